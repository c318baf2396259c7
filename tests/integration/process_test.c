/* Processes: privileges the program does not have, the syscalls it may not
 * make, the ordinary Python it can run, and what is left after it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

MODE_TEST (process, double_forked_daemon_is_gone_after_the_run, .timeout = 30)
{
  char tag[96];
  make_run_tag (tag, sizeof tag);
  const char *const args[] = { "--env", tag, NULL };
  struct run_out out;
  run_mode (*mode,
            "import os,time\n"
            "if os.fork()==0:\n"
            " os.setsid()\n"
            " if os.fork()==0:\n"
            "  time.sleep(1000)\n"
            " os._exit(0)\n"
            "print('parent done')\n",
            args, &out);
  char desc[1024];
  int left = count_uid_processes (sandbox_host_uid (), tag, desc, sizeof desc);
  assert_prints (&out, "parent done\n");
  RUN_ASSERT (&out, left == 0, "%d process(es) of uid %u outlived the run: %s", left,
              (unsigned)sandbox_host_uid (), desc);
  run_out_free (&out);
}

MODE_TEST (process, capabilities_are_dropped_with_no_new_privs_and_seccomp, .timeout = 30)
{
  static const char *const expected[] = { "CapInh:\t0000000000000000\n",
                                          "CapPrm:\t0000000000000000\n",
                                          "CapEff:\t0000000000000000\n",
                                          "CapBnd:\t0000000000000000\n",
                                          "CapAmb:\t0000000000000000\n",
                                          "NoNewPrivs:\t1\n",
                                          "Seccomp:\t2\n" };
  struct run_out out;
  run_mode (*mode,
            "for line in open('/proc/self/status'):\n"
            "    if line.startswith(('Cap', 'NoNewPrivs', 'Seccomp:')):\n"
            "        print(line, end='')\n",
            NULL, &out);
  RUN_ASSERT (&out, out.exit_status == 0, "expected exit status 0");
  const char *s = run_stdout (&out, NULL);
  for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
    {
      /* gVisor's /proc/self/status (runsc 20221219) has no CapAmb and no
       * NoNewPrivs line; the other lines are the sentry's view. */
      if (harness_is_runsc ()
          && (strncmp (expected[i], "CapAmb", 6) == 0 || strncmp (expected[i], "NoNew", 5) == 0))
        continue;
      RUN_ASSERT (&out, strstr (s, expected[i]) != NULL, "expected \"%.*s\" in /proc/self/status",
                  (int)strlen (expected[i]) - 1, expected[i]);
    }
  run_out_free (&out);
}

/* Runs `call` (a Python expression using libc; the syscall numbers are
 * x86_64's and aarch64's) and asserts it failed with EPERM. */
static void
assert_denied_with_eperm (enum run_mode mode, const char *what, const char *call)
{
  char code[2048];
  snprintf (code, sizeof code,
            "import ctypes, os, platform\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "NR = {'x86_64': {'keyctl': 250, 'bpf': 321, 'unshare': 272},\n"
            "      'aarch64': {'keyctl': 219, 'bpf': 280, 'unshare': 97}}[platform.machine()]\n"
            "ret = %s\n"
            "print('ret', ret, 'errno', ctypes.get_errno())\n",
            call);
  struct run_out out;
  run_mode (mode, code, NULL, &out);
  RUN_ASSERT (&out, out.exit_status == 0, "expected exit status 0 (%s)", what);
  RUN_ASSERT (&out, strcmp (run_stdout (&out, NULL), "ret -1 errno 1\n") == 0,
              "expected %s to fail with EPERM", what);
  run_out_free (&out);
}

MODE_TEST (process, ptrace_traceme_is_denied, .timeout = 30)
{
  /* PTRACE_TRACEME = 0: allowed by the kernel, so only the filter stops it. */
  assert_denied_with_eperm (*mode, "ptrace(PTRACE_TRACEME)", "libc.ptrace(0, 0, None, None)");
}

MODE_TEST (process, ptrace_attach_to_init_is_denied, .timeout = 30)
{
  /* PTRACE_ATTACH = 16, pid 1 is the sandbox's init. */
  assert_denied_with_eperm (*mode, "ptrace(PTRACE_ATTACH, 1)", "libc.ptrace(16, 1, None, None)");
}

MODE_TEST (process, mount_is_denied, .timeout = 30)
{
  assert_denied_with_eperm (*mode, "mount tmpfs",
                            "libc.mount(b'none', b'/tmp', b'tmpfs', 0, None)");
}

MODE_TEST (process, nested_user_namespace_is_denied, .timeout = 30)
{
  /* CLONE_NEWUSER; bookworm's Python 3.11 has no os.unshare. */
  assert_denied_with_eperm (*mode, "unshare(CLONE_NEWUSER)",
                            "libc.syscall(NR['unshare'], 0x10000000)");
}

MODE_TEST (process, keyctl_is_denied, .timeout = 30)
{
  /* KEYCTL_GET_KEYRING_ID (0) of the session keyring (-3). */
  assert_denied_with_eperm (*mode, "keyctl", "libc.syscall(NR['keyctl'], 0, -3, 0)");
}

MODE_TEST (process, bpf_is_denied, .timeout = 30)
{
  /* BPF_MAP_CREATE with no attributes. */
  assert_denied_with_eperm (*mode, "bpf", "libc.syscall(NR['bpf'], 0, None, 0)");
}

MODE_TEST (process, multiprocessing_pool_map_works, .timeout = 60)
{
  struct run_out out;
  const char *const args[] = { "--timeout", "30s", NULL };
  run_mode (*mode,
            "import multiprocessing as mp\n"
            "with mp.get_context('fork').Pool(2) as pool:\n"
            "    print(pool.map(abs, [-1, -2, -3]))\n",
            args, &out);
  assert_prints (&out, "[1, 2, 3]\n");
  run_out_free (&out);
}

MODE_TEST (process, threads_and_asyncio_loopback_work, .timeout = 60)
{
  struct run_out out;
  const char *const args[] = { "--timeout", "30s", NULL };
  run_mode (*mode,
            "import asyncio, threading\n"
            "squares = []\n"
            "threads = [threading.Thread(target=lambda i=i: squares.append(i * i))\n"
            "           for i in range(4)]\n"
            "for t in threads: t.start()\n"
            "for t in threads: t.join()\n"
            "print('threads', sorted(squares))\n"
            "async def main():\n"
            "    async def handle(reader, writer):\n"
            "        writer.write((await reader.readline()).upper())\n"
            "        await writer.drain()\n"
            "        writer.close()\n"
            "    server = await asyncio.start_server(handle, '127.0.0.1', 0)\n"
            "    port = server.sockets[0].getsockname()[1]\n"
            "    reader, writer = await asyncio.open_connection('127.0.0.1', port)\n"
            "    writer.write(b'ping\\n')\n"
            "    await writer.drain()\n"
            "    print('asyncio', (await reader.readline()).decode().strip())\n"
            "    writer.close()\n"
            "    server.close()\n"
            "    await server.wait_closed()\n"
            "asyncio.run(main())\n",
            args, &out);
  assert_prints (&out, "threads [0, 1, 4, 9]\nasyncio PING\n");
  run_out_free (&out);
}

MODE_TEST (process, subprocess_runs_python, .timeout = 30)
{
  struct run_out out;
  const char *const args[] = { "--timeout", "20s", NULL };
  run_mode (*mode,
            "import subprocess\n"
            "r = subprocess.run(['python', '-c', 'print(1)'], capture_output=True, text=True)\n"
            "print('child', r.returncode, r.stdout.strip())\n",
            args, &out);
  assert_prints (&out, "child 0 1\n");
  run_out_free (&out);
}

/* An embedding program that dropped root with setuid() (no exec) is not
 * dumpable, and neither is the sandbox init it clones until the id maps
 * are written: the library must still start the sandbox. */
Test (process, library_runs_from_a_non_dumpable_caller, .timeout = 30)
{
  struct run_out out;
  const char *code = "print(sum(range(10)))\n";
  run_lib_non_dumpable (code, strlen (code), NULL, &out);
  assert_prints (&out, "45\n");
  run_out_free (&out);
}

/* Under runsc the sandbox is gVisor's sentry, gofer and ptrace stubs on the
 * host: a timeout must take every one of them (nsbox runs runsc under its
 * own init in a PID namespace), and no work directory may be left. Runs in
 * every pass, with the runtime asked for explicitly. */
Test (process, no_runsc_process_survives_a_timeout, .timeout = 60)
{
  NSBOX_SKIP_UNLESS (runsc_installed (), "no runsc binary (apt-get install runsc)");
  /* The loop outlives gVisor's start, on a slow machine too. */
  char timeout[32];
  harness_scaled_duration (2.0, timeout, sizeof timeout);
  const char *const args[] = { "--runtime", "runsc", "--timeout", timeout, NULL };
  const char *code = "while True: pass\n";
  struct run_job job;
  run_cli_spawn (args, true, &job);
  run_job_feed (&job, code, strlen (code));
  char desc[1024];
  int seen = wait_runsc_processes (job.pid, 3, 2000, desc, sizeof desc);
  struct run_out out;
  run_cli_wait (&job, NULL, 0, &out);
  RUN_ASSERT (&out, run_json_bool (&out, "timed_out"), "expected the loop to time out");
  RUN_ASSERT (&out, out.exit_status == 124, "expected exit status 124");
  RUN_ASSERT (&out, strcmp (run_json_str (&out, "runtime", NULL), "runsc") == 0,
              "runtime is runsc");
  RUN_ASSERT (&out, seen >= 3, "runsc, gofer and sentry not all seen while it ran (%d: %s)", seen,
              desc);
  /* Right after the launcher exits: the kernel empties a PID namespace
   * before its init can be reaped. */
  int left = count_runsc_processes (job.pid, desc, sizeof desc);
  RUN_ASSERT (&out, left == 0, "%d runsc process(es) outlived the run: %s", left, desc);
  char prefix[64];
  snprintf (prefix, sizeof prefix, "nsbox-runsc-%d-", (int)job.pid);
  static const char *const bases[] = { "/dev/shm", "/tmp" };
  for (size_t b = 0; b < sizeof bases / sizeof bases[0]; b++)
    {
      DIR *dir = opendir (bases[b]);
      struct dirent *d;
      while (dir && (d = readdir (dir)))
        RUN_ASSERT (&out, strncmp (d->d_name, prefix, strlen (prefix)) != 0,
                    "runsc work directory %s/%s left behind", bases[b], d->d_name);
      if (dir)
        closedir (dir);
    }
  run_out_free (&out);
}

/* The launcher itself killed: runsc's init dies with it (parent-death
 * signal), and the kernel empties its PID namespace. */
/* Starts a long runsc run, waits for runsc, gofer and sentry, kills the
 * launcher with SIGKILL and waits for it (its end in out): no runsc process
 * may outlive it. */
static void
kill_runsc_launcher_mid_run (struct run_job *job, struct run_out *out)
{
  const char *const args[] = { "--runtime", "runsc", "--timeout", "30s", NULL };
  const char *code = "import time\ntime.sleep(60)\n";
  run_cli_spawn (args, true, job);
  run_job_feed (job, code, strlen (code));
  char desc[1024];
  int seen = wait_runsc_processes (job->pid, 3, 10000, desc, sizeof desc);
  cr_assert (seen >= 3, "runsc, gofer and sentry not all seen (%d: %s)", seen, desc);
  kill (job->pid, SIGKILL);
  run_cli_wait (job, NULL, 0, out);
  int left = wait_runsc_processes (job->pid, 0, 5000, desc, sizeof desc);
  RUN_ASSERT (out, left == 0, "%d runsc process(es) outlived the killed launcher: %s", left, desc);
}

Test (process, no_runsc_process_survives_a_killed_launcher, .timeout = 60)
{
  NSBOX_SKIP_UNLESS (runsc_installed (), "no runsc binary (apt-get install runsc)");
  struct run_job job;
  struct run_out out;
  kill_runsc_launcher_mid_run (&job, &out);
  RUN_ASSERT (&out, out.term_signal == SIGKILL, "expected the launcher killed by SIGKILL");
  run_out_free (&out);
}

/* The entry of dir whose name starts with prefix, or NULL. */
static char *
find_entry (const char *dir, const char *prefix)
{
  DIR *d = opendir (dir);
  cr_assert_not_null (d, "opendir '%s': %s", dir, strerror (errno));
  char *found = NULL;
  struct dirent *e;
  while (!found && (e = readdir (d)))
    if (strncmp (e->d_name, prefix, strlen (prefix)) == 0)
      cr_assert (asprintf (&found, "%s/%s", dir, e->d_name) > 0);
  closedir (d);
  return found;
}

static void
make_dir (const char *path, uid_t uid, gid_t gid)
{
  cr_assert (mkdir (path, 0755) == 0, "mkdir '%s': %s", path, strerror (errno));
  cr_assert (chown (path, uid, gid) == 0, "chown '%s': %s", path, strerror (errno));
}

/* A launcher killed with SIGKILL cannot remove its runsc work directory;
 * the next run does, without following a symlink planted in it, and leaves
 * alone the directories of launchers still running (by pid here, by lock
 * from another PID namespace) and, as root, those it does not own. TMPDIR puts the work directories
 * where the test sees only its own. */
Test (process, the_next_runsc_run_removes_a_killed_launcher_s_work_dir, .timeout = 120)
{
  NSBOX_SKIP_UNLESS (runsc_installed (), "no runsc binary (apt-get install runsc)");
  /* The launcher's ids: the test user's in the unprivileged pass. */
  uid_t uid = geteuid ();
  gid_t gid = getegid ();
  if (harness_test_user ())
    {
      struct passwd *pw = getpwnam (harness_test_user ());
      cr_assert_not_null (pw, "no user %s", harness_test_user ());
      uid = pw->pw_uid;
      gid = pw->pw_gid;
    }
  char *base = make_public_dir ();
  cr_assert (chown (base, uid, gid) == 0, "chown '%s': %s", base, strerror (errno));
  cr_assert (setenv ("TMPDIR", base, 1) == 0);
  struct run_job job;
  struct run_out killed;
  kill_runsc_launcher_mid_run (&job, &killed);
  run_out_free (&killed);

  char prefix[64], path[4096];
  snprintf (prefix, sizeof prefix, "nsbox-runsc-%d-", (int)job.pid);
  char *stale = find_entry (base, prefix);
  cr_assert_not_null (stale, "the killed launcher left no work directory in %s", base);
  snprintf (path, sizeof path, "%s/victim", base);
  make_dir (path, uid, gid);
  snprintf (path, sizeof path, "%s/victim/keep", base);
  write_text_file (path, "keep\n", 0644);
  snprintf (path, sizeof path, "%s/planted", stale);
  char victim[4096];
  snprintf (victim, sizeof victim, "%s/victim", base);
  cr_assert (symlink (victim, path) == 0, "symlink '%s': %s", path, strerror (errno));
  cr_assert (lchown (path, uid, gid) == 0, "chown '%s': %s", path, strerror (errno));
  snprintf (path, sizeof path, "%s/deep", stale);
  for (int i = 0; i < 40; i++)
    {
      make_dir (path, uid, gid);
      strncat (path, "/d", sizeof path - strlen (path) - 1);
    }
  char live[4096], foreign[4096];
  snprintf (live, sizeof live, "%s/nsbox-runsc-%d-live", base, (int)getpid ());
  make_dir (live, uid, gid);
  snprintf (foreign, sizeof foreign, "%s/nsbox-runsc-%d-foreign", base, (int)job.pid);
  /* Only root can give a directory away. */
  bool root = geteuid () == 0;
  if (root)
    make_dir (foreign, 12345, 12345);
  /* A launcher in another PID namespace: its pid means nothing here (this
   * one is dead here), but it holds its directory's lock. */
  char locked[4096];
  snprintf (locked, sizeof locked, "%s/nsbox-runsc-%d-locked", base, (int)job.pid);
  make_dir (locked, uid, gid);
  int lock_fd = open (locked, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  cr_assert (lock_fd >= 0 && flock (lock_fd, LOCK_EX | LOCK_NB) == 0, "lock '%s': %s", locked,
             strerror (errno));

  struct run_out out;
  run_cli ("pass\n", 5, (const char *const[]){ "--runtime", "runsc", NULL }, &out);
  RUN_ASSERT (&out, out.exit_status == 0, "the next run failed");
  struct stat st;
  RUN_ASSERT (&out, lstat (stale, &st) < 0 && errno == ENOENT,
              "the killed launcher's work directory %s is still there", stale);
  snprintf (path, sizeof path, "%s/victim/keep", base);
  RUN_ASSERT (&out, lstat (path, &st) == 0, "the sweep followed a planted symlink: %s is gone",
              path);
  RUN_ASSERT (&out, lstat (live, &st) == 0, "the sweep removed %s of a live launcher", live);
  RUN_ASSERT (&out, lstat (locked, &st) == 0, "the sweep removed %s, whose lock is held", locked);
  close (lock_fd);
  if (root)
    RUN_ASSERT (&out, lstat (foreign, &st) == 0, "the sweep removed %s, owned by another user",
                foreign);
  run_out_free (&out);
  free (stale);
  remove_tree (base);
  free (base);
}

/* The run's work directory (nsbox-runsc-<launcher>-*) in /dev/shm or /tmp,
 * once its bundle holds config.json; polls. */
static bool
find_runsc_config (pid_t launcher, char *path, size_t size)
{
  char prefix[64];
  snprintf (prefix, sizeof prefix, "nsbox-runsc-%d-", (int)launcher);
  static const char *const bases[] = { "/dev/shm", "/tmp" };
  int polls = (int)harness_scaled (1000);
  for (int i = 0; i < polls; i++)
    {
      for (size_t b = 0; b < sizeof bases / sizeof bases[0]; b++)
        {
          DIR *dir = opendir (bases[b]);
          struct dirent *d;
          while (dir && (d = readdir (dir)))
            if (strncmp (d->d_name, prefix, strlen (prefix)) == 0)
              {
                snprintf (path, size, "%s/%s/bundle/config.json", bases[b], d->d_name);
                if (access (path, F_OK) == 0)
                  {
                    closedir (dir);
                    return true;
                  }
              }
          if (dir)
            closedir (dir);
        }
      nanosleep (&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);
    }
  return false;
}

/* In a child as a host user that is neither the launcher nor gVisor:
 * 0 when neither the work directory nor config.json can be opened, else
 * 1 (directory) or 2 (file). */
static int
stranger_reads (const char *config)
{
  char workdir[4096];
  snprintf (workdir, sizeof workdir, "%s", config);
  *strstr (workdir, "/bundle/config.json") = '\0';
  pid_t pid = fork ();
  cr_assert (pid >= 0);
  if (pid == 0)
    {
      if (setgroups (0, NULL) < 0 || setresgid (12345, 12345, 12345) < 0
          || setresuid (12345, 12345, 12345) < 0)
        _exit (3);
      int fd = open (workdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd >= 0 || errno != EACCES)
        _exit (1);
      fd = open (config, O_RDONLY | O_CLOEXEC);
      _exit (fd >= 0 || errno != EACCES ? 2 : 0);
    }
  int status;
  cr_assert (waitpid (pid, &status, 0) == pid);
  cr_assert (WIFEXITED (status) && WEXITSTATUS (status) != 3, "could not become uid 12345");
  return WEXITSTATUS (status);
}

/* The bundle's config.json holds the command line and the environment
 * (--env values): while the run lasts, another user of the host can open
 * neither it nor the work directory. */
Test (process, runsc_bundle_is_private_to_the_runtime, .timeout = 60)
{
  NSBOX_SKIP_UNLESS (runsc_installed (), "no runsc binary (apt-get install runsc)");
  NSBOX_SKIP_UNLESS (geteuid () == 0, "needs root to act as another user");
  char secret[96];
  make_run_tag (secret, sizeof secret);
  char timeout[32];
  harness_scaled_duration (30.0, timeout, sizeof timeout);
  const char *const args[] = { "--runtime", "runsc", "--timeout", timeout, "--env", secret, NULL };
  /* Long enough to be looked at, on a slow machine too. */
  char code[64];
  snprintf (code, sizeof code, "import time\ntime.sleep(%.1f)\n", harness_scaled (3.0));
  struct run_job job;
  run_cli_spawn (args, true, &job);
  run_job_feed (&job, code, strlen (code));
  char config[4096];
  bool found = find_runsc_config (job.pid, config, sizeof config);
  int stranger = found ? stranger_reads (config) : -1;
  /* The file checked is the run's: it holds the --env value (once
   * written: it is there before its content). */
  char *content = NULL;
  size_t len = 0;
  for (int i = 0, polls = found ? (int)harness_scaled (300) : 0; i < polls; i++)
    {
      free (content);
      content = read_file (config, &len);
      if (!content || memmem (content, len, secret, strlen (secret)))
        break;
      nanosleep (&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);
    }
  struct run_out out;
  run_cli_wait (&job, NULL, 0, &out);
  RUN_ASSERT (&out, found, "no runsc work directory with a config.json appeared");
  RUN_ASSERT (&out, content && memmem (content, len, secret, strlen (secret)),
              "'%s' does not hold the run's --env value", config);
  RUN_ASSERT (&out, stranger == 0, "another user could open the run's %s",
              stranger == 1 ? "work directory" : "config.json");
  RUN_ASSERT (&out, out.exit_status == 0, "expected the run to end normally");
  free (content);
  run_out_free (&out);
}

/* Under runsc a setup failure travels through a report file of the
 * helper's: a program that could write it would forge nsbox's own error.
 * As the default user the program cannot open it; as user 0 it would own
 * it, so runsc refuses user 0. Natively there is no such file. */
static const char forge_report[]
    = "import os\n"
      "try:\n"
      "    fd = os.open('/mnt/.nsbox-report', os.O_WRONLY | os.O_APPEND)\n"
      "except FileNotFoundError:\n"
      "    print('absent')\n"
      "except PermissionError:\n"
      "    print('denied')\n"
      "else:\n"
      "    os.write(fd, b'forged')\n"
      "    print('WROTE')\n";

MODE_TEST (process, the_program_cannot_write_the_runsc_setup_report, .timeout = 30)
{
  struct run_out out;
  run_mode (*mode, forge_report, NULL, &out);
  assert_prints (&out, harness_is_runsc () ? "denied\n" : "absent\n");
  run_out_free (&out);
  const char *const as_root[] = { "--user", "0:0", NULL };
  run_mode (*mode, forge_report, as_root, &out);
  const char *const needles[] = { "user 0", "runsc", NULL };
  assert_refused_by_runsc_else_prints (&out, needles, "absent\n");
  run_out_free (&out);
}

/* Every id the configuration accepts is the program's, under either
 * runtime (runsc's helper parses them itself). */
MODE_TEST (process, a_user_id_above_2_to_the_31_is_the_program_s, .timeout = 30)
{
  const char *const args[] = { "--user", "3000000000:3000000001", NULL };
  struct run_out out;
  run_mode (*mode, "import os\nprint(os.getuid(), os.getgid())\n", args, &out);
  assert_prints (&out, "3000000000 3000000001\n");
  run_out_free (&out);
}
