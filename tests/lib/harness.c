/* Integration test harness: see harness.h. */
#include "harness.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <openssl/evp.h>
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

#include "config.h"
#include "nsbox.h"
#include "util.h"

enum run_mode harness_modes[2] = { RUN_CLI, RUN_LIB };

/* Captured output beyond this is read and dropped: a broken launcher that
 * floods must not exhaust the test's memory. */
#define CAPTURE_LIMIT (32u << 20)

/* Environment. */

const char *
harness_rootfs (void)
{
  const char *rootfs = getenv ("NSBOX_TEST_ROOTFS");
  cr_assert (rootfs && *rootfs,
             "NSBOX_TEST_ROOTFS is not set (run tests/run-tests.sh, or set it to the output of "
             "tests/fixtures/rootfs.sh)");
  struct stat st;
  cr_assert (stat (rootfs, &st) == 0 && S_ISDIR (st.st_mode),
             "NSBOX_TEST_ROOTFS '%s' is not a directory", rootfs);
  return rootfs;
}

const char *
harness_nsbox_bin (void)
{
  static char resolved[PATH_MAX];
  const char *bin = getenv ("NSBOX_BIN");
  if (!bin || !*bin)
    bin = "build/nsbox";
  cr_assert (realpath (bin, resolved), "NSBOX_BIN '%s': %s", bin, strerror (errno));
  cr_assert (access (resolved, X_OK) == 0, "NSBOX_BIN '%s' is not executable", resolved);
  return resolved;
}

const char *
harness_test_user (void)
{
  const char *user = getenv ("NSBOX_TEST_USER");
  return user && *user ? user : NULL;
}

bool
harness_must_work (void)
{
  const char *v = getenv ("NSBOX_TEST_MUST_WORK");
  return v && strcmp (v, "1") == 0;
}

const char *
harness_runtime (void)
{
  const char *v = getenv ("NSBOX_TEST_RUNTIME");
  return v && *v ? v : "native";
}

bool
harness_is_runsc (void)
{
  return strcmp (harness_runtime (), "runsc") == 0;
}

/* Whether the runtime is chosen by NSBOX_TEST_RUNTIME for every run. */
static bool
runtime_forced (void)
{
  const char *v = getenv ("NSBOX_TEST_RUNTIME");
  return v && *v;
}

struct test_ids
{
  bool drop;
  bool keep_non_dumpable;
  uid_t uid;
  gid_t gid;
};

static struct test_ids
test_ids (void)
{
  struct test_ids ids = { false, false, getuid (), getgid () };
  const char *user = harness_test_user ();
  if (!user)
    return ids;
  struct passwd *pw = getpwnam (user);
  cr_assert_not_null (pw, "NSBOX_TEST_USER '%s': no such user", user);
  cr_assert (pw->pw_uid != 0, "NSBOX_TEST_USER '%s' is root", user);
  cr_assert (geteuid () == 0, "NSBOX_TEST_USER needs the test binary to run as root");
  ids.drop = true;
  ids.uid = pw->pw_uid;
  ids.gid = pw->pw_gid;
  return ids;
}

uid_t
sandbox_host_uid (void)
{
  struct test_ids ids = test_ids ();
  if (ids.drop)
    return ids.uid;
  return geteuid () == 0 ? 65534 : geteuid ();
}

gid_t
sandbox_host_gid (void)
{
  struct test_ids ids = test_ids ();
  if (ids.drop)
    return ids.gid;
  return geteuid () == 0 ? 65534 : getegid ();
}

/* Called in a forked child only: becomes the test user (async-signal-safe
 * calls; the ids were looked up before the fork). */
static void
become (const struct test_ids *ids)
{
  if (!ids->drop)
    return;
  if (setgroups (0, NULL) < 0 || setgid (ids->gid) < 0 || setuid (ids->uid) < 0)
    {
      static const char msg[] = "harness: cannot switch to the test user\n";
      (void)!write (STDERR_FILENO, msg, sizeof msg - 1);
      _exit (126);
    }
  /* Changing credentials made this copy non-dumpable; a process the user
   * started normally is dumpable (execve restores it for the CLI). The
   * library case for a non-dumpable caller is a test of its own. */
  if (!ids->keep_non_dumpable)
    prctl (PR_SET_DUMPABLE, 1, 0, 0, 0);
}

void
harness_test_ids (bool *drop, uid_t *uid, gid_t *gid)
{
  struct test_ids ids = test_ids ();
  *drop = ids.drop;
  *uid = ids.uid;
  *gid = ids.gid;
}

static bool raise_rlimits;

void
harness_raise_launcher_rlimits (void)
{
  raise_rlimits = true;
}

/* In the launcher's child, before it becomes the test user (root may raise
 * what an unprivileged user may not). */
static void
raise_launcher_rlimits (void)
{
  static const struct
  {
    int resource;
    rlim_t wanted;
  } raised[] = {
    { RLIMIT_RTPRIO, 99 },
    { RLIMIT_NICE, 40 },
    { RLIMIT_MEMLOCK, RLIM_INFINITY },
    { RLIMIT_NOFILE, 1 << 20 },
    { RLIMIT_CORE, RLIM_INFINITY },
    { RLIMIT_STACK, RLIM_INFINITY },
    { RLIMIT_SIGPENDING, 1 << 20 },
    { RLIMIT_MSGQUEUE, 1 << 30 },
    { RLIMIT_CPU, RLIM_INFINITY },
    { RLIMIT_FSIZE, RLIM_INFINITY },
  };
  if (!raise_rlimits)
    return;
  for (size_t i = 0; i < sizeof raised / sizeof raised[0]; i++)
    {
      struct rlimit rl = { raised[i].wanted, raised[i].wanted };
      if (setrlimit (raised[i].resource, &rl) == 0 || getrlimit (raised[i].resource, &rl) < 0)
        continue;
      rl.rlim_cur = rl.rlim_max;
      setrlimit (raised[i].resource, &rl);
    }
}

struct rlimit
harness_raised_rlimit (int resource)
{
  int p[2];
  cr_assert (pipe2 (p, O_CLOEXEC) == 0);
  bool was = raise_rlimits;
  raise_rlimits = true;
  pid_t pid = fork ();
  cr_assert (pid >= 0, "fork: %s", strerror (errno));
  if (pid == 0)
    {
      struct rlimit rl = { 0, 0 };
      raise_launcher_rlimits ();
      getrlimit (resource, &rl);
      (void)!write (p[1], &rl, sizeof rl);
      _exit (0);
    }
  raise_rlimits = was;
  close (p[1]);
  struct rlimit rl;
  cr_assert (read (p[0], &rl, sizeof rl) == (ssize_t)sizeof rl);
  close (p[0]);
  while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
    ;
  return rl;
}

/* A forked child starts clean: default SIGPIPE, nothing blocked, and it dies
 * with the test worker. */
static void
child_reset (pid_t parent)
{
  signal (SIGPIPE, SIG_DFL);
  sigset_t none;
  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, NULL);
  prctl (PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (getppid () != parent)
    _exit (126);
}

double
now_seconds (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Growable NUL-terminated capture. */
struct buf
{
  char *data;
  size_t len, alloc;
};

static void
buf_add (struct buf *b, const char *data, size_t n)
{
  if (b->len + n > CAPTURE_LIMIT)
    n = CAPTURE_LIMIT - b->len;
  if (b->len + n + 1 > b->alloc)
    {
      size_t want = b->alloc ? b->alloc : 4096;
      while (want < b->len + n + 1)
        want *= 2;
      char *grown = realloc (b->data, want);
      cr_assert_not_null (grown, "out of memory");
      b->data = grown;
      b->alloc = want;
    }
  memcpy (b->data + b->len, data, n);
  b->len += n;
  b->data[b->len] = '\0';
}

static char *
buf_take (struct buf *b, size_t *len)
{
  if (!b->data)
    buf_add (b, "", 0);
  *len = b->len;
  char *data = b->data;
  memset (b, 0, sizeof *b);
  return data;
}

static void
set_nonblocking (int fd)
{
  fcntl (fd, F_SETFL, fcntl (fd, F_GETFL) | O_NONBLOCK);
}

/* Feeds `code` to in_fd while reading out_fd and err_fd until both are at
 * EOF; all at once so large outputs cannot deadlock. */
static void
pump (int in_fd, const char *code, size_t len, int out_fd, struct buf *out, int err_fd,
      struct buf *err)
{
  size_t off = 0;
  int fds[3] = { in_fd, out_fd, err_fd };
  if (in_fd >= 0 && len == 0)
    {
      close (in_fd);
      fds[0] = -1;
    }
  for (int i = 0; i < 3; i++)
    if (fds[i] >= 0)
      set_nonblocking (fds[i]);
  while (fds[1] >= 0 || fds[2] >= 0 || fds[0] >= 0)
    {
      struct pollfd p[3];
      for (int i = 0; i < 3; i++)
        p[i] = (struct pollfd){ fds[i], (short)(i == 0 ? POLLOUT : POLLIN), 0 };
      if (poll (p, 3, -1) < 0)
        {
          cr_assert (errno == EINTR, "poll: %s", strerror (errno));
          continue;
        }
      if (fds[0] >= 0 && p[0].revents)
        {
          ssize_t n = write (fds[0], code + off, len - off > 65536 ? 65536 : len - off);
          if (n > 0)
            off += (size_t)n;
          if ((n < 0 && errno != EAGAIN && errno != EINTR) || off == len)
            {
              close (fds[0]);
              fds[0] = -1;
            }
        }
      for (int i = 1; i < 3; i++)
        if (fds[i] >= 0 && p[i].revents)
          {
            char chunk[65536];
            ssize_t n = read (fds[i], chunk, sizeof chunk);
            if (n > 0)
              buf_add (i == 1 ? out : err, chunk, (size_t)n);
            else if (n == 0 || (errno != EAGAIN && errno != EINTR))
              {
                close (fds[i]);
                fds[i] = -1;
              }
          }
    }
}

/* SIGPIPE when the launcher refuses before reading its stdin must not kill
 * the test; forked children restore the default. */
static void
ignore_sigpipe (void)
{
  signal (SIGPIPE, SIG_IGN);
}

static void
parse_json (struct run_out *out)
{
  if (!out->as_json || out->out_len == 0)
    return;
  json_error_t error;
  out->json = json_loadb (out->out, out->out_len, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &error);
  /* nsbox's own failure is not a result (nsbox(1), THE JSON RESULT). */
  if (out->json && json_is_object (out->json) && !json_object_get (out->json, "exit_code")
      && json_object_get (out->json, "error"))
    {
      out->json_error = out->json;
      out->json = NULL;
    }
}

void
run_cli_spawn (const char *const *extra_args, bool as_json, struct run_job *job)
{
  run_nsbox_spawn ("run", true, extra_args, as_json, job);
}

void
run_nsbox_spawn (const char *command, bool sandbox_args, const char *const *extra_args,
                 bool as_json, struct run_job *job)
{
  /* Measured before any sandbox of the test runs, never while one does. */
  harness_time_scale ();
  memset (job, 0, sizeof *job);
  job->as_json = as_json;
  const char *bin = harness_nsbox_bin ();
  const char *rootfs = harness_rootfs ();
  struct test_ids ids = test_ids ();
  size_t nextra = 0;
  while (extra_args && extra_args[nextra])
    nextra++;
  const char **argv = calloc (nextra + 8, sizeof *argv);
  cr_assert_not_null (argv);
  size_t argc = 0;
  argv[argc++] = bin;
  argv[argc++] = command;
  if (sandbox_args)
    argv[argc++] = "--rootfs";
  if (sandbox_args)
    argv[argc++] = rootfs;
  if (sandbox_args && runtime_forced ())
    {
      argv[argc++] = "--runtime";
      argv[argc++] = harness_runtime ();
    }
  if (as_json)
    argv[argc++] = "--json";
  for (size_t i = 0; i < nextra; i++)
    argv[argc++] = extra_args[i];
  argv[argc] = NULL;

  int in[2], o[2], e[2];
  cr_assert (pipe2 (in, O_CLOEXEC) == 0 && pipe2 (o, O_CLOEXEC) == 0 && pipe2 (e, O_CLOEXEC) == 0,
             "pipe2: %s", strerror (errno));
  ignore_sigpipe ();
  pid_t parent = getpid ();
  job->start = now_seconds ();
  pid_t pid = fork ();
  cr_assert (pid >= 0, "fork: %s", strerror (errno));
  if (pid == 0)
    {
      if (dup2 (in[0], 0) < 0 || dup2 (o[1], 1) < 0 || dup2 (e[1], 2) < 0)
        _exit (126);
      raise_launcher_rlimits ();
      become (&ids);
      child_reset (parent);
      execv (bin, (char *const *)argv);
      dprintf (2, "harness: execute '%s': %s\n", bin, strerror (errno));
      _exit (127);
    }
  job->pid = pid;
  free (argv);
  close (in[0]);
  close (o[1]);
  close (e[1]);
  job->in_fd = in[1];
  job->out_fd = o[0];
  job->err_fd = e[0];
}

void
run_job_feed (struct run_job *job, const char *code, size_t len)
{
  cr_assert (job->in_fd >= 0, "the code was fed already");
  (void)nsbox_write_all (job->in_fd, code, len);
  close (job->in_fd);
  job->in_fd = -1;
}

void
run_cli_wait (struct run_job *job, const char *code, size_t len, struct run_out *out)
{
  memset (out, 0, sizeof *out);
  out->mode = RUN_CLI;
  out->as_json = job->as_json;
  out->pid = job->pid;
  struct buf ob = { 0 }, eb = { 0 };
  pump (job->in_fd, code, len, job->out_fd, &ob, job->err_fd, &eb);
  job->in_fd = job->out_fd = job->err_fd = -1;
  int status;
  struct rusage ru;
  while (wait4 (job->pid, &status, 0, &ru) < 0)
    cr_assert (errno == EINTR, "wait4: %s", strerror (errno));
  out->seconds = now_seconds () - job->start;
  out->peak_rss_kb = ru.ru_maxrss;
  out->cpu_seconds = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec)
                     + (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  out->exit_status = WIFEXITED (status) ? WEXITSTATUS (status) : -1;
  out->term_signal = WIFSIGNALED (status) ? WTERMSIG (status) : 0;
  out->out = buf_take (&ob, &out->out_len);
  out->err = buf_take (&eb, &out->err_len);
  parse_json (out);
}

static void
run_cli_impl (const char *code, size_t len, const char *const *extra_args, bool as_json,
              struct run_out *out)
{
  struct run_job job;
  run_cli_spawn (extra_args, as_json, &job);
  run_cli_wait (&job, code, len, out);
}

void
run_cli (const char *code, size_t len, const char *const *extra_args, struct run_out *out)
{
  run_cli_impl (code, len, extra_args, true, out);
}

void
run_cli_text (const char *code, size_t len, const char *const *extra_args, struct run_out *out)
{
  run_cli_impl (code, len, extra_args, false, out);
}

/* Speed calibration: see harness.h. */

#define CALIBRATION_RUNS 5
/* Beyond this the machine is too slow for the suite to say anything: the
 * scale stops here and the bounds it would need fail loudly. The lanes of
 * tests/run-tests.sh load the machine on purpose: a native pass beside two
 * runsc passes measured 9.3 on this 2-CPU machine, and a sanitizer build's
 * native pass alone 7.2 on a slow day. */
#define MAX_TIME_SCALE 20.0

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median wall time of a trivial run through the CLI, as this pass's
 * user and runtime. */
static double
measure_trivial_run (void)
{
  double took[CALIBRATION_RUNS];
  for (int i = 0; i < CALIBRATION_RUNS; i++)
    {
      struct run_out out;
      run_cli ("pass\n", 5, NULL, &out);
      RUN_ASSERT (&out, out.exit_status == 0, "calibration: a trivial run failed");
      took[i] = out.seconds;
      run_out_free (&out);
    }
  qsort (took, CALIBRATION_RUNS, sizeof took[0], cmp_double);
  return took[CALIBRATION_RUNS / 2];
}

static double
scale_of (double median)
{
  double reference = harness_is_runsc () ? HARNESS_REFERENCE_RUNSC_S : HARNESS_REFERENCE_NATIVE_S;
#ifdef __SANITIZE_ADDRESS__
  reference += HARNESS_SANITIZER_EXTRA_S;
#endif
  const char *own = getenv ("NSBOX_TEST_REFERENCE_MS");
  if (own && *own)
    {
      char *end;
      reference = strtod (own, &end) / 1000;
      cr_assert (*end == '\0' && reference > 0, "NSBOX_TEST_REFERENCE_MS '%s' is not a number",
                 own);
    }
  double scale = median / reference;
  return scale < 1.0 ? 1.0 : scale > MAX_TIME_SCALE ? MAX_TIME_SCALE : scale;
}

/* The pass's calibration file: "<scale> <median>\n", written by the first
 * worker that needs it while the others wait on its lock. */
static double
calibrate_through_file (const char *path)
{
  int fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  cr_assert (fd >= 0, "NSBOX_TEST_CALIBRATION '%s': %s", path, strerror (errno));
  cr_assert (flock (fd, LOCK_EX) == 0, "lock '%s': %s", path, strerror (errno));
  char buf[128];
  ssize_t n = pread (fd, buf, sizeof buf - 1, 0);
  double scale = 0;
  if (n > 0)
    {
      buf[n] = '\0';
      scale = strtod (buf, NULL);
    }
  if (!(scale >= 1.0))
    {
      double median = measure_trivial_run ();
      scale = scale_of (median);
      int len = snprintf (buf, sizeof buf, "%.2f %.1f\n", scale, median * 1000);
      cr_assert (ftruncate (fd, 0) == 0 && pwrite (fd, buf, (size_t)len, 0) == len,
                 "write '%s': %s", path, strerror (errno));
      cr_log_info ("calibration: a trivial %s run takes %.1f ms here: time scale %.2f",
                   harness_runtime (), median * 1000, scale);
    }
  close (fd);
  return scale;
}

/* Set while the trivial runs are measured, whose own start must not
 * calibrate again. */
static bool calibrating;

double
harness_time_scale (void)
{
  static double scale;
  if (scale >= 1.0)
    return scale;
  if (calibrating)
    return 1.0;
  const char *forced = getenv ("NSBOX_TEST_TIME_SCALE");
  const char *path = getenv ("NSBOX_TEST_CALIBRATION");
  if (forced && *forced)
    {
      char *end;
      scale = strtod (forced, &end);
      cr_assert (*end == '\0' && scale >= 1.0 && scale <= MAX_TIME_SCALE,
                 "NSBOX_TEST_TIME_SCALE '%s' is not a number from 1 to %.0f", forced,
                 MAX_TIME_SCALE);
    }
  else
    {
      calibrating = true;
      scale = path && *path ? calibrate_through_file (path) : scale_of (measure_trivial_run ());
      calibrating = false;
    }
  return scale;
}

double
harness_scaled (double seconds)
{
  return seconds * harness_time_scale ();
}

const char *
harness_scaled_duration (double seconds, char *buf, size_t size)
{
  snprintf (buf, size, "%.0fms", harness_scaled (seconds) * 1000);
  return buf;
}

static int cli_status_of (json_t *json);

/* Library mode, in the forked child. */

static long
own_rss_kb (void)
{
  char buf[4096];
  size_t n;
  if (!read_whole ("/proc/self/status", buf, sizeof buf, &n))
    return 0;
  const char *p = strstr (buf, "\nVmRSS:");
  return p ? strtol (p + 7, NULL, 10) : 0;
}

static bool
key_is_boolean (const char *name, size_t len)
{
  for (const struct nsbox_key_info *k = nsbox_config_keys (); k->name; k++)
    if (strlen (k->name) == len && strncmp (k->name, name, len) == 0)
      return k->is_boolean;
  return false;
}

/* Applies CLI-style arguments as the CLI does: --config first, then the
 * keys in order, then the command. */
static int
configure_lib (nsbox_config *config, const char *const *args, struct nsbox_error **err)
{
  int r = nsbox_config_set (config, "rootfs", harness_rootfs (), err);
  for (size_t i = 0; r >= 0 && args && args[i]; i++)
    if (strcmp (args[i], "--config") == 0 && args[i + 1])
      r = nsbox_config_load_yaml (config, args[++i], err);
  /* As the CLI puts --runtime before the case's flags: after the YAML,
   * before the keys. */
  if (r >= 0 && runtime_forced ())
    r = nsbox_config_set (config, "runtime", harness_runtime (), err);
  for (size_t i = 0; r >= 0 && args && args[i]; i++)
    {
      const char *a = args[i];
      if (strcmp (a, "--") == 0)
        {
          size_t n = 0;
          while (args[i + 1 + n])
            n++;
          return nsbox_config_set_command (config, n, args + i + 1, err);
        }
      if (strcmp (a, "--json") == 0)
        continue;
      if (strcmp (a, "--config") == 0)
        {
          i++;
          continue;
        }
      const char *name = strncmp (a, "--", 2) == 0 ? a + 2 : a;
      const char *eq = strchr (name, '=');
      if (eq)
        {
          char key[128];
          snprintf (key, sizeof key, "%.*s", (int)(eq - name), name);
          r = nsbox_config_set (config, key, eq + 1, err);
        }
      else if (key_is_boolean (name, strlen (name)))
        r = nsbox_config_set (config, name, "true", err);
      else
        r = nsbox_config_set (config, name, args[i + 1] ? args[++i] : "", err);
    }
  return r;
}

/* Writes "J <base_rss_kb>\n<json>" or "E <base_rss_kb>\n<message>". */
static void __attribute__ ((noreturn))
lib_child (int fd, const char *code, size_t len, const char *const *args)
{
  char head[64];
  long base = own_rss_kb ();
  struct nsbox_error *err = NULL;
  nsbox_result *res = NULL;
  char *json = NULL;
  nsbox_config *config = nsbox_config_new (&err);
  if (config && configure_lib (config, args, &err) >= 0
      && nsbox_run (config, code, len, &res, &err) >= 0)
    json = nsbox_result_to_json (res, &err);
  if (json)
    {
      snprintf (head, sizeof head, "J %ld\n", base);
      (void)nsbox_write_all (fd, head, strlen (head));
      (void)nsbox_write_all (fd, json, strlen (json));
    }
  else
    {
      const char *msg = err ? nsbox_error_message (err) : "(no error object)";
      snprintf (head, sizeof head, "E %ld\n", base);
      (void)nsbox_write_all (fd, head, strlen (head));
      (void)nsbox_write_all (fd, msg, strlen (msg));
    }
  free (json);
  nsbox_result_free (res);
  nsbox_config_free (config);
  nsbox_error_free (err);
  harness_launcher_exit ();
}

void
harness_launcher_exit (void)
{
#ifdef __SANITIZE_ADDRESS__
  /* _exit skips LeakSanitizer's check at exit: run it here, so that a leak
   * in the library's run path fails the case. */
  if (__lsan_do_recoverable_leak_check ())
    _exit (23);
#endif
  _exit (0);
}

int
harness_configure (nsbox_config *config, const char *const *args, struct nsbox_error **err)
{
  return configure_lib (config, args, err);
}

pid_t
harness_fork_launcher (void)
{
  harness_time_scale ();
  harness_rootfs ();
  struct test_ids ids = test_ids ();
  ignore_sigpipe ();
  pid_t parent = getpid ();
  pid_t pid = fork ();
  cr_assert (pid >= 0, "fork: %s", strerror (errno));
  if (pid == 0)
    {
      raise_launcher_rlimits ();
      become (&ids);
      child_reset (parent);
    }
  return pid;
}

void
harness_result_to_out (const char *json, const char *error, struct run_out *out)
{
  memset (out, 0, sizeof *out);
  out->mode = RUN_LIB;
  out->as_json = true;
  struct buf ob = { 0 }, eb = { 0 };
  if (json)
    {
      buf_add (&ob, json, strlen (json));
      buf_add (&ob, "\n", 1);
    }
  else
    {
      buf_add (&eb, "nsbox: ", 7);
      buf_add (&eb, error, strlen (error));
      buf_add (&eb, "\n", 1);
      out->exit_status = 125;
    }
  out->out = buf_take (&ob, &out->out_len);
  out->err = buf_take (&eb, &out->err_len);
  parse_json (out);
  if (out->json)
    out->exit_status = cli_status_of (out->json);
}

/* The CLI's exit status for a result. */
static int
cli_status_of (json_t *json)
{
  if (json_is_true (json_object_get (json, "timed_out")))
    return 124;
  if (json_is_true (json_object_get (json, "oom_killed")))
    return 137;
  json_t *code = json_object_get (json, "exit_code");
  return json_is_integer (code) ? (int)json_integer_value (code) : -1;
}

static void
run_lib_impl (const char *code, size_t len, const char *const *extra_args, bool non_dumpable,
              struct run_out *out)
{
  harness_time_scale ();
  memset (out, 0, sizeof *out);
  out->mode = RUN_LIB;
  out->as_json = true;
  out->non_dumpable = non_dumpable;
  harness_rootfs ();
  struct test_ids ids = test_ids ();
  ids.keep_non_dumpable = non_dumpable;
  int p[2];
  cr_assert (pipe2 (p, O_CLOEXEC) == 0, "pipe2: %s", strerror (errno));
  ignore_sigpipe ();
  pid_t parent = getpid ();
  double start = now_seconds ();
  pid_t pid = fork ();
  cr_assert (pid >= 0, "fork: %s", strerror (errno));
  if (pid == 0)
    {
      close (p[0]);
      raise_launcher_rlimits ();
      become (&ids);
      child_reset (parent);
      if (non_dumpable)
        prctl (PR_SET_DUMPABLE, 0, 0, 0, 0);
      lib_child (p[1], code, len, extra_args);
    }
  out->pid = pid;
  close (p[1]);
  struct buf rb = { 0 };
  pump (-1, NULL, 0, p[0], &rb, -1, NULL);
  int status;
  struct rusage ru;
  while (wait4 (pid, &status, 0, &ru) < 0)
    cr_assert (errno == EINTR, "wait4: %s", strerror (errno));
  out->seconds = now_seconds () - start;
  out->peak_rss_kb = ru.ru_maxrss;
  out->term_signal = WIFSIGNALED (status) ? WTERMSIG (status) : 0;

  size_t rlen;
  char *report = buf_take (&rb, &rlen);
  char *nl = memchr (report, '\n', rlen);
  struct buf ob = { 0 }, eb = { 0 };
  if (!nl || (report[0] != 'J' && report[0] != 'E') || !WIFEXITED (status)
      || WEXITSTATUS (status) != 0)
    {
      out->exit_status = -1;
      char msg[128];
      snprintf (msg, sizeof msg, "harness: library child ended with status 0x%x: ", status);
      buf_add (&eb, msg, strlen (msg));
      buf_add (&eb, report, rlen);
    }
  else
    {
      out->base_rss_kb = strtol (report + 2, NULL, 10);
      const char *body = nl + 1;
      size_t blen = rlen - (size_t)(body - report);
      if (report[0] == 'J')
        {
          buf_add (&ob, body, blen);
          buf_add (&ob, "\n", 1);
        }
      else
        {
          buf_add (&eb, "nsbox: ", 7);
          buf_add (&eb, body, blen);
          buf_add (&eb, "\n", 1);
          out->exit_status = 125;
        }
    }
  free (report);
  out->out = buf_take (&ob, &out->out_len);
  out->err = buf_take (&eb, &out->err_len);
  parse_json (out);
  if (out->json)
    out->exit_status = cli_status_of (out->json);
}

void
run_lib (const char *code, size_t len, const char *const *extra_args, struct run_out *out)
{
  run_lib_impl (code, len, extra_args, false, out);
}

void
run_lib_non_dumpable (const char *code, size_t len, const char *const *extra_args,
                      struct run_out *out)
{
  run_lib_impl (code, len, extra_args, true, out);
}

void
run_mode (enum run_mode mode, const char *code, const char *const *extra_args, struct run_out *out)
{
  if (mode == RUN_CLI)
    run_cli (code, strlen (code), extra_args, out);
  else
    run_lib (code, strlen (code), extra_args, out);
}

void
run_out_free (struct run_out *out)
{
  free (out->out);
  free (out->err);
  free (out->description);
  if (out->json)
    json_decref (out->json);
  json_decref (out->json_error);
  memset (out, 0, sizeof *out);
}

const char *
run_mode_name (enum run_mode mode)
{
  return mode == RUN_CLI ? "cli" : "lib";
}

/* Appends up to `max` bytes of data, escaped, to b. */
static void
describe_bytes (struct buf *b, const char *data, size_t len, size_t max)
{
  for (size_t i = 0; i < len && i < max; i++)
    {
      unsigned char c = (unsigned char)data[i];
      char esc[8];
      if (c == '\n')
        buf_add (b, "\\n", 2);
      else if (c == '\\' || c == '"')
        {
          esc[0] = '\\';
          esc[1] = (char)c;
          buf_add (b, esc, 2);
        }
      else if (c < 0x20 || c >= 0x7f)
        {
          snprintf (esc, sizeof esc, "\\x%02x", c);
          buf_add (b, esc, 4);
        }
      else
        buf_add (b, (const char *)&c, 1);
    }
  if (len > max)
    buf_add (b, "...", 3);
}

const char *
run_describe (struct run_out *out)
{
  free (out->description);
  struct buf b = { 0 };
  char line[512];
  const char *user = harness_test_user ();
  snprintf (line, sizeof line,
            "  run: %s%s as %s: exit status %d, launcher signal %d, %.2f s, peak rss %ld kB "
            "(base %ld kB), launcher pid %d\n  stdout (%zu bytes): \"",
            run_mode_name (out->mode),
            out->mode == RUN_CLI && !out->as_json ? " (text)"
            : out->non_dumpable                   ? " (non-dumpable caller)"
                                                  : "",
            user ? user : (geteuid () == 0 ? "root" : "the invoking user"), out->exit_status,
            out->term_signal, out->seconds, out->peak_rss_kb, out->base_rss_kb, (int)out->pid,
            out->out_len);
  buf_add (&b, line, strlen (line));
  describe_bytes (&b, out->out, out->out_len, 1500);
  snprintf (line, sizeof line, "\"\n  stderr (%zu bytes): \"", out->err_len);
  buf_add (&b, line, strlen (line));
  describe_bytes (&b, out->err, out->err_len, 1500);
  buf_add (&b, "\"", 1);
  if (out->json)
    {
      size_t olen, elen;
      const char *o = json_string_value (json_object_get (out->json, "stdout"));
      const char *e = json_string_value (json_object_get (out->json, "stderr"));
      olen = o ? json_string_length (json_object_get (out->json, "stdout")) : 0;
      elen = e ? json_string_length (json_object_get (out->json, "stderr")) : 0;
      buf_add (&b, "\n  json stdout: \"", 17);
      describe_bytes (&b, o ? o : "", olen, 1500);
      buf_add (&b, "\"\n  json stderr: \"", 18);
      describe_bytes (&b, e ? e : "", elen, 1500);
      buf_add (&b, "\"", 1);
    }
  else if (out->as_json)
    buf_add (&b, "\n  (no parsable JSON result)", 28);
  size_t dlen;
  out->description = buf_take (&b, &dlen);
  return out->description;
}

/* JSON access. */

json_t *
run_json (struct run_out *out)
{
  RUN_ASSERT (out, out->json != NULL, "expected a JSON result");
  return out->json;
}

static json_t *
field (struct run_out *out, const char *key)
{
  json_t *value = json_object_get (run_json (out), key);
  RUN_ASSERT (out, value != NULL, "JSON result has no '%s'", key);
  return value;
}

long long
run_json_int (struct run_out *out, const char *key)
{
  json_t *value = field (out, key);
  RUN_ASSERT (out, json_is_integer (value), "JSON '%s' is not an integer", key);
  return (long long)json_integer_value (value);
}

bool
run_json_bool (struct run_out *out, const char *key)
{
  json_t *value = field (out, key);
  RUN_ASSERT (out, json_is_boolean (value), "JSON '%s' is not a boolean", key);
  return json_is_true (value);
}

const char *
run_json_str (struct run_out *out, const char *key, size_t *len)
{
  json_t *value = field (out, key);
  if (json_is_null (value))
    {
      if (len)
        *len = 0;
      return NULL;
    }
  RUN_ASSERT (out, json_is_string (value), "JSON '%s' is not a string", key);
  if (len)
    *len = json_string_length (value);
  return json_string_value (value);
}

const char *
run_json_limit (struct run_out *out, const char *name)
{
  json_t *limits = field (out, "limits");
  json_t *value = json_object_get (limits, name);
  RUN_ASSERT (out, json_is_string (value), "JSON limits.%s is not a string", name);
  return json_string_value (value);
}

const char *
run_stdout (struct run_out *out, size_t *len)
{
  const char *s = run_json_str (out, "stdout", len);
  RUN_ASSERT (out, s != NULL, "JSON stdout is null");
  return s;
}

const char *
run_stderr (struct run_out *out, size_t *len)
{
  const char *s = run_json_str (out, "stderr", len);
  RUN_ASSERT (out, s != NULL, "JSON stderr is null");
  return s;
}

void
assert_prints (struct run_out *out, const char *expected)
{
  RUN_ASSERT (out, out->exit_status == 0, "expected exit status 0");
  RUN_ASSERT (out, run_json_int (out, "exit_code") == 0, "expected exit_code 0");
  RUN_ASSERT (out, !run_json_bool (out, "timed_out"), "expected timed_out false");
  size_t len;
  const char *s = run_stdout (out, &len);
  RUN_ASSERT (out, len == strlen (expected) && memcmp (s, expected, len) == 0,
              "expected stdout \"%s\"", expected);
}

/* With --json, a refusal's stdout: one line {"error": the stderr message,
 * "stage": "input" or "run"} (nsbox(1), THE JSON RESULT). */
static bool
json_error_matches (const struct run_out *out)
{
  const json_t *j = out->json_error;
  if (!j || json_object_size (j) != 2 || out->out[out->out_len - 1] != '\n'
      || memchr (out->out, '\n', out->out_len) != out->out + out->out_len - 1)
    return false;
  const char *e = json_string_value (json_object_get (j, "error"));
  const char *stage = json_string_value (json_object_get (j, "stage"));
  if (!e || !stage || (strcmp (stage, "input") != 0 && strcmp (stage, "run") != 0))
    return false;
  size_t n = strlen (e);
  return out->err_len == 7 + n + 1 && memcmp (out->err + 7, e, n) == 0;
}

const char *
refusal_stage (const struct run_out *out)
{
  return json_error_matches (out) ? json_string_value (json_object_get (out->json_error, "stage"))
                                  : NULL;
}

void
assert_refused (struct run_out *out, const char *const *needles)
{
  RUN_ASSERT (out, out->exit_status == 125, "expected exit status 125");
  RUN_ASSERT (out, out->out_len == 0 || json_error_matches (out),
              "expected no stdout, or the JSON error of the stderr message");
  RUN_ASSERT (out, out->err_len > 8 && strncmp (out->err, "nsbox: ", 7) == 0,
              "expected stderr to start with 'nsbox: '");
  const char *nl = memchr (out->err, '\n', out->err_len);
  RUN_ASSERT (out, nl && (size_t)(nl - out->err) == out->err_len - 1,
              "expected exactly one line on stderr");
  for (size_t i = 0; needles && needles[i]; i++)
    RUN_ASSERT (out, strstr (out->err, needles[i]) != NULL, "expected stderr to contain \"%s\"",
                needles[i]);
}

void
assert_refused_by_runsc_else_prints (struct run_out *out, const char *const *needles,
                                     const char *expected)
{
  if (harness_is_runsc ())
    assert_refused (out, needles);
  else
    assert_prints (out, expected);
}

void
make_run_tag (char *buf, size_t size)
{
  static unsigned counter;
  struct timespec ts;
  clock_gettime (CLOCK_REALTIME, &ts);
  snprintf (buf, size, "NSBOX_TEST_TAG=%d-%u-%ld", (int)getpid (), counter++, (long)ts.tv_nsec);
}

/* Host helpers. */

int
tcp_listener (uint16_t *port)
{
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  cr_assert (fd >= 0, "socket: %s", strerror (errno));
  struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = 0 };
  addr.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  cr_assert (bind (fd, (struct sockaddr *)&addr, sizeof addr) == 0, "bind: %s", strerror (errno));
  cr_assert (listen (fd, 16) == 0, "listen: %s", strerror (errno));
  socklen_t alen = sizeof addr;
  cr_assert (getsockname (fd, (struct sockaddr *)&addr, &alen) == 0, "getsockname: %s",
             strerror (errno));
  *port = ntohs (addr.sin_port);
  return fd;
}

bool
listener_was_connected (int fd)
{
  int c = accept4 (fd, NULL, NULL, SOCK_CLOEXEC);
  if (c >= 0)
    {
      close (c);
      return true;
    }
  return false;
}

char *
canary_file (const char *content)
{
  char dir[] = "/tmp/nsbox-canary.XXXXXX";
  cr_assert_not_null (mkdtemp (dir), "mkdtemp: %s", strerror (errno));
  char *path = NULL;
  cr_assert (asprintf (&path, "%s/canary", dir) > 0);
  write_text_file (path, content, 0600);
  return path;
}

void
remove_canary (char *path)
{
  if (!path)
    return;
  unlink (path);
  char *slash = strrchr (path, '/');
  if (slash)
    {
      *slash = '\0';
      rmdir (path);
    }
  free (path);
}

int
open_inheritable (const char *path)
{
  int fd = open (path, O_RDONLY);
  cr_assert (fd >= 0, "open '%s': %s", path, strerror (errno));
  return fd;
}

bool
read_whole (const char *path, char *buf, size_t size, size_t *len)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  size_t used = 0;
  for (;;)
    {
      ssize_t n = read (fd, buf + used, size - 1 - used);
      if (n <= 0)
        break;
      used += (size_t)n;
      if (used == size - 1)
        break;
    }
  close (fd);
  buf[used] = '\0';
  *len = used;
  return true;
}

int
count_uid_processes (uid_t uid, const char *environ_needle, char *desc, size_t desc_size)
{
  DIR *proc = opendir ("/proc");
  cr_assert_not_null (proc, "opendir /proc: %s", strerror (errno));
  int count = 0;
  size_t used = 0;
  if (desc && desc_size)
    desc[0] = '\0';
  static char buf[1 << 16];
  struct dirent *d;
  while ((d = readdir (proc)))
    {
      if (!isdigit ((unsigned char)d->d_name[0]))
        continue;
      char path[320];
      size_t len;
      snprintf (path, sizeof path, "/proc/%s/status", d->d_name);
      if (!read_whole (path, buf, sizeof buf, &len))
        continue;
      const char *u = strstr (buf, "\nUid:");
      if (!u || strtoul (u + 5, NULL, 10) != uid)
        continue;
      char name[64] = "";
      if (strncmp (buf, "Name:", 5) == 0)
        sscanf (buf + 5, " %63s", name);
      if (environ_needle)
        {
          snprintf (path, sizeof path, "/proc/%s/environ", d->d_name);
          if (!read_whole (path, buf, sizeof buf, &len)
              || !memmem (buf, len, environ_needle, strlen (environ_needle)))
            continue;
        }
      count++;
      if (desc && used + 80 < desc_size)
        used += (size_t)snprintf (desc + used, desc_size - used, "%s%s (%s)", used ? ", " : "",
                                  d->d_name, name);
    }
  closedir (proc);
  return count;
}

int
count_runsc_processes (pid_t launcher_pid, char *desc, size_t desc_size)
{
  DIR *proc = opendir ("/proc");
  cr_assert_not_null (proc, "opendir /proc: %s", strerror (errno));
  char needle[64];
  snprintf (needle, sizeof needle, "/nsbox-runsc-%d-", (int)launcher_pid);
  int count = 0;
  size_t used = 0;
  if (desc && desc_size)
    desc[0] = '\0';
  static char buf[1 << 16];
  struct dirent *d;
  while ((d = readdir (proc)))
    {
      if (!isdigit ((unsigned char)d->d_name[0]))
        continue;
      char path[320], exe[PATH_MAX];
      snprintf (path, sizeof path, "/proc/%s/exe", d->d_name);
      ssize_t n = readlink (path, exe, sizeof exe - 1);
      if (n <= 0)
        continue;
      exe[n] = '\0';
      const char *base = strrchr (exe, '/');
      base = base ? base + 1 : exe;
      if (strcmp (base, "runsc") != 0 && strncmp (base, "runsc ", 6) != 0)
        continue;
      size_t len;
      snprintf (path, sizeof path, "/proc/%s/cmdline", d->d_name);
      if (!read_whole (path, buf, sizeof buf, &len) || !memmem (buf, len, needle, strlen (needle)))
        continue;
      count++;
      if (desc && used + 80 < desc_size)
        used += (size_t)snprintf (desc + used, desc_size - used, "%s%s (%.40s)", used ? ", " : "",
                                  d->d_name, buf);
    }
  closedir (proc);
  return count;
}

bool
runsc_installed (void)
{
  const char *env = getenv ("NSBOX_RUNSC");
  if (env && *env)
    return access (env, X_OK) == 0;
  static const char *const dirs[]
      = { "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin" };
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
    {
      char path[64];
      snprintf (path, sizeof path, "%s/runsc", dirs[i]);
      if (access (path, X_OK) == 0)
        return true;
    }
  return false;
}

int
wait_uid_processes_gone (uid_t uid, const char *environ_needle, int timeout_ms, char *desc,
                         size_t desc_size)
{
  double deadline = now_seconds () + harness_scaled (timeout_ms / 1000.0);
  for (;;)
    {
      int n = count_uid_processes (uid, environ_needle, desc, desc_size);
      if (n == 0 || now_seconds () >= deadline)
        return n;
      struct timespec ts = { 0, 20 * 1000 * 1000 };
      nanosleep (&ts, NULL);
    }
}

int
wait_runsc_processes (pid_t launcher_pid, int at_least, int timeout_ms, char *desc,
                      size_t desc_size)
{
  double deadline = now_seconds () + harness_scaled (timeout_ms / 1000.0);
  for (;;)
    {
      int n = count_runsc_processes (launcher_pid, desc, desc_size);
      if ((at_least == 0 ? n == 0 : n >= at_least) || now_seconds () >= deadline)
        return n;
      struct timespec ts = { 0, 10 * 1000 * 1000 };
      nanosleep (&ts, NULL);
    }
}

/* cgroups: (mount point, mount root, controllers or "" for v2). */
struct hierarchy
{
  char mountpoint[PATH_MAX];
  char root[PATH_MAX];
  char options[256];
  bool v2;
};

static size_t
load_hierarchies (struct hierarchy *h, size_t max)
{
  FILE *f = fopen ("/proc/self/mountinfo", "re");
  if (!f)
    return 0;
  char line[4096];
  size_t n = 0;
  while (n < max && fgets (line, sizeof line, f))
    {
      char root[PATH_MAX], mnt[PATH_MAX];
      if (sscanf (line, "%*s %*s %*s %4095s %4095s", root, mnt) != 2)
        continue;
      const char *sep = strstr (line, " - ");
      if (!sep)
        continue;
      char fstype[32], source[256], super[256];
      if (sscanf (sep + 3, "%31s %255s %255s", fstype, source, super) != 3)
        continue;
      bool v2 = strcmp (fstype, "cgroup2") == 0;
      if (!v2 && strcmp (fstype, "cgroup") != 0)
        continue;
      snprintf (h[n].mountpoint, sizeof h[n].mountpoint, "%s", mnt);
      snprintf (h[n].root, sizeof h[n].root, "%s", root);
      snprintf (h[n].options, sizeof h[n].options, "%s", super);
      h[n].v2 = v2;
      n++;
    }
  fclose (f);
  return n;
}

static bool
has_option (const char *list, const char *word)
{
  size_t wl = strlen (word);
  for (const char *p = list; p;)
    {
      if (strncmp (p, word, wl) == 0 && (p[wl] == ',' || p[wl] == '\0'))
        return true;
      p = strchr (p, ',');
      p = p ? p + 1 : NULL;
    }
  return false;
}

/* Whether one of the comma-separated controllers is among the options. */
static bool
shares_controller (const char *ctrls, const char *options)
{
  char copy[256];
  snprintf (copy, sizeof copy, "%s", ctrls);
  char *save = NULL;
  for (char *c = strtok_r (copy, ",", &save); c; c = strtok_r (NULL, ",", &save))
    if (has_option (options, c))
      return true;
  return false;
}

/* Our own path in hierarchy h, from /proc/self/cgroup. */
static bool
own_path (const struct hierarchy *h, char *path, size_t size)
{
  FILE *f = fopen ("/proc/self/cgroup", "re");
  if (!f)
    return false;
  char line[4096];
  bool found = false;
  while (!found && fgets (line, sizeof line, f))
    {
      line[strcspn (line, "\n")] = '\0';
      char *c1 = strchr (line, ':');
      char *c2 = c1 ? strchr (c1 + 1, ':') : NULL;
      if (!c2)
        continue;
      *c2 = '\0';
      const char *ctrls = c1 + 1;
      if (h->v2 ? (strncmp (line, "0:", 2) == 0 && *ctrls == '\0')
                : shares_controller (ctrls, h->options))
        {
          snprintf (path, size, "%s", c2 + 1);
          found = true;
        }
    }
  fclose (f);
  return found;
}

static size_t cg_used, cg_size;
static char *cg_desc;
static int cg_count;
static const char *cg_prefix;

static int
cgroup_visit (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void)st;
  if (flag != FTW_D && flag != FTW_DP)
    return 0;
  const char *base = path + ftw->base;
  if (strncmp (base, cg_prefix, strlen (cg_prefix)) != 0)
    return 0;
  cg_count++;
  if (cg_desc && cg_used + strlen (path) + 3 < cg_size)
    cg_used += (size_t)snprintf (cg_desc + cg_used, cg_size - cg_used, "%s%s", cg_used ? ", " : "",
                                 path);
  return 0;
}

bool
have_cgroups (void)
{
  struct hierarchy h[16];
  return load_hierarchies (h, 16) > 0;
}

int
count_nsbox_cgroups (pid_t launcher_pid, char *desc, size_t desc_size)
{
  static struct hierarchy h[16];
  size_t n = load_hierarchies (h, 16);
  char prefix[64];
  if (launcher_pid > 0)
    snprintf (prefix, sizeof prefix, "nsbox-%d-", (int)launcher_pid);
  else
    snprintf (prefix, sizeof prefix, "nsbox-");
  cg_prefix = prefix;
  cg_desc = desc;
  cg_size = desc_size;
  cg_used = 0;
  cg_count = 0;
  if (desc && desc_size)
    desc[0] = '\0';
  for (size_t i = 0; i < n; i++)
    {
      char own[PATH_MAX], *dir = NULL;
      if (!own_path (&h[i], own, sizeof own))
        continue;
      size_t rl = strcmp (h[i].root, "/") == 0 ? 0 : strlen (h[i].root);
      if (rl && strncmp (own, h[i].root, rl) != 0)
        continue;
      cr_assert (asprintf (&dir, "%s%s", h[i].mountpoint, own + rl) > 0);
      nftw (dir, cgroup_visit, 16, FTW_PHYS | FTW_MOUNT);
      free (dir);
    }
  return cg_count;
}

/* What this host offers for each limit: see harness.h. */

enum limit_kind
{
  LIMIT_MEMORY = 0,
  LIMIT_CPUS,
  LIMIT_PIDS,
  LIMIT_KINDS,
};
static const char *const limit_names[LIMIT_KINDS] = { "memory", "cpus", "pids" };
/* The v1 controller of each limit, and a file every cgroup there has when
 * the kernel can enforce the limit (without CONFIG_CFS_BANDWIDTH the cpu
 * controller has no quota; pids.max is on every cgroup but the root, so the
 * pids controller's presence is enough). */
static const char *const limit_v1_ctrl[LIMIT_KINDS] = { "memory", "cpu", "pids" };
static const char *const limit_v1_file[LIMIT_KINDS]
    = { "memory.limit_in_bytes", "cpu.cfs_quota_us", NULL };

/* What the host offers a launcher started through the CLI and through the
 * library, and how the probe found it. */
struct host_offer
{
  bool probed;
  const char *mech[LIMIT_KINDS];
  char account[2048];
  size_t used;
};
static struct host_offer offers[2];
static struct host_offer *probing;

static void __attribute__ ((format (printf, 1, 2))) account (const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  if (probing->used < sizeof probing->account)
    {
      int n = vsnprintf (probing->account + probing->used, sizeof probing->account - probing->used,
                         fmt, ap);
      if (n > 0)
        probing->used += (size_t)n;
    }
  va_end (ap);
}

/* The test process's directory in hierarchy h (where its launchers start). */
static bool
own_dir (const struct hierarchy *h, char *dir, size_t size)
{
  char own[PATH_MAX];
  if (!own_path (h, own, sizeof own))
    return false;
  size_t rl = strcmp (h->root, "/") == 0 ? 0 : strlen (h->root);
  if (rl && (strncmp (own, h->root, rl) != 0 || (own[rl] != '/' && own[rl] != '\0')))
    return false;
  if ((size_t)snprintf (dir, size, "%s%s", h->mountpoint, own + rl) >= size)
    return false;
  size_t len = strlen (dir);
  if (len > 1 && dir[len - 1] == '/')
    dir[len - 1] = '\0';
  return true;
}

/* Whether the user who launches the sandboxes may write `path`: checked as
 * that user, in a child that became it. */
static bool
writable_by_launcher (const char *path)
{
  struct test_ids ids = test_ids ();
  if (!ids.drop)
    return access (path, W_OK) == 0;
  pid_t pid = fork ();
  cr_assert (pid >= 0, "fork: %s", strerror (errno));
  if (pid == 0)
    {
      if (setgroups (0, NULL) < 0 || setgid (ids.gid) < 0 || setuid (ids.uid) < 0)
        _exit (2);
      _exit (access (path, W_OK) == 0 ? 0 : 1);
    }
  int status;
  while (waitpid (pid, &status, 0) < 0)
    cr_assert (errno == EINTR, "waitpid: %s", strerror (errno));
  cr_assert (WIFEXITED (status) && WEXITSTATUS (status) < 2,
             "cannot become the test user to probe '%s'", path);
  return WEXITSTATUS (status) == 0;
}

/* cgroup.controllers of dir (space-separated), "" when unreadable. */
static void
read_controllers (const char *dir, char *buf, size_t size)
{
  char path[PATH_MAX + 32];
  size_t len;
  snprintf (path, sizeof path, "%.4000s/cgroup.controllers", dir);
  if (!read_whole (path, buf, size, &len))
    buf[0] = '\0';
  buf[strcspn (buf, "\n")] = '\0';
}

static bool
has_controller (const char *controllers, const char *name)
{
  size_t nl = strlen (name);
  for (const char *p = controllers; *p;)
    {
      size_t wl = strcspn (p, " ");
      if (wl == nl && strncmp (p, name, nl) == 0)
        return true;
      p += wl;
      p += strspn (p, " ");
    }
  return false;
}

/* A systemd user bus the launcher would reach: DBUS_SESSION_BUS_ADDRESS
 * (unix:path=) or $XDG_RUNTIME_DIR/bus, a socket of the launching uid. */
static bool
user_bus_of (uid_t uid, char *where, size_t size)
{
  const char *addr = getenv ("DBUS_SESSION_BUS_ADDRESS");
  const char *runtime = getenv ("XDG_RUNTIME_DIR");
  if (addr && strncmp (addr, "unix:path=", 10) == 0)
    snprintf (where, size, "%.*s", (int)strcspn (addr + 10, ",;"), addr + 10);
  else if (runtime && *runtime)
    snprintf (where, size, "%s/bus", runtime);
  else
    return false;
  struct stat st;
  return stat (where, &st) == 0 && S_ISSOCK (st.st_mode) && st.st_uid == uid;
}

/* cgroup v2: whether it gives the launcher memory and pids; *cpu whether
 * cpu too. A launcher the harness starts shares the test process's cgroup,
 * which nsbox cannot use for itself (it holds other processes: the
 * harness's), so: root makes a cgroup at the top of the hierarchy; another
 * user gets one from a wrapper around the CLI (NSBOX_TEST_LAUNCHER_CGROUP)
 * or from its systemd user instance (a scope, asked for on its user bus). */
static bool
probe_v2 (const struct hierarchy *h, size_t n, uid_t uid, enum run_mode mode, bool *cpu)
{
  char ctrls[512];
  const char *wrapped = getenv ("NSBOX_TEST_LAUNCHER_CGROUP");
  if (uid != 0 && mode == RUN_CLI && wrapped && *wrapped)
    {
      char path[PATH_MAX + 32];
      size_t len;
      snprintf (path, sizeof path, "%s/cgroup.subtree_control", wrapped);
      if (!read_whole (path, ctrls, sizeof ctrls, &len))
        ctrls[0] = '\0';
      ctrls[strcspn (ctrls, "\n")] = '\0';
      bool writable = writable_by_launcher (wrapped);
      account ("each CLI launcher alone below %s (NSBOX_TEST_LAUNCHER_CGROUP), whose children get "
               "'%s', %s; ",
               wrapped, ctrls,
               writable ? "the launcher's to write" : "not the launcher's to write");
      if (writable && has_controller (ctrls, "memory") && has_controller (ctrls, "pids"))
        {
          *cpu = has_controller (ctrls, "cpu");
          return true;
        }
    }
  for (size_t i = 0; i < n; i++)
    {
      if (!h[i].v2 || strcmp (h[i].root, "/") != 0)
        continue;
      read_controllers (h[i].mountpoint, ctrls, sizeof ctrls);
      if (!has_controller (ctrls, "memory") || !has_controller (ctrls, "pids"))
        {
          account ("cgroup v2 %s: controllers '%s'; ", h[i].mountpoint, ctrls);
          continue;
        }
      char bus[PATH_MAX];
      bool scope = uid != 0 && user_bus_of (uid, bus, sizeof bus);
      account ("cgroup v2 %s: controllers '%s', %s; ", h[i].mountpoint, ctrls,
               uid == 0 ? "root may make a cgroup there"
               : scope  ? "a user bus for a delegated scope"
                        : "no user bus for a delegated scope");
      if (uid == 0 || scope)
        {
          *cpu = has_controller (ctrls, "cpu");
          return true;
        }
    }
  return false;
}

/* cgroup v1: whether the controller's hierarchy holds the test process in a
 * directory the launching user may write (and the limit's file is there). */
static bool
probe_v1 (const struct hierarchy *h, size_t n, enum limit_kind k)
{
  char dir[PATH_MAX], file[PATH_MAX + 64];
  for (size_t i = 0; i < n; i++)
    {
      if (h[i].v2 || !has_option (h[i].options, limit_v1_ctrl[k])
          || !own_dir (&h[i], dir, sizeof dir))
        continue;
      bool present = true;
      if (limit_v1_file[k])
        {
          snprintf (file, sizeof file, "%s/%s", dir, limit_v1_file[k]);
          present = access (file, F_OK) == 0;
        }
      bool writable = present && writable_by_launcher (dir);
      account ("cgroup v1 %s: %s; ", dir,
               !present   ? "no limit file"
               : writable ? "writable by the launcher"
                          : "not writable by the launcher");
      return writable;
    }
  account ("no cgroup v1 %s hierarchy; ", limit_v1_ctrl[k]);
  return false;
}

static struct host_offer *
probe_host (enum run_mode mode)
{
  struct host_offer *offer = &offers[mode == RUN_LIB];
  if (offer->probed)
    return offer;
  probing = offer;
  static struct hierarchy h[16];
  size_t n = load_hierarchies (h, 16);
  struct test_ids ids = test_ids ();
  uid_t uid = ids.drop ? ids.uid : getuid ();
  offer->used = 0;
  offer->account[0] = '\0';
  account ("launcher uid %u, %s, %s: ", (unsigned)uid, run_mode_name (mode), harness_runtime ());
  bool v2_cpu = false;
  if (probe_v2 (h, n, uid, mode, &v2_cpu))
    {
      offer->mech[LIMIT_MEMORY] = offer->mech[LIMIT_PIDS] = "cgroup2";
      offer->mech[LIMIT_CPUS] = v2_cpu ? "cgroup2" : "none";
    }
  else
    for (int k = 0; k < LIMIT_KINDS; k++)
      offer->mech[k] = probe_v1 (h, n, (enum limit_kind)k) ? "cgroup1"
                       : k == LIMIT_CPUS                   ? "none"
                                                           : "rlimit";
  if (harness_is_runsc ())
    offer->mech[LIMIT_PIDS] = "rlimit";
  account ("so memory %s, cpus %s, pids %s", offer->mech[LIMIT_MEMORY], offer->mech[LIMIT_CPUS],
           offer->mech[LIMIT_PIDS]);
  offer->probed = true;
  probing = NULL;
  cr_log_info ("host probe: %s", offer->account);
  return offer;
}

const char *
harness_expected_mechanism (enum run_mode mode, const char *limit)
{
  struct host_offer *offer = probe_host (mode);
  for (int k = 0; k < LIMIT_KINDS; k++)
    if (strcmp (limit, limit_names[k]) == 0)
      return offer->mech[k];
  cr_assert_fail ("harness_expected_mechanism: unknown limit '%s'", limit);
  return NULL;
}

const char *
harness_host_probe (enum run_mode mode)
{
  return probe_host (mode)->account;
}

static int
mechanism_rank (const char *mech)
{
  static const char *const order[] = { "none", "rlimit", "cgroup1", "cgroup2" };
  for (int i = 0; i < 4; i++)
    if (strcmp (mech, order[i]) == 0)
      return i;
  return -1;
}

void
assert_limit_mechanisms (struct run_out *out)
{
  for (int k = 0; k < LIMIT_KINDS; k++)
    {
      const char *got = run_json_limit (out, limit_names[k]);
      const char *want = harness_expected_mechanism (out->mode, limit_names[k]);
      if (strcmp (got, want) == 0)
        continue;
      if (mechanism_rank (got) < mechanism_rank (want))
        RUN_ASSERT (out, false, "limits.%s is '%s', weaker than the '%s' this host offers (%s)",
                    limit_names[k], got, want, harness_host_probe (out->mode));
      RUN_ASSERT (out, false,
                  "limits.%s is '%s', but this host offers '%s' (%s): the result claims a "
                  "mechanism the probe says is not there",
                  limit_names[k], got, want, harness_host_probe (out->mode));
    }
}

/* The task watch: see harness.h. PID namespaces are told apart by their
 * inode number, which the kernel gives again once a namespace is gone: a
 * number stands for one namespace only while a process known to be in it
 * lives, so every identification below is tied to such a process. */

struct ns_holder
{
  char ns[64];
  char pid[16];
  unsigned long long started; /* field 22 of /proc/PID/stat */
};

struct task_watch
{
  char tag[128];
  uid_t uid;
  pid_t pid;                /* the watcher process */
  int stop_fd;              /* closing it stops the watcher */
  int result_fd;            /* the watcher's answer: most, then desc */
  struct ns_holder sandbox; /* a tagged process, then the sandbox's init */
  bool found, have_init, over;
  struct ns_holder foreign[64]; /* namespaces known not to be the sandbox's */
  int nforeign;
  int most;
  char desc[512];
};

bool
read_pid_ns (const char *pid, char *ns, size_t size)
{
  char path[64];
  snprintf (path, sizeof path, "/proc/%s/ns/pid", pid);
  ssize_t n = readlink (path, ns, size - 1);
  if (n <= 0)
    return false;
  ns[n] = '\0';
  return true;
}

static unsigned long long
started_at (const char *pid)
{
  char path[64], buf[1024];
  size_t len;
  snprintf (path, sizeof path, "/proc/%s/stat", pid);
  if (!read_whole (path, buf, sizeof buf, &len))
    return 0;
  char *p = strrchr (buf, ')');
  for (int field = 2; p && field < 22; field++)
    p = strchr (p + 1, ' ');
  return p ? strtoull (p + 1, NULL, 10) : 0;
}

static void
hold (struct ns_holder *h, const char *ns, const char *pid)
{
  snprintf (h->ns, sizeof h->ns, "%s", ns);
  snprintf (h->pid, sizeof h->pid, "%s", pid);
  h->started = started_at (pid);
}

/* Whether the process that identified h->ns is still there, in it. */
static bool
still_held (const struct ns_holder *h)
{
  char ns[64];
  return read_pid_ns (h->pid, ns, sizeof ns) && strcmp (ns, h->ns) == 0
         && started_at (h->pid) == h->started;
}

/* The last NSpid of a status text: the pid inside the innermost namespace. */
static long
inner_pid (const char *status)
{
  const char *nspid = strstr (status, "\nNSpid:");
  if (!nspid)
    return -1;
  const char *last = nspid + 7 + strcspn (nspid + 7, "\n");
  while (last > nspid + 7 && last[-1] != '\t' && last[-1] != ' ')
    last--;
  return atol (last);
}

/* Looks for the tagged process of w->uid. Reading a process's environment
 * waits for its memory map's lock, which a task forking in a loop (another
 * test's fork bomb, throttled by its CPU quota) holds most of the time: one
 * process with an environment but not the tag settles its whole namespace.
 * Init never carries the tag and is not asked; the program before its
 * execve shows init's environment, which nsbox wipes: no variable at all,
 * which settles nothing. */
static void
find_tagged (struct task_watch *w, char *buf, size_t size)
{
  int kept = 0;
  for (int i = 0; i < w->nforeign; i++)
    if (still_held (&w->foreign[i]))
      w->foreign[kept++] = w->foreign[i];
  w->nforeign = kept;
  DIR *proc = opendir ("/proc");
  struct dirent *d;
  while (proc && !w->found && (d = readdir (proc)))
    {
      char path[320], ns[64];
      size_t len;
      if (!isdigit ((unsigned char)d->d_name[0]) || !read_pid_ns (d->d_name, ns, sizeof ns))
        continue;
      bool foreign = false;
      for (int i = 0; i < w->nforeign && !foreign; i++)
        foreign = strcmp (w->foreign[i].ns, ns) == 0;
      snprintf (path, sizeof path, "/proc/%s/status", d->d_name);
      if (foreign || !read_whole (path, buf, size, &len))
        continue;
      const char *u = strstr (buf, "\nUid:");
      if (!u || strtoul (u + 5, NULL, 10) != w->uid || inner_pid (buf) == 1)
        continue;
      snprintf (path, sizeof path, "/proc/%s/environ", d->d_name);
      if (!read_whole (path, buf, size, &len))
        continue;
      if (memmem (buf, len, w->tag, strlen (w->tag)))
        {
          hold (&w->sandbox, ns, d->d_name);
          w->found = true;
        }
      else if (memchr (buf, '=', len)
               && w->nforeign < (int)(sizeof w->foreign / sizeof w->foreign[0]))
        hold (&w->foreign[w->nforeign++], ns, d->d_name);
    }
  if (proc)
    closedir (proc);
}

/* Counts the tasks of every process in the sandbox's namespace now; its
 * init, once seen, holds the namespace from then on: when init is gone the
 * sandbox is over. */
static void
count_sandbox_tasks (struct task_watch *w, char *buf, size_t size)
{
  if (!still_held (&w->sandbox))
    {
      w->over = true;
      return;
    }
  DIR *proc = opendir ("/proc");
  if (!proc)
    return;
  int tasks = 0, processes = 0;
  struct dirent *d;
  while ((d = readdir (proc)))
    {
      char ns[64], path[320];
      size_t len;
      if (!isdigit ((unsigned char)d->d_name[0]) || !read_pid_ns (d->d_name, ns, sizeof ns)
          || strcmp (ns, w->sandbox.ns) != 0)
        continue;
      snprintf (path, sizeof path, "/proc/%s/status", d->d_name);
      if (!read_whole (path, buf, size, &len))
        continue;
      const char *t = strstr (buf, "\nThreads:");
      tasks += t ? atoi (t + 9) : 1;
      processes++;
      if (!w->have_init && inner_pid (buf) == 1)
        {
          hold (&w->sandbox, ns, d->d_name);
          w->have_init = true;
        }
    }
  closedir (proc);
  if (tasks > w->most)
    {
      w->most = tasks;
      snprintf (w->desc, sizeof w->desc, "%d tasks in %d processes of PID namespace %s", tasks,
                processes, w->sandbox.ns);
    }
}

/* The watcher is a process, not a thread: a test that forks while a
 * thread of its own holds a lock of the allocator (ASan's, in sanitizer
 * builds) leaves the child waiting for it forever. It polls until its stop
 * pipe closes, then answers with the count and its description. */
static void __attribute__ ((noreturn))
task_watch_main (struct task_watch *w, int stop_fd, int result_fd)
{
  static char buf[1 << 16];
  size_t size = sizeof buf;
  struct pollfd pfd = { stop_fd, POLLIN, 0 };
  while (!w->over && poll (&pfd, 1, 2) == 0)
    {
      if (!w->found)
        find_tagged (w, buf, size);
      if (w->found)
        count_sandbox_tasks (w, buf, size);
    }
  /* After a sandbox ended early (over), wait for the stop all the same. */
  while (poll (&pfd, 1, -1) < 0 && errno == EINTR)
    ;
  (void)nsbox_write_all (result_fd, &w->most, sizeof w->most);
  (void)nsbox_write_all (result_fd, w->desc, strlen (w->desc));
  _exit (0);
}

struct task_watch *
task_watch_start (const char *tag)
{
  struct task_watch *w = calloc (1, sizeof *w);
  cr_assert_not_null (w);
  snprintf (w->tag, sizeof w->tag, "%s", tag);
  w->uid = sandbox_host_uid ();
  int stop[2], result[2];
  cr_assert (pipe2 (stop, O_CLOEXEC) == 0 && pipe2 (result, O_CLOEXEC) == 0, "pipe2: %s",
             strerror (errno));
  w->pid = fork ();
  cr_assert_geq (w->pid, 0, "fork: %s", strerror (errno));
  if (w->pid == 0)
    {
      close (stop[1]);
      close (result[0]);
      task_watch_main (w, stop[0], result[1]);
    }
  close (stop[0]);
  close (result[1]);
  w->stop_fd = stop[1];
  w->result_fd = result[0];
  return w;
}

int
task_watch_stop (struct task_watch *w, char *desc, size_t desc_size)
{
  close (w->stop_fd);
  int most = 0;
  char text[sizeof w->desc] = "";
  ssize_t n = read (w->result_fd, &most, sizeof most);
  if (n != (ssize_t)sizeof most)
    most = 0;
  size_t len = 0;
  while (n > 0 && len < sizeof text - 1
         && (n = read (w->result_fd, text + len, sizeof text - 1 - len)) > 0)
    len += (size_t)n;
  text[len] = '\0';
  close (w->result_fd);
  int status;
  while (waitpid (w->pid, &status, 0) < 0 && errno == EINTR)
    ;
  snprintf (desc, desc_size, "%s", most ? text : "the sandbox was never seen");
  free (w);
  return most;
}

/* Files. */

char *
make_public_dir (void)
{
  char tmpl[] = "/tmp/nsbox-test.XXXXXX";
  cr_assert_not_null (mkdtemp (tmpl), "mkdtemp: %s", strerror (errno));
  cr_assert (chmod (tmpl, 0755) == 0, "chmod '%s': %s", tmpl, strerror (errno));
  char *dir = strdup (tmpl);
  cr_assert_not_null (dir);
  return dir;
}

void
write_text_file (const char *path, const char *text, mode_t mode)
{
  int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  cr_assert (fd >= 0, "create '%s': %s", path, strerror (errno));
  (void)nsbox_write_all (fd, text, strlen (text));
  cr_assert (fchmod (fd, mode) == 0, "chmod '%s': %s", path, strerror (errno));
  close (fd);
}

static int
remove_entry (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void)st;
  (void)flag;
  (void)ftw;
  remove (path);
  return 0;
}

void
remove_tree (const char *path)
{
  if (path)
    nftw (path, remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

char *
read_file (const char *path, size_t *len)
{
  FILE *f = fopen (path, "rbe");
  if (!f)
    return NULL;
  char *data = NULL;
  size_t n = 0;
  FILE *m = open_memstream (&data, &n);
  char buf[65536];
  size_t got;
  while ((got = fread (buf, 1, sizeof buf, f)) > 0)
    fwrite (buf, 1, got, m);
  fclose (f);
  fclose (m);
  *len = n;
  return data;
}

void
sha256_hex (const char *data, size_t len, char hex[65])
{
  unsigned char d[32];
  unsigned int n = 0;
  cr_assert (EVP_Digest (data, len, d, &n, EVP_sha256 (), NULL) == 1 && n == 32);
  for (int i = 0; i < 32; i++)
    snprintf (hex + 2 * i, 3, "%02x", d[i]);
}

char *
user_dir (void)
{
  struct test_ids ids = test_ids ();
  char tmpl[] = "/tmp/nsbox-test-XXXXXX";
  cr_assert_not_null (mkdtemp (tmpl), "mkdtemp: %s", strerror (errno));
  if (ids.drop)
    cr_assert (chown (tmpl, ids.uid, ids.gid) == 0, "chown %s: %s", tmpl, strerror (errno));
  return strdup (tmpl);
}

void
sleep_seconds (double s)
{
  struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
  while (nanosleep (&ts, &ts) < 0 && errno == EINTR)
    ;
}

bool
process_gone (pid_t pid)
{
  char path[64], buf[512];
  size_t n;
  snprintf (path, sizeof path, "/proc/%d/stat", (int)pid);
  if (!read_whole (path, buf, sizeof buf, &n))
    return true;
  char *p = strrchr (buf, ')');
  return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

bool
sandbox_emptied (pid_t init)
{
  pid_t child;
  return process_gone (init) || children_of (init, &child, 1) == 0;
}

int
children_of (pid_t pid, pid_t *out, int max)
{
  char path[64];
  snprintf (path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *d = opendir (path);
  if (!d)
    return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir (d)))
    {
      char cpath[300], buf[4096];
      size_t len;
      snprintf (cpath, sizeof cpath, "/proc/%d/task/%s/children", (int)pid, e->d_name);
      if (e->d_name[0] == '.' || !read_whole (cpath, buf, sizeof buf, &len))
        continue;
      char *save = NULL;
      for (char *tok = strtok_r (buf, " \n", &save); tok && n < max;
           tok = strtok_r (NULL, " \n", &save))
        out[n++] = (pid_t)strtol (tok, NULL, 10);
    }
  closedir (d);
  return n;
}

int
count_fds (pid_t pid)
{
  char path[64];
  snprintf (path, sizeof path, "/proc/%d/fd", (int)pid);
  DIR *d = opendir (path);
  cr_assert_not_null (d, "%s: %s", path, strerror (errno));
  int n = 0;
  struct dirent *e;
  while ((e = readdir (d)))
    n += e->d_name[0] != '.';
  closedir (d);
  return n;
}

long
rss_kb (pid_t pid)
{
  char path[64], buf[4096];
  size_t n;
  snprintf (path, sizeof path, "/proc/%d/status", (int)pid);
  if (!read_whole (path, buf, sizeof buf, &n))
    return -1;
  const char *p = strstr (buf, "\nVmRSS:");
  return p ? strtol (p + 7, NULL, 10) : -1;
}

void
daemon_code (char *code, size_t size, char *tag, size_t tag_size)
{
  make_run_tag (tag, tag_size);
  const char *eq = strchr (tag, '=');
  cr_assert_not_null (eq);
  snprintf (code, size,
            "import os\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    if os.fork() == 0:\n"
            "        os.execve('/bin/sleep', ['sleep', '1000'], {'%.*s': '%s'})\n"
            "    os._exit(0)\n"
            "print('started')\n",
            (int)(eq - tag), tag, eq + 1);
}

/* The host processes whose command line holds `marker`; the first's pid
 * in *first. */
static int
host_processes_scan (const char *marker, pid_t *first)
{
  DIR *d = opendir ("/proc");
  cr_assert_not_null (d);
  int found = 0;
  struct dirent *e;
  while ((e = readdir (d)))
    {
      if (e->d_name[0] < '1' || e->d_name[0] > '9')
        continue;
      char path[300], cmd[4096];
      snprintf (path, sizeof path, "/proc/%s/cmdline", e->d_name);
      int fd = open (path, O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        continue;
      ssize_t n = read (fd, cmd, sizeof cmd - 1);
      close (fd);
      for (ssize_t i = 0; i < n; i++)
        if (cmd[i] == '\0')
          cmd[i] = ' ';
      cmd[n > 0 ? n : 0] = '\0';
      if (n > 0 && strstr (cmd, marker) && found++ == 0 && first)
        *first = (pid_t)strtol (e->d_name, NULL, 10);
    }
  closedir (d);
  return found;
}

int
host_processes_with (const char *marker)
{
  return host_processes_scan (marker, NULL);
}

pid_t
host_process_with (const char *marker)
{
  pid_t first = 0;
  return host_processes_scan (marker, &first) > 0 ? first : 0;
}

int
host_processes_become (const char *marker, int want, double seconds)
{
  double until = now_seconds () + harness_scaled (seconds);
  int n;
  while ((n = host_processes_with (marker)) != want && now_seconds () < until)
    usleep (50000);
  return n;
}

const char *
json_str_of (json_t *j, const char *key)
{
  json_t *v = json_object_get (j, key);
  return json_is_string (v) ? json_string_value (v) : NULL;
}

long long
json_int_of (json_t *j, const char *key)
{
  json_t *v = json_object_get (j, key);
  cr_assert (json_is_integer (v), "no integer %s", key);
  return json_integer_value (v);
}

bool
json_bool_of (json_t *j, const char *key)
{
  json_t *v = json_object_get (j, key);
  cr_assert (json_is_boolean (v), "no boolean %s", key);
  return json_is_true (v);
}
