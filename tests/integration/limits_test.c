/* Limits: wall-clock timeout, output caps, memory, tasks, and the launcher's
 * own memory under an output flood. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static void
assert_no_cgroup_left (struct run_out *out)
{
  char desc[2048];
  int left = count_nsbox_cgroups (out->pid, desc, sizeof desc);
  RUN_ASSERT (out, left == 0, "%d cgroup(s) of the run left behind: %s", left, desc);
}

/* A run with a `timeout_s` timeout ends within 1 s after it (start, kill
 * and teardown) on the machine the bound was tuned on; that second is
 * scaled by this machine's measured speed. */
static void
assert_ends_soon_after_timeout (struct run_out *out, double timeout_s)
{
  double allowed = timeout_s + harness_scaled (1.0);
  RUN_ASSERT (out, out->seconds < allowed, "took %.2f s, more than the %.1f s timeout + %.2f s",
              out->seconds, timeout_s, allowed - timeout_s);
}

MODE_TEST (limits, timeout_kills_a_busy_loop_within_a_second, .timeout = 30)
{
  struct run_out out;
  const char *const args[] = { "--timeout", "1s", NULL };
  run_mode (*mode, "while True:\n    pass\n", args, &out);
  RUN_ASSERT (&out, run_json_bool (&out, "timed_out"), "expected timed_out true");
  RUN_ASSERT (&out, run_json_int (&out, "exit_code") == 137, "expected exit_code 137");
  const char *sig = run_json_str (&out, "signal", NULL);
  RUN_ASSERT (&out, sig && strcmp (sig, "SIGKILL") == 0, "expected signal \"SIGKILL\"");
  RUN_ASSERT (&out, out.exit_status == 124, "expected exit status 124");
  assert_ends_soon_after_timeout (&out, 1.0);
  assert_no_cgroup_left (&out);
  run_out_free (&out);
}

Test (limits, timeout_without_json_exits_124, .timeout = 60)
{
  struct run_out out;
  /* Long enough for Python (under gVisor too) to print before the kill on
   * a slow machine. */
  char timeout[32];
  double seconds = harness_scaled (1.0);
  harness_scaled_duration (1.0, timeout, sizeof timeout);
  const char *const args[] = { "--timeout", timeout, NULL };
  const char *code = "print('started', flush=True)\nwhile True:\n    pass\n";
  run_cli_text (code, strlen (code), args, &out);
  RUN_ASSERT (&out, out.exit_status == 124, "expected exit status 124");
  RUN_ASSERT (&out, strcmp (out.out, "started\n") == 0, "expected the output before the kill");
  RUN_ASSERT (&out, strstr (out.err, "timed out") != NULL, "expected a note on stderr");
  assert_ends_soon_after_timeout (&out, seconds);
  run_out_free (&out);
}

MODE_TEST (limits, stdout_beyond_max_output_bytes_is_truncated_in_head_mode, .timeout = 30)
{
  struct run_out out;
  const char *const args[] = { "--max-output-bytes", "1024", "--output-capture", "head", NULL };
  run_mode (*mode, "print('a' * 100_000)\n", args, &out);
  RUN_ASSERT (&out, out.exit_status == 0, "expected exit status 0");
  size_t len;
  const char *s = run_stdout (&out, &len);
  RUN_ASSERT (&out, len == 1024, "expected exactly the first 1024 bytes, got %zu", len);
  RUN_ASSERT (&out, strspn (s, "a") == len, "expected only 'a's");
  RUN_ASSERT (&out, run_json_bool (&out, "stdout_truncated"), "expected stdout_truncated true");
  RUN_ASSERT (&out, !run_json_bool (&out, "stderr_truncated"), "expected stderr_truncated false");
  RUN_ASSERT (&out, run_json_int (&out, "stdout_omitted_bytes") == 100001 - 1024,
              "expected the 100001 bytes written less the 1024 kept as omitted");
  RUN_ASSERT (&out, run_json_int (&out, "stderr_omitted_bytes") == 0, "nothing omitted of stderr");
  run_out_free (&out);
}

MODE_TEST (limits, stderr_beyond_max_output_bytes_is_truncated_in_head_mode, .timeout = 30)
{
  struct run_out out;
  const char *const args[] = { "--max-output-bytes", "1024", "--output-capture", "head", NULL };
  run_mode (*mode, "import sys\nsys.stderr.write('e' * 100_000)\nprint('done')\n", args, &out);
  RUN_ASSERT (&out, out.exit_status == 0, "expected exit status 0");
  size_t len;
  run_stderr (&out, &len);
  RUN_ASSERT (&out, len == 1024, "expected exactly 1024 bytes of stderr, got %zu", len);
  RUN_ASSERT (&out, run_json_bool (&out, "stderr_truncated"), "expected stderr_truncated true");
  RUN_ASSERT (&out, !run_json_bool (&out, "stdout_truncated"), "expected stdout_truncated false");
  RUN_ASSERT (&out, strcmp (run_stdout (&out, NULL), "done\n") == 0, "expected stdout intact");
  run_out_free (&out);
}

Test (limits, cli_without_json_caps_raw_output_in_head_mode, .timeout = 30)
{
  struct run_out out;
  const char *const args[] = { "--max-output-bytes", "1024", "--output-capture", "head", NULL };
  const char *code = "print('a' * 100_000)\n";
  run_cli_text (code, strlen (code), args, &out);
  RUN_ASSERT (&out, out.exit_status == 0, "expected exit status 0");
  RUN_ASSERT (&out, out.out_len == 1024, "expected 1024 bytes of stdout, got %zu", out.out_len);
  RUN_ASSERT (&out, strstr (out.err, "stdout truncated") != NULL, "expected a note on stderr");
  run_out_free (&out);
}

/* The launcher keeps the head and the tail (a fixed ring) of the output
 * and counts the rest: its memory must not grow with the output. (The
 * measure also covers the sandbox's processes, which the launcher reaps;
 * python writing 1 MiB blocks stays well below.) */
MODE_TEST (limits, gigabyte_of_output_keeps_launcher_rss_under_16_mb, .timeout = 90)
{
  struct run_out out;
  const char *const args[] = { "--timeout", "20s", "--cpus", "2", NULL };
  run_mode (*mode,
            "import sys\n"
            "b = b'x' * (1 << 20)\n"
            "for _ in range(1024):\n"
            "    sys.stdout.buffer.write(b)\n",
            args, &out);
  run_json (&out);
  RUN_ASSERT (&out, run_json_bool (&out, "stdout_truncated"), "expected stdout_truncated true");
  size_t len;
  run_stdout (&out, &len);
  /* Head-tail by default: the cap's bytes and the marker line between. */
  static const char marker[] = "\n[nsbox: 1073676288 bytes omitted]\n";
  RUN_ASSERT (&out, len == 65536 + strlen (marker),
              "expected the default cap of 65536 bytes and the marker, got %zu", len);
  RUN_ASSERT (&out, run_json_int (&out, "stdout_omitted_bytes") == (1LL << 30) - 65536,
              "expected 1 GiB less the 65536 bytes kept as omitted");
  long grown_kb = out.peak_rss_kb - out.base_rss_kb;
  /* Under runsc the reaped descendants include runsc, gofer and sentry (Go
   * programs of about 30 MB each, whatever the output): the bound covers
   * them, still far below the gigabyte that went through. */
  long bound_mb = harness_is_runsc () ? 64 : 16;
#ifdef __SANITIZE_ADDRESS__
  /* The launcher is built with ASan too: its runtime, shadow memory and
   * quarantine add megabytes that do not grow with the output. */
  bound_mb += 32;
#endif
  RUN_ASSERT (&out, grown_kb < bound_mb * 1024,
              "launcher peak RSS %ld kB (above its start) >= %ld MB", grown_kb, bound_mb);
  run_out_free (&out);
}

/* bytes of b'x' * N are written, so the memory is really used. */
static const char alloc_gigabyte[] = "b = b'x' * (1 << 30)\nprint('allocated', len(b))\n";

/* What stops the allocation follows from what this host offers (the
 * harness's probe, not the result): a memory cgroup kills the program,
 * RLIMIT_AS makes the allocation fail. */
MODE_TEST (limits, gigabyte_allocation_under_128m_is_stopped, .timeout = 60)
{
  struct run_out out;
  const char *const args[] = { "--memory", "128m", "--timeout", "30s", NULL };
  run_mode (*mode, alloc_gigabyte, args, &out);
  const char *mech = harness_expected_mechanism (*mode, "memory");
  assert_limit_mechanisms (&out);
  RUN_ASSERT (&out, strstr (run_stdout (&out, NULL), "allocated") == NULL,
              "1 GiB was allocated under a 128m limit");
  RUN_ASSERT (&out, !run_json_bool (&out, "timed_out"), "expected no timeout");
  if (strcmp (mech, "rlimit") == 0)
    {
      RUN_ASSERT (&out, !run_json_bool (&out, "oom_killed"), "expected oom_killed false (rlimit)");
      RUN_ASSERT (&out, run_json_int (&out, "exit_code") == 1, "expected exit_code 1");
      RUN_ASSERT (&out, strstr (run_stderr (&out, NULL), "MemoryError") != NULL,
                  "expected a MemoryError on stderr (rlimit)");
    }
  else
    {
      RUN_ASSERT (&out, run_json_bool (&out, "oom_killed"), "expected oom_killed (%s)", mech);
      RUN_ASSERT (&out, run_json_int (&out, "exit_code") == 137, "expected exit_code 137");
      const char *sig = run_json_str (&out, "signal", NULL);
      RUN_ASSERT (&out, sig && strcmp (sig, "SIGKILL") == 0, "expected signal \"SIGKILL\"");
      RUN_ASSERT (&out, out.exit_status == 137, "expected exit status 137");
    }
  assert_no_cgroup_left (&out);
  run_out_free (&out);
}

Test (limits, memory_kill_without_json_exits_137, .timeout = 60)
{
  const char *const args[] = { "--memory", "128m", "--timeout", "30s", NULL };
  struct run_out out;
  const char *mech = harness_expected_mechanism (RUN_CLI, "memory");
  run_cli_text (alloc_gigabyte, strlen (alloc_gigabyte), args, &out);
  if (strcmp (mech, "rlimit") != 0)
    {
      RUN_ASSERT (&out, out.exit_status == 137, "expected exit status 137 (%s)", mech);
      RUN_ASSERT (&out, strstr (out.err, "memory limit") != NULL, "expected a note on stderr");
    }
  else
    {
      RUN_ASSERT (&out, out.exit_status == 1, "expected exit status 1 (rlimit)");
      RUN_ASSERT (&out, strstr (out.err, "MemoryError") != NULL, "expected a MemoryError");
    }
  run_out_free (&out);
}

#define FORK_BOMB_PIDS_LIMIT 32

/* A fork bomb with a budget: every process forks until it has made 8
 * children, retrying at once whenever fork fails, then sleeps. Unlimited it
 * stops at 2^8 = 256 processes, 8 times the limit: a build without the
 * limit fails this test without taking the host down. The first process
 * counts the sandbox's tasks in its /proc instead (gVisor's tasks are not
 * host tasks: under runsc only this count exists) and prints each new
 * maximum until it has seen LIMIT tasks and the count has not grown for
 * PLATEAU seconds (or DEADLINE passed: a bomb slower than that fails the
 * test), then "counted", and exits at once: the run ends with it, and
 * nsbox must take the rest of the bomb down. The bomb runs at nice 19, so
 * that the counter gets the CPU quota it shares with 31 spinning processes
 * (in check-vm's slow guest it could not even finish Python's exit
 * before the timeout). Under runsc as root the run stays short
 * on purpose: the host threads of gVisor's ptrace stubs for 32 processes
 * grow towards nsbox's backstop pids cgroup (256 + 32 * pids-limit = 1280
 * tasks; at the former 512 the Sentry panicked within about 5 s, which
 * nsbox now reports as an error: a_dying_gvisor_kernel_is_an_error...). */
static const char fork_bomb_fmt[] = "import os, time\n"
                                    "def tasks():\n"
                                    "    n = 0\n"
                                    "    for p in os.listdir('/proc'):\n"
                                    "        if p.isdigit():\n"
                                    "            try:\n"
                                    "                n += len(os.listdir('/proc/%%s/task' %% p))\n"
                                    "            except OSError:\n"
                                    "                pass\n"
                                    "    return n\n"
                                    "if os.fork() == 0:\n"
                                    "    os.nice(19)\n"
                                    "    budget = 8\n"
                                    "    while budget:\n"
                                    "        try:\n"
                                    "            os.fork()\n"
                                    "            budget -= 1\n"
                                    "        except OSError:\n"
                                    "            pass\n"
                                    "    time.sleep(3600)\n"
                                    "LIMIT, PLATEAU, DEADLINE = %d, %.2f, %.2f\n"
                                    "most = 0\n"
                                    "start = grew = time.monotonic()\n"
                                    "while True:\n"
                                    "    n, now = tasks(), time.monotonic()\n"
                                    "    if n > most:\n"
                                    "        most, grew = n, now\n"
                                    "        print('tasks', n, flush=True)\n"
                                    "    if most >= LIMIT and now - grew >= PLATEAU:\n"
                                    "        break\n"
                                    "    if now - start >= DEADLINE:\n"
                                    "        break\n"
                                    "print('counted', flush=True)\n"
                                    "os._exit(0)\n";

/* The most tasks the program counted from inside (0 when it printed no
 * count). */
static int
counted_inside (struct run_out *out)
{
  const char *s = run_stdout (out, NULL);
  int most = 0;
  for (const char *p = strstr (s, "tasks "); p; p = strstr (p + 1, "tasks "))
    if (atoi (p + 6) > most)
      most = atoi (p + 6);
  return most;
}

/* The sandbox never holds more tasks than pids-limit, counted by observers
 * nsbox has no part in: the host (every task in the sandbox's PID
 * namespace) and the program itself (the only one under gVisor). Both
 * counts include the sandbox's init, as the limit does: in a pids cgroup
 * init joins the run's cgroup before it forks the program; under
 * RLIMIT_NPROC it runs as the sandbox's uid in the sandbox's user
 * namespace, where the kernel counts tasks per (namespace, uid); under
 * gVisor, whose RLIMIT_NPROC counts a task for the user that created it,
 * nsbox leaves room for the helper at PID 1 and the program's first
 * process, both created by uid 0 (runsc_bundle.c). */
MODE_TEST (limits, fork_bomb_never_holds_more_tasks_than_pids_limit, .timeout = 90)
{
  char tag[96], timeout[32], code[sizeof fork_bomb_fmt + 64];
  make_run_tag (tag, sizeof tag);
  /* Only a hang guard: the program ends the run. */
  harness_scaled_duration (20.0, timeout, sizeof timeout);
  /* Half a second without growth once the limit is reached: a bomb not
   * held there grows on at once. Not scaled: see the runsc note above. */
  snprintf (code, sizeof code, fork_bomb_fmt, FORK_BOMB_PIDS_LIMIT, 0.5, harness_scaled (10.0));
  /* Memory enough for 256 processes: under runsc the run's memory cgroup
   * holds gVisor too (about 5 MB a task), and a bomb beyond the limit must
   * be counted, not ended by the memory limit first. */
  const char *const args[]
      = { "--pids-limit", "32", "--memory", "1g", "--timeout", timeout, "--env", tag, NULL };
  struct run_out out;
  struct task_watch *watch = task_watch_start (tag);
  run_mode (*mode, code, args, &out);
  char seen[512];
  int host_most = task_watch_stop (watch, seen, sizeof seen);
  char desc[1024];
  int left = wait_uid_processes_gone (sandbox_host_uid (), tag, 3000, desc, sizeof desc);
  int inside_most = counted_inside (&out);
  cr_log_info ("fork bomb (%s): the host saw %s; the program counted %d tasks",
               run_mode_name (*mode), harness_is_runsc () ? "nothing (gVisor)" : seen, inside_most);
  /* The counts first: a bomb beyond the limit may end the run otherwise
   * (its memory limit, its timeout) before the program is done. */
  if (!harness_is_runsc ())
    {
      RUN_ASSERT (&out, host_most > 0, "the host never saw the sandbox's tasks (%s)", seen);
      RUN_ASSERT (&out, host_most <= FORK_BOMB_PIDS_LIMIT, "the host saw %s under pids-limit %d",
                  seen, FORK_BOMB_PIDS_LIMIT);
    }
  RUN_ASSERT (&out, inside_most <= FORK_BOMB_PIDS_LIMIT,
              "the program counted %d tasks in the sandbox under pids-limit %d", inside_most,
              FORK_BOMB_PIDS_LIMIT);
  RUN_ASSERT (&out, out.exit_status == 0 && strstr (run_stdout (&out, NULL), "counted\n"),
              "expected the program to finish counting and exit 0");
  assert_limit_mechanisms (&out);
  /* The bomb must have pushed against the limit for a count to say
   * anything. */
  RUN_ASSERT (&out, inside_most >= FORK_BOMB_PIDS_LIMIT / 2,
              "the program counted only %d tasks: the bomb did not run", inside_most);
  RUN_ASSERT (&out, harness_is_runsc () || host_most >= FORK_BOMB_PIDS_LIMIT / 2,
              "the host saw at most %s: the bomb did not run", seen);
  RUN_ASSERT (&out, left == 0, "%d process(es) of uid %u left after the run: %s", left,
              (unsigned)sandbox_host_uid (), desc);
  assert_no_cgroup_left (&out);
  run_out_free (&out);
}

/* A small pids-limit holds exactly: natively init, the program and one
 * child make 3. gVisor counts init and the program's first process apart
 * from the sandbox user's tasks (runsc_bundle.c), so runsc cannot hold
 * fewer than 4 exactly: it refuses, never runs with more. */
MODE_TEST (limits, a_pids_limit_of_3_holds_one_child_or_is_refused, .timeout = 30)
{
  const char *const args[] = { "--pids-limit", "3", NULL };
  struct run_out out;
  run_mode (*mode,
            "import os, time\n"
            "n = 0\n"
            "try:\n"
            "    while n < 8:\n"
            "        if os.fork() == 0:\n"
            "            time.sleep(60)\n"
            "        n += 1\n"
            "except OSError:\n"
            "    pass\n"
            "print('forked', n, flush=True)\n"
            "os._exit(0)\n",
            args, &out);
  const char *const needles[] = { "pids-limit 3", "runsc", NULL };
  assert_refused_by_runsc_else_prints (&out, needles, "forked 1\n");
  run_out_free (&out);
}

/* When gVisor's kernel dies under the program, runsc exits with a status
 * of its own (2 for a Go panic), which must not pass for the program's.
 * The Sentry is made to die for real: runsc starts under an RLIMIT_NPROC
 * of 150 (a shell wrapper given as NSBOX_RUNSC) and a fork bomb needs a
 * host thread for each of its processes' stubs, which the Sentry cannot
 * make: it panics ("error initializing first thread"). nsbox must refuse
 * to report an exit status for that run. */
MODE_TEST (limits, a_dying_gvisor_kernel_is_an_error_not_an_exit_status, .timeout = 60)
{
  NSBOX_SKIP_UNLESS (runsc_installed (), "no runsc binary (apt-get install runsc)");
  const char *runsc = getenv ("NSBOX_RUNSC");
  char *saved = runsc && *runsc ? strdup (runsc) : NULL;
  char *dir = make_public_dir ();
  char wrapper[256], text[512];
  snprintf (wrapper, sizeof wrapper, "%s/runsc", dir);
  snprintf (text, sizeof text, "#!/bin/bash\nulimit -u 150\nexec %s \"$@\"\n",
            saved ? saved : "runsc");
  write_text_file (wrapper, text, 0755);
  setenv ("NSBOX_RUNSC", wrapper, 1);
  const char *const args[]
      = { "--runtime", "runsc", "--pids-limit", "32", "--memory", "1g", "--timeout", "20s", NULL };
  const char *const needles[] = { "runtime 'runsc'", "gVisor's kernel failed", NULL };
  struct run_out out;
  run_mode (*mode,
            "import os\n"
            "print('started', flush=True)\n"
            "while True:\n"
            "    try:\n"
            "        os.fork()\n"
            "    except OSError:\n"
            "        pass\n",
            args, &out);
  if (saved)
    setenv ("NSBOX_RUNSC", saved, 1);
  else
    unsetenv ("NSBOX_RUNSC");
  remove_tree (dir);
  free (dir);
  free (saved);
  assert_refused (&out, needles);
  run_out_free (&out);
}

MODE_TEST (limits, no_nsbox_cgroup_is_left_after_runs, .timeout = 30)
{
  NSBOX_SKIP_UNLESS (have_cgroups (), "no cgroup hierarchy is mounted");
  struct run_out out;
  run_mode (*mode, "print('x')\n", NULL, &out);
  RUN_ASSERT (&out, out.exit_status == 0, "expected exit status 0");
  assert_no_cgroup_left (&out);
  run_out_free (&out);
  const char *const args[] = { "--timeout", "500ms", NULL };
  run_mode (*mode, "import time\ntime.sleep(60)\n", args, &out);
  RUN_ASSERT (&out, run_json_bool (&out, "timed_out"), "expected timed_out true");
  assert_no_cgroup_left (&out);
  run_out_free (&out);
}

/* nsbox sets every resource limit of the sandbox, whatever its launcher had
 * (a systemd unit with LimitRTPRIO, LimitMEMLOCK=infinity...): the launcher
 * here starts with its limits raised as far as the harness may. */
MODE_TEST (limits, rlimits_are_nsbox_s_own_whatever_the_launcher_had, .timeout = 30)
{
  static const struct
  {
    const char *name;
    int resource;
    long long soft, hard;
  } table[] = {
    { "RLIMIT_CORE", RLIMIT_CORE, 0, 0 },
    { "RLIMIT_STACK", RLIMIT_STACK, 8 << 20, 8 << 20 },
    { "RLIMIT_NOFILE", RLIMIT_NOFILE, 1024, 4096 },
    { "RLIMIT_MEMLOCK", RLIMIT_MEMLOCK, 64 << 10, 64 << 10 },
    { "RLIMIT_SIGPENDING", RLIMIT_SIGPENDING, 1024, 1024 },
    { "RLIMIT_MSGQUEUE", RLIMIT_MSGQUEUE, 819200, 819200 },
    { "RLIMIT_NICE", RLIMIT_NICE, 0, 0 },
    { "RLIMIT_RTPRIO", RLIMIT_RTPRIO, 0, 0 },
  };
  harness_raise_launcher_rlimits ();
  /* The launcher really has more than the sandbox gets. */
  struct rlimit nofile = harness_raised_rlimit (RLIMIT_NOFILE);
  struct rlimit memlock = harness_raised_rlimit (RLIMIT_MEMLOCK);
  struct rlimit rtprio = harness_raised_rlimit (RLIMIT_RTPRIO);
  cr_assert (nofile.rlim_cur > 4096 && memlock.rlim_cur > (64 << 10),
             "the launcher's limits were not raised (nofile %llu, memlock %llu)",
             (unsigned long long)nofile.rlim_cur, (unsigned long long)memlock.rlim_cur);
  cr_log_info ("launcher: nofile %llu, memlock %llu, rtprio %llu (99 needs CAP_SYS_RESOURCE)",
               (unsigned long long)nofile.rlim_cur, (unsigned long long)memlock.rlim_cur,
               (unsigned long long)rtprio.rlim_cur);
  struct run_out out;
  run_mode (*mode,
            "import ctypes, os, resource\n"
            "for n in ('CORE', 'STACK', 'NOFILE', 'MEMLOCK', 'SIGPENDING', 'MSGQUEUE', 'NICE',\n"
            "          'RTPRIO'):\n"
            "    print('RLIMIT_' + n, *resource.getrlimit(getattr(resource, 'RLIMIT_' + n)))\n"
            "try:\n"
            "    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))\n"
            "    print('SCHED_FIFO allowed')\n"
            "except OSError:\n"
            "    pass\n"
            "libc = ctypes.CDLL(None)\n"
            "buf = ctypes.create_string_buffer(1 << 20)\n"
            "if libc.mlock(buf, 1 << 20) == 0:\n"
            "    print('mlock of 1 MiB allowed')\n",
            NULL, &out);
  RUN_ASSERT (&out, out.exit_status == 0, "expected exit status 0");
  const char *text = run_stdout (&out, NULL);
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    {
      char line[128];
      snprintf (line, sizeof line, "%s %lld %lld\n", table[i].name, table[i].soft, table[i].hard);
      RUN_ASSERT (&out, strstr (text, line) != NULL, "expected \"%.*s\"", (int)strlen (line) - 1,
                  line);
    }
  RUN_ASSERT (&out, !strstr (text, "allowed"), "SCHED_FIFO or mlock beyond the limit was allowed");
  run_out_free (&out);
}
