/* The basic contract of one run: output, exit status, the JSON result, the
 * identity and environment the program sees. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define REPLACEMENT "\xef\xbf\xbd"

MODE_TEST (basics, sum_of_range_prints_45_and_exits_0, .timeout = 30)
{
  struct run_out out;
  run_mode (*mode, "print(sum(range(10)))\n", NULL, &out);
  assert_prints (&out, "45\n");
  RUN_ASSERT (&out, run_json_str (&out, "signal", NULL) == NULL, "expected signal null");
  run_out_free (&out);
}

Test (basics, cli_without_json_passes_stdout_and_exit_code_through, .timeout = 30)
{
  struct run_out out;
  const char *code = "import sys\nprint('to stdout')\nprint('to stderr', file=sys.stderr)\n"
                     "sys.exit(3)\n";
  run_cli_text (code, strlen (code), NULL, &out);
  RUN_ASSERT (&out, out.exit_status == 3, "expected the program's exit status 3");
  RUN_ASSERT (&out, strcmp (out.out, "to stdout\n") == 0, "expected the raw stdout");
  RUN_ASSERT (&out, strcmp (out.err, "to stderr\n") == 0, "expected the raw stderr");
  run_out_free (&out);
}

MODE_TEST (basics, exit_status_of_the_program_is_reported, .timeout = 30)
{
  struct run_out out;
  run_mode (*mode, "import sys\nsys.exit(7)\n", NULL, &out);
  RUN_ASSERT (&out, out.exit_status == 7, "expected exit status 7");
  RUN_ASSERT (&out, run_json_int (&out, "exit_code") == 7, "expected exit_code 7");
  RUN_ASSERT (&out, run_json_str (&out, "signal", NULL) == NULL, "expected signal null");
  run_out_free (&out);
}

MODE_TEST (basics, json_result_has_exactly_the_documented_fields, .timeout = 30)
{
  static const char *const keys[] = { "exit_code",
                                      "signal",
                                      "timed_out",
                                      "oom_killed",
                                      "stdout",
                                      "stderr",
                                      "stdout_truncated",
                                      "stderr_truncated",
                                      "stdout_omitted_bytes",
                                      "stderr_omitted_bytes",
                                      "duration_ms",
                                      "cpu_ms",
                                      "memory_peak_bytes",
                                      "timeout_ms",
                                      "memory_limit_bytes",
                                      "limits",
                                      "runtime",
                                      "served",
                                      "files",
                                      "files_refused",
                                      "quota_refusal",
                                      "egress" };
  static const char *const limit_keys[] = { "memory", "cpus", "pids", "tmp" };
  static const char *const mechanisms[] = { "none", "rlimit", "cgroup1", "cgroup2", "tmpfs" };
  struct run_out out;
  run_mode (*mode, "print('hi')\n", NULL, &out);
  json_t *json = run_json (&out);
  RUN_ASSERT (&out, json_is_object (json), "expected a JSON object");
  RUN_ASSERT (&out, json_object_size (json) == sizeof keys / sizeof keys[0],
              "expected %zu fields, found %zu", sizeof keys / sizeof keys[0],
              json_object_size (json));
  size_t i = 0;
  const char *key;
  json_t *value;
  json_object_foreach (json, key, value)
  {
    RUN_ASSERT (&out, strcmp (key, keys[i]) == 0, "field %zu is '%s', expected '%s'", i, key,
                keys[i]);
    i++;
  }
  RUN_ASSERT (&out, json_is_integer (json_object_get (json, "exit_code")), "exit_code type");
  json_t *sig = json_object_get (json, "signal");
  RUN_ASSERT (&out, json_is_null (sig) || json_is_string (sig), "signal type");
  static const char *const bools[]
      = { "timed_out", "oom_killed", "stdout_truncated", "stderr_truncated" };
  for (size_t b = 0; b < sizeof bools / sizeof bools[0]; b++)
    RUN_ASSERT (&out, json_is_boolean (json_object_get (json, bools[b])), "%s type", bools[b]);
  static const char *const ints[]
      = { "stdout_omitted_bytes", "stderr_omitted_bytes", "duration_ms",       "cpu_ms",
          "memory_peak_bytes",    "timeout_ms",           "memory_limit_bytes" };
  for (size_t n = 0; n < sizeof ints / sizeof ints[0]; n++)
    RUN_ASSERT (&out,
                json_is_integer (json_object_get (json, ints[n]))
                    && json_integer_value (json_object_get (json, ints[n])) >= 0,
                "%s must be a non-negative integer", ints[n]);
  RUN_ASSERT (&out, json_is_string (json_object_get (json, "stdout")), "stdout type");
  static const char *const lists[] = { "files", "files_refused" };
  for (size_t l = 0; l < sizeof lists / sizeof lists[0]; l++)
    RUN_ASSERT (&out,
                json_is_array (json_object_get (json, lists[l]))
                    && json_array_size (json_object_get (json, lists[l])) == 0,
                "%s must be an empty array without output-dir", lists[l]);
  RUN_ASSERT (&out, json_is_string (json_object_get (json, "stderr")), "stderr type");
  RUN_ASSERT (&out, json_is_null (json_object_get (json, "quota_refusal")),
              "quota_refusal must be null for a run no quota refused");
  json_t *limits = json_object_get (json, "limits");
  RUN_ASSERT (&out, json_is_object (limits) && json_object_size (limits) == 4,
              "limits must be an object of 4 fields");
  i = 0;
  json_object_foreach (limits, key, value)
  {
    RUN_ASSERT (&out, strcmp (key, limit_keys[i]) == 0, "limits field %zu is '%s', expected '%s'",
                i, key, limit_keys[i]);
    bool known = false;
    for (size_t m = 0; m < sizeof mechanisms / sizeof mechanisms[0]; m++)
      known = known
              || (json_is_string (value) && strcmp (json_string_value (value), mechanisms[m]) == 0);
    RUN_ASSERT (&out, known, "limits.%s is not a known mechanism", key);
    i++;
  }
  RUN_ASSERT (&out, strcmp (run_json_limit (&out, "tmp"), "tmpfs") == 0, "limits.tmp is tmpfs");
  RUN_ASSERT (&out, strcmp (run_json_str (&out, "runtime", NULL), harness_runtime ()) == 0,
              "runtime is %s", harness_runtime ());
  RUN_ASSERT (&out, strcmp (run_json_str (&out, "served", NULL), "cold") == 0,
              "a run without a pool is served cold");
  run_out_free (&out);
}

MODE_TEST (basics, invalid_utf8_output_becomes_replacement_characters_in_json, .timeout = 30)
{
  struct run_out out;
  /* 0xff: one U+FFFD; the overlong C0 80: two. */
  run_mode (*mode, "import sys\nsys.stdout.buffer.write(b'a\\xffb\\xc0\\x80c\\n')\n", NULL, &out);
  RUN_ASSERT (&out, out.exit_status == 0, "expected exit status 0");
  size_t len;
  const char *s = run_stdout (&out, &len);
  const char *expected = "a" REPLACEMENT "b" REPLACEMENT REPLACEMENT "c\n";
  RUN_ASSERT (&out, len == strlen (expected) && memcmp (s, expected, len) == 0,
              "expected each invalid byte sequence replaced by U+FFFD");
  run_out_free (&out);
}

Test (basics, cli_without_json_passes_invalid_utf8_unchanged, .timeout = 30)
{
  struct run_out out;
  const char *code = "import sys\nsys.stdout.buffer.write(b'a\\xffb\\x00c\\n')\n";
  run_cli_text (code, strlen (code), NULL, &out);
  RUN_ASSERT (&out, out.exit_status == 0, "expected exit status 0");
  RUN_ASSERT (&out,
              out.out_len == 6
                  && memcmp (out.out,
                             "a\xff"
                             "b\0c\n",
                             6)
                         == 0,
              "expected the raw bytes");
  run_out_free (&out);
}

MODE_TEST (basics, program_runs_as_uid_and_gid_65534, .timeout = 30)
{
  struct run_out out;
  run_mode (*mode, "import os\nprint(os.getuid(), os.getgid(), os.geteuid(), os.getegid())\n", NULL,
            &out);
  assert_prints (&out, "65534 65534 65534 65534\n");
  run_out_free (&out);
}

/* Run by root, the sandbox user is host uid/gid 65534, never host root; run
 * by a user, it is that user. One id each, nothing else mapped. */
MODE_TEST (basics, sandbox_ids_map_to_one_unprivileged_host_id, .timeout = 30)
{
  char expected[128];
  snprintf (expected, sizeof expected,
            "uid_map ['65534', '%u', '1']\ngid_map ['65534', '%u', '1']\n",
            (unsigned)sandbox_host_uid (), (unsigned)sandbox_host_gid ());
  /* gVisor: the program sees the sentry's own user namespace, not the
   * host's; the host side (gVisor's processes run as sandbox_host_uid) is
   * checked by observers and no_runsc_process_survives_a_timeout. */
  if (harness_is_runsc ())
    snprintf (expected, sizeof expected,
              "uid_map ['0', '0', '4294967295']\ngid_map ['0', '0', '4294967295']\n");
  struct run_out out;
  run_mode (*mode,
            "print('uid_map', open('/proc/self/uid_map').read().split())\n"
            "print('gid_map', open('/proc/self/gid_map').read().split())\n",
            NULL, &out);
  assert_prints (&out, expected);
  run_out_free (&out);
}

MODE_TEST (basics, hostname_is_nsbox, .timeout = 30)
{
  struct run_out out;
  run_mode (*mode, "import socket\nprint(socket.gethostname())\n", NULL, &out);
  assert_prints (&out, "nsbox\n");
  run_out_free (&out);
}

MODE_TEST (basics, host_environment_is_not_visible, .timeout = 30)
{
  char secret[64];
  snprintf (secret, sizeof secret, "s3cr3t-%d-%ld", (int)getpid (), random ());
  cr_assert (setenv ("NSBOX_TEST_SECRET", secret, 1) == 0);
  const char *code = "import os\n"
                     "print('environ', 'NSBOX_TEST_SECRET' in os.environ)\n"
                     "print('values', list(os.environ.items()))\n"
                     "for p in ('/proc/self/environ', '/proc/1/environ'):\n"
                     "    try:\n"
                     "        print(p, open(p, 'rb').read())\n"
                     "    except OSError as e:\n"
                     "        print(p, 'unreadable', e.errno)\n";
  struct run_out out;
  run_mode (*mode, code, NULL, &out);
  unsetenv ("NSBOX_TEST_SECRET");
  RUN_ASSERT (&out, out.exit_status == 0, "expected exit status 0");
  const char *s = run_stdout (&out, NULL);
  RUN_ASSERT (&out, strstr (s, "environ False\n") != NULL, "NSBOX_TEST_SECRET is in os.environ");
  RUN_ASSERT (&out, strstr (s, "NSBOX_TEST_SECRET") == NULL && strstr (s, secret) == NULL,
              "the host's NSBOX_TEST_SECRET (%s) is visible in the sandbox", secret);
  RUN_ASSERT (&out, strstr (s, "/proc/self/environ b'") != NULL,
              "expected /proc/self/environ to be readable");
  run_out_free (&out);
}
