/* Fuzz target: nsbox_result_to_json with arbitrary bytes as stdout and
 * stderr. The output must always parse as JSON; output that is valid UTF-8
 * must come back byte for byte, anything else with U+FFFD in it. The text
 * form (nsbox_result_to_text) must be valid UTF-8, and the result rebuilt
 * from the JSON (nsbox_result_from_json) must encode to the same JSON.
 *
 * Input: a 16-byte header (exit code, signal, flags, limit mechanisms,
 * counters; missing bytes read as zero), then one byte that splits the rest
 * into stdout and stderr. */
#include <signal.h>
#include <stdbool.h>
#include <string.h>

#include <jansson.h>

#include "fuzz.h"
#include "nsbox.h"
#include "result.h"

#define HEADER_BYTES 16

static uint8_t
header_byte (const uint8_t *data, size_t size, size_t i)
{
  return i < size ? data[i] : 0;
}

/* A malloc'ed copy of exactly len bytes (ASan sees any read past it), or
 * NULL for an empty stream when null_when_empty. */
static char *
copy_stream (const uint8_t *bytes, size_t len, bool null_when_empty)
{
  if (len == 0 && null_when_empty)
    return NULL;
  char *copy = malloc (len ? len : 1);
  FUZZ_CHECK (copy, "out of memory");
  if (len)
    memcpy (copy, bytes, len);
  return copy;
}

static void
check_stream (json_t *object, const char *key, const char *in, size_t in_len)
{
  json_t *value = json_object_get (object, key);
  FUZZ_CHECK (json_is_string (value), "'%s' is not a string", key);
  const char *out = json_string_value (value);
  size_t out_len = json_string_length (value);

  /* jansson accepts exactly the well-formed UTF-8 (no surrogates, no
   * overlongs, nothing above U+10FFFF): such output must round-trip. */
  json_t *as_utf8 = in ? json_stringn (in, in_len) : json_string ("");
  if (as_utf8)
    {
      FUZZ_CHECK (out_len == in_len && (in_len == 0 || memcmp (out, in, in_len) == 0),
                  "valid UTF-8 %s of %zu bytes came back as %zu different bytes", key, in_len,
                  out_len);
      json_decref (as_utf8);
    }
  else
    FUZZ_CHECK (memmem (out, out_len, "\xef\xbf\xbd", 3) != NULL,
                "invalid UTF-8 %s of %zu bytes has no U+FFFD in its JSON form", key, in_len);

  /* The repair alone: valid UTF-8 out, and what was valid is unchanged. */
  char *repaired = NULL;
  size_t repaired_len = 0;
  FUZZ_CHECK (nsbox_utf8_sanitize (in ? in : "", in_len, &repaired, &repaired_len) == 0,
              "nsbox_utf8_sanitize failed");
  FUZZ_CHECK (repaired[repaired_len] == '\0', "repaired text is not NUL-terminated");
  json_t *again = json_stringn (repaired, repaired_len);
  FUZZ_CHECK (again, "nsbox_utf8_sanitize returned invalid UTF-8");
  FUZZ_CHECK (repaired_len == out_len && memcmp (repaired, out, out_len) == 0,
              "nsbox_utf8_sanitize and the JSON %s differ", key);
  json_decref (again);
  free (repaired);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static const char *const runtimes[] = { NULL, "native", "runsc", "native" };
  uint8_t flags = header_byte (data, size, 5);
  uint64_t counter = 0;
  for (size_t i = 8; i < 16; i++)
    counter = counter << 8 | header_byte (data, size, i);

  struct nsbox_result result = {
    .exit_code = (int)((uint32_t)header_byte (data, size, 0) << 24
                       | (uint32_t)header_byte (data, size, 1) << 16
                       | (uint32_t)header_byte (data, size, 2) << 8 | header_byte (data, size, 3)),
    .signal = (int8_t)header_byte (data, size, 4),
    .timed_out = flags & 1,
    .oom_killed = flags & 2,
    .stdout_truncated = flags & 4,
    .stderr_truncated = flags & 8,
    .runtime = runtimes[(flags >> 4) & 3],
    .duration_ms = counter,
    .cpu_ms = ~counter,
    .memory_peak_bytes = counter >> 1,
    .stdout_omitted = counter >> 2,
    .stderr_omitted = counter >> 3,
    .timeout_ms = counter >> 4,
    .memory_limit_bytes = counter >> 5,
  };
  uint16_t mechanisms = (uint16_t)(header_byte (data, size, 6) << 8 | header_byte (data, size, 7));
  for (unsigned i = 0; i < NSBOX_LIMIT_COUNT_; i++)
    result.limits[i] = (enum nsbox_mechanism) ((mechanisms >> (4 * i)) & 7);

  const uint8_t *rest = size > HEADER_BYTES ? data + HEADER_BYTES : NULL;
  size_t rest_len = size > HEADER_BYTES ? size - HEADER_BYTES : 0;
  size_t split = 0;
  if (rest_len > 0)
    {
      split = rest_len > 1 ? rest[0] % rest_len : 0;
      rest++;
      rest_len--;
    }
  bool null_when_empty = flags & 0x40;
  result.stdout_buf = copy_stream (rest, split, null_when_empty);
  result.stdout_len = split;
  result.stderr_buf = copy_stream (rest ? rest + split : NULL, rest_len - split, null_when_empty);
  result.stderr_len = rest_len - split;

  struct nsbox_error *err = NULL;
  char *text = nsbox_result_to_json (&result, &err);
  FUZZ_CHECK (text, "nsbox_result_to_json failed: %s", nsbox_error_message (err));

  json_error_t jerr;
  json_t *parsed = json_loads (text, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &jerr);
  FUZZ_CHECK (json_is_object (parsed), "output is not a JSON object: %d:%d: %s", jerr.line,
              jerr.column, jerr.text);
  FUZZ_CHECK (json_integer_value (json_object_get (parsed, "exit_code")) == result.exit_code,
              "exit_code does not round-trip");
  FUZZ_CHECK (json_is_boolean (json_object_get (parsed, "timed_out")), "timed_out");
  FUZZ_CHECK (json_integer_value (json_object_get (parsed, "duration_ms")) >= 0,
              "duration_ms is negative");
  check_stream (parsed, "stdout", result.stdout_buf, result.stdout_len);
  check_stream (parsed, "stderr", result.stderr_buf, result.stderr_len);

  /* The text form is valid UTF-8 (json_string checks it). */
  char *as_text = nsbox_result_to_text (&result, &err);
  FUZZ_CHECK (as_text, "nsbox_result_to_text failed: %s", nsbox_error_message (err));
  json_t *text_value = json_string (as_text);
  FUZZ_CHECK (text_value, "the text form is not valid UTF-8");
  json_decref (text_value);
  free (as_text);

  /* Rebuilt from its JSON (what `run --server` does), the result encodes to
   * the same JSON, where the JSON can say it: a runtime, a signal with a
   * name, counters that were not clamped. */
  bool representable = result.runtime && result.signal >= 0 && result.signal <= SIGRTMAX
                       && counter <= INT64_MAX && ~counter <= INT64_MAX;
  nsbox_result *back = NULL;
  int r = nsbox_result_from_json (text, strlen (text), &back, &err);
  if (representable)
    {
      FUZZ_CHECK (r == 0, "nsbox_result_from_json failed: %s", nsbox_error_message (err));
      char *again = nsbox_result_to_json (back, &err);
      FUZZ_CHECK (again && strcmp (again, text) == 0, "the rebuilt result encodes differently");
      free (again);
    }
  nsbox_result_free (back);
  nsbox_error_free (err);

  json_decref (parsed);
  free (text);
  free (result.stdout_buf);
  free (result.stderr_buf);
  return 0;
}
