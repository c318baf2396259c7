/* `nsbox doctor`, checked against conditions the test sets up and probes
 * itself: this machine as it is (its cgroup layout read here, sandboxes
 * known to run since the suite runs them), user namespaces exhausted
 * (user.max_user_namespaces 0 inside a user namespace of the test's own:
 * the host's value is never touched) and /proc partly covered (a bind
 * mount over /proc/cpuinfo in a mount namespace of the test's own, as a
 * container's masked paths do). For each, the printed fix must name the
 * condition, and `nsbox run` must agree with the verdict. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/magic.h>

#include "harness.h"

enum condition
{
  AS_IS,
  USERNS_EXHAUSTED,
  PROC_COVERED,
};

static void
die_child (const char *what)
{
  dprintf (2, "doctor_test: %s: %s\n", what, strerror (errno));
  _exit (120);
}

static void
write_or_die (const char *path, const char *text)
{
  int fd = open (path, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write (fd, text, strlen (text)) != (ssize_t)strlen (text))
    die_child (path);
  close (fd);
}

/* In the forked child: the condition, checked here, then the test user. */
static void
set_up (enum condition condition, bool drop, uid_t uid, gid_t gid)
{
  if (condition == PROC_COVERED)
    {
      if (unshare (CLONE_NEWNS) < 0 || mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0
          || mount ("/dev/null", "/proc/cpuinfo", NULL, MS_BIND, NULL) < 0)
        die_child ("cover /proc/cpuinfo");
      struct stat st;
      if (stat ("/proc/cpuinfo", &st) < 0 || !S_ISCHR (st.st_mode))
        die_child ("/proc/cpuinfo is not covered");
    }
  if (drop && (setgroups (0, NULL) < 0 || setgid (gid) < 0 || setuid (uid) < 0))
    die_child ("become the test user");
  /* As a process the user started: its /proc files its own. */
  prctl (PR_SET_DUMPABLE, 1, 0, 0, 0);
  if (condition == USERNS_EXHAUSTED)
    {
      char map[64];
      if (unshare (CLONE_NEWUSER) < 0)
        die_child ("unshare(CLONE_NEWUSER)");
      write_or_die ("/proc/self/setgroups", "deny");
      snprintf (map, sizeof map, "0 %u 1", (unsigned)uid);
      write_or_die ("/proc/self/uid_map", map);
      snprintf (map, sizeof map, "0 %u 1", (unsigned)gid);
      write_or_die ("/proc/self/gid_map", map);
      write_or_die ("/proc/sys/user/max_user_namespaces", "0");
      /* The condition holds: no user namespace can be made from here. */
      pid_t probe = fork ();
      if (probe == 0)
        _exit (unshare (CLONE_NEWUSER) < 0 && errno == ENOSPC ? 0 : 1);
      int status = 1;
      if (probe < 0 || waitpid (probe, &status, 0) < 0 || !WIFEXITED (status)
          || WEXITSTATUS (status) != 0)
        die_child ("user namespaces are still possible");
    }
}

/* `nsbox COMMAND ARGS...` under the condition; stdout in *out (caller
 * frees); returns the exit status (-1 for a signal). */
static int
nsbox_under (enum condition condition, const char *const *args, const char *stdin_text, char **out)
{
  bool drop = false;
  uid_t uid;
  gid_t gid;
  harness_test_ids (&drop, &uid, &gid);
  char *home = user_dir ();
  int o[2], in[2];
  cr_assert (pipe2 (o, O_CLOEXEC) == 0 && pipe2 (in, O_CLOEXEC) == 0);
  pid_t pid = fork ();
  cr_assert (pid >= 0);
  if (pid == 0)
    {
      if (dup2 (o[1], 1) < 0 || dup2 (in[0], 0) < 0)
        _exit (126);
      set_up (condition, drop, uid, gid);
      setenv ("HOME", home, 1);
      setenv ("NSBOX_STORE", home, 1);
      const char *argv[16] = { harness_nsbox_bin () };
      size_t n = 1;
      for (size_t i = 0; args[i] && n < 15; i++)
        argv[n++] = args[i];
      argv[n] = NULL;
      execv (argv[0], (char *const *)argv);
      _exit (127);
    }
  close (o[1]);
  close (in[0]);
  if (stdin_text)
    cr_assert (write (in[1], stdin_text, strlen (stdin_text)) == (ssize_t)strlen (stdin_text));
  close (in[1]);
  size_t cap = 65536, len = 0;
  char *buf = malloc (cap + 1);
  cr_assert_not_null (buf);
  ssize_t n;
  while ((n = read (o[0], buf + len, cap - len)) > 0)
    len += (size_t)n;
  buf[len] = '\0';
  close (o[0]);
  int status = 0;
  cr_assert (waitpid (pid, &status, 0) == pid);
  char cmd[4200];
  snprintf (cmd, sizeof cmd, "rm -rf '%s'", home);
  cr_expect_eq (system (cmd), 0);
  free (home);
  *out = buf;
  return WIFEXITED (status) ? WEXITSTATUS (status) : -1;
}

static json_t *
doctor_under (enum condition condition, const char *runtime, int *status)
{
  const char *const args[]
      = { "doctor", "--json", "--rootfs", harness_rootfs (), "--runtime", runtime, NULL };
  char *out = NULL;
  *status = nsbox_under (condition, args, NULL, &out);
  cr_assert_neq (*status, 120, "the test could not set its condition up");
  json_error_t jerr;
  json_t *report = json_loads (out, 0, &jerr);
  cr_assert (json_is_object (report), "nsbox doctor --json printed no JSON object: %s", out);
  free (out);
  return report;
}

static json_t *
check_named (json_t *report, const char *name)
{
  json_t *checks = json_object_get (report, "checks");
  for (size_t i = 0; i < json_array_size (checks); i++)
    {
      json_t *c = json_array_get (checks, i);
      if (strcmp (json_string_value (json_object_get (c, "name")), name) == 0)
        return c;
    }
  cr_assert_fail ("no check named '%s'", name);
  return NULL;
}

static const char *
field (json_t *check, const char *key)
{
  const char *v = json_string_value (json_object_get (check, key));
  return v ? v : "";
}

static int
expected_status (const char *verdict)
{
  return strcmp (verdict, "ok") == 0 ? 0 : strcmp (verdict, "degraded") == 0 ? 1 : 2;
}

/* Whether cgroup v1 holds the memory, cpu and pids hierarchies, and the
 * launcher's user may make cgroups there: root. */
static bool
cgroup1_for (bool drop)
{
  struct statfs sf;
  return !drop && statfs ("/sys/fs/cgroup/memory", &sf) == 0 && sf.f_type == CGROUP_SUPER_MAGIC
         && statfs ("/sys/fs/cgroup/pids", &sf) == 0 && sf.f_type == CGROUP_SUPER_MAGIC;
}

Test (doctor, reports_this_machine_as_it_is, .timeout = 120)
{
  bool drop = false;
  uid_t uid;
  gid_t gid;
  harness_test_ids (&drop, &uid, &gid);
  int status = 0;
  json_t *report = doctor_under (AS_IS, harness_runtime (), &status);
  const char *verdict = json_string_value (json_object_get (report, "verdict"));
  cr_assert_not_null (verdict);
  cr_expect_eq (status, expected_status (verdict), "exit %d for verdict %s", status, verdict);
  /* This suite runs sandboxes here: they work. */
  cr_expect_str_eq (field (check_named (report, "user namespaces"), "status"), "ok");
  cr_expect_str_eq (field (check_named (report, "/proc"), "status"), "ok");
  json_t *sandbox = check_named (report, "sandbox");
  cr_expect_str_eq (field (sandbox, "status"), "ok", "%s", field (sandbox, "detail"));
  json_t *limits = check_named (report, "limits");
  struct statfs sf;
  bool hybrid_or_v1 = statfs ("/sys/fs/cgroup", &sf) == 0 && sf.f_type == TMPFS_MAGIC;
  if (cgroup1_for (drop))
    {
      /* Root on cgroup v1 gets every limit by a cgroup. */
      cr_expect_str_eq (field (limits, "status"), "ok", "%s", field (limits, "detail"));
      cr_expect_str_eq (verdict, "ok");
    }
  else if (drop && hybrid_or_v1)
    {
      /* An unprivileged user on cgroup v1: nothing to delegate. */
      cr_expect_str_eq (field (limits, "status"), "degraded", "%s", field (limits, "detail"));
      cr_expect (strstr (field (limits, "fix"), "systemd.unified_cgroup_hierarchy=1") != NULL,
                 "the fix must name cgroup v2: %s", field (limits, "fix"));
      cr_expect_str_eq (verdict, "degraded");
    }
  else if (!drop && statfs ("/sys/fs/cgroup", &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC)
    {
      /* Root on cgroup v2 (the cgroup2 guest checks this with its own
       * suites): the limits are cgroup2 ones when the controllers are there. */
      char controllers[256] = "";
      FILE *f = fopen ("/sys/fs/cgroup/cgroup.controllers", "re");
      if (f && !fgets (controllers, sizeof controllers, f))
        controllers[0] = '\0';
      if (f)
        fclose (f);
      bool all = strstr (controllers, "memory") && strstr (controllers, "cpu")
                 && strstr (controllers, "pids");
      cr_expect_str_eq (field (limits, "status"), all ? "ok" : "degraded", "%s",
                        field (limits, "detail"));
    }
  else
    /* An unprivileged user on cgroup v2: delegated or not, the doctor and
     * the run must agree, which the sandbox check above and the exit status
     * show; the cgroup2 guest judges the delegation itself. */
    cr_expect (strcmp (field (limits, "status"), "ok") == 0
                   || strstr (field (limits, "fix"), "Delegate") != NULL,
               "degraded limits without a delegation fix: %s", field (limits, "fix"));
  json_decref (report);
}

Test (doctor, names_the_sysctl_when_user_namespaces_are_exhausted, .timeout = 120)
{
  long long before = 0, after = 0;
  char buf[64];
  FILE *f = fopen ("/proc/sys/user/max_user_namespaces", "re");
  cr_assert (f && fgets (buf, sizeof buf, f));
  fclose (f);
  before = atoll (buf);
  int status = 0;
  json_t *report = doctor_under (USERNS_EXHAUSTED, "native", &status);
  cr_expect_eq (status, 2, "cannot run: exit 2, got %d", status);
  cr_expect_str_eq (json_string_value (json_object_get (report, "verdict")), "failing");
  json_t *userns = check_named (report, "user namespaces");
  cr_expect_str_eq (field (userns, "status"), "failing");
  cr_expect (strstr (field (userns, "fix"), "user.max_user_namespaces=") != NULL, "fix: %s",
             field (userns, "fix"));
  cr_expect_str_eq (field (check_named (report, "sandbox"), "status"), "failing");
  json_decref (report);
  /* nsbox run agrees: it cannot run there. */
  const char *const run[] = { "run", "--rootfs", harness_rootfs (), NULL };
  char *out = NULL;
  cr_expect_eq (nsbox_under (USERNS_EXHAUSTED, run, "print(45)\n", &out), 125);
  cr_expect (strstr (out, "45") == NULL, "%s", out);
  free (out);
  f = fopen ("/proc/sys/user/max_user_namespaces", "re");
  cr_assert (f && fgets (buf, sizeof buf, f));
  fclose (f);
  after = atoll (buf);
  cr_expect_eq (after, before, "the host's user.max_user_namespaces changed");
}

Test (doctor, names_the_masked_paths_when_proc_is_covered, .timeout = 120)
{
  int status = 0;
  json_t *report = doctor_under (PROC_COVERED, "native", &status);
  cr_expect_eq (status, 2, "cannot run: exit 2, got %d", status);
  json_t *proc = check_named (report, "/proc");
  cr_expect_str_eq (field (proc, "status"), "failing");
  cr_expect (strstr (field (proc, "detail"), "/proc/cpuinfo") != NULL, "detail: %s",
             field (proc, "detail"));
  cr_expect (strstr (field (proc, "fix"), "masked paths") != NULL, "fix: %s", field (proc, "fix"));
  cr_expect_str_eq (field (check_named (report, "user namespaces"), "status"), "ok");
  json_decref (report);
  const char *const run[] = { "run", "--rootfs", harness_rootfs (), NULL };
  char *out = NULL;
  cr_expect_eq (nsbox_under (PROC_COVERED, run, "print(45)\n", &out), 125,
                "nsbox run must fail where doctor says it cannot run");
  free (out);
}
