/* Where a session's accounting lives (quota.h): a table in this process,
 * or a state file per session for separate CLI invocations.
 *
 * The table is shared by every run of the process (sessions are keyed by
 * their id alone, whatever configuration they run under), guarded by one
 * mutex held only for the arithmetic. It forgets a session once nothing
 * of it is left to remember.
 *
 * A state file is replaced whole (written beside it, fsync'ed, renamed),
 * under an exclusive flock of a lock file that is never replaced, so a
 * launcher that dies at any point leaves either the old text or the new.
 * A run in flight is recorded with its launcher's pid and start time: a
 * reader that finds that process gone charges the run's whole reservation
 * and drops it, so a killed launcher neither holds a concurrency slot
 * forever nor gets its run for free. */
#include "quota.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "digest.h"
#include "fileio.h"
#include "forksafe.h"
#include "result.h"
#include "units.h"

/* Sessions the table keeps before it refuses new ones. */
#define TABLE_MAX 16384
/* How long a launcher waits for another's state file lock. */
#define LOCK_WAIT_MS 10000
#define STATE_MAX (1 << 20)

bool
nsbox_quota_configured (const nsbox_config *c)
{
  return c->quota_runs_per_minute || c->quota_concurrent || c->quota_cpu_ms || c->quota_wall_ms;
}

static struct nsbox_quota_limits
limits_of (const nsbox_config *c)
{
  return (struct nsbox_quota_limits){
    .runs_per_minute = c->quota_runs_per_minute,
    .concurrent = c->quota_concurrent,
    .cpu_ms = c->quota_cpu_ms,
    .wall_ms = c->quota_wall_ms,
    .window_ms = c->quota_window_ms,
  };
}

/* The most CPU a run may use: its timeout at its CPU bandwidth (or every
 * CPU of the machine, when that is fewer). */
static uint64_t
cpu_need (const nsbox_config *c, uint64_t timeout_ms)
{
  long online = sysconf (_SC_NPROCESSORS_ONLN);
  uint64_t milli = c->cpus_milli;
  if (online > 0 && (uint64_t)online * 1000 < milli)
    milli = (uint64_t)online * 1000;
  return (timeout_ms * milli + 999) / 1000;
}

/* Field 22 of /proc/PID/stat; 0 when the process is gone. */
static uint64_t
process_starttime (pid_t pid)
{
  char path[64];
  uint64_t v = 0;
  snprintf (path, sizeof path, "/proc/%d/stat", (int)pid);
  return nsbox_proc_stat_fields (path, 22, 1, &v) ? v : 0;
}

static uint64_t
random_id (void)
{
  uint64_t id = 0;
  while (id == 0)
    if (getrandom (&id, sizeof id, 0) != (ssize_t)sizeof id)
      id = (uint64_t)nsbox_realtime_ms () ^ ((uint64_t)getpid () << 32);
  return id;
}

/* ---- this process ---- */

struct table_entry
{
  char *key;
  struct nsbox_quota_session s;
  struct table_entry *next;
};

/* A fork in another thread while the table is locked must not leave the
 * child a lock nobody will release. */
static struct nsbox_fork_registry table_lock = NSBOX_FORK_REGISTRY (NULL, NULL, NULL);
static struct table_entry *table;
static size_t table_len;

static void
table_sweep (uint64_t now_ms)
{
  for (struct table_entry **link = &table; *link;)
    {
      struct table_entry *e = *link;
      if (nsbox_quota_idle (&e->s, now_ms))
        {
          *link = e->next;
          free (e->key);
          nsbox_quota_session_clear (&e->s);
          free (e);
          table_len--;
        }
      else
        link = &e->next;
    }
}

/* Called with the lock held. */
static struct table_entry *
table_find (const char *key, bool create, uint64_t now_ms, struct nsbox_error **err)
{
  for (struct table_entry *e = table; e; e = e->next)
    if (strcmp (e->key, key) == 0)
      return e;
  if (!create)
    return NULL;
  if (table_len >= TABLE_MAX)
    table_sweep (now_ms);
  if (table_len >= TABLE_MAX)
    {
      nsbox_error_set (err, EAGAIN,
                       "quota: %d sessions are being accounted for in this process; no "
                       "room for another",
                       TABLE_MAX);
      return NULL;
    }
  struct table_entry *e = calloc (1, sizeof *e);
  if (!e || !(e->key = strdup (key)))
    {
      free (e);
      nsbox_error_oom (err);
      return NULL;
    }
  e->next = table;
  table = e;
  table_len++;
  return e;
}

static int
enter_process (const struct nsbox_quota_limits *l, struct nsbox_quota_ticket *t,
               struct nsbox_quota_flight *flight, struct nsbox_quota_refusal *refusal,
               struct nsbox_error **err)
{
  nsbox_fork_lock (&table_lock);
  uint64_t now = nsbox_realtime_ms ();
  struct table_entry *e = table_find (t->key, true, now, err);
  int ret = e ? nsbox_quota_decide (&e->s, l, now, flight, &refusal->kind, &refusal->retry_after_ms,
                                    err)
              : -EAGAIN;
  if (e && ret < 0 && nsbox_quota_idle (&e->s, now))
    table_sweep (now);
  nsbox_fork_unlock (&table_lock);
  return ret;
}

static void
leave_process (struct nsbox_quota_ticket *t, uint64_t cpu_ms, uint64_t wall_ms)
{
  nsbox_fork_lock (&table_lock);
  struct table_entry *e = table_find (t->key, false, 0, NULL);
  if (e)
    nsbox_quota_settle (&e->s, t->id, nsbox_realtime_ms (), cpu_ms, wall_ms);
  nsbox_fork_unlock (&table_lock);
}

/* ---- state files ---- */

/* The directory, created owner-only when missing (parents too); it must be
 * the caller's and writable by no one else. */
static int
open_state_dir (const char *dir, struct nsbox_error **err)
{
  cleanup_free char *path = strdup (dir);
  if (!path)
    return nsbox_error_oom (err);
  for (char *slash = strchr (path + 1, '/');; slash = strchr (slash + 1, '/'))
    {
      if (slash)
        *slash = '\0';
      if (mkdir (path, 0700) < 0 && errno != EEXIST)
        return nsbox_error_sys (err, errno, "quota: create directory '%s'", path);
      if (!slash)
        break;
      *slash = '/';
    }
  int fd = open (dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return nsbox_error_sys (err, errno, "quota: open directory '%s'", dir);
  struct stat st;
  if (fstat (fd, &st) < 0 || st.st_uid != geteuid () || (st.st_mode & (S_IWGRP | S_IWOTH)))
    {
      close (fd);
      return nsbox_error_set (err, EPERM,
                              "quota: directory '%s' must be owned by uid %u and writable by "
                              "its owner only",
                              dir, (unsigned)geteuid ());
    }
  return fd;
}

static int
lock_state (int dir_fd, const char *name, const char *dir, struct nsbox_error **err)
{
  char lock_name[NSBOX_SHA256_HEX + 8];
  snprintf (lock_name, sizeof lock_name, "%s.lock", name);
  int fd = openat (dir_fd, lock_name, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
  if (fd < 0)
    return nsbox_error_sys (err, errno, "quota: open '%s/%s'", dir, lock_name);
  for (unsigned waited = 0;; waited += 5)
    {
      if (flock (fd, LOCK_EX | LOCK_NB) == 0)
        return fd;
      if (errno != EWOULDBLOCK && errno != EINTR)
        break;
      if (waited >= LOCK_WAIT_MS)
        {
          errno = ETIMEDOUT;
          break;
        }
      nanosleep (&(struct timespec){ 0, 5 * 1000 * 1000 }, NULL);
    }
  int saved = errno;
  close (fd);
  return nsbox_error_sys (err, saved, "quota: lock '%s/%s'", dir, lock_name);
}

static int
load_state (int dir_fd, const char *name, const char *dir, struct nsbox_quota_session *s,
            struct nsbox_error **err)
{
  cleanup_close int fd = openat (dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    {
      if (errno == ENOENT)
        return 0;
      return nsbox_error_sys (err, errno, "quota: open state file '%s/%s'", dir, name);
    }
  struct stat st;
  if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode) || st.st_uid != geteuid ()
      || st.st_size > STATE_MAX)
    return nsbox_error_set (err, EBADMSG,
                            "quota: state file '%s/%s' is not a regular file of uid %u under "
                            "1 MiB; remove it to reset the session's accounting",
                            dir, name, (unsigned)geteuid ());
  cleanup_free char *path = xasprintf ("%s/%s", dir, name);
  cleanup_free char *text = NULL;
  size_t got = 0;
  int ret = path ? nsbox_read_fd (fd, STATE_MAX, "quota state file", path, &text, &got, err)
                 : nsbox_error_oom (err);
  if (ret < 0)
    return ret;
  if (strlen (text) != got || nsbox_quota_parse (text, s, err) < 0)
    {
      if (strlen (text) != got)
        nsbox_error_set (err, EBADMSG, "it holds a NUL byte");
      return nsbox_error_prefix (err,
                                 "quota: state file '%s/%s' is corrupt (remove it to reset the "
                                 "session's accounting)",
                                 dir, name);
    }
  return 0;
}

static int
save_state (int dir_fd, const char *name, const char *dir, const struct nsbox_quota_session *s,
            struct nsbox_error **err)
{
  cleanup_free char *text = nsbox_quota_format (s);
  if (!text)
    return nsbox_error_oom (err);
  char tmp[NSBOX_SHA256_HEX + 8];
  snprintf (tmp, sizeof tmp, "%s.new", name);
  unlinkat (dir_fd, tmp, 0);
  cleanup_close int fd
      = openat (dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  int ret = 0;
  if (fd < 0)
    ret = -errno;
  else if ((ret = nsbox_write_all (fd, text, strlen (text))) == 0 && fsync (fd) < 0)
    ret = -errno;
  if (ret == 0 && renameat (dir_fd, tmp, dir_fd, name) < 0)
    ret = -errno;
  if (ret < 0)
    {
      unlinkat (dir_fd, tmp, 0);
      return nsbox_error_sys (err, -ret, "quota: write state file '%s/%s'", dir, name);
    }
  return 0;
}

/* Runs whose launcher is gone: charged their whole reservation. */
static void
drop_orphans (struct nsbox_quota_session *s, uint64_t now_ms)
{
  for (size_t i = 0; i < s->n_flights;)
    {
      struct nsbox_quota_flight f = s->flights[i];
      if (f.pid > 0 && process_starttime (f.pid) == f.starttime)
        {
          i++;
          continue;
        }
      nsbox_quota_settle (s, f.id, now_ms, f.cpu_ms, f.wall_ms);
    }
}

/* Under the session's lock: loads its state, drops orphans, applies `step`
 * and writes the state back when it changed. */
struct file_step
{
  const struct nsbox_quota_limits *limits; /* enter; NULL: leave */
  struct nsbox_quota_flight *flight;
  struct nsbox_quota_refusal *refusal;
  uint64_t id, cpu_ms, wall_ms; /* leave */
};

static int
with_state_file (const struct nsbox_quota_ticket *t, struct file_step *step,
                 struct nsbox_error **err)
{
  char name[NSBOX_SHA256_HEX];
  int ret = nsbox_sha256_hex (t->key, strlen (t->key), name, err);
  if (ret < 0)
    return nsbox_error_prefix (err, "quota");
  cleanup_close int dir_fd = open_state_dir (t->state_dir, err);
  if (dir_fd < 0)
    return dir_fd;
  cleanup_close int lock_fd = lock_state (dir_fd, name, t->state_dir, err);
  if (lock_fd < 0)
    return lock_fd;
  struct nsbox_quota_session s = { 0 };
  ret = load_state (dir_fd, name, t->state_dir, &s, err);
  if (ret == 0)
    {
      uint64_t now = nsbox_realtime_ms ();
      drop_orphans (&s, now);
      if (step->limits)
        ret = nsbox_quota_decide (&s, step->limits, now, step->flight, &step->refusal->kind,
                                  &step->refusal->retry_after_ms, err);
      else
        nsbox_quota_settle (&s, step->id, now, step->cpu_ms, step->wall_ms);
      if (ret == 0)
        ret = save_state (dir_fd, name, t->state_dir, &s, err);
    }
  nsbox_quota_session_clear (&s);
  return ret;
}

/* ---- the gate ---- */

static void
ticket_clear (struct nsbox_quota_ticket *t)
{
  free (t->key);
  free (t->state_dir);
  *t = (struct nsbox_quota_ticket){ 0 };
}

int
nsbox_quota_enter (const nsbox_config *c, const char *session, uint64_t timeout_ms,
                   struct nsbox_quota_ticket *ticket, struct nsbox_quota_refusal *refusal,
                   struct nsbox_error **err)
{
  *ticket = (struct nsbox_quota_ticket){ 0 };
  *refusal = (struct nsbox_quota_refusal){ 0 };
  if (!nsbox_quota_configured (c))
    return 0;
  if (!session)
    session = c->session;
  /* Accounting under another window is another account: usage cannot be
   * moved between windows. */
  struct nsbox_quota_ticket t = {
    .key = xasprintf ("%s\n%" PRIu64, session ? session : "", c->quota_window_ms),
    .state_dir = c->quota_state_dir ? strdup (c->quota_state_dir) : NULL,
    .id = random_id (),
  };
  if (!t.key || (c->quota_state_dir && !t.state_dir))
    {
      ticket_clear (&t);
      return nsbox_error_oom (err);
    }
  struct nsbox_quota_limits l = limits_of (c);
  /* The teardown after a timeout belongs to the run: a little margin. */
  struct nsbox_quota_flight flight = {
    .id = t.id,
    .pid = getpid (),
    .starttime = t.state_dir ? process_starttime (getpid ()) : 0,
    .deadline_ms = nsbox_realtime_ms () + timeout_ms + 1000,
    .cpu_ms = l.cpu_ms ? cpu_need (c, timeout_ms) : 0,
    .wall_ms = l.wall_ms ? timeout_ms : 0,
  };
  int ret;
  if (t.state_dir)
    {
      struct file_step step = { .limits = &l, .flight = &flight, .refusal = refusal };
      ret = with_state_file (&t, &step, err);
    }
  else
    ret = enter_process (&l, &t, &flight, refusal, err);
  if (ret < 0 || refusal->kind != NSBOX_QUOTA_NONE)
    {
      ticket_clear (&t);
      return ret < 0 ? ret : 1;
    }
  t.active = true;
  t.started_ms = flight.started_ms;
  t.reserved_cpu_ms = flight.cpu_ms;
  *ticket = t;
  return 0;
}

void
nsbox_quota_leave (struct nsbox_quota_ticket *ticket, const nsbox_result *result)
{
  if (!ticket->active)
    return;
  uint64_t now = nsbox_realtime_ms ();
  uint64_t wall = now > ticket->started_ms ? now - ticket->started_ms : 0;
  uint64_t cpu_ms = result ? result->cpu_ms : ticket->reserved_cpu_ms;
  if (result && result->duration_ms < wall)
    wall = result->duration_ms;
  if (ticket->state_dir)
    {
      struct file_step step = { .id = ticket->id, .cpu_ms = cpu_ms, .wall_ms = wall };
      with_state_file (ticket, &step, NULL);
    }
  else
    leave_process (ticket, cpu_ms, wall);
  ticket_clear (ticket);
}

/* The refused quota's limit as the result shows it: "20 per minute", "2 at
 * once", "10m per 1h". */
static void
limit_text (const nsbox_config *c, enum nsbox_quota_kind kind, char *out, size_t size)
{
  cleanup_free char *amount = NULL, *window = nsbox_format_duration (c->quota_window_ms);
  switch (kind)
    {
    case NSBOX_QUOTA_RATE:
      snprintf (out, size, "%" PRIu64 " per minute", c->quota_runs_per_minute);
      return;
    case NSBOX_QUOTA_CONCURRENT:
      snprintf (out, size, "%" PRIu64 " at once", c->quota_concurrent);
      return;
    case NSBOX_QUOTA_CPU:
    case NSBOX_QUOTA_WALL:
      amount = nsbox_format_duration (kind == NSBOX_QUOTA_CPU ? c->quota_cpu_ms : c->quota_wall_ms);
      snprintf (out, size, "%s per %s", amount ? amount : "?", window ? window : "?");
      return;
    case NSBOX_QUOTA_NONE:
      break;
    }
  snprintf (out, size, "?");
}

int
nsbox_quota_admit (const nsbox_config *c, const char *session, uint64_t timeout_ms,
                   struct nsbox_quota_ticket *ticket, nsbox_result **refused,
                   struct nsbox_error **err)
{
  struct nsbox_quota_refusal refusal;
  int ret = nsbox_quota_enter (c, session, timeout_ms, ticket, &refusal, err);
  if (ret != 1)
    return ret;
  char limit[32];
  limit_text (c, refusal.kind, limit, sizeof limit);
  nsbox_result *r = nsbox_result_refused (nsbox_quota_kind_name (refusal.kind), limit,
                                          refusal.retry_after_ms, timeout_ms);
  if (!r)
    return nsbox_error_oom (err);
  *refused = r;
  return 1;
}
