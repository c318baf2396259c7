/* A warm pool in a forked launcher, for the pool tests: the test worker
 * sends one command at a time on a pipe and reads one answer.
 *
 * Commands: 'R' u32 optlen, "key=value\n"..., u32 codelen, code (run);
 * 'W' u32 n (wait for n ready entries); 'C' (counters); 'F' (fork, see
 * fork_check); 'X' chunk code (fork during a proxied run, see
 * proxied_fork_check); 'Q' (free, exit).
 * Answers: u32 len, then "J <seconds> <json>", "E <message>", "OK", "NO" or
 * "<warm> <cold> <discarded> <started>". */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "harness.h"
#include "pool.h"
#include "util.h"

static bool
read_full (int fd, void *buf, size_t len)
{
  char *p = buf;
  while (len > 0)
    {
      ssize_t n = read (fd, p, len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return false;
      p += n;
      len -= (size_t)n;
    }
  return true;
}

static char *
read_chunk (int fd, uint32_t *len)
{
  uint32_t n;
  if (!read_full (fd, &n, sizeof n))
    return NULL;
  char *b = malloc ((size_t)n + 1);
  if (!b || !read_full (fd, b, n))
    {
      free (b);
      return NULL;
    }
  b[n] = '\0';
  if (len)
    *len = n;
  return b;
}

static void
send_chunk (int fd, const char *data, size_t len)
{
  uint32_t n = (uint32_t)len;
  if (nsbox_write_all (fd, &n, sizeof n) < 0 || nsbox_write_all (fd, data, len) < 0)
    _exit (27);
}

static bool
wait_ready (nsbox_pool *pool, unsigned n, double limit_s)
{
  double until = now_seconds () + limit_s;
  while (nsbox_pool_ready (pool) < n)
    {
      if (now_seconds () > until)
        return false;
      struct timespec ts = { 0, 1000000 };
      nanosleep (&ts, NULL);
    }
  return true;
}

static void
answer_run (int out, nsbox_pool *pool, char *opts, const char *code, size_t len, double limit_s)
{
  struct nsbox_error *err = NULL;
  nsbox_run_options *ro = nsbox_run_options_new (&err);
  int r = ro ? 0 : -1;
  char *save = NULL;
  for (char *line = strtok_r (opts, "\n", &save); r >= 0 && line;
       line = strtok_r (NULL, "\n", &save))
    {
      char *eq = strchr (line, '=');
      if (!eq)
        continue;
      *eq = '\0';
      r = nsbox_run_options_set (ro, line, eq + 1, &err);
    }
  nsbox_result *res = NULL;
  double t0 = 0, t1 = 0;
  if (r >= 0)
    {
      wait_ready (pool, 1, limit_s);
      t0 = now_seconds ();
      r = nsbox_pool_run (pool, code, len, ro, &res, &err);
      t1 = now_seconds ();
    }
  char *json = r >= 0 ? nsbox_result_to_json (res, &err) : NULL;
  char *msg = json ? xasprintf ("J %.6f %s", t1 - t0, json)
                   : xasprintf ("E %s", err ? nsbox_error_message (err) : "(no error)");
  send_chunk (out, msg, strlen (msg));
  free (msg);
  free (json);
  nsbox_result_free (res);
  nsbox_run_options_free (ro);
  nsbox_error_free (err);
}

/* One run's printed text and whether it was warm, or "" on failure. */
static bool
run_prints (nsbox_pool *pool, const char *code, const char *expected, bool *warm)
{
  struct nsbox_error *err = NULL;
  nsbox_result *res = NULL;
  bool ok = nsbox_pool_run (pool, code, strlen (code), NULL, &res, &err) == 0;
  size_t len = 0;
  const char *out = ok ? nsbox_result_stdout (res, &len) : "";
  ok = ok && !nsbox_result_timed_out (res) && len == strlen (expected)
       && memcmp (out, expected, len) == 0;
  *warm = ok && nsbox_result_warm (res);
  nsbox_result_free (res);
  nsbox_error_free (err);
  return ok;
}

/* The launcher forks a child that does not exec (as a multiprocessing
 * worker or a pre-fork server does). The child's pool is a foreign copy:
 * its run is served cold, its nsbox_pool_free touches nothing of the
 * parent's. The parent's next warm run still gets EOF on its stdin (the
 * child's copies of the entries' fds are closed), and its entries survive
 * the child's free. Answer: "<parent ok> <parent warm> <child status>
 * <after ok> <after warm>". */
static char *
fork_check (nsbox_pool *pool, double limit_s)
{
  wait_ready (pool, 1, limit_s);
  pid_t pid = fork ();
  if (pid == 0)
    {
      /* Bounded, and gone with the launcher, even if it hangs (a pool
       * lock copied while held would do that). */
      prctl (PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
      alarm ((unsigned)limit_s);
#ifdef __SANITIZE_ADDRESS__
      /* No allocation in a child forked from a threaded process under
       * ASan (its allocator lock may be held by a thread that is gone). */
      sleep (1);
      _exit (0);
#else
      bool warm = true;
      bool ok = run_prints (pool, "print('child')\n", "child\n", &warm);
      sleep (1);
      nsbox_pool_free (pool);
      _exit (ok && !warm ? 0 : 1);
#endif
    }
  bool warm = false, after_warm = false;
  bool ok = run_prints (pool, "print('parent')\n", "parent\n", &warm);
  int status = -1;
  waitpid (pid, &status, 0);
  wait_ready (pool, 1, limit_s);
  bool after = run_prints (pool, "print('after')\n", "after\n", &after_warm);
  return xasprintf ("%d %d %d %d %d", ok, warm, status, after, after_warm);
}

/* This process's fds that are sockets or pipes: number and link target,
 * read without allocating (the forked child below may not). */
struct fd_seen
{
  int fd;
  char link[48];
};
#define FDS_SEEN_MAX 256

static size_t
list_fds (struct fd_seen *seen, size_t max)
{
  int dir = open ("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0)
    return 0;
  size_t n = 0;
  char buf[4096];
  long got;
  while ((got = syscall (SYS_getdents64, dir, buf, sizeof buf)) > 0)
    for (long off = 0; off < got;)
      {
        struct
        {
          uint64_t ino;
          int64_t off;
          unsigned short reclen;
          unsigned char type;
          char name[];
        } *d = (void *)(buf + off);
        off += d->reclen;
        char *end;
        long fd = strtol (d->name, &end, 10);
        if (*end || fd == dir || n >= max)
          continue;
        ssize_t k = readlinkat (dir, d->name, seen[n].link, sizeof seen[n].link - 1);
        if (k <= 0)
          continue;
        seen[n].link[k] = '\0';
        if (strncmp (seen[n].link, "socket:", 7) != 0 && strncmp (seen[n].link, "pipe:", 5) != 0)
          continue;
        seen[n++].fd = (int)fd;
      }
  close (dir);
  return n;
}

/* How many of `now` are not in `before` (the same number and target). */
static int
count_new (const struct fd_seen *now, size_t n_now, const struct fd_seen *before, size_t n_before,
           int ignore_fd)
{
  int fresh = 0;
  for (size_t i = 0; i < n_now; i++)
    {
      bool old = now[i].fd == ignore_fd;
      for (size_t j = 0; j < n_before && !old; j++)
        old = now[i].fd == before[j].fd && strcmp (now[i].link, before[j].link) == 0;
      fresh += !old;
    }
  return fresh;
}

struct held_run
{
  nsbox_pool *pool;
  const char *code;
  bool ok;
};

static void *
held_run_main (void *arg)
{
  struct held_run *h = arg;
  bool warm;
  h->ok = run_prints (h->pool, h->code, "done\n", &warm);
  return NULL;
}

/* A proxied run holds a connection (its code prints "done" at the end);
 * while it does, the launcher forks a child that does not exec. The child
 * must hold none of the proxy's sockets and pipes. Answer: "<new sockets
 * and pipes in the child> <new sockets in the launcher when it forked>
 * <the run printed done>". */
static char *
proxied_fork_check (nsbox_pool *pool, const char *code, double limit_s)
{
  static struct fd_seen before[FDS_SEEN_MAX], now[FDS_SEEN_MAX];
  size_t n_before = list_fds (before, FDS_SEEN_MAX);
  struct held_run h = { pool, code, false };
  pthread_t thread;
  if (pthread_create (&thread, NULL, held_run_main, &h) != 0)
    return xasprintf ("E pthread_create");
  /* The sandbox's listener, the program's connection and the server's. */
  int sockets = 0;
  for (double until = now_seconds () + limit_s; sockets < 3 && now_seconds () < until;)
    {
      struct timespec ts = { 0, 5000000 };
      nanosleep (&ts, NULL);
      size_t n = list_fds (now, FDS_SEEN_MAX);
      sockets = 0;
      for (size_t i = 0; i < n; i++)
        sockets += strncmp (now[i].link, "socket:", 7) == 0
                   && count_new (&now[i], 1, before, n_before, -1) == 1;
    }
  int report[2];
  if (pipe2 (report, O_CLOEXEC) < 0)
    return xasprintf ("E pipe2");
  pid_t pid = fork ();
  if (pid == 0)
    {
      prctl (PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
      alarm ((unsigned)limit_s);
      close (report[0]);
      int fresh = count_new (now, list_fds (now, FDS_SEEN_MAX), before, n_before, report[1]);
      ssize_t w = write (report[1], &fresh, sizeof fresh);
      _exit (w == sizeof fresh ? 0 : 1);
    }
  close (report[1]);
  int fresh = -1;
  if (pid < 0 || read (report[0], &fresh, sizeof fresh) != sizeof fresh)
    fresh = -1;
  close (report[0]);
  if (pid > 0)
    waitpid (pid, NULL, 0);
  pthread_join (thread, NULL);
  return xasprintf ("%d %d %d", fresh, sockets, h.ok);
}

static void __attribute__ ((noreturn))
pool_child (int in, int out, const char *const *args, unsigned size, double limit_s)
{
  struct nsbox_error *err = NULL;
  nsbox_config *config = nsbox_config_new (&err);
  nsbox_pool_options *po = nsbox_pool_options_new (&err);
  nsbox_pool *pool = NULL;
  char sz[32];
  snprintf (sz, sizeof sz, "%u", size);
  if (!config || !po || harness_configure (config, args, &err) < 0
      || nsbox_pool_options_set (po, "size", sz, &err) < 0
      || nsbox_pool_new (config, po, &pool, &err) < 0)
    {
      char *msg = xasprintf ("E %s", err ? nsbox_error_message (err) : "(no error)");
      send_chunk (out, msg, strlen (msg));
      _exit (0);
    }
  send_chunk (out, "OK", 2);
  for (;;)
    {
      char op;
      if (!read_full (in, &op, 1) || op == 'Q')
        break;
      if (op == 'R')
        {
          char *opts = read_chunk (in, NULL);
          uint32_t len = 0;
          char *code = read_chunk (in, &len);
          if (!opts || !code)
            _exit (28);
          answer_run (out, pool, opts, code, len, limit_s);
          free (opts);
          free (code);
        }
      else if (op == 'W')
        {
          uint32_t n;
          if (!read_full (in, &n, sizeof n))
            _exit (28);
          bool ok = wait_ready (pool, n, limit_s);
          send_chunk (out, ok ? "OK" : "NO", 2);
        }
      else if (op == 'X')
        {
          char *code = read_chunk (in, NULL);
          if (!code)
            _exit (28);
          char *msg = proxied_fork_check (pool, code, limit_s);
          send_chunk (out, msg, strlen (msg));
          free (msg);
          free (code);
        }
      else if (op == 'F')
        {
          char *msg = fork_check (pool, limit_s);
          send_chunk (out, msg, strlen (msg));
          free (msg);
        }
      else if (op == 'C')
        {
          struct nsbox_pool_stats st;
          nsbox_pool_get_stats (pool, &st);
          char *msg = xasprintf ("%llu %llu %llu %llu", (unsigned long long)st.warm,
                                 (unsigned long long)st.cold, (unsigned long long)st.discarded,
                                 (unsigned long long)st.started);
          send_chunk (out, msg, strlen (msg));
          free (msg);
        }
    }
  nsbox_pool_free (pool);
  nsbox_pool_options_free (po);
  nsbox_config_free (config);
  nsbox_error_free (err);
  harness_launcher_exit ();
}

void
pool_start (const char *const *extra_args, unsigned size, struct pool_job *job)
{
  int cmd[2], resp[2];
  cr_assert (pipe2 (cmd, O_CLOEXEC) == 0 && pipe2 (resp, O_CLOEXEC) == 0, "pipe2: %s",
             strerror (errno));
  double limit_s = harness_scaled (30);
  pid_t pid = harness_fork_launcher ();
  if (pid == 0)
    {
      close (cmd[1]);
      close (resp[0]);
      pool_child (cmd[0], resp[1], extra_args, size, limit_s);
    }
  close (cmd[0]);
  close (resp[1]);
  *job = (struct pool_job){ pid, cmd[1], resp[0] };
  char *hello = read_chunk (job->resp_fd, NULL);
  cr_assert (hello && strcmp (hello, "OK") == 0, "pool launcher: %s",
             hello ? hello : "(ended without an answer)");
  free (hello);
}

static void
send_op (struct pool_job *job, char op)
{
  cr_assert (nsbox_write_all (job->cmd_fd, &op, 1) == 0, "pool launcher gone");
}

static void
send_chunk_checked (struct pool_job *job, const char *data, size_t len)
{
  uint32_t n = (uint32_t)len;
  cr_assert (nsbox_write_all (job->cmd_fd, &n, sizeof n) == 0
                 && nsbox_write_all (job->cmd_fd, data, len) == 0,
             "pool launcher gone");
}

void
pool_run (struct pool_job *job, const char *code, const char *const *run_options,
          struct run_out *out)
{
  char opts[512] = "";
  for (size_t i = 0; run_options && run_options[i] && run_options[i + 1]; i += 2)
    snprintf (opts + strlen (opts), sizeof opts - strlen (opts), "%s=%s\n", run_options[i],
              run_options[i + 1]);
  send_op (job, 'R');
  send_chunk_checked (job, opts, strlen (opts));
  send_chunk_checked (job, code, strlen (code));
  char *answer = read_chunk (job->resp_fd, NULL);
  cr_assert_not_null (answer, "pool launcher ended during a run");
  if (answer[0] == 'J')
    {
      char *end;
      double seconds = strtod (answer + 2, &end);
      harness_result_to_out (end + 1, NULL, out);
      out->seconds = seconds;
    }
  else
    harness_result_to_out (NULL, answer + 2, out);
  out->pid = job->pid;
  free (answer);
}

bool
pool_wait_ready (struct pool_job *job, unsigned n)
{
  send_op (job, 'W');
  uint32_t v = n;
  cr_assert (nsbox_write_all (job->cmd_fd, &v, sizeof v) == 0, "pool launcher gone");
  char *answer = read_chunk (job->resp_fd, NULL);
  cr_assert_not_null (answer, "pool launcher ended while waiting");
  bool ok = strcmp (answer, "OK") == 0;
  free (answer);
  return ok;
}

void
pool_proxied_fork_check (struct pool_job *job, const char *code, int *child_new,
                         int *launcher_new_sockets, bool *run_ok)
{
  send_op (job, 'X');
  send_chunk_checked (job, code, strlen (code));
  char *answer = read_chunk (job->resp_fd, NULL);
  cr_assert_not_null (answer, "pool launcher ended during the proxied fork check");
  int ok = 0;
  cr_assert (sscanf (answer, "%d %d %d", child_new, launcher_new_sockets, &ok) == 3,
             "proxied fork check: '%s'", answer);
  *run_ok = ok;
  free (answer);
}

void
pool_fork_check (struct pool_job *job, struct pool_fork_outcome *o)
{
  send_op (job, 'F');
  char *answer = read_chunk (job->resp_fd, NULL);
  cr_assert_not_null (answer, "pool launcher ended during the fork check");
  int ok, warm, after, after_warm;
  cr_assert (sscanf (answer, "%d %d %d %d %d", &ok, &warm, &o->child_status, &after, &after_warm)
                 == 5,
             "fork check: '%s'", answer);
  o->parent_ok = ok;
  o->parent_warm = warm;
  o->after_ok = after;
  o->after_warm = after_warm;
  free (answer);
}

struct pool_counts
pool_counts (struct pool_job *job)
{
  send_op (job, 'C');
  char *answer = read_chunk (job->resp_fd, NULL);
  cr_assert_not_null (answer, "pool launcher ended");
  struct pool_counts c = { 0 };
  cr_assert (sscanf (answer, "%llu %llu %llu %llu", &c.warm, &c.cold, &c.discarded, &c.started)
                 == 4,
             "pool counters: '%s'", answer);
  free (answer);
  return c;
}

int
pool_entry_pids (struct pool_job *job, pid_t *pids, int max)
{
  return children_of (job->pid, pids, max);
}

void
pool_stop (struct pool_job *job)
{
  send_op (job, 'Q');
  close (job->cmd_fd);
  int status;
  while (waitpid (job->pid, &status, 0) < 0)
    cr_assert (errno == EINTR, "waitpid: %s", strerror (errno));
  close (job->resp_fd);
  cr_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0,
             "pool launcher ended with status 0x%x", status);
}
