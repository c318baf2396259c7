/* The JSON form of a result and the UTF-8 repair behind it. */
#include <criterion/criterion.h>

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "error.h"
#include "result.h"

#define REPLACEMENT "\xef\xbf\xbd"

static char *
copy_bytes (const char *bytes, size_t len)
{
  char *copy = malloc (len ? len : 1);
  cr_assert_not_null (copy);
  if (len)
    memcpy (copy, bytes, len);
  return copy;
}

static nsbox_result *
make_result (const char *out, size_t out_len, const char *errout, size_t err_len)
{
  nsbox_result *result = calloc (1, sizeof *result);
  cr_assert_not_null (result);
  result->stdout_buf = copy_bytes (out, out_len);
  result->stdout_len = out_len;
  result->stderr_buf = copy_bytes (errout, err_len);
  result->stderr_len = err_len;
  result->runtime = "native";
  return result;
}

static char *
encode (const nsbox_result *result)
{
  struct nsbox_error *err = NULL;
  char *text = nsbox_result_to_json (result, &err);
  cr_assert_not_null (text, "nsbox_result_to_json: %s", nsbox_error_message (err));
  cr_assert_null (err);
  return text;
}

static json_t *
decode (const char *text)
{
  json_error_t error;
  json_t *value = json_loads (text, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &error);
  cr_assert_not_null (value, "invalid json at %d:%d: %s", error.line, error.column, error.text);
  return value;
}

/* The stdout member of the JSON encoding of a result with this stdout. */
static json_t *
stdout_through_json (const char *bytes, size_t len, char **text_out)
{
  nsbox_result *result = make_result (bytes, len, "", 0);
  char *text = encode (result);
  nsbox_result_free (result);
  json_t *root = decode (text);
  json_t *out = json_incref (json_object_get (root, "stdout"));
  json_decref (root);
  cr_assert (json_is_string (out));
  if (text_out)
    *text_out = text;
  else
    free (text);
  return out;
}

static void
assert_sanitized (const char *in, size_t in_len, const char *expected, size_t expected_len)
{
  char *out = NULL;
  size_t out_len = 0;
  cr_assert_eq (nsbox_utf8_sanitize (in, in_len, &out, &out_len), 0);
  cr_assert_eq (out_len, expected_len, "length %zu, expected %zu", out_len, expected_len);
  cr_assert_eq (memcmp (out, expected, expected_len), 0);
  cr_assert_eq (out[out_len], '\0');
  free (out);

  json_t *value = stdout_through_json (in, in_len, NULL);
  cr_assert_eq (json_string_length (value), expected_len);
  cr_assert_eq (memcmp (json_string_value (value), expected, expected_len), 0);
  json_decref (value);
}

#define ASSERT_SANITIZED(in, expected)                                                             \
  assert_sanitized ((in), sizeof (in) - 1, (expected), sizeof (expected) - 1)

Test (result, json_has_documented_keys_in_order_with_their_values, .timeout = 5)
{
  static const char *const keys[] = {
    "exit_code",
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
    "egress",
  };
  static const char *const limit_keys[] = { "memory", "cpus", "pids", "tmp" };

  nsbox_result *result = make_result ("hello\n", 6, "oops\n", 5);
  result->exit_code = 3;
  result->timed_out = true;
  result->oom_killed = false;
  result->stdout_truncated = false;
  result->stderr_truncated = true;
  result->stderr_omitted = 4321;
  result->timeout_ms = 5000;
  result->memory_limit_bytes = 268435456;
  result->duration_ms = 1234;
  result->cpu_ms = 567;
  result->memory_peak_bytes = 8388608;
  result->limits[NSBOX_LIMIT_MEMORY] = NSBOX_MECH_CGROUP2;
  result->limits[NSBOX_LIMIT_CPUS] = NSBOX_MECH_RLIMIT;
  result->limits[NSBOX_LIMIT_PIDS] = NSBOX_MECH_CGROUP1;
  result->limits[NSBOX_LIMIT_TMP] = NSBOX_MECH_TMPFS;
  result->runtime = "runsc";
  result->warm = true;

  char *text = encode (result);
  nsbox_result_free (result);
  cr_assert_eq (strncmp (text, "{\"exit_code\":3,", 15), 0, "starts as %.40s", text);
  cr_assert_null (strchr (text, '\n'), "compact output has no newline");
  json_t *root = decode (text);

  size_t i = 0;
  const char *key;
  json_t *value;
  json_object_foreach (root, key, value)
  {
    cr_assert_lt (i, sizeof keys / sizeof keys[0], "extra key '%s'", key);
    cr_assert_str_eq (key, keys[i]);
    i++;
  }
  cr_assert_eq (i, sizeof keys / sizeof keys[0]);

  cr_assert_eq (json_integer_value (json_object_get (root, "exit_code")), 3);
  cr_assert (json_is_null (json_object_get (root, "signal")));
  cr_assert (json_is_true (json_object_get (root, "timed_out")));
  cr_assert (json_is_false (json_object_get (root, "oom_killed")));
  cr_assert_str_eq (json_string_value (json_object_get (root, "stdout")), "hello\n");
  cr_assert_str_eq (json_string_value (json_object_get (root, "stderr")), "oops\n");
  cr_assert (json_is_false (json_object_get (root, "stdout_truncated")));
  cr_assert (json_is_true (json_object_get (root, "stderr_truncated")));
  cr_assert (json_is_integer (json_object_get (root, "stdout_omitted_bytes")));
  cr_assert_eq (json_integer_value (json_object_get (root, "stdout_omitted_bytes")), 0);
  cr_assert_eq (json_integer_value (json_object_get (root, "stderr_omitted_bytes")), 4321);
  cr_assert_eq (json_integer_value (json_object_get (root, "timeout_ms")), 5000);
  cr_assert_eq (json_integer_value (json_object_get (root, "memory_limit_bytes")), 268435456);
  cr_assert_eq (json_integer_value (json_object_get (root, "duration_ms")), 1234);
  cr_assert_eq (json_integer_value (json_object_get (root, "cpu_ms")), 567);
  cr_assert_eq (json_integer_value (json_object_get (root, "memory_peak_bytes")), 8388608);
  cr_assert_str_eq (json_string_value (json_object_get (root, "runtime")), "runsc");
  cr_assert_str_eq (json_string_value (json_object_get (root, "served")), "warm");

  json_t *limits = json_object_get (root, "limits");
  cr_assert (json_is_object (limits));
  i = 0;
  json_object_foreach (limits, key, value)
  {
    cr_assert_lt (i, sizeof limit_keys / sizeof limit_keys[0], "extra limit '%s'", key);
    cr_assert_str_eq (key, limit_keys[i]);
    i++;
  }
  cr_assert_eq (i, sizeof limit_keys / sizeof limit_keys[0]);
  cr_assert_str_eq (json_string_value (json_object_get (limits, "memory")), "cgroup2");
  cr_assert_str_eq (json_string_value (json_object_get (limits, "cpus")), "rlimit");
  cr_assert_str_eq (json_string_value (json_object_get (limits, "pids")), "cgroup1");
  cr_assert_str_eq (json_string_value (json_object_get (limits, "tmp")), "tmpfs");

  json_decref (root);
  free (text);
}

Test (result, a_live_sandbox_run_ends_with_its_four_members, .timeout = 5)
{
  nsbox_result *result = make_result ("", 0, "", 0);
  result->in_sandbox = true;
  result->sandbox_run = 3;
  snprintf (result->sandbox_id, sizeof result->sandbox_id, "%s",
            "0123456789abcdef0123456789abcdef");
  result->value = strdup ("'caf\xc3\xa9' \xff");
  result->value_len = strlen (result->value);
  cr_assert_str_eq (nsbox_result_value (result, NULL), "'caf\xc3\xa9' \xff");
  cr_assert_str_eq (nsbox_result_sandbox_id (result), "0123456789abcdef0123456789abcdef");
  cr_assert_eq (nsbox_result_sandbox_run (result), 3);
  cr_assert_not (nsbox_result_sandbox_lost (result));
  char *text = encode (result);
  json_t *root = decode (text);
  static const char *const tail[]
      = { "egress", "value", "sandbox_id", "sandbox_run", "sandbox_lost" };
  size_t n = json_object_size (root), i = 0;
  const char *key;
  json_t *value;
  json_object_foreach (root, key, value)
  {
    if (i + 5 >= n)
      cr_assert_str_eq (key, tail[i + 5 - n]);
    i++;
  }
  /* Valid UTF-8 kept, an invalid byte replaced, as for stdout. */
  cr_assert_str_eq (json_string_value (json_object_get (root, "value")),
                    "'caf\xc3\xa9' " REPLACEMENT);
  cr_assert_eq (json_integer_value (json_object_get (root, "sandbox_run")), 3);
  cr_assert (json_is_false (json_object_get (root, "sandbox_lost")));
  json_decref (root);
  free (text);
  /* A single run has none of them. */
  result->in_sandbox = false;
  text = encode (result);
  nsbox_result_free (result);
  root = decode (text);
  cr_assert_null (json_object_get (root, "value"));
  cr_assert_null (json_object_get (root, "sandbox_id"));
  cr_assert_null (nsbox_result_sandbox_id (NULL));
  json_decref (root);
  free (text);
}

Test (result, signal_9_is_named_sigkill, .timeout = 5)
{
  nsbox_result *result = make_result ("", 0, "", 0);
  result->signal = SIGKILL;
  result->exit_code = 128 + SIGKILL;
  char *text = encode (result);
  nsbox_result_free (result);
  json_t *root = decode (text);
  cr_assert_str_eq (json_string_value (json_object_get (root, "signal")), "SIGKILL");
  cr_assert_eq (json_integer_value (json_object_get (root, "exit_code")), 137);
  json_decref (root);
  free (text);
}

Test (result, signal_0_is_null, .timeout = 5)
{
  nsbox_result *result = make_result ("", 0, "", 0);
  char *text = encode (result);
  nsbox_result_free (result);
  cr_assert_not_null (strstr (text, "\"signal\":null,"), "%s", text);
  free (text);
}

Test (result, realtime_signal_is_named_from_sigrtmin, .timeout = 5)
{
  nsbox_result *result = make_result ("", 0, "", 0);
  result->signal = SIGRTMIN + 2;
  char *text = encode (result);
  nsbox_result_free (result);
  cr_assert_not_null (strstr (text, "\"signal\":\"SIGRTMIN+2\""), "%s", text);
  free (text);
}

Test (result, invalid_utf8_becomes_replacement_character, .timeout = 5)
{
  ASSERT_SANITIZED ("\xff", REPLACEMENT);
  ASSERT_SANITIZED ("a\xfe"
                    "b",
                    "a" REPLACEMENT "b");
  /* Overlong NUL: C0 is never a lead byte, 80 is a lone continuation. */
  ASSERT_SANITIZED ("a\xc0\x80z", "a" REPLACEMENT REPLACEMENT "z");
  ASSERT_SANITIZED ("\x80", REPLACEMENT);
  ASSERT_SANITIZED ("x\xbf\x80y", "x" REPLACEMENT REPLACEMENT "y");
}

Test (result, truncated_sequence_becomes_one_replacement_character, .timeout = 5)
{
  ASSERT_SANITIZED ("ab\xe2\x82", "ab" REPLACEMENT);
  ASSERT_SANITIZED ("ab\xe2", "ab" REPLACEMENT);
  ASSERT_SANITIZED ("\xf0\x9f\x98", REPLACEMENT);
  /* The byte that breaks the sequence starts over and survives. */
  ASSERT_SANITIZED ("\xe2\x82x", REPLACEMENT "x");
  ASSERT_SANITIZED ("\xe2\x82\xe2\x82\xac", REPLACEMENT "\xe2\x82\xac");
}

Test (result, surrogates_overlongs_and_out_of_range_follow_maximal_subparts, .timeout = 5)
{
  /* ED A0 80 would be U+D800: ED only takes 80..9F next. */
  ASSERT_SANITIZED ("\xed\xa0\x80", REPLACEMENT REPLACEMENT REPLACEMENT);
  ASSERT_SANITIZED ("\xed\xbf\xbf", REPLACEMENT REPLACEMENT REPLACEMENT);
  ASSERT_SANITIZED ("\xe0\x80\xaf", REPLACEMENT REPLACEMENT REPLACEMENT);
  ASSERT_SANITIZED ("\xf0\x80\x80\xaf", REPLACEMENT REPLACEMENT REPLACEMENT REPLACEMENT);
  /* F4 90 80 80 would be U+110000. */
  ASSERT_SANITIZED ("\xf4\x90\x80\x80", REPLACEMENT REPLACEMENT REPLACEMENT REPLACEMENT);
  ASSERT_SANITIZED ("\xf5\x80", REPLACEMENT REPLACEMENT);
  ASSERT_SANITIZED ("\xc1\xbf", REPLACEMENT REPLACEMENT);
}

Test (result, valid_multibyte_text_is_unchanged, .timeout = 5)
{
  /* Every boundary of table 3-7 plus ordinary text. */
  static const char text[] = "h\xc3\xa9llo \xe2\x82\xac \xf0\x9d\x84\x9e \xe6\x97\xa5\xe6\x9c\xac "
                             "\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf"
                             "\xf0\x90\x80\x80\xf4\x8f\xbf\xbf";
  ASSERT_SANITIZED (text, text);

  char *json = NULL;
  json_t *value = stdout_through_json (text, sizeof text - 1, &json);
  cr_assert_str_eq (json_string_value (value), text);
  /* Non-ASCII text goes out as UTF-8, not as \u escapes. */
  cr_assert_not_null (strstr (json, "h\xc3\xa9llo"));
  json_decref (value);
  free (json);
}

Test (result, nul_bytes_survive_as_escaped_u0000, .timeout = 5)
{
  ASSERT_SANITIZED ("a\0b\xff\0", "a\0b" REPLACEMENT "\0");

  char *text = NULL;
  json_t *value = stdout_through_json ("a\0b", 3, &text);
  cr_assert_not_null (strstr (text, "\"stdout\":\"a\\u0000b\""), "%s", text);
  cr_assert_eq (json_string_length (value), 3);
  cr_assert_eq (memcmp (json_string_value (value), "a\0b", 3), 0);
  json_decref (value);
  free (text);
}

Test (result, control_characters_are_escaped, .timeout = 5)
{
  static const char raw[] = "\x1b[31mred\x1b[0m\x07\t\n\r\x01\x1f\"\\";
  char *text = NULL;
  json_t *value = stdout_through_json (raw, sizeof raw - 1, &text);
  for (const char *p = text; *p; p++)
    cr_assert_geq ((unsigned char)*p, 0x20, "raw control byte 0x%02x in %s", (unsigned char)*p,
                   text);
  /* JSON allows either case of hex digit; jansson writes upper case. */
  cr_assert_not_null (strcasestr (text, "\"stdout\":\"\\u001b[31mred\\u001b[0m\\u0007\\t\\n\\r"),
                      "%s", text);
  cr_assert_not_null (strcasestr (text, "\\u0001\\u001f\\\"\\\\\""), "%s", text);
  cr_assert_eq (json_string_length (value), sizeof raw - 1);
  cr_assert_eq (memcmp (json_string_value (value), raw, sizeof raw - 1), 0);
  json_decref (value);
  free (text);
}

Test (result, one_mebibyte_of_output_encodes, .timeout = 10)
{
  const size_t len = 1024 * 1024;
  static const char pattern[] = "abc \xe2\x82\xac\n"; /* 8 bytes, divides 1 MiB */
  char *big = malloc (len);
  cr_assert_not_null (big);
  for (size_t i = 0; i < len; i++)
    big[i] = pattern[i % (sizeof pattern - 1)];

  json_t *value = stdout_through_json (big, len, NULL);
  cr_assert_eq (json_string_length (value), len);
  cr_assert_eq (memcmp (json_string_value (value), big, len), 0);
  json_decref (value);

  /* A capture cut at max-output-bytes can end inside a character. */
  value = stdout_through_json (big, len - 2, NULL);
  cr_assert_eq (json_string_length (value), len - 4 + 3);
  cr_assert_eq (memcmp (json_string_value (value), big, len - 4), 0);
  cr_assert_eq (memcmp (json_string_value (value) + len - 4, REPLACEMENT, 3), 0);
  json_decref (value);
  free (big);
}

Test (result, one_mebibyte_of_invalid_bytes_triples_in_size, .timeout = 10)
{
  const size_t len = 1024 * 1024;
  char *big = malloc (len);
  cr_assert_not_null (big);
  memset (big, 0xff, len);
  json_t *value = stdout_through_json (big, len, NULL);
  cr_assert_eq (json_string_length (value), 3 * len);
  cr_assert_eq (memcmp (json_string_value (value) + 3 * len - 3, REPLACEMENT, 3), 0);
  json_decref (value);
  free (big);
}

Test (result, sanitizing_random_bytes_gives_valid_utf8_that_sanitizes_to_itself, .timeout = 10)
{
  const size_t len = 256 * 1024;
  char *noise = malloc (len);
  cr_assert_not_null (noise);
  unsigned state = 12345;
  for (size_t i = 0; i < len; i++)
    {
      state = state * 1103515245u + 12345u;
      noise[i] = (char)(state >> 16);
    }

  char *once = NULL, *twice = NULL;
  size_t once_len = 0, twice_len = 0;
  cr_assert_eq (nsbox_utf8_sanitize (noise, len, &once, &once_len), 0);
  json_t *checked = json_stringn (once, once_len);
  cr_assert_not_null (checked, "jansson rejects the repaired text");
  json_decref (checked);
  cr_assert_eq (nsbox_utf8_sanitize (once, once_len, &twice, &twice_len), 0);
  cr_assert_eq (twice_len, once_len);
  cr_assert_eq (memcmp (once, twice, once_len), 0);
  free (noise);
  free (once);
  free (twice);
}

Test (result, empty_input_sanitizes_to_empty_string, .timeout = 5)
{
  char *out = NULL;
  size_t out_len = 1;
  cr_assert_eq (nsbox_utf8_sanitize (NULL, 0, &out, &out_len), 0);
  cr_assert_eq (out_len, 0);
  cr_assert_str_eq (out, "");
  free (out);
}

Test (result, mechanisms_have_documented_names, .timeout = 5)
{
  cr_assert_str_eq (nsbox_mechanism_name (NSBOX_MECH_NONE), "none");
  cr_assert_str_eq (nsbox_mechanism_name (NSBOX_MECH_RLIMIT), "rlimit");
  cr_assert_str_eq (nsbox_mechanism_name (NSBOX_MECH_CGROUP1), "cgroup1");
  cr_assert_str_eq (nsbox_mechanism_name (NSBOX_MECH_CGROUP2), "cgroup2");
  cr_assert_str_eq (nsbox_mechanism_name (NSBOX_MECH_TMPFS), "tmpfs");
  cr_assert_str_eq (nsbox_mechanism_name ((enum nsbox_mechanism)99), "unknown");
}

Test (result, accessors_return_the_stored_fields, .timeout = 5)
{
  nsbox_result *result = make_result ("o\0ut", 4, "err", 3);
  result->exit_code = 1;
  result->signal = SIGTERM;
  result->oom_killed = true;
  result->stdout_truncated = true;
  result->duration_ms = 10;
  result->cpu_ms = 20;
  result->memory_peak_bytes = 30;
  result->limits[NSBOX_LIMIT_PIDS] = NSBOX_MECH_CGROUP2;

  size_t len = 0;
  cr_assert_eq (nsbox_result_exit_code (result), 1);
  cr_assert_eq (nsbox_result_signal (result), SIGTERM);
  cr_assert_not (nsbox_result_timed_out (result));
  cr_assert (nsbox_result_oom_killed (result));
  cr_assert_eq (memcmp (nsbox_result_stdout (result, &len), "o\0ut", 4), 0);
  cr_assert_eq (len, 4);
  cr_assert_eq (memcmp (nsbox_result_stderr (result, &len), "err", 3), 0);
  cr_assert_eq (len, 3);
  cr_assert (nsbox_result_stdout_truncated (result));
  cr_assert_not (nsbox_result_stderr_truncated (result));
  cr_assert_eq (nsbox_result_duration_ms (result), 10);
  cr_assert_eq (nsbox_result_cpu_ms (result), 20);
  cr_assert_eq (nsbox_result_memory_peak_bytes (result), 30);
  cr_assert_eq (nsbox_result_limit (result, NSBOX_LIMIT_PIDS), NSBOX_MECH_CGROUP2);
  cr_assert_eq (nsbox_result_limit (result, NSBOX_LIMIT_MEMORY), NSBOX_MECH_NONE);
  cr_assert_eq (nsbox_result_limit (result, NSBOX_LIMIT_COUNT_), NSBOX_MECH_NONE);
  cr_assert_str_eq (nsbox_result_runtime (result), "native");
  nsbox_result_free (result);
}

Test (result, missing_output_reads_as_empty_not_null, .timeout = 5)
{
  nsbox_result *result = calloc (1, sizeof *result);
  cr_assert_not_null (result);
  size_t len = 99;
  const char *out = nsbox_result_stdout (result, &len);
  cr_assert_not_null (out);
  cr_assert_eq (len, 0);

  /* No runtime recorded: null rather than a guess. */
  char *text = encode (result);
  cr_assert_not_null (strstr (text, "\"stdout\":\"\",\"stderr\":\"\","), "%s", text);
  cr_assert_not_null (
      strstr (text, "\"runtime\":null,\"served\":\"cold\",\"files\":[],\"files_refused\":[],"
                    "\"quota_refusal\":null,\"egress\":null}"),
      "%s", text);
  free (text);
  nsbox_result_free (result);
  nsbox_result_free (NULL);
}

Test (result, counters_beyond_json_integer_range_are_clamped, .timeout = 5)
{
  nsbox_result *result = make_result ("", 0, "", 0);
  result->memory_peak_bytes = UINT64_MAX;
  char *text = encode (result);
  nsbox_result_free (result);
  cr_assert_not_null (strstr (text, "\"memory_peak_bytes\":9223372036854775807,"), "%s", text);
  free (text);
}

Test (result, null_result_fails_with_einval, .timeout = 5)
{
  struct nsbox_error *err = NULL;
  cr_assert_null (nsbox_result_to_json (NULL, &err));
  cr_assert_eq (nsbox_error_errno (err), EINVAL);
  cr_assert_str_eq (nsbox_error_message (err), "encode result as json: no result");
  nsbox_error_free (err);
}

/* jansson's allocator is process-wide; Criterion runs every test in its own
 * process, so replacing it here affects no other test. */
static size_t allocations_left;
static size_t allocations_live;

static void *
failing_malloc (size_t size)
{
  if (allocations_left == 0)
    return NULL;
  allocations_left--;
  void *p = malloc (size);
  if (p)
    allocations_live++;
  return p;
}

static void
counting_free (void *p)
{
  if (p)
    allocations_live--;
  free (p);
}

Test (result, jansson_out_of_memory_fails_with_enomem_and_leaks_nothing, .timeout = 10)
{
  nsbox_result *result = make_result ("out\xff", 4, "err", 3);
  result->signal = SIGKILL;
  json_set_alloc_funcs (failing_malloc, counting_free);

  bool succeeded = false;
  for (size_t budget = 0; budget < 1000 && !succeeded; budget++)
    {
      struct nsbox_error *err = NULL;
      allocations_left = budget;
      char *text = nsbox_result_to_json (result, &err);
      cr_assert_eq (allocations_live, 0, "jansson memory leaked with budget %zu", budget);
      if (text)
        {
          /* Allocated with malloc whatever jansson uses, so free() is right. */
          cr_assert_null (err);
          cr_assert_not_null (strstr (text, "\"signal\":\"SIGKILL\""));
          free (text);
          succeeded = true;
        }
      else
        {
          cr_assert_eq (nsbox_error_errno (err), ENOMEM);
          cr_assert_str_eq (nsbox_error_message (err),
                            "encode result as json: Cannot allocate memory");
          nsbox_error_free (err);
        }
    }
  cr_assert (succeeded);
  json_set_alloc_funcs (malloc, free);
  nsbox_result_free (result);
}

Test (result, a_refused_run_in_json_and_back, .timeout = 5)
{
  nsbox_result *r = nsbox_result_refused ("runs-per-minute", "20 per minute", 2500, 5000);
  cr_assert_not_null (r);
  cr_expect_eq (nsbox_result_exit_code (r), -1);
  cr_expect_str_eq (nsbox_result_quota_refusal (r), "runs-per-minute");
  cr_expect_eq (nsbox_result_retry_after_ms (r), 2500);
  char *text = encode (r);
  nsbox_result_free (r);
  cr_expect_not_null (strstr (text, "\"exit_code\":-1,"), "%s", text);
  cr_expect_not_null (strstr (text, "\"quota_refusal\":{\"quota\":\"runs-per-minute\",\"limit\":"
                                    "\"20 per minute\",\"retry_after_ms\":2500},\"egress\":null}"),
                      "%s", text);
  nsbox_result *back = NULL;
  struct nsbox_error *err = NULL;
  cr_assert_eq (nsbox_result_from_json (text, strlen (text), &back, &err), 0);
  cr_expect_str_eq (nsbox_result_quota_refusal (back), "runs-per-minute");
  cr_expect_eq (nsbox_result_retry_after_ms (back), 2500);
  nsbox_result_free (back);
  free (text);
  static const char *const bad[] = {
    "{\"exit_code\":-1,\"stdout\":\"\",\"stderr\":\"\",\"quota_refusal\":{\"quota\":\"x\","
    "\"limit\":\"1\",\"retry_after_ms\":1}}",
    "{\"exit_code\":-1,\"stdout\":\"\",\"stderr\":\"\",\"quota_refusal\":\"concurrent\"}",
    "{\"exit_code\":-1,\"stdout\":\"\",\"stderr\":\"\",\"quota_refusal\":{\"quota\":"
    "\"concurrent\",\"retry_after_ms\":1}}",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      back = NULL;
      cr_expect_eq (nsbox_result_from_json (bad[i], strlen (bad[i]), &back, &err), -EBADMSG,
                    "case %zu", i);
      nsbox_error_free (err);
      err = NULL;
      nsbox_result_free (back);
    }
}
