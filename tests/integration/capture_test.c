/* Output capture and the model-facing text, by effect: a program that
 * floods a stream and then fails keeps its traceback, the omitted count is
 * the bytes the program really wrote (known from the program) less what
 * was kept, no character is split at the seams, and `--format text` renders
 * the same text locally and through `nsbox serve`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"

#define MIB (1u << 20)

/* Writes `mib` MiB of 'x' to stderr, then raises: the traceback is the
 * last thing on stderr. */
static char *
flood_then_raise (unsigned mib)
{
  char *code = NULL;
  cr_assert (asprintf (&code,
                       "import sys\n"
                       "chunk = b'x' * (1 << 20)\n"
                       "for _ in range(%u):\n"
                       "    sys.stderr.buffer.write(chunk)\n"
                       "sys.stderr.flush()\n"
                       "raise ValueError('boom at the very end')\n",
                       mib)
             > 0);
  return code;
}

/* The marker line in `s`: its start (the newline before it when there is
 * one) and length; the count it states in *count. */
static const char *
find_marker (const char *s, size_t len, size_t *marker_len, unsigned long long *count)
{
  const char *m = memmem (s, len, "[nsbox: ", 8);
  if (!m)
    return NULL;
  const char *end = memchr (m, '\n', len - (size_t)(m - s));
  if (!end || sscanf (m, "[nsbox: %llu bytes omitted]", count) != 1)
    return NULL;
  if (m > s && m[-1] == '\n')
    m--;
  *marker_len = (size_t)(end + 1 - m);
  return m;
}

MODE_TEST (capture, a_flood_then_an_exception_keeps_the_traceback_and_counts_the_rest,
           .timeout = 120)
{
  char timeout[32];
  harness_scaled_duration (20, timeout, sizeof timeout);
  const char *const args[] = { "--timeout", timeout, NULL };
  /* The traceback alone, from the same program without the flood. */
  char *quiet = flood_then_raise (0), *loud = flood_then_raise (10);
  struct run_out ref, out;
  run_mode (*mode, quiet, args, &ref);
  size_t tb_len = 0;
  const char *tb = run_stderr (&ref, &tb_len);
  RUN_ASSERT (&ref,
              strstr (tb, "ValueError: boom at the very end\n")
                  && !run_json_bool (&ref, "stderr_truncated"),
              "expected the whole traceback without a flood");

  run_mode (*mode, loud, args, &out);
  RUN_ASSERT (&out, run_json_int (&out, "exit_code") == 1, "expected the exception's exit code 1");
  size_t len = 0;
  const char *err = run_stderr (&out, &len);
  RUN_ASSERT (&out, len >= tb_len && memcmp (err + len - tb_len, tb, tb_len) == 0,
              "stderr must end with the whole traceback");
  RUN_ASSERT (&out, strspn (err, "x") == 32768, "expected the head: half the 65536-byte cap");
  size_t marker_len = 0;
  unsigned long long stated = 0;
  RUN_ASSERT (&out, find_marker (err, len, &marker_len, &stated), "expected the marker line");
  unsigned long long written = 10ull * MIB + tb_len, kept = len - marker_len;
  long long omitted = run_json_int (&out, "stderr_omitted_bytes");
  RUN_ASSERT (&out, run_json_bool (&out, "stderr_truncated"), "expected stderr_truncated");
  RUN_ASSERT (&out, kept == 65536, "expected the cap's 65536 bytes kept, got %llu", kept);
  RUN_ASSERT (&out, (unsigned long long)omitted == written - kept && stated == written - kept,
              "omitted %lld (marker: %llu), expected %llu written less %llu kept", omitted, stated,
              written, kept);
  RUN_ASSERT (&out, run_json_int (&out, "stdout_omitted_bytes") == 0, "stdout lost nothing");
  run_out_free (&ref);
  run_out_free (&out);
  free (quiet);
  free (loud);
}

MODE_TEST (capture, head_mode_keeps_only_the_start, .timeout = 120)
{
  char timeout[32];
  harness_scaled_duration (20, timeout, sizeof timeout);
  const char *const args[] = { "--timeout", timeout, "--output-capture", "head", NULL };
  char *loud = flood_then_raise (2);
  struct run_out out;
  run_mode (*mode, loud, args, &out);
  size_t len = 0;
  const char *err = run_stderr (&out, &len);
  RUN_ASSERT (&out, len == 65536 && strspn (err, "x") == len, "expected the first 65536 bytes");
  RUN_ASSERT (&out,
              (unsigned long long)run_json_int (&out, "stderr_omitted_bytes") > 2ull * MIB - len,
              "expected the rest counted as omitted");
  run_out_free (&out);
  free (loud);
}

/* Byte j of what the program below writes: the unit, then a newline. */
static char
stream_byte (unsigned long long j, unsigned long long written)
{
  static const char unit[] = "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
  return j + 1 == written ? '\n' : unit[j % 9];
}

/* "é€😀" (2, 3 and 4 bytes) repeated; an odd cap puts both cuts inside
 * characters. The JSON form would show a split character as U+FFFD. */
MODE_TEST (capture, no_character_is_split_at_either_seam, .timeout = 60)
{
  const char *const args[] = { "--max-output-bytes", "1001", NULL };
  struct run_out out;
  run_mode (*mode, "print('\\u00e9\\u20ac\\U0001F600' * 100000)\n", args, &out);
  size_t len = 0;
  const char *s = run_stdout (&out, &len);
  RUN_ASSERT (&out, !memmem (s, len, "\xef\xbf\xbd", 3), "a character was split: U+FFFD found");
  size_t marker_len = 0;
  unsigned long long stated = 0;
  const char *m = find_marker (s, len, &marker_len, &stated);
  RUN_ASSERT (&out, m != NULL, "expected the marker line");
  size_t head = (size_t)(m - s), tail = len - head - marker_len;
  unsigned long long written = 9ull * 100000 + 1;
  bool same = true;
  for (size_t i = 0; i < head; i++)
    same = same && s[i] == stream_byte (i, written);
  for (size_t i = 0; i < tail; i++)
    same = same && s[head + marker_len + i] == stream_byte (written - tail + i, written);
  RUN_ASSERT (&out, same, "the head and the tail must be the stream's own start and end");
  RUN_ASSERT (&out, head >= 501 - 3 && tail >= 500 - 3, "at most a character less per side");
  RUN_ASSERT (&out,
              (unsigned long long)run_json_int (&out, "stdout_omitted_bytes")
                      == written - head - tail
                  && stated == written - head - tail,
              "omitted must be the %llu bytes written less the %zu kept", written, head + tail);
  run_out_free (&out);
}

static void
expect_text (struct run_out *out, int status, const char *expected)
{
  RUN_ASSERT (out, out->exit_status == status, "expected exit status %d", status);
  RUN_ASSERT (out, strcmp (out->out, expected) == 0, "expected the text:\n%s", expected);
}

Test (capture, format_text_renders_a_normal_run, .timeout = 30)
{
  struct run_out out;
  const char *const args[] = { "--format", "text", NULL };
  const char *code = "print(sum(range(10)))\n";
  run_cli_text (code, strlen (code), args, &out);
  expect_text (&out, 0, "exit code: 0\n--- stdout ---\n45\n--- stderr ---\n(empty)\n");
  RUN_ASSERT (&out, out.err_len == 0, "nothing on nsbox's stderr");
  run_out_free (&out);
}

Test (capture, format_text_names_the_timeout_in_force, .timeout = 60)
{
  char timeout[32], expected[256];
  /* Long enough for python to start and print under runsc and the other
   * lane's load (1 s scaled by the pass's first measure was not). */
  harness_scaled_duration (3, timeout, sizeof timeout);
  const char *const args[] = { "--format", "text", "--timeout", timeout, NULL };
  const char *code = "print('started', flush=True)\nwhile True: pass\n";
  struct run_out out;
  run_cli_text (code, strlen (code), args, &out);
  /* Written back as nsbox_config_get would: 1000ms is 1s. */
  unsigned long ms = strtoul (timeout, NULL, 10);
  char shown[32];
  snprintf (shown, sizeof shown, ms % 1000 ? "%lums" : "%lus", ms % 1000 ? ms : ms / 1000);
  snprintf (
      expected, sizeof expected,
      "exit code: 137\ntimed out after %s\n--- stdout ---\nstarted\n--- stderr ---\n(empty)\n",
      shown);
  expect_text (&out, 124, expected);
  run_out_free (&out);
}

Test (capture, format_text_says_how_many_bytes_were_omitted, .timeout = 30)
{
  struct run_out out;
  const char *const args[] = { "--format", "text", "--max-output-bytes", "1000", NULL };
  const char *code = "print('a' * 100000)\nimport sys\nsys.exit(3)\n";
  run_cli_text (code, strlen (code), args, &out);
  /* 100001 bytes written, 500 kept at each end. */
  char a500[501];
  memset (a500, 'a', 500);
  a500[500] = '\0';
  char expected[2048];
  snprintf (expected, sizeof expected,
            "exit code: 3\noutput truncated: 99001 bytes omitted from stdout\n--- stdout ---\n"
            "%s\n[nsbox: 99001 bytes omitted]\n%.499s\n--- stderr ---\n(empty)\n",
            a500, a500);
  expect_text (&out, 3, expected);
  run_out_free (&out);
}

/* The same text, by the same code, from a result rebuilt out of the
 * server's JSON: for runs whose text holds no timing. */
Test (capture, format_text_through_the_server_is_the_local_text, .timeout = 300)
{
  char timeout[32];
  /* The normal runs must end well within it under runsc and the other
   * lane's load (1 s scaled was not enough). */
  harness_scaled_duration (3, timeout, sizeof timeout);
  const char *const serve_args[] = { "--timeout", timeout, "--pool-size", "1", NULL };
  struct serve_job s;
  serve_start (serve_args, &s);
  const char *const codes[] = {
    "print(sum(range(10)))\n",
    "print('x' * 100000)\nimport sys\nsys.stderr.write('\\xe9' * 70000)\nraise KeyError('k')\n",
    "print('started', flush=True)\nwhile True: pass\n",
    "import os\nos.kill(os.getpid(), 11)\n",
  };
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
    {
      const char *const local_args[] = { "--format", "text", "--timeout", timeout, NULL };
      struct run_out local, served;
      run_cli_text (codes[i], strlen (codes[i]), local_args, &local);
      const char *const args[] = { "--server", s.server_arg, "--format", "text", NULL };
      struct run_job job;
      run_nsbox_spawn ("run", false, args, false, &job);
      run_cli_wait (&job, codes[i], strlen (codes[i]), &served);
      RUN_ASSERT (&served,
                  served.exit_status == local.exit_status && strcmp (served.out, local.out) == 0,
                  "code %zu: through the server (status %d):\n%s\nlocally (status %d):\n%s", i,
                  served.exit_status, served.out, local.exit_status, local.out);
      RUN_ASSERT (&served, strncmp (served.out, "exit code: ", 11) == 0, "expected the text");
      run_out_free (&local);
      run_out_free (&served);
    }
  char *log = NULL;
  int status = serve_stop (&s, &log);
  cr_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0, "nsbox serve: %s", log);
  free (log);
}

/* The limits in force reach the result on every path: a cold run (CLI and
 * library), and a pool's warm run with and without its own timeout. */
MODE_TEST (capture, the_result_carries_the_timeout_and_memory_limit_in_force, .timeout = 60)
{
  const char *const args[] = { "--timeout", "7s", "--memory", "100m", NULL };
  struct run_out out;
  run_mode (*mode, "print(1)\n", args, &out);
  RUN_ASSERT (&out, run_json_int (&out, "timeout_ms") == 7000, "expected timeout_ms 7000");
  RUN_ASSERT (&out, run_json_int (&out, "memory_limit_bytes") == 100ll << 20,
              "expected memory_limit_bytes of 100m");
  run_out_free (&out);
}

Test (capture, a_pooled_run_carries_its_own_timeout, .timeout = 120)
{
  const char *const args[] = { "--timeout", "7s", "--memory", "100m", NULL };
  struct pool_job job;
  pool_start (args, 1, &job);
  const char *const own[] = { "timeout", "2s", NULL };
  struct run_out with, without;
  cr_assert (pool_wait_ready (&job, 1), "no entry became ready");
  pool_run (&job, "print(1)\n", own, &with);
  cr_assert (pool_wait_ready (&job, 1), "no entry became ready");
  pool_run (&job, "print(1)\n", NULL, &without);
  RUN_ASSERT (&with, strcmp (run_json_str (&with, "served", NULL), "warm") == 0, "served warm");
  RUN_ASSERT (&with, run_json_int (&with, "timeout_ms") == 2000, "expected the run's 2s");
  RUN_ASSERT (&with, run_json_int (&with, "memory_limit_bytes") == 100ll << 20, "expected 100m");
  RUN_ASSERT (&without, run_json_int (&without, "timeout_ms") == 7000, "expected the pool's 7s");
  run_out_free (&with);
  run_out_free (&without);
  pool_stop (&job);
}

Test (capture, a_bad_format_or_a_conflict_with_json_is_refused, .timeout = 30)
{
  static const char *const bad_format[] = { "--format", "xml", NULL };
  static const char *const conflict[] = { "--json", "--format", "text", NULL };
  static const char *const bad_capture[] = { "--output-capture", "tail", NULL };
  static const char *const needles_format[] = { "--format", "'xml'", "plain, json or text", NULL };
  static const char *const needles_conflict[] = { "--json", "--format text", NULL };
  static const char *const needles_capture[]
      = { "output-capture", "'tail'", "head or head-tail", NULL };
  const char *const *const args[] = { bad_format, conflict, bad_capture };
  const char *const *const needles[] = { needles_format, needles_conflict, needles_capture };
  for (size_t i = 0; i < 3; i++)
    {
      struct run_out out;
      run_cli_text ("print(1)\n", 9, args[i], &out);
      assert_refused (&out, needles[i]);
      run_out_free (&out);
    }
}
