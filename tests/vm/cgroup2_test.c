/* cgroup v2 effects, shown on a kernel with cgroup v2 only (make check-vm):
 * run from the guest's init with NSBOX_BIN and NSBOX_TEST_USER set per pass.
 *
 *   suite cgroup2  every limit is a cgroup2 one and does what it says; run
 *                  as root and as a user with a delegated subtree
 *   suite undelegated a user without a delegated subtree gets rlimits, says
 *                  so, and --strict refuses
 *   suite userscope a user started from a cgroup it cannot use (root's)
 *                  gets a delegated scope from its systemd user instance;
 *                  run with XDG_RUNTIME_DIR set, under systemd
 * Each suite also asks `nsbox doctor` and checks its verdict and its fix
 * against what the suite's own condition is.
 *
 * Run cgroups are found by walking the whole cgroup2 mount, not only below
 * the test's own cgroup: a delegated launcher runs in a scope elsewhere. One
 * run at a time (--jobs 1), so the run cgroup seen is this test's. The
 * launcher's own scope (nsbox-PID-RANDOM.scope) is not a run cgroup. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "nsbox.h"

#define CGROUP_ROOT "/sys/fs/cgroup"

static char found_dir[4096];
static char *tree_list;
static size_t tree_len, tree_cap;

static bool
ends_with (const char *text, const char *suffix)
{
  size_t tl = strlen (text), sl = strlen (suffix);
  return tl >= sl && strcmp (text + tl - sl, suffix) == 0;
}

static int
find_run_cgroup (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void)st;
  if (flag == FTW_D && strncmp (path + ftw->base, "nsbox-", 6) == 0
      && !ends_with (path + ftw->base, ".scope"))
    {
      snprintf (found_dir, sizeof found_dir, "%s", path);
      return 1;
    }
  return 0;
}

/* Path of a run cgroup (a directory nsbox-* anywhere), or NULL. */
static const char *
any_run_cgroup (void)
{
  found_dir[0] = '\0';
  nftw (CGROUP_ROOT, find_run_cgroup, 16, FTW_PHYS | FTW_MOUNT);
  return found_dir[0] ? found_dir : NULL;
}

static int
list_dir (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void)st;
  (void)ftw;
  if (flag != FTW_D)
    return 0;
  size_t n = strlen (path) + 1;
  if (tree_len + n + 1 > tree_cap)
    {
      tree_cap = (tree_len + n + 1) * 2;
      tree_list = realloc (tree_list, tree_cap);
      cr_assert_not_null (tree_list);
    }
  memcpy (tree_list + tree_len, path, n - 1);
  tree_list[tree_len + n - 1] = '\n';
  tree_len += n;
  tree_list[tree_len] = '\0';
  return 0;
}

/* Every cgroup directory, one a line (free it). */
static char *
cgroup_tree (void)
{
  tree_list = NULL;
  tree_len = tree_cap = 0;
  nftw (CGROUP_ROOT, list_dir, 16, FTW_PHYS | FTW_MOUNT);
  char *list = tree_list ? tree_list : strdup ("");
  tree_list = NULL;
  return list;
}

static void
sleep_ms (int ms)
{
  struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
  nanosleep (&ts, NULL);
}

static bool
read_text (const char *dir, const char *file, char *buf, size_t size)
{
  char path[4400];
  snprintf (path, sizeof path, "%s/%s", dir, file);
  FILE *f = fopen (path, "re");
  if (!f)
    return false;
  size_t n = fread (buf, 1, size - 1, f);
  fclose (f);
  buf[n] = '\0';
  return true;
}

/* "key N" of a flat keyed file, or -1. */
static long long
keyed (const char *dir, const char *file, const char *key)
{
  char buf[4096];
  if (!read_text (dir, file, buf, sizeof buf))
    return -1;
  size_t kl = strlen (key);
  for (char *p = buf; p && *p; p = strchr (p, '\n'), p = p ? p + 1 : NULL)
    if (strncmp (p, key, kl) == 0 && p[kl] == ' ')
      return strtoll (p + kl + 1, NULL, 10);
  return -1;
}

/* Waits until a run cgroup holds a process; copies its path to dir. */
static void
wait_populated_run_cgroup (char *dir, size_t size, int timeout_ms)
{
  char buf[256];
  timeout_ms = (int)harness_scaled (timeout_ms);
  for (int waited = 0; waited < timeout_ms; waited += 20)
    {
      const char *d = any_run_cgroup ();
      if (d && read_text (d, "cgroup.procs", buf, sizeof buf) && buf[0])
        {
          snprintf (dir, size, "%s", d);
          return;
        }
      sleep_ms (20);
    }
  cr_assert_fail ("no populated run cgroup (nsbox-*) below " CGROUP_ROOT " within %d ms",
                  timeout_ms);
}

static void
assert_no_run_cgroup (struct run_out *out)
{
  const char *d = any_run_cgroup ();
  RUN_ASSERT (out, d == NULL, "run cgroup '%s' left behind", d ? d : "");
}

static void
assert_cgroup2_limits (struct run_out *out)
{
  static const char *const names[] = { "memory", "cpus", "pids" };
  for (size_t i = 0; i < 3; i++)
    RUN_ASSERT (out, strcmp (run_json_limit (out, names[i]), "cgroup2") == 0,
                "limits.%s is '%s', expected 'cgroup2'", names[i], run_json_limit (out, names[i]));
}

Test (cgroup2, json_limits_say_cgroup2_for_memory_cpus_and_pids, .timeout = 60)
{
  struct run_out out;
  const char *const args[] = { "--memory", "128m", "--cpus", "0.5", "--pids-limit", "32", NULL };
  run_cli ("print('ok')\n", 12, args, &out);
  assert_prints (&out, "ok\n");
  assert_cgroup2_limits (&out);
  assert_no_run_cgroup (&out);
  run_out_free (&out);
}

/* `nsbox doctor --json` as this pass runs nsbox: the report, its exit
 * status in *status, and the "limits" check. */
static json_t *
doctor_report (int *status, json_t **limits)
{
  char *store = user_dir ();
  setenv ("NSBOX_STORE", store, 1);
  const char *const args[] = { "--json", NULL };
  struct run_job job;
  run_nsbox_spawn ("doctor", true, args, false, &job);
  struct run_out out;
  run_cli_wait (&job, NULL, 0, &out);
  json_error_t jerr;
  json_t *report = json_loadb (out.out, out.out_len, 0, &jerr);
  RUN_ASSERT (&out, json_is_object (report), "nsbox doctor --json printed no JSON object");
  *status = out.exit_status;
  run_out_free (&out);
  *limits = NULL;
  json_t *checks = json_object_get (report, "checks");
  for (size_t i = 0; i < json_array_size (checks); i++)
    if (strcmp (json_string_value (json_object_get (json_array_get (checks, i), "name")), "limits")
        == 0)
      *limits = json_array_get (checks, i);
  cr_assert_not_null (*limits, "no limits check");
  char cmd[4200];
  snprintf (cmd, sizeof cmd, "rm -rf '%s'", store);
  cr_expect_eq (system (cmd), 0);
  free (store);
  return report;
}

static const char *
member (json_t *o, const char *key)
{
  const char *v = json_string_value (json_object_get (o, key));
  return v ? v : "";
}

/* Where every limit is a cgroup2 one (this suite's condition), the doctor
 * says so and exits 0. */
Test (cgroup2, doctor_finds_every_limit_enforced_by_cgroup2, .timeout = 120)
{
  int status = -1;
  json_t *limits = NULL;
  json_t *report = doctor_report (&status, &limits);
  cr_expect_str_eq (member (limits, "detail"), "memory by cgroup2, cpus by cgroup2, pids by cgroup2");
  cr_expect_str_eq (member (report, "verdict"), "ok");
  cr_expect_eq (status, 0);
  json_decref (report);
}

/* With CLONE_NEWCGROUP at clone time, the namespace's root is the cgroup the
 * child was created in: "0::/" means it was born in the run cgroup, not
 * moved there later (then it would read "/.." or the launcher's path). */
Test (cgroup2, sandbox_starts_in_its_run_cgroup, .timeout = 60)
{
  struct run_job job;
  const char *const args[] = { "--timeout", "20s", NULL };
  const char *code = "import time\n"
                     "print(open('/proc/self/cgroup').read(), end='', flush=True)\n"
                     "time.sleep(4)\n";
  run_cli_spawn (args, true, &job);
  run_job_feed (&job, code, strlen (code));
  char dir[4096], procs[1024], self_cg[512], want[4200];
  wait_populated_run_cgroup (dir, sizeof dir, 15000);
  cr_assert (read_text (dir, "cgroup.procs", procs, sizeof procs));
  /* Every task of the sandbox is in the run cgroup; the launcher is not. */
  snprintf (want, sizeof want, "0::%s\n", dir + strlen (CGROUP_ROOT));
  for (char *p = procs; *p;)
    {
      char *end;
      long pid = strtol (p, &end, 10);
      if (end == p)
        break;
      char path[64];
      snprintf (path, sizeof path, "/proc/%ld", pid);
      if (read_text (path, "cgroup", self_cg, sizeof self_cg))
        cr_assert_str_eq (self_cg, want, "pid %ld of the run cgroup", pid);
      p = end + strspn (end, "\n");
    }
  char launcher[64];
  snprintf (launcher, sizeof launcher, "/proc/%d", (int)job.pid);
  if (read_text (launcher, "cgroup", self_cg, sizeof self_cg))
    cr_assert (strcmp (self_cg, want) != 0, "the launcher itself is in the run cgroup");
  struct run_out out;
  run_cli_wait (&job, NULL, 0, &out);
  assert_prints (&out, "0::/\n");
  assert_no_run_cgroup (&out);
  run_out_free (&out);
}

Test (cgroup2, memory_limit_kills_and_reports_oom_and_peak, .timeout = 120)
{
  struct run_out out;
  const char *const args[] = { "--memory", "64m", "--timeout", "60s", NULL };
  const char *code = "b = bytearray(1 << 30)\nprint('allocated')\n";
  run_cli (code, strlen (code), args, &out);
  assert_cgroup2_limits (&out);
  RUN_ASSERT (&out, run_json_bool (&out, "oom_killed"), "expected oom_killed (memory.events)");
  RUN_ASSERT (&out, out.exit_status == 137, "expected exit status 137");
  RUN_ASSERT (&out, strstr (run_stdout (&out, NULL), "allocated") == NULL, "1 GiB allocated");
  long long peak = run_json_int (&out, "memory_peak_bytes");
  RUN_ASSERT (&out, peak >= 32LL << 20 && peak <= 64LL << 20,
              "memory_peak_bytes %lld: expected the limit reached (32..64 MiB, memory.peak)", peak);
  assert_no_run_cgroup (&out);
  run_out_free (&out);
}

Test (cgroup2, memory_max_is_set_and_swap_is_disabled, .timeout = 60)
{
  struct run_job job;
  const char *const args[] = { "--memory", "96m", "--timeout", "20s", NULL };
  const char *code = "import time\nb = bytearray(16 << 20)\ntime.sleep(4)\nprint('done')\n";
  run_cli_spawn (args, true, &job);
  run_job_feed (&job, code, strlen (code));
  char dir[4096], buf[64];
  wait_populated_run_cgroup (dir, sizeof dir, 15000);
  cr_assert (read_text (dir, "memory.max", buf, sizeof buf), "read %s/memory.max", dir);
  cr_assert_str_eq (buf, "100663296\n", "memory.max");
  cr_assert (read_text (dir, "memory.swap.max", buf, sizeof buf),
             "%s has no memory.swap.max (swap accounting off?)", dir);
  cr_assert_str_eq (buf, "0\n", "memory.swap.max");
  struct run_out out;
  run_cli_wait (&job, NULL, 0, &out);
  assert_prints (&out, "done\n");
  long long peak = run_json_int (&out, "memory_peak_bytes");
  RUN_ASSERT (&out, peak >= 16LL << 20, "memory_peak_bytes %lld below the 16 MiB allocated", peak);
  run_out_free (&out);
}

Test (cgroup2, fork_bomb_is_contained_by_pids_max, .timeout = 120)
{
  char tag[96];
  make_run_tag (tag, sizeof tag);
  struct run_job job;
  /* Time enough to meet the limit before the timeout, on a slow host too. */
  char timeout[32];
  harness_scaled_duration (8.0, timeout, sizeof timeout);
  const char *const args[] = { "--pids-limit", "16", "--timeout", timeout, "--env", tag, NULL };
  const char *code = "import os\n"
                     "while True:\n"
                     "  try:\n"
                     "    os.fork()\n"
                     "  except OSError:\n"
                     "    pass\n";
  run_cli_spawn (args, true, &job);
  run_job_feed (&job, code, strlen (code));
  char dir[4096];
  wait_populated_run_cgroup (dir, sizeof dir, 15000);
  long long max_events = -1, current = -1, highest = 0;
  int window_ms = (int)harness_scaled (6000);
  for (int waited = 0; waited < window_ms; waited += 20)
    {
      max_events = keyed (dir, "pids.events", "max");
      char buf[64];
      if (read_text (dir, "pids.current", buf, sizeof buf))
        current = strtoll (buf, NULL, 10);
      if (current > highest)
        highest = current;
      if (max_events > 0)
        break;
      sleep_ms (20);
    }
  struct run_out out;
  run_cli_wait (&job, NULL, 0, &out);
  assert_cgroup2_limits (&out);
  RUN_ASSERT (&out, max_events > 0, "pids.events shows no fork refused (max %lld)", max_events);
  RUN_ASSERT (&out, highest <= 16, "pids.current reached %lld > 16", highest);
  RUN_ASSERT (&out, run_json_bool (&out, "timed_out"), "expected the bomb to run until timeout");
  char desc[1024];
  int left = wait_uid_processes_gone (sandbox_host_uid (), tag, 3000, desc, sizeof desc);
  RUN_ASSERT (&out, left == 0, "%d process(es) left: %s", left, desc);
  assert_no_run_cgroup (&out);
  run_out_free (&out);
}

/* 0.2 CPU over 2 s of wall time is 0.4 s of CPU; cpu.max periods are 100 ms,
 * so allow a period or so above. */
Test (cgroup2, cpus_limit_throttles_a_busy_loop, .timeout = 120)
{
  struct run_job job;
  const char *const args[] = { "--cpus", "0.2", "--timeout", "30s", NULL };
  const char *code = "import time\n"
                     "t0, c0 = time.monotonic(), time.process_time()\n"
                     "while time.monotonic() - t0 < 2.0:\n"
                     "    pass\n"
                     "print(round(time.process_time() - c0, 3))\n";
  run_cli_spawn (args, true, &job);
  run_job_feed (&job, code, strlen (code));
  char dir[4096];
  wait_populated_run_cgroup (dir, sizeof dir, 15000);
  char cpu_max[64];
  cr_assert (read_text (dir, "cpu.max", cpu_max, sizeof cpu_max), "read %s/cpu.max", dir);
  cr_assert_str_eq (cpu_max, "20000 100000\n", "cpu.max");
  long long throttled = -1;
  int window_ms = (int)harness_scaled (10000);
  for (int waited = 0; waited < window_ms; waited += 50)
    {
      throttled = keyed (dir, "cpu.stat", "nr_throttled");
      if (throttled > 0)
        break;
      sleep_ms (50);
    }
  struct run_out out;
  run_cli_wait (&job, NULL, 0, &out);
  assert_cgroup2_limits (&out);
  RUN_ASSERT (&out, out.exit_status == 0, "expected exit status 0");
  RUN_ASSERT (&out, throttled > 0, "cpu.stat nr_throttled is %lld", throttled);
  double loop_cpu = strtod (run_stdout (&out, NULL), NULL);
  RUN_ASSERT (&out, loop_cpu > 0.05 && loop_cpu <= 0.55,
              "the 2 s busy loop used %.3f s of CPU (expected about 0.4)", loop_cpu);
  long long cpu_ms = run_json_int (&out, "cpu_ms");
  RUN_ASSERT (&out, cpu_ms > 0, "cpu_ms is %lld (cpu.stat usage_usec)", cpu_ms);
  run_out_free (&out);
}

/* On timeout the launcher writes cgroup.kill: every task of the run cgroup
 * dies, including ones that left init's process group, and the cgroup can
 * be removed. */
Test (cgroup2, timeout_kills_the_whole_cgroup_and_removes_it, .timeout = 60)
{
  struct run_job job;
  /* Long enough for the children to start first, on a slow host too. */
  char timeout[32];
  harness_scaled_duration (3.0, timeout, sizeof timeout);
  const char *const args[] = { "--timeout", timeout, NULL };
  const char *code = "import os, time\n"
                     "for _ in range(4):\n"
                     "    if os.fork() == 0:\n"
                     "        os.setsid()\n"
                     "        time.sleep(600)\n"
                     "time.sleep(600)\n";
  run_cli_spawn (args, true, &job);
  run_job_feed (&job, code, strlen (code));
  char dir[4096], procs[1024];
  wait_populated_run_cgroup (dir, sizeof dir, 15000);
  int n = 0;
  int window_ms = (int)harness_scaled (2500);
  for (int waited = 0; waited < window_ms && n < 6; waited += 20)
    {
      cr_assert (read_text (dir, "cgroup.procs", procs, sizeof procs));
      n = 0;
      for (char *p = procs; *p; p++)
        n += *p == '\n';
      sleep_ms (20);
    }
  struct run_out out;
  run_cli_wait (&job, NULL, 0, &out);
  RUN_ASSERT (&out, n >= 6, "expected init, python and 4 children in %s, saw %d", dir, n);
  RUN_ASSERT (&out, run_json_bool (&out, "timed_out"), "expected timed_out");
  RUN_ASSERT (&out, access (dir, F_OK) < 0 && errno == ENOENT, "run cgroup %s not removed", dir);
  for (char *p = procs; *p;)
    {
      char *end;
      long pid = strtol (p, &end, 10);
      if (end == p)
        break;
      RUN_ASSERT (&out, kill ((pid_t)pid, 0) < 0 && errno == ESRCH, "pid %ld survived", pid);
      p = end + strspn (end, "\n");
    }
  run_out_free (&out);
}

/* A run per process: the CLI. */
Test (cgroup2, twenty_cli_runs_leave_no_cgroup_behind, .timeout = 300)
{
  struct run_out out;
  /* A cgroup per run is the point, not Python: /usr/bin/true is quicker in
   * this slow guest. */
  const char *const args[] = { "--", "/usr/bin/true", NULL };
  /* One run first: a launcher may leave its delegation set-up (the
   * nsbox.launcher leaf of a cgroup it stays in) - that is not per run. */
  run_cli ("", 0, args, &out);
  RUN_ASSERT (&out, out.exit_status == 0, "expected exit status 0");
  run_out_free (&out);
  char *before = cgroup_tree ();
  for (int i = 0; i < 20; i++)
    {
      run_cli ("", 0, args, &out);
      RUN_ASSERT (&out, out.exit_status == 0, "run %d: expected exit status 0", i);
      if (i == 0)
        assert_cgroup2_limits (&out);
      run_out_free (&out);
    }
  char *after = cgroup_tree ();
  cr_assert_str_eq (after, before, "cgroup directories differ after 20 runs");
  cr_assert_null (any_run_cgroup (), "run cgroup left: %s", found_dir);
  free (before);
  free (after);
}

static void child_fail (int fd, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3), noreturn));

static void
child_fail (int fd, const char *fmt, ...)
{
  char msg[1024];
  va_list ap;
  va_start (ap, fmt);
  int n = vsnprintf (msg, sizeof msg, fmt, ap);
  va_end (ap);
  (void)!write (fd, msg, n > 0 && (size_t)n < sizeof msg ? (size_t)n : strlen (msg));
  _exit (1);
}

/* As the test user: alone in a fresh scope of the delegated subtree
 * (NSBOX_VM_DELEGATED), delegated to the user as systemd delegates a scope. */
/* Drops to the test user (pw, its passwd entry) for library runs. */
static void
child_become_test_user (const struct passwd *pw, int fd)
{
  if (setgroups (0, NULL) < 0 || setgid (pw->pw_gid) < 0 || setuid (pw->pw_uid) < 0)
    child_fail (fd, "become %s: %s", harness_test_user (), strerror (errno));
  prctl (PR_SET_DUMPABLE, 1, 0, 0, 0);
}

/* A config running /usr/bin/true in the fixture rootfs: a cgroup per run
 * is the point of these runs, not Python. */
static nsbox_config *
child_true_config (int fd)
{
  struct nsbox_error *err = NULL;
  nsbox_config *c = nsbox_config_new (&err);
  const char *const cmd[] = { "/usr/bin/true" };
  if (!c || nsbox_config_set (c, "rootfs", harness_rootfs (), &err) < 0
      || nsbox_config_set_command (c, 1, cmd, &err) < 0)
    child_fail (fd, "config: %s", nsbox_error_message (err));
  return c;
}

static void
child_enter_scope (const char *scope, int fd)
{
  struct passwd *pw = getpwnam (harness_test_user ());
  if (!pw)
    child_fail (fd, "no user %s", harness_test_user ());
  static const char *const files[]
      = { "", "/cgroup.procs", "/cgroup.subtree_control", "/cgroup.threads" };
  if (mkdir (scope, 0755) < 0)
    child_fail (fd, "mkdir %s: %s", scope, strerror (errno));
  for (size_t i = 0; i < 4; i++)
    {
      char path[4200];
      snprintf (path, sizeof path, "%s%s", scope, files[i]);
      if (chown (path, pw->pw_uid, pw->pw_gid) < 0)
        child_fail (fd, "chown %s: %s", path, strerror (errno));
    }
  char procs[4200], pid[32];
  snprintf (procs, sizeof procs, "%s/cgroup.procs", scope);
  snprintf (pid, sizeof pid, "%d", (int)getpid ());
  int pfd = open (procs, O_WRONLY | O_CLOEXEC);
  if (pfd < 0 || write (pfd, pid, strlen (pid)) < 0)
    child_fail (fd, "join %s: %s", scope, strerror (errno));
  close (pfd);
  child_become_test_user (pw, fd);
}

static void
child_runs (int n, int fd)
{
  struct nsbox_error *err = NULL;
  nsbox_config *c = child_true_config (fd);
  for (int i = 0; i < n; i++)
    {
      nsbox_result *r = NULL;
      if (nsbox_run (c, "", 0, &r, &err) < 0)
        child_fail (fd, "run %d: %s", i, nsbox_error_message (err));
      for (int l = NSBOX_LIMIT_MEMORY; l <= NSBOX_LIMIT_PIDS; l++)
        if (nsbox_result_limit (r, (enum nsbox_limit)l) != NSBOX_MECH_CGROUP2)
          child_fail (fd, "run %d: limit %d enforced by %s, not cgroup2", i, l,
                      nsbox_mechanism_name (nsbox_result_limit (r, (enum nsbox_limit)l)));
      if (nsbox_result_exit_code (r) != 0)
        child_fail (fd, "run %d: exit code %d", i, nsbox_result_exit_code (r));
      nsbox_result_free (r);
    }
  nsbox_config_free (c);
  _exit (0);
}

/* Many runs of one process: the library. The launcher delegates once (as
 * the test user it moves itself into a leaf of its scope) and reuses that
 * for every later run. */
Test (cgroup2, hundred_library_runs_in_one_process_leave_no_cgroup_behind, .timeout = 300)
{
  char scope[4096] = "";
  if (harness_test_user ())
    {
      const char *delegated = getenv ("NSBOX_VM_DELEGATED");
      cr_assert (delegated && *delegated, "NSBOX_VM_DELEGATED: the test user's delegated cgroup");
      snprintf (scope, sizeof scope, "%s/scope-lib-%d", delegated, (int)getpid ());
    }
  char *before = cgroup_tree ();
  int pipefd[2];
  cr_assert (pipe2 (pipefd, O_CLOEXEC) == 0);
  pid_t pid = fork ();
  cr_assert (pid >= 0);
  if (pid == 0)
    {
      close (pipefd[0]);
      if (scope[0])
        child_enter_scope (scope, pipefd[1]);
      child_runs (100, pipefd[1]);
    }
  close (pipefd[1]);
  char msg[1024];
  ssize_t n = read (pipefd[0], msg, sizeof msg - 1);
  msg[n > 0 ? n : 0] = '\0';
  close (pipefd[0]);
  int status;
  cr_assert (waitpid (pid, &status, 0) == pid);
  cr_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0, "library runs failed: %s",
             msg[0] ? msg : "(no message)");
  if (scope[0])
    {
      /* What the delegating manager removes when the scope ends. */
      char leaf[4200];
      snprintf (leaf, sizeof leaf, "%s/nsbox.launcher", scope);
      cr_assert (rmdir (leaf) == 0, "rmdir %s: %s (the launcher's leaf expected)", leaf,
                 strerror (errno));
      cr_assert (rmdir (scope) == 0, "rmdir %s: %s", scope, strerror (errno));
    }
  char *after = cgroup_tree ();
  cr_assert_null (any_run_cgroup (), "run cgroup left: %s", found_dir);
  cr_assert_str_eq (after, before, "cgroup directories differ after 100 runs");
  free (before);
  free (after);
}

Test (undelegated, user_without_delegation_gets_rlimits_and_the_result_says_so, .timeout = 60)
{
  cr_assert_not_null (harness_test_user (), "run this suite with NSBOX_TEST_USER");
  struct run_out out;
  const char *const args[] = { "--memory", "128m", NULL };
  run_cli ("print('ok')\n", 12, args, &out);
  assert_prints (&out, "ok\n");
  RUN_ASSERT (&out, strcmp (run_json_limit (&out, "memory"), "rlimit") == 0,
              "limits.memory is '%s', expected 'rlimit'", run_json_limit (&out, "memory"));
  RUN_ASSERT (&out, strcmp (run_json_limit (&out, "pids"), "rlimit") == 0,
              "limits.pids is '%s', expected 'rlimit'", run_json_limit (&out, "pids"));
  RUN_ASSERT (&out, strcmp (run_json_limit (&out, "cpus"), "none") == 0,
              "limits.cpus is '%s', expected 'none'", run_json_limit (&out, "cpus"));
  assert_no_run_cgroup (&out);
  run_out_free (&out);
}

/* No delegated cgroup and no user bus (this suite's condition, checked
 * here): degraded, exit 1, and the fix names a delegated scope. */
Test (undelegated, doctor_says_degraded_and_names_a_delegated_scope, .timeout = 120)
{
  struct passwd *pw = getpwnam (harness_test_user ());
  cr_assert_not_null (pw);
  char bus[64];
  snprintf (bus, sizeof bus, "/run/user/%u/bus", (unsigned)pw->pw_uid);
  struct stat st;
  cr_assert (stat (bus, &st) < 0 || !S_ISSOCK (st.st_mode), "%s exists: not this suite's condition",
             bus);
  int status = -1;
  json_t *limits = NULL;
  json_t *report = doctor_report (&status, &limits);
  cr_expect_str_eq (member (limits, "status"), "degraded", "%s", member (limits, "detail"));
  cr_expect (strstr (member (limits, "fix"), "systemd-run --user --scope") != NULL, "fix: %s",
             member (limits, "fix"));
  cr_expect_str_eq (member (report, "verdict"), "degraded");
  cr_expect_eq (status, 1);
  json_decref (report);
}

Test (undelegated, strict_refuses_without_a_cgroup, .timeout = 60)
{
  cr_assert_not_null (harness_test_user (), "run this suite with NSBOX_TEST_USER");
  struct run_out out;
  const char *const args[] = { "--strict", NULL };
  run_cli ("print('ran')\n", 13, args, &out);
  const char *const needles[] = { "strict", "cgroup", NULL };
  assert_refused (&out, needles);
  assert_no_run_cgroup (&out);
  run_out_free (&out);
}

/* The launcher's scope `scope` (the parent of its run cgroup) is named
 * nsbox-<launcher>-*.scope, sits below the test user's systemd instance
 * (user@UID.service) and was the user's (`owner`: delegated). */
static void
assert_user_scope (struct run_out *out, const char *scope, pid_t launcher, uid_t owner)
{
  struct passwd *pw = getpwnam (harness_test_user ());
  cr_assert_not_null (pw);
  const char *name = strrchr (scope, '/') + 1;
  char prefix[64], manager[64];
  snprintf (prefix, sizeof prefix, "nsbox-%d-", (int)launcher);
  snprintf (manager, sizeof manager, "/user@%u.service/", (unsigned)pw->pw_uid);
  RUN_ASSERT (out, strncmp (name, prefix, strlen (prefix)) == 0 && ends_with (name, ".scope"),
              "the run cgroup's parent %s is not a scope %s*.scope of the launcher", scope, prefix);
  RUN_ASSERT (out, strstr (scope, manager) != NULL, "the scope %s is not below %s", scope, manager);
  RUN_ASSERT (out, owner == pw->pw_uid, "the scope %s was uid %u's, not the user's (delegated)",
              scope, (unsigned)owner);
}

/* systemd removes a scope once its last process is gone, soon after. */
static bool
wait_gone (const char *dir, int timeout_ms)
{
  timeout_ms = (int)harness_scaled (timeout_ms);
  for (int waited = 0; waited < timeout_ms; waited += 50)
    {
      if (access (dir, F_OK) < 0 && errno == ENOENT)
        return true;
      sleep_ms (50);
    }
  return false;
}

static void
assert_undelegated_start (void)
{
  cr_assert_not_null (harness_test_user (), "run this suite with NSBOX_TEST_USER");
  const char *runtime_dir = getenv ("XDG_RUNTIME_DIR");
  cr_assert (runtime_dir && *runtime_dir, "run this suite with XDG_RUNTIME_DIR (the user bus)");
  /* The launcher starts in this process's cgroup: root's, so not delegated
   * to the test user. */
  char own[512], dir[1024];
  cr_assert (read_text ("/proc/self", "cgroup", own, sizeof own));
  own[strcspn (own, "\n")] = '\0';
  cr_assert (strncmp (own, "0::", 3) == 0, "/proc/self/cgroup: %s", own);
  snprintf (dir, sizeof dir, CGROUP_ROOT "%s", own + 3);
  struct stat st;
  cr_assert (stat (dir, &st) == 0 && st.st_uid == 0, "%s is not root's", dir);
}

Test (userscope, launcher_from_an_undelegated_cgroup_runs_in_a_scope_from_systemd, .timeout = 120)
{
  assert_undelegated_start ();
  struct run_job job;
  const char *const args[] = { "--memory", "96m", "--timeout", "30s", NULL };
  const char *code = "import time\nprint('ok', flush=True)\ntime.sleep(3)\n";
  run_cli_spawn (args, true, &job);
  run_job_feed (&job, code, strlen (code));
  char run_dir[4096], scope[4096], launcher_cg[4200] = "?", want[4300], ctrl[256] = "?";
  char memory_max[64] = "?", proc[64];
  wait_populated_run_cgroup (run_dir, sizeof run_dir, 30000);
  snprintf (scope, sizeof scope, "%s", run_dir);
  *strrchr (scope, '/') = '\0';
  snprintf (proc, sizeof proc, "/proc/%d", (int)job.pid);
  read_text (proc, "cgroup", launcher_cg, sizeof launcher_cg);
  read_text (scope, "cgroup.subtree_control", ctrl, sizeof ctrl);
  read_text (run_dir, "memory.max", memory_max, sizeof memory_max);
  struct stat st;
  uid_t owner = stat (scope, &st) == 0 ? st.st_uid : (uid_t)-1;
  struct run_out out;
  run_cli_wait (&job, NULL, 0, &out);
  assert_prints (&out, "ok\n");
  assert_cgroup2_limits (&out);
  assert_user_scope (&out, scope, job.pid, owner);
  /* The launcher moved itself into a leaf of the scope and made the scope a
   * parent with the controllers; the run cgroup had its limit. */
  snprintf (want, sizeof want, "0::%s/nsbox.launcher\n", scope + strlen (CGROUP_ROOT));
  RUN_ASSERT (&out, strcmp (launcher_cg, want) == 0,
              "the launcher's cgroup was '%s', expected '%s'", launcher_cg, want);
  RUN_ASSERT (&out, strstr (ctrl, "memory") && strstr (ctrl, "pids"),
              "%s/cgroup.subtree_control was '%s'", scope, ctrl);
  RUN_ASSERT (&out, strcmp (memory_max, "100663296\n") == 0, "%s/memory.max was '%s'", run_dir,
              memory_max);
  RUN_ASSERT (&out, access (run_dir, F_OK) < 0 && errno == ENOENT, "run cgroup %s not removed",
              run_dir);
  RUN_ASSERT (&out, wait_gone (scope, 15000),
              "the scope %s is still there 15 s after the launcher exited", scope);
  run_out_free (&out);
}

/* Scopes of one launcher process, named nsbox-<pid>-*.scope. */
static char scope_prefix[64];
static int scopes_seen;

static int
count_scope (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void)st;
  if (flag == FTW_D && strncmp (path + ftw->base, scope_prefix, strlen (scope_prefix)) == 0
      && ends_with (path + ftw->base, ".scope"))
    scopes_seen++;
  return 0;
}

struct thread_runs
{
  const nsbox_config *config;
  int runs;
  char failure[512];
};

static void *
thread_runs (void *arg)
{
  struct thread_runs *t = arg;
  for (int i = 0; i < t->runs && !t->failure[0]; i++)
    {
      struct nsbox_error *err = NULL;
      nsbox_result *r = NULL;
      if (nsbox_run (t->config, "", 0, &r, &err) < 0)
        {
          snprintf (t->failure, sizeof t->failure, "run %d: %s", i, nsbox_error_message (err));
          nsbox_error_free (err);
          break;
        }
      for (int l = NSBOX_LIMIT_MEMORY; l <= NSBOX_LIMIT_PIDS; l++)
        if (nsbox_result_limit (r, (enum nsbox_limit)l) != NSBOX_MECH_CGROUP2)
          snprintf (t->failure, sizeof t->failure, "run %d: limit %d enforced by %s, not cgroup2",
                    i, l, nsbox_mechanism_name (nsbox_result_limit (r, (enum nsbox_limit)l)));
      if (!t->failure[0] && nsbox_result_exit_code (r) != 0)
        snprintf (t->failure, sizeof t->failure, "run %d: exit code %d", i,
                  nsbox_result_exit_code (r));
      nsbox_result_free (r);
    }
  return NULL;
}

/* As the test user, from this process's cgroup: 4 threads of one process
 * run sandboxes at once; the first to need a cgroup asks for the scope, the
 * others wait for it and use it. Reports the process's cgroup on `fd`, then
 * waits for a byte (or EOF) on `hold` before exiting. */
static void
child_threads (int fd, int hold)
{
  struct passwd *pw = getpwnam (harness_test_user ());
  if (!pw)
    child_fail (fd, "no user %s", harness_test_user ());
  child_become_test_user (pw, fd);
  nsbox_config *c = child_true_config (fd);
  struct thread_runs runs[4];
  pthread_t threads[4];
  for (int i = 0; i < 4; i++)
    {
      runs[i] = (struct thread_runs){ .config = c, .runs = 3 };
      int r = pthread_create (&threads[i], NULL, thread_runs, &runs[i]);
      if (r != 0)
        child_fail (fd, "pthread_create: %s", strerror (r));
    }
  for (int i = 0; i < 4; i++)
    pthread_join (threads[i], NULL);
  for (int i = 0; i < 4; i++)
    if (runs[i].failure[0])
      child_fail (fd, "thread %d: %s", i, runs[i].failure);
  nsbox_config_free (c);
  char cg[1024] = "ok ";
  if (!read_text ("/proc/self", "cgroup", cg + 3, sizeof cg - 3))
    child_fail (fd, "read /proc/self/cgroup: %s", strerror (errno));
  (void)!write (fd, cg, strlen (cg));
  close (fd);
  char byte;
  (void)!read (hold, &byte, 1);
  _exit (0);
}

Test (userscope, threads_of_one_library_caller_share_one_scope, .timeout = 300)
{
  assert_undelegated_start ();
  int report[2], hold[2];
  cr_assert (pipe2 (report, O_CLOEXEC) == 0 && pipe2 (hold, O_CLOEXEC) == 0);
  pid_t pid = fork ();
  cr_assert (pid >= 0);
  if (pid == 0)
    {
      close (report[0]);
      close (hold[1]);
      child_threads (report[1], hold[0]);
    }
  close (report[1]);
  close (hold[0]);
  char msg[1100];
  size_t len = 0;
  ssize_t n;
  while (len < sizeof msg - 1 && (n = read (report[0], msg + len, sizeof msg - 1 - len)) > 0)
    len += (size_t)n;
  msg[len] = '\0';
  close (report[0]);
  scopes_seen = 0;
  snprintf (scope_prefix, sizeof scope_prefix, "nsbox-%d-", (int)pid);
  nftw (CGROUP_ROOT, count_scope, 16, FTW_PHYS | FTW_MOUNT);
  close (hold[1]);
  int status;
  cr_assert (waitpid (pid, &status, 0) == pid);
  cr_assert (strncmp (msg, "ok 0::", 6) == 0, "library runs failed: %s",
             msg[0] ? msg : "(no message)");
  cr_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  cr_assert_eq (scopes_seen, 1, "%d scopes %s*.scope for one process, expected 1", scopes_seen,
                scope_prefix);
  /* 12 runs, one scope: the process stayed in the scope's launcher leaf. */
  char scope[1200];
  snprintf (scope, sizeof scope, CGROUP_ROOT "%s", msg + 6);
  scope[strcspn (scope, "\n")] = '\0';
  cr_assert (ends_with (scope, "/nsbox.launcher"), "the caller is in %s", scope);
  *strrchr (scope, '/') = '\0';
  cr_assert (strstr (scope, scope_prefix), "the caller is in %s, not its scope", scope);
  cr_assert_null (any_run_cgroup (), "run cgroup left: %s", found_dir);
  cr_assert (wait_gone (scope, 15000), "the scope %s is still there 15 s after the caller exited",
             scope);
}
