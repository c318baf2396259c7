/* What nsbox refuses to run, and how it says so: exit status 125 and one
 * clear line on stderr, before anything starts. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"

static void
assert_setting_refused (enum run_mode mode, const char *key, const char *value)
{
  char flag[64], quoted_key[64], quoted_value[64];
  snprintf (flag, sizeof flag, "--%s", key);
  snprintf (quoted_key, sizeof quoted_key, "'%s'", key);
  snprintf (quoted_value, sizeof quoted_value, "'%s'", value);
  const char *const args[] = { flag, value, NULL };
  const char *const needles[] = { quoted_key, quoted_value, NULL };
  struct run_out out;
  run_mode (mode, "print('ran')\n", args, &out);
  assert_refused (&out, needles);
  run_out_free (&out);
}

Test (config, unknown_flag_is_refused, .timeout = 30)
{
  const char *const args[] = { "--no-such-flag", "1", NULL };
  const char *const needles[] = { "--no-such-flag", NULL };
  struct run_out out;
  run_cli ("print('ran')\n", 13, args, &out);
  assert_refused (&out, needles);
  run_out_free (&out);
}

MODE_TEST (config, negative_memory_is_refused, .timeout = 30)
{
  assert_setting_refused (*mode, "memory", "-1");
}

MODE_TEST (config, zero_cpus_is_refused, .timeout = 30)
{
  assert_setting_refused (*mode, "cpus", "0");
}

MODE_TEST (config, zero_timeout_is_refused, .timeout = 30)
{
  assert_setting_refused (*mode, "timeout", "0s");
}

MODE_TEST (config, tmp_size_with_unknown_unit_is_refused, .timeout = 30)
{
  assert_setting_refused (*mode, "tmp-size", "10x");
}

MODE_TEST (config, yaml_with_unknown_key_is_refused_with_its_position, .timeout = 30)
{
  char *dir = make_public_dir ();
  char path[PATH_MAX], position[PATH_MAX + 16];
  snprintf (path, sizeof path, "%s/nsbox.yaml", dir);
  write_text_file (path, "timeout: 2s\nbogus_key: 1\n", 0644);
  snprintf (position, sizeof position, "%s:2:1", path);
  const char *const args[] = { "--config", path, NULL };
  const char *const needles[] = { position, "bogus_key", NULL };
  struct run_out out;
  run_mode (*mode, "print('ran')\n", args, &out);
  remove_tree (dir);
  free (dir);
  assert_refused (&out, needles);
  run_out_free (&out);
}

MODE_TEST (config, missing_rootfs_is_refused_by_name, .timeout = 30)
{
  const char *const args[] = { "--rootfs", "/nonexistent/nsbox-rootfs", NULL };
  const char *const needles[] = { "/nonexistent/nsbox-rootfs", NULL };
  struct run_out out;
  run_mode (*mode, "print('ran')\n", args, &out);
  assert_refused (&out, needles);
  run_out_free (&out);
}

MODE_TEST (config, rootfs_without_tmp_is_refused, .timeout = 30)
{
  char *dir = make_public_dir ();
  char sub[PATH_MAX];
  snprintf (sub, sizeof sub, "%s/proc", dir);
  cr_assert (mkdir (sub, 0755) == 0);
  snprintf (sub, sizeof sub, "%s/dev", dir);
  cr_assert (mkdir (sub, 0755) == 0);
  const char *const args[] = { "--rootfs", dir, NULL };
  const char *const needles[] = { dir, "'/tmp'", NULL };
  struct run_out out;
  run_mode (*mode, "print('ran')\n", args, &out);
  remove_tree (dir);
  assert_refused (&out, needles);
  free (dir);
  run_out_free (&out);
}

/* Asked for explicitly, an unusable runsc is an error, never a fallback. */
MODE_TEST (config, runsc_runtime_without_runsc_is_refused, .timeout = 30)
{
  setenv ("NSBOX_RUNSC", "/nonexistent/runsc", 1);
  const char *const args[] = { "--runtime", "runsc", NULL };
  const char *const needles[] = { "runtime 'runsc'", "/nonexistent/runsc", NULL };
  struct run_out out;
  run_mode (*mode, "print('ran')\n", args, &out);
  assert_refused (&out, needles);
  run_out_free (&out);
  unsetenv ("NSBOX_RUNSC");
}

MODE_TEST (config, auto_runtime_without_runsc_runs_native, .timeout = 30)
{
  setenv ("NSBOX_RUNSC", "/nonexistent/runsc", 1);
  const char *const args[] = { "--runtime", "auto", NULL };
  struct run_out out;
  run_mode (*mode, "print('ran')\n", args, &out);
  assert_prints (&out, "ran\n");
  RUN_ASSERT (&out, strcmp (run_json_str (&out, "runtime", NULL), "native") == 0,
              "runtime is native");
  run_out_free (&out);
  unsetenv ("NSBOX_RUNSC");
}

MODE_TEST (config, auto_runtime_with_a_working_runsc_runs_runsc, .timeout = 60)
{
  NSBOX_SKIP_UNLESS (runsc_installed (), "no runsc binary (apt-get install runsc)");
  const char *const args[] = { "--runtime", "auto", NULL };
  struct run_out out;
  run_mode (*mode, "print('ran')\n", args, &out);
  assert_prints (&out, "ran\n");
  RUN_ASSERT (&out, strcmp (run_json_str (&out, "runtime", NULL), "runsc") == 0,
              "runtime is runsc");
  run_out_free (&out);
}

MODE_TEST (config, nonexistent_command_reports_the_failed_exec, .timeout = 30)
{
  const char *const args[] = { "--", "/nonexistent", NULL };
  struct run_out out;
  run_mode (*mode, "print('ran')\n", args, &out);
  assert_refused (&out, NULL);
  RUN_ASSERT (
      &out,
      strcmp (out.err, "nsbox: sandbox setup: execute '/nonexistent': No such file or directory\n")
          == 0,
      "expected the exact message");
  /* A sandbox was being set up: the run's failure, not the input's. */
  if (*mode == RUN_CLI)
    RUN_ASSERT (&out, refusal_stage (&out) && strcmp (refusal_stage (&out), "run") == 0,
                "expected the JSON error's stage \"run\"");
  run_out_free (&out);
}

MODE_TEST (config, a_runs_own_limits_may_only_lower_the_configured_ones, .timeout = 30)
{
  if (*mode != RUN_CLI)
    return; /* --run-timeout is a flag of nsbox run */
  const char *const longer[] = { "--timeout", "2s", "--run-timeout", "1h", NULL };
  struct run_out out;
  run_mode (*mode, "print('ran')\n", longer, &out);
  const char *const needles[] = { "--run-timeout 1h is longer than the configured 2s", NULL };
  assert_refused (&out, needles);
  RUN_ASSERT (&out, refusal_stage (&out) && strcmp (refusal_stage (&out), "input") == 0,
              "expected the JSON error's stage \"input\"");
  run_out_free (&out);
  const char *const shorter[] = { "--run-timeout", "1s", NULL };
  run_mode (*mode, "import time\ntime.sleep(30)\n", shorter, &out);
  RUN_ASSERT (&out, run_json_bool (&out, "timed_out") && out.seconds < harness_scaled (10),
              "expected --run-timeout 1s to time the run out");
  run_out_free (&out);
}
