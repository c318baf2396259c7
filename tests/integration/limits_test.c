/* Limits: wall-clock timeout, output caps, memory, tasks, and the launcher's
 * own memory under an output flood. */
#include <signal.h>
#include <stdio.h>
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

Test (limits, timeout_without_json_exits_124, .timeout = 30)
{
  struct run_out out;
  const char *const args[] = { "--timeout", "1s", NULL };
  const char *code = "print('started', flush=True)\nwhile True:\n    pass\n";
  run_cli_text (code, strlen (code), args, &out);
  RUN_ASSERT (&out, out.exit_status == 124, "expected exit status 124");
  RUN_ASSERT (&out, strcmp (out.out, "started\n") == 0, "expected the output before the kill");
  RUN_ASSERT (&out, strstr (out.err, "timed out") != NULL, "expected a note on stderr");
  assert_ends_soon_after_timeout (&out, 1.0);
  run_out_free (&out);
}

MODE_TEST (limits, stdout_beyond_max_output_bytes_is_truncated, .timeout = 30)
{
  struct run_out out;
  const char *const args[] = { "--max-output-bytes", "1024", NULL };
  run_mode (*mode, "print('a' * 100_000)\n", args, &out);
  RUN_ASSERT (&out, out.exit_status == 0, "expected exit status 0");
  size_t len;
  const char *s = run_stdout (&out, &len);
  RUN_ASSERT (&out, len == 1024, "expected exactly the first 1024 bytes, got %zu", len);
  RUN_ASSERT (&out, strspn (s, "a") == len, "expected only 'a's");
  RUN_ASSERT (&out, run_json_bool (&out, "stdout_truncated"), "expected stdout_truncated true");
  RUN_ASSERT (&out, !run_json_bool (&out, "stderr_truncated"), "expected stderr_truncated false");
  run_out_free (&out);
}

MODE_TEST (limits, stderr_beyond_max_output_bytes_is_truncated, .timeout = 30)
{
  struct run_out out;
  const char *const args[] = { "--max-output-bytes", "1024", NULL };
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

Test (limits, cli_without_json_caps_raw_output, .timeout = 30)
{
  struct run_out out;
  const char *const args[] = { "--max-output-bytes", "1024", NULL };
  const char *code = "print('a' * 100_000)\n";
  run_cli_text (code, strlen (code), args, &out);
  RUN_ASSERT (&out, out.exit_status == 0, "expected exit status 0");
  RUN_ASSERT (&out, out.out_len == 1024, "expected 1024 bytes of stdout, got %zu", out.out_len);
  RUN_ASSERT (&out, strstr (out.err, "stdout truncated") != NULL, "expected a note on stderr");
  run_out_free (&out);
}

/* The launcher reads and discards beyond the cap: its memory must not grow
 * with the output. (The measure also covers the sandbox's processes, which
 * the launcher reaps; python writing 1 MiB blocks stays well below.) */
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
  RUN_ASSERT (&out, len == 65536, "expected the default cap of 65536 bytes, got %zu", len);
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

MODE_TEST (limits, fork_bomb_is_contained_and_leaves_no_process, .timeout = 60)
{
  char tag[96];
  make_run_tag (tag, sizeof tag);
  const char *const args[] = { "--pids-limit", "32", "--timeout", "3s", "--env", tag, NULL };
  struct run_out out;
  run_mode (*mode,
            "import os\n"
            "while True:\n"
            "  try:\n"
            "    os.fork()\n"
            "  except OSError:\n"
            "    pass\n",
            args, &out);
  char desc[1024];
  int left = wait_uid_processes_gone (sandbox_host_uid (), tag, 3000, desc, sizeof desc);
  RUN_ASSERT (&out, out.exit_status != 0 && out.exit_status != 125,
              "expected the run to end by timeout or error");
  RUN_ASSERT (&out, out.json != NULL, "expected a result");
  RUN_ASSERT (&out, strcmp (run_json_limit (&out, "pids"), "none") != 0,
              "the pids limit was not enforced");
  RUN_ASSERT (&out, left == 0, "%d process(es) of uid %u left after the run: %s", left,
              (unsigned)sandbox_host_uid (), desc);
  assert_no_cgroup_left (&out);
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
