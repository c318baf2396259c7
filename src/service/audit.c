/* The audit log.
 *
 * A record is one line of compact JSON. Its last members are "prev" (the
 * hash of the record before it, or null where a chain starts, with "chain"
 * saying why) and "hash": the SHA-256 of the line's text up to "hash",
 * closed with '}'. So every record ends with the same 75 bytes,
 * ,"hash":"<64 hex digits>"}, and the next writer finds the hash it chains
 * to by reading only the end of the file, whatever the size of the record.
 *
 * A log named by path must be a regular file owned by the launcher's
 * euid, with one name and writable by its owner only (nobody else may edit,
 * truncate or stall it); it is opened read-write for every run before the
 * sandbox starts (a log that cannot be opened stops the run), and at
 * append time reopened if logrotate moved it meanwhile. fd:N names a
 * descriptor the caller holds; a regular file behind it is reopened
 * through /proc/self/fd, so every writer has an open file description of
 * its own.
 *
 * Writers, threads of one process or separate processes, serialise on an
 * exclusive flock of that description (waiting at most LOCK_WAIT_MS):
 * under it a writer reads the last hash, then appends its record in one
 * write to a descriptor opened with O_APPEND, truncating back what a short
 * write left. A pipe, a socket or a device cannot be read back or locked:
 * there a process chains to the last record it wrote itself.
 *
 * What a record never holds: environment values, and unless audit-code
 * is set, the code and its output (their SHA-256 and length only). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "audit.h"
#include "digest.h"
#include "egress.h"
#include "quota.h"
#include "result.h"

static const char tail_head[] = ",\"hash\":\"";

/* A log named by path: a regular file of ours, one name, writable by no
 * one else, so that nobody else can edit, truncate or stall it. O_NONBLOCK
 * keeps a FIFO planted at the path from blocking the open. */
static int
open_path (const char *path, int *fd, struct nsbox_error **err)
{
  /* Read too: the next record chains to the hash at its end. */
  cleanup_close int f = open (
      path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK, 0600);
  if (f < 0)
    return nsbox_error_sys (err, errno, "audit log '%s'", path);
  struct stat st;
  if (fstat (f, &st) < 0)
    return nsbox_error_sys (err, errno, "audit log '%s': fstat", path);
  if (!S_ISREG (st.st_mode))
    return nsbox_error_set (err, EINVAL,
                            "audit log '%s': not a regular file (for a pipe, use fd:N)", path);
  if (st.st_uid != geteuid () || st.st_nlink != 1 || (st.st_mode & (S_IWGRP | S_IWOTH)))
    return nsbox_error_set (err, EPERM,
                            "audit log '%s': must be owned by uid %u, have one name and be "
                            "writable by its owner only",
                            path, (unsigned)geteuid ());
  int flags = fcntl (f, F_GETFL);
  if (flags < 0 || fcntl (f, F_SETFL, flags & ~O_NONBLOCK) < 0)
    return nsbox_error_sys (err, errno, "audit log '%s': fcntl", path);
  *fd = TAKE_FD (f);
  return 0;
}

/* fd:N. A regular file is reopened through /proc/self/fd: a description
 * of our own, so that its flock excludes every other writer, including
 * processes that share the caller's description. */
static int
open_descriptor (const char *spec, int *fd, struct nsbox_error **err)
{
  int n = atoi (spec + 3);
  struct stat st;
  if (fstat (n, &st) < 0)
    return nsbox_error_sys (err, errno, "audit log '%s'", spec);
  int flags = fcntl (n, F_GETFL);
  if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY)
    return nsbox_error_set (err, EBADF, "audit log '%s': not open for writing", spec);
  if (S_ISREG (st.st_mode))
    {
      char path[64];
      snprintf (path, sizeof path, "/proc/self/fd/%d", n);
      cleanup_close int f = open (path, O_RDWR | O_APPEND | O_CLOEXEC | O_NOCTTY);
      struct stat mine;
      if (f < 0)
        return nsbox_error_sys (err, errno, "audit log '%s': reopen it read-write", spec);
      if (fstat (f, &mine) < 0 || mine.st_dev != st.st_dev || mine.st_ino != st.st_ino)
        return nsbox_error_set (err, EBADF, "audit log '%s': reopened another file", spec);
      *fd = TAKE_FD (f);
      return 0;
    }
  if (!(S_ISFIFO (st.st_mode) || S_ISSOCK (st.st_mode) || S_ISCHR (st.st_mode)))
    return nsbox_error_set (
        err, EINVAL, "audit log '%s': not a regular file, a pipe, a socket or a device", spec);
  int f = fcntl (n, F_DUPFD_CLOEXEC, 3);
  if (f < 0)
    return nsbox_error_sys (err, errno, "audit log '%s'", spec);
  *fd = f;
  return 0;
}

int
nsbox_audit_open (const nsbox_config *c, int *fd, struct nsbox_error **err)
{
  *fd = -1;
  if (!c->audit_log)
    return 0;
  if (strncmp (c->audit_log, "fd:", 3) == 0)
    return open_descriptor (c->audit_log, fd, err);
  return open_path (c->audit_log, fd, err);
}

/* A log rotated away (renamed, removed) while the run went on: its record
 * goes to the file now at the path. */
static int
follow_rotation (const nsbox_config *c, int *fd, struct nsbox_error **err)
{
  if (strncmp (c->audit_log, "fd:", 3) == 0)
    return 0;
  struct stat at_path, mine;
  if (fstat (*fd, &mine) == 0 && stat (c->audit_log, &at_path) == 0 && at_path.st_dev == mine.st_dev
      && at_path.st_ino == mine.st_ino)
    return 0;
  int fresh;
  int ret = open_path (c->audit_log, &fresh, err);
  if (ret < 0)
    return ret;
  close (*fd);
  *fd = fresh;
  return 0;
}

/* ---- the chain ---- */

static bool
is_hex64 (const char *s)
{
  for (int i = 0; i < 64; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return false;
  return true;
}

/* The hash at the end of a record's text (without its newline), or false
 * when the text does not end as a record does. */
static bool
record_hash (const char *line, size_t len, char hash[NSBOX_SHA256_HEX])
{
  if (len < NSBOX_AUDIT_TAIL)
    return false;
  const char *t = line + len - NSBOX_AUDIT_TAIL;
  if (memcmp (t, tail_head, sizeof tail_head - 1) != 0)
    return false;
  t += sizeof tail_head - 1;
  if (!is_hex64 (t) || memcmp (t + 64, "\"}", 2) != 0)
    return false;
  memcpy (hash, t, 64);
  hash[64] = '\0';
  return true;
}

/* Logs that cannot be read back (a pipe, a socket): the last hash this
 * process wrote to each. */
static pthread_mutex_t audit_lock = PTHREAD_MUTEX_INITIALIZER;
static struct
{
  dev_t dev;
  ino_t ino;
  char hash[NSBOX_SHA256_HEX];
} streams[16];
static unsigned streams_next;

enum chain
{
  CHAIN_CONTINUES,
  CHAIN_STARTS,
  CHAIN_AFTER_DAMAGE,
};

/* Under the lock: what the new record chains to. *needs_newline when the
 * file does not end with one (a record cut short): the new record then
 * starts on a line of its own. Regular files are read through fd (every
 * log of that kind is opened read-write by us). */
static enum chain
previous_hash (int fd, const struct stat *st, char prev[NSBOX_SHA256_HEX], bool *needs_newline)
{
  *needs_newline = false;
  if (!S_ISREG (st->st_mode))
    {
      for (unsigned i = 0; i < ARRAY_SIZE (streams); i++)
        if (streams[i].hash[0] && streams[i].dev == st->st_dev && streams[i].ino == st->st_ino)
          {
            memcpy (prev, streams[i].hash, NSBOX_SHA256_HEX);
            return CHAIN_CONTINUES;
          }
      return CHAIN_STARTS;
    }
  if (st->st_size == 0)
    return CHAIN_STARTS;
  char end[NSBOX_AUDIT_TAIL + 2];
  size_t want = st->st_size < (off_t)sizeof end ? (size_t)st->st_size : sizeof end;
  ssize_t n = pread (fd, end, want, st->st_size - (off_t)want);
  if (n != (ssize_t)want)
    return CHAIN_AFTER_DAMAGE;
  *needs_newline = end[want - 1] != '\n';
  if (want != sizeof end || *needs_newline)
    return CHAIN_AFTER_DAMAGE;
  return record_hash (end, sizeof end - 1, prev) ? CHAIN_CONTINUES : CHAIN_AFTER_DAMAGE;
}

static void
remember_hash (const struct stat *st, const char hash[NSBOX_SHA256_HEX])
{
  if (S_ISREG (st->st_mode))
    return;
  unsigned slot = streams_next;
  for (unsigned i = 0; i < ARRAY_SIZE (streams); i++)
    if (streams[i].hash[0] && streams[i].dev == st->st_dev && streams[i].ino == st->st_ino)
      slot = i;
  if (slot == streams_next)
    streams_next = (streams_next + 1) % ARRAY_SIZE (streams);
  streams[slot].dev = st->st_dev;
  streams[slot].ino = st->st_ino;
  memcpy (streams[slot].hash, hash, NSBOX_SHA256_HEX);
}

/* ---- the record ---- */

static int
add (json_t *object, const char *key, json_t *value)
{
  if (!value || json_object_set_new (object, key, value) < 0)
    return -ENOMEM;
  return 0;
}

/* Any bytes as a JSON string (invalid UTF-8 as U+FFFD). */
static json_t *
bytes_value (const char *bytes, size_t len)
{
  char *text = NULL;
  size_t text_len = 0;
  if (nsbox_utf8_sanitize (bytes ? bytes : "", len, &text, &text_len) < 0)
    return NULL;
  json_t *v = json_stringn (text, text_len);
  free (text);
  return v;
}

static void
format_time (uint64_t ms, char *out, size_t size)
{
  time_t sec = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r (&sec, &tm);
  char date[32];
  strftime (date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf (out, size, "%s.%03" PRIu64 "Z", date, ms % 1000);
}

static json_t *
string_list (char *const *items, size_t n)
{
  json_t *a = json_array ();
  for (size_t i = 0; a && i < n; i++)
    if (json_array_append_new (a, json_string (items[i])) < 0)
      {
        json_decref (a);
        return NULL;
      }
  return a;
}

static json_t *
limits_value (const nsbox_config *c)
{
  json_t *l = json_object ();
  char cpus[32];
  snprintf (cpus, sizeof cpus, "%" PRIu64 ".%03" PRIu64, c->cpus_milli / 1000,
            c->cpus_milli % 1000);
  if (!l || add (l, "timeout_ms", json_integer ((json_int_t)c->timeout_ms)) < 0
      || add (l, "memory_bytes", json_integer ((json_int_t)c->memory_bytes)) < 0
      || add (l, "cpus", json_string (cpus)) < 0
      || add (l, "pids", json_integer ((json_int_t)c->pids_limit)) < 0
      || add (l, "tmp_bytes", json_integer ((json_int_t)c->tmp_size_bytes)) < 0
      || add (l, "max_output_bytes", json_integer ((json_int_t)c->max_output_bytes)) < 0
      || add (l, "network", json_string (c->network ? c->network : "none")) < 0
      || (nsbox_egress_wanted (c)
          && (add (l, "egress_allow", string_list (c->egress_allow, c->egress_allow_len)) < 0
              || add (l, "egress_resolve", string_list (c->egress_resolve, c->egress_resolve_len))
                     < 0)))
    {
      json_decref (l);
      return NULL;
    }
  return l;
}

/* The result's own JSON, less the output unless audit-code. */
static json_t *
outcome_value (const nsbox_config *c, const nsbox_result *result)
{
  json_t *o = nsbox_result_json_value (result);
  if (o && !c->audit_code)
    {
      json_object_del (o, "stdout");
      json_object_del (o, "stderr");
      json_object_del (o, "value");
    }
  return o;
}

/* A string from outside (a client's name, a path, an error message) as
 * valid UTF-8, or null. */
static json_t *
text_or_null (const char *s)
{
  return s ? bytes_value (s, strlen (s)) : json_null ();
}

/* A new object already stored under key (NULL when out of memory). */
static json_t *
add_object (json_t *parent, const char *key)
{
  json_t *o = json_object ();
  if (add (parent, key, o) < 0)
    return NULL;
  return o;
}

/* "none" without quotas; else the decision, and for a refusal which quota,
 * its limit and the wait it asked for. */
static json_t *
quota_value (const nsbox_config *c, const nsbox_result *result)
{
  if (!nsbox_quota_configured (c))
    return json_string ("none");
  json_t *q = json_object ();
  bool refused = result && result->quota_refusal;
  if (!q || add (q, "decision", json_string (refused ? "refused" : "accepted")) < 0
      || (refused
          && (add (q, "quota", json_string (result->quota_refusal)) < 0
              || add (q, "limit", json_string (result->quota_limit)) < 0
              || add (q, "retry_after_ms", json_integer ((json_int_t)result->retry_after_ms)) < 0)))
    {
      json_decref (q);
      return NULL;
    }
  return q;
}

static const char *
runtime_name (const nsbox_config *c, const nsbox_result *result)
{
  if (result && result->runtime)
    return result->runtime;
  return c->runtime == NSBOX_RUNTIME_RUNSC  ? "runsc"
         : c->runtime == NSBOX_RUNTIME_AUTO ? "auto"
                                            : "native";
}

static json_t *
record_value (const nsbox_config *c, const struct nsbox_audit_run *run, size_t code_len,
              const nsbox_result *result, const struct nsbox_error *failure,
              const char *code_sha256)
{
  char when[64], id[33];
  format_time (run->started_ms, when, sizeof when);
  if (nsbox_random_id (id) < 0)
    return NULL;
  const char *session = run->session ? run->session : c->session;
  cleanup_json json_t *r = json_object ();
  if (!r || add (r, "v", json_integer (1)) < 0 || add (r, "time", json_string (when)) < 0
      || add (r, "event",
              json_string (!result                 ? "error"
                           : result->quota_refusal ? "refused"
                                                   : "run"))
             < 0
      || add (r, "run_id", json_string (id)) < 0 || add (r, "session", text_or_null (session)) < 0
      || (run->sandbox_id && add (r, "sandbox_id", json_string (run->sandbox_id)) < 0))
    return NULL;
  json_t *caller = add_object (r, "caller");
  if (!caller || add (caller, "uid", json_integer ((json_int_t)getuid ())) < 0
      || add (caller, "pid", json_integer ((json_int_t)getpid ())) < 0
      || add (caller, "client", text_or_null (run->client)) < 0)
    return NULL;
  /* An image the CLI resolved to a rootfs itself is still the image's run. */
  bool from_image = !c->rootfs || c->image_digest;
  const char *digest = result && result->image_digest[0] ? result->image_digest : c->image_digest;
  json_t *image = add_object (r, "image");
  if (!image || add (image, "reference", text_or_null (from_image ? c->image : NULL)) < 0
      || add (image, "digest", text_or_null (from_image ? digest : NULL)) < 0
      || add (image, "rootfs", text_or_null (c->rootfs)) < 0)
    return NULL;
  if (add (r, "seccomp_sha256",
           result && result->policy_sha256[0] ? json_string (result->policy_sha256) : json_null ())
          < 0
      || add (r, "runtime", json_string (runtime_name (c, result))) < 0
      || add (r, "limits", limits_value (c)) < 0)
    return NULL;
  json_t *code = add_object (r, "code");
  if (!code || add (code, "sha256", json_string (code_sha256)) < 0
      || add (code, "length", json_integer ((json_int_t)code_len)) < 0
      || (c->audit_code && add (code, "text", bytes_value (run->code, code_len)) < 0)
      || add (r, "quota", quota_value (c, result)) < 0)
    return NULL;
  if (result)
    {
      if (add (r, "outcome", outcome_value (c, result)) < 0)
        return NULL;
    }
  else if (add (r, "error", text_or_null (failure ? nsbox_error_message (failure) : "unknown")) < 0)
    return NULL;
  return TAKE_PTR (r);
}

struct text
{
  char *data;
  size_t len, cap;
};

static int
text_add (struct text *t, const char *chunk, size_t size)
{
  if (t->len + size + 1 > t->cap)
    {
      size_t cap = t->cap ? t->cap * 2 : 4096;
      while (cap < t->len + size + 1)
        cap *= 2;
      char *grown = realloc (t->data, cap);
      if (!grown)
        return -1;
      t->data = grown;
      t->cap = cap;
    }
  memcpy (t->data + t->len, chunk, size);
  t->len += size;
  t->data[t->len] = '\0';
  return 0;
}

static int
dump_add (const char *chunk, size_t size, void *data)
{
  return text_add (data, chunk, size);
}

/* Under the lock: chains the record (its text without the closing '}')
 * to the log's last one and writes it. */
static int
chain_and_write (int fd, const struct stat *st, struct text *t, struct nsbox_error **err)
{
  char prev[NSBOX_SHA256_HEX] = "", link[160], hash[NSBOX_SHA256_HEX];
  bool needs_newline;
  switch (previous_hash (fd, st, prev, &needs_newline))
    {
    case CHAIN_CONTINUES:
      snprintf (link, sizeof link, ",\"prev\":\"%s\"}", prev);
      break;
    case CHAIN_STARTS:
      snprintf (link, sizeof link, ",\"prev\":null,\"chain\":\"start\"}");
      break;
    case CHAIN_AFTER_DAMAGE:
    default:
      snprintf (link, sizeof link,
                ",\"prev\":null,\"chain\":\"restart: the log does not end with a whole record\"}");
      break;
    }
  if (text_add (t, link, strlen (link)) < 0)
    return nsbox_error_oom (err);
  int ret = nsbox_sha256_hex (t->data, t->len, hash, err);
  if (ret < 0)
    return nsbox_error_prefix (err, "audit log");
  t->len--; /* the closing '}' */
  char end[NSBOX_AUDIT_TAIL + 2];
  snprintf (end, sizeof end, "%s%s\"}\n", tail_head, hash);
  if (text_add (t, end, strlen (end)) < 0)
    return nsbox_error_oom (err);
  /* One write: the record, after a newline that ends a record cut short. */
  struct iovec iov[2] = { { (void *)"\n", 1 }, { t->data, t->len } };
  size_t total = t->len + (needs_newline ? 1 : 0);
  ssize_t n;
  do
    n = writev (fd, needs_newline ? iov : iov + 1, needs_newline ? 2 : 1);
  while (n < 0 && errno == EINTR);
  if (n >= 0 && (size_t)n == total)
    {
      remember_hash (st, hash);
      return 0;
    }
  int e = n < 0 ? errno : ENOSPC;
  /* Nothing half-written stays: the next writer finds a whole record. */
  if (n > 0 && S_ISREG (st->st_mode))
    (void)!ftruncate (fd, st->st_size);
  return nsbox_error_sys (err, e, "audit log: write (%zd of a record's %zu bytes)", n, total);
}

/* How long a writer waits for another's lock on the log before the run
 * fails. */
#define LOCK_WAIT_MS 10000

static int
lock_log (int fd, struct nsbox_error **err)
{
  for (unsigned waited_ms = 0;;)
    {
      if (flock (fd, LOCK_EX | LOCK_NB) == 0)
        return 0;
      if (errno != EWOULDBLOCK && errno != EINTR)
        return nsbox_error_sys (err, errno, "audit log: flock");
      if (waited_ms >= LOCK_WAIT_MS)
        return nsbox_error_set (err, ETIMEDOUT,
                                "audit log: another process has held its lock for %u s",
                                LOCK_WAIT_MS / 1000);
      unsigned step = waited_ms < 50 ? 1 : 10;
      usleep (step * 1000);
      waited_ms += step;
    }
}

int
nsbox_audit_append (int fd, const nsbox_config *c, const struct nsbox_audit_run *run,
                    const nsbox_result *result, const struct nsbox_error *failure,
                    struct nsbox_error **err)
{
  cleanup_close int log = fd;
  size_t code_len = run->code ? run->code_len : 0;
  char code_sha256[NSBOX_SHA256_HEX];
  int ret = nsbox_sha256_hex (run->code ? run->code : "", code_len, code_sha256, err);
  if (ret < 0)
    return nsbox_error_prefix (err, "audit log");
  cleanup_json json_t *record = record_value (c, run, code_len, result, failure, code_sha256);
  if (!record)
    return nsbox_error_set (err, ENOMEM, "audit log: the record could not be built");
  struct text t = { NULL, 0, 0 };
  if (json_dump_callback (record, dump_add, &t, JSON_COMPACT | JSON_PRESERVE_ORDER) < 0 || !t.data
      || t.len < 2 || t.data[t.len - 1] != '}')
    {
      free (t.data);
      return nsbox_error_set (err, ENOMEM, "audit log: the record could not be written out");
    }
  t.len--; /* chain_and_write closes it */
  if ((ret = follow_rotation (c, &log, err)) < 0)
    {
      free (t.data);
      return ret;
    }
  struct stat st;
  if (fstat (log, &st) < 0)
    ret = nsbox_error_sys (err, errno, "audit log: fstat");
  else if (S_ISREG (st.st_mode))
    {
      /* Every writer has a description of its own (nsbox_audit_open): the
       * flock excludes threads and processes alike. */
      if ((ret = lock_log (log, err)) == 0)
        {
          if (fstat (log, &st) < 0)
            ret = nsbox_error_sys (err, errno, "audit log: fstat");
          else
            ret = chain_and_write (log, &st, &t, err);
          flock (log, LOCK_UN);
        }
    }
  else
    {
      /* A pipe, a socket or a device: nothing to lock or read back. The
       * mutex orders this process's writers and guards the hashes it
       * remembers; a write of up to PIPE_BUF bytes to a pipe is atomic. */
      pthread_mutex_lock (&audit_lock);
      ret = chain_and_write (log, &st, &t, err);
      pthread_mutex_unlock (&audit_lock);
    }
  free (t.data);
  return ret;
}

int
nsbox_audit_after (int fd, const nsbox_config *c, const struct nsbox_audit_run *run, int ret,
                   nsbox_result **out, struct nsbox_error **run_err)
{
  if (fd < 0)
    return ret;
  struct nsbox_error *audit_err = NULL;
  int a = nsbox_audit_append (fd, c, run, ret >= 0 ? *out : NULL, *run_err, &audit_err);
  if (a >= 0)
    return ret;
  if (ret >= 0)
    {
      nsbox_result_free (*out);
      *out = NULL;
      nsbox_error_pass (run_err, TAKE_PTR (audit_err));
      return nsbox_error_prefix (run_err, "the run ended, but its audit record is missing");
    }
  nsbox_error_append (run_err, "and its audit record is missing: %s",
                      nsbox_error_message (audit_err));
  nsbox_error_free (audit_err);
  return ret;
}

/* ---- verification ---- */

int
nsbox_audit_verify (const char *path, size_t *records, struct nsbox_error **err)
{
  *records = 0;
  FILE *f = fopen (path, "re");
  if (!f)
    return nsbox_error_sys (err, errno, "open");
  char *line = NULL;
  size_t cap = 0, n = 0;
  ssize_t len;
  char prev[NSBOX_SHA256_HEX] = "", hash[NSBOX_SHA256_HEX], computed[NSBOX_SHA256_HEX];
  int ret = 0;
  while (ret == 0 && (len = getline (&line, &cap, f)) >= 0)
    {
      n++;
      if (len == 0 || line[len - 1] != '\n')
        {
          ret = nsbox_error_set (err, EBADMSG, "record %zu: cut short (no newline at its end)", n);
          break;
        }
      line[--len] = '\0';
      if (!record_hash (line, (size_t)len, hash))
        {
          ret = nsbox_error_set (err, EBADMSG, "record %zu: does not end with its hash", n);
          break;
        }
      /* What was hashed: the text up to "hash", closed. */
      size_t body = (size_t)len - NSBOX_AUDIT_TAIL;
      char saved = line[body];
      line[body] = '}';
      ret = nsbox_sha256_hex (line, body + 1, computed, err);
      if (ret < 0)
        break;
      if (strcmp (computed, hash) != 0)
        {
          ret = nsbox_error_set (
              err, EBADMSG,
              "record %zu: its hash does not match its content (changed after it "
              "was written)",
              n);
          break;
        }
      json_error_t jerr;
      json_t *r = json_loadb (line, body + 1, JSON_REJECT_DUPLICATES, &jerr);
      line[body] = saved;
      json_t *p = r ? json_object_get (r, "prev") : NULL;
      if (!json_is_object (r) || !p || !(json_is_null (p) || json_is_string (p)))
        ret = nsbox_error_set (err, EBADMSG, "record %zu: not an audit record", n);
      else if (json_is_null (p) && n > 1)
        {
          /* The file's words, shown on a terminal: escaped. */
          const char *why = json_string_value (json_object_get (r, "chain"));
          cleanup_free char *shown = nsbox_printable (why ? why : "no reason given");
          ret = nsbox_error_set (err, EBADMSG, "record %zu: starts a new chain inside the log (%s)",
                                 n, shown ? shown : "?");
        }
      else if (json_is_string (p) && n == 1)
        ret = nsbox_error_set (err, EBADMSG,
                               "record 1: follows a record that is not in the file (the log's "
                               "beginning was removed)");
      else if (json_is_string (p) && strcmp (json_string_value (p), prev) != 0)
        ret = nsbox_error_set (err, EBADMSG,
                               "record %zu: does not follow record %zu (a record was removed, "
                               "inserted or reordered there)",
                               n, n - 1);
      json_decref (r);
      memcpy (prev, hash, sizeof prev);
    }
  if (ret == 0 && ferror (f))
    ret = nsbox_error_sys (err, EIO, "'%s': read", path);
  free (line);
  fclose (f);
  if (ret == 0)
    *records = n;
  return ret;
}
