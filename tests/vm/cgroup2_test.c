/* cgroup v2 effects, shown on a kernel with cgroup v2 only (make check-vm):
 * run from the guest's init with NSBOX_BIN and NSBOX_TEST_USER set per pass.
 *
 *   suite cgroup2  every limit is a cgroup2 one and does what it says; run
 *                  as root and as a user with a delegated subtree
 *   suite undelegated a user without a delegated subtree gets rlimits, says
 *                  so, and --strict refuses
 *
 * Run cgroups are found by walking the whole cgroup2 mount, not only below
 * the test's own cgroup: a delegated launcher runs in a scope elsewhere. One
 * run at a time (--jobs 1), so the run cgroup seen is this test's. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "nsbox.h"

#define CGROUP_ROOT "/sys/fs/cgroup"

static char found_dir[4096];
static char *tree_list;
static size_t tree_len, tree_cap;

static int
find_run_cgroup (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void)st;
  if (flag == FTW_D && strncmp (path + ftw->base, "nsbox-", 6) == 0)
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
              "memory_peak_bytes %lld: expected the limit reached (32..64 MiB, memory.peak)",
              peak);
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
  const char *const args[] = { "--pids-limit", "16", "--timeout", "8s", "--env", tag, NULL };
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
  for (int waited = 0; waited < 6000; waited += 20)
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
  for (int waited = 0; waited < 10000; waited += 50)
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
  const char *const args[] = { "--timeout", "3s", NULL };
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
  for (int waited = 0; waited < 2500 && n < 6; waited += 20)
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

static void
child_fail (int fd, const char *fmt, ...) __attribute__ ((format (printf, 2, 3), noreturn));

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
static void
child_enter_scope (const char *scope, int fd)
{
  struct passwd *pw = getpwnam (harness_test_user ());
  if (!pw)
    child_fail (fd, "no user %s", harness_test_user ());
  static const char *const files[] = { "", "/cgroup.procs", "/cgroup.subtree_control",
                                       "/cgroup.threads" };
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
  if (setgroups (0, NULL) < 0 || setgid (pw->pw_gid) < 0 || setuid (pw->pw_uid) < 0)
    child_fail (fd, "become %s: %s", harness_test_user (), strerror (errno));
  prctl (PR_SET_DUMPABLE, 1, 0, 0, 0);
}

static void
child_runs (int n, int fd)
{
  struct nsbox_error *err = NULL;
  nsbox_config *c = nsbox_config_new (&err);
  const char *const cmd[] = { "/usr/bin/true" };
  if (!c || nsbox_config_set (c, "rootfs", harness_rootfs (), &err) < 0
      || nsbox_config_set_command (c, 1, cmd, &err) < 0)
    child_fail (fd, "config: %s", nsbox_error_message (err));
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
