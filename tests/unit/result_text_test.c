/* The model-facing text of a result (nsbox_result_to_text) and the result
 * rebuilt from its JSON form (nsbox_result_from_json, for --server). */
#include <criterion/criterion.h>

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "error.h"
#include "result.h"

static nsbox_result *
make_result (const char *out, const char *errout)
{
  nsbox_result *r = calloc (1, sizeof *r);
  cr_assert_not_null (r);
  r->stdout_buf = strdup (out);
  r->stdout_len = strlen (out);
  r->stderr_buf = strdup (errout);
  r->stderr_len = strlen (errout);
  r->runtime = "native";
  r->timeout_ms = 5000;
  r->memory_limit_bytes = 256u << 20;
  return r;
}

static void
expect_text (const nsbox_result *r, const char *expected)
{
  struct nsbox_error *err = NULL;
  char *text = nsbox_result_to_text (r, &err);
  cr_assert_not_null (text, "%s", nsbox_error_message (err));
  cr_assert_str_eq (text, expected);
  free (text);
}

Test (result_text, normal_exit_shows_the_code_and_both_streams, .timeout = 5)
{
  nsbox_result *r = make_result ("45\n", "");
  expect_text (r, "exit code: 0\n--- stdout ---\n45\n--- stderr ---\n(empty)\n");
  nsbox_result_free (r);
}

Test (result_text, a_stream_without_final_newline_gets_one, .timeout = 5)
{
  nsbox_result *r = make_result ("", "oops");
  r->exit_code = 1;
  expect_text (r, "exit code: 1\n--- stdout ---\n(empty)\n--- stderr ---\noops\n");
  nsbox_result_free (r);
}

Test (result_text, timeout_is_named_with_its_limit, .timeout = 5)
{
  nsbox_result *r = make_result ("started\n", "");
  r->exit_code = 137;
  r->signal = SIGKILL;
  r->timed_out = true;
  r->timeout_ms = 1500;
  expect_text (r, "exit code: 137\ntimed out after 1500ms\n--- stdout ---\nstarted\n"
                  "--- stderr ---\n(empty)\n");
  nsbox_result_free (r);
}

Test (result_text, memory_kill_is_named_with_its_limit, .timeout = 5)
{
  nsbox_result *r = make_result ("", "");
  r->exit_code = 137;
  r->signal = SIGKILL;
  r->oom_killed = true;
  expect_text (r, "exit code: 137\nkilled: memory limit 256m exceeded\n--- stdout ---\n(empty)\n"
                  "--- stderr ---\n(empty)\n");
  nsbox_result_free (r);
}

Test (result_text, a_signal_is_named_by_number_and_name, .timeout = 5)
{
  nsbox_result *r = make_result ("", "");
  r->exit_code = 128 + SIGSEGV;
  r->signal = SIGSEGV;
  expect_text (r, "exit code: 139\nkilled by signal 11 (SIGSEGV)\n--- stdout ---\n(empty)\n"
                  "--- stderr ---\n(empty)\n");
  nsbox_result_free (r);
}

Test (result_text, truncation_says_how_many_bytes_each_stream_lost, .timeout = 5)
{
  nsbox_result *r = make_result ("ab\n[nsbox: 99 bytes omitted]\nyz\n", "e");
  r->stdout_truncated = r->stderr_truncated = true;
  r->stdout_omitted = 99;
  r->stderr_omitted = 7;
  expect_text (r, "exit code: 0\n"
                  "output truncated: 99 bytes omitted from stdout\n"
                  "output truncated: 7 bytes omitted from stderr\n"
                  "--- stdout ---\nab\n[nsbox: 99 bytes omitted]\nyz\n"
                  "--- stderr ---\ne\n");
  nsbox_result_free (r);
}

Test (result_text, invalid_utf8_and_nul_become_replacement_characters, .timeout = 5)
{
  nsbox_result *r = make_result ("", "");
  free (r->stdout_buf);
  r->stdout_buf = malloc (5);
  memcpy (r->stdout_buf, "a\xff\0b\n", 5);
  r->stdout_len = 5;
  expect_text (r, "exit code: 0\n--- stdout ---\na\xef\xbf\xbd\xef\xbf\xbd"
                  "b\n--- stderr ---\n(empty)\n");
  nsbox_result_free (r);
}

Test (result_text, egress_says_how_many_connections_each_refusal_and_the_limit, .timeout = 5)
{
  nsbox_result *r = make_result ("", "");
  json_error_t jerr;
  r->egress = json_loads (
      "{\"connections\": 8, \"refused\": 7, \"limit\": \"egress-bytes\", \"log\": ["
      "{\"decision\": \"allowed\", \"reason\": \"closed\"},"
      "{\"decision\": \"refused\", \"reason\": \"a.test is not on the egress allowlist\"},"
      "{\"decision\": \"refused\", \"reason\": \"b\\nc\"},"
      "{\"decision\": \"refused\", \"reason\": \"3\"},"
      "{\"decision\": \"refused\", \"reason\": \"4\"},"
      "{\"decision\": \"refused\", \"reason\": \"5\"},"
      "{\"decision\": \"refused\", \"reason\": \"6\"}]}",
      0, &jerr);
  cr_assert_not_null (r->egress, "%s", jerr.text);
  expect_text (r, "exit code: 0\n"
                  "egress: 8 connections, 7 refused\n"
                  "egress refused: a.test is not on the egress allowlist\n"
                  "egress refused: b?c\n"
                  "egress refused: 3\n"
                  "egress refused: 4\n"
                  "egress refused: 5\n"
                  "egress refused: (more)\n"
                  "egress limit reached: egress-bytes\n"
                  "--- stdout ---\n(empty)\n--- stderr ---\n(empty)\n");
  json_decref (r->egress);
  r->egress
      = json_loads ("{\"connections\": 1, \"refused\": 0, \"limit\": null, \"log\": []}", 0, &jerr);
  expect_text (r, "exit code: 0\negress: 1 connection, 0 refused\n"
                  "--- stdout ---\n(empty)\n--- stderr ---\n(empty)\n");
  nsbox_result_free (r);
}

Test (result_text, no_result_is_an_error, .timeout = 5)
{
  struct nsbox_error *err = NULL;
  cr_assert_null (nsbox_result_to_text (NULL, &err));
  cr_assert_eq (nsbox_error_errno (err), EINVAL);
  nsbox_error_free (err);
}

static char *
to_json (const nsbox_result *r)
{
  struct nsbox_error *err = NULL;
  char *json = nsbox_result_to_json (r, &err);
  cr_assert_not_null (json, "%s", nsbox_error_message (err));
  return json;
}

Test (result_text, json_rebuilds_the_same_result, .timeout = 5)
{
  nsbox_result *r = make_result ("out\n[nsbox: 12 bytes omitted]\nx", "err\n");
  r->exit_code = 128 + SIGRTMIN + 2;
  r->signal = SIGRTMIN + 2;
  r->timed_out = true;
  r->oom_killed = true;
  r->stdout_truncated = true;
  r->stdout_omitted = 12;
  r->duration_ms = 1234;
  r->cpu_ms = 99;
  r->memory_peak_bytes = 4096;
  r->limits[NSBOX_LIMIT_MEMORY] = NSBOX_MECH_CGROUP2;
  r->limits[NSBOX_LIMIT_TMP] = NSBOX_MECH_TMPFS;
  r->runtime = "runsc";
  r->warm = true;
  char *json = to_json (r);
  nsbox_result *back = NULL;
  struct nsbox_error *err = NULL;
  cr_assert_eq (nsbox_result_from_json (json, strlen (json), &back, &err), 0, "%s",
                nsbox_error_message (err));
  char *again = to_json (back);
  cr_assert_str_eq (again, json);
  char *t1 = nsbox_result_to_text (r, NULL), *t2 = nsbox_result_to_text (back, NULL);
  cr_assert_str_eq (t1, t2);
  free (t1);
  free (t2);
  free (again);
  free (json);
  nsbox_result_free (back);
  nsbox_result_free (r);
}

Test (result_text, json_without_the_required_members_is_refused, .timeout = 5)
{
  static const char *const bad[] = {
    "[]",
    "{\"stdout\":\"\",\"stderr\":\"\"}",
    "{\"exit_code\":0,\"stderr\":\"\"}",
    "{\"exit_code\":0,\"stdout\":\"\",\"stderr\":\"\",\"timed_out\":1}",
    "{\"exit_code\":0,\"stdout\":\"\",\"stderr\":\"\",\"stdout_omitted_bytes\":-1}",
    "{\"exit_code\":0,\"stdout\":\"\",\"stderr\":\"\",\"signal\":\"SIGNOPE\"}",
    "not json",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      nsbox_result *r = (nsbox_result *)&bad; /* never written on failure */
      struct nsbox_error *err = NULL;
      cr_assert_lt (nsbox_result_from_json (bad[i], strlen (bad[i]), &r, &err), 0, "%s", bad[i]);
      cr_assert_eq (nsbox_error_errno (err), EBADMSG, "%s", bad[i]);
      cr_assert_eq ((void *)r, (void *)&bad);
      nsbox_error_free (err);
    }
}

Test (result_text, a_refused_run_says_what_and_until_when, .timeout = 5)
{
  nsbox_result *r = nsbox_result_refused ("cpu-time", "10m per 1h", 61200, 5000);
  cr_assert_not_null (r);
  expect_text (r, "refused: this session's quota cpu-time (10m per 1h) is used up; retry in 62s\n"
                  "the code did not run (no sandbox was started)\n");
  nsbox_result_free (r);
  r = nsbox_result_refused ("concurrent", "2 at once", 250, 5000);
  expect_text (r,
               "refused: this session's quota concurrent (2 at once) is used up; retry in 250ms\n"
               "the code did not run (no sandbox was started)\n");
  nsbox_result_free (r);
}
