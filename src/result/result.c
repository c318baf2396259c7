/* The result of a run: accessors, UTF-8 repair and the JSON form. */
#include "result.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "error.h"
#include "util.h"

static const char *const kind_names[] = {
  [NSBOX_QUOTA_NONE] = "",
  [NSBOX_QUOTA_RATE] = "runs-per-minute",
  [NSBOX_QUOTA_CONCURRENT] = "concurrent",
  [NSBOX_QUOTA_CPU] = "cpu-time",
  [NSBOX_QUOTA_WALL] = "wall-time",
};

const char *
nsbox_quota_kind_name (enum nsbox_quota_kind kind)
{
  return (size_t)kind < ARRAY_SIZE (kind_names) ? kind_names[kind] : "";
}

void
nsbox_result_free (nsbox_result *result)
{
  if (!result)
    return;
  /* A pooled sandbox's init is a copy of this process: what a run printed
   * must not be in the memory later entries are cloned from. */
  if (result->stdout_buf)
    explicit_bzero (result->stdout_buf, result->stdout_len);
  if (result->stderr_buf)
    explicit_bzero (result->stderr_buf, result->stderr_len);
  if (result->value)
    explicit_bzero (result->value, result->value_len);
  free (result->stdout_buf);
  free (result->stderr_buf);
  free (result->value);
  for (size_t i = 0; i < result->n_files; i++)
    free (result->files[i].name);
  free (result->files);
  for (size_t i = 0; i < result->n_refused; i++)
    {
      free (result->refused[i].name);
      free (result->refused[i].reason);
    }
  free (result->refused);
  json_decref (result->egress);
  free (result);
}

int
nsbox_result_exit_code (const nsbox_result *result)
{
  return result ? result->exit_code : 0;
}

int
nsbox_result_signal (const nsbox_result *result)
{
  return result ? result->signal : 0;
}

bool
nsbox_result_timed_out (const nsbox_result *result)
{
  return result && result->timed_out;
}

bool
nsbox_result_oom_killed (const nsbox_result *result)
{
  return result && result->oom_killed;
}

/* Never returns NULL, so callers may hand the pointer to memcpy or fwrite
 * even when nothing was captured. */
static const char *
stream_bytes (const char *buf, size_t buf_len, size_t *len)
{
  if (len)
    *len = buf ? buf_len : 0;
  return buf ? buf : "";
}

const char *
nsbox_result_stdout (const nsbox_result *result, size_t *len)
{
  if (!result)
    return stream_bytes (NULL, 0, len);
  return stream_bytes (result->stdout_buf, result->stdout_len, len);
}

const char *
nsbox_result_stderr (const nsbox_result *result, size_t *len)
{
  if (!result)
    return stream_bytes (NULL, 0, len);
  return stream_bytes (result->stderr_buf, result->stderr_len, len);
}

bool
nsbox_result_stdout_truncated (const nsbox_result *result)
{
  return result && result->stdout_truncated;
}

bool
nsbox_result_stderr_truncated (const nsbox_result *result)
{
  return result && result->stderr_truncated;
}

uint64_t
nsbox_result_stdout_omitted_bytes (const nsbox_result *result)
{
  return result ? result->stdout_omitted : 0;
}

uint64_t
nsbox_result_stderr_omitted_bytes (const nsbox_result *result)
{
  return result ? result->stderr_omitted : 0;
}

uint64_t
nsbox_result_timeout_ms (const nsbox_result *result)
{
  return result ? result->timeout_ms : 0;
}

uint64_t
nsbox_result_memory_limit_bytes (const nsbox_result *result)
{
  return result ? result->memory_limit_bytes : 0;
}

uint64_t
nsbox_result_duration_ms (const nsbox_result *result)
{
  return result ? result->duration_ms : 0;
}

uint64_t
nsbox_result_cpu_ms (const nsbox_result *result)
{
  return result ? result->cpu_ms : 0;
}

uint64_t
nsbox_result_memory_peak_bytes (const nsbox_result *result)
{
  return result ? result->memory_peak_bytes : 0;
}

enum nsbox_mechanism
nsbox_result_limit (const nsbox_result *result, enum nsbox_limit limit)
{
  if (!result || (unsigned)limit >= NSBOX_LIMIT_COUNT_)
    return NSBOX_MECH_NONE;
  return result->limits[limit];
}

bool
nsbox_result_warm (const nsbox_result *result)
{
  return result && result->warm;
}

const char *
nsbox_result_value (const nsbox_result *result, size_t *len)
{
  if (len)
    *len = result && result->value ? result->value_len : 0;
  return result ? result->value : NULL;
}

const char *
nsbox_result_sandbox_id (const nsbox_result *result)
{
  return result && result->in_sandbox ? result->sandbox_id : NULL;
}

uint64_t
nsbox_result_sandbox_run (const nsbox_result *result)
{
  return result && result->in_sandbox ? result->sandbox_run : 0;
}

bool
nsbox_result_sandbox_lost (const nsbox_result *result)
{
  return result && result->sandbox_lost;
}

const char *
nsbox_result_quota_refusal (const nsbox_result *result)
{
  return result ? result->quota_refusal : NULL;
}

uint64_t
nsbox_result_retry_after_ms (const nsbox_result *result)
{
  return result && result->quota_refusal ? result->retry_after_ms : 0;
}

nsbox_result *
nsbox_result_refused (const char *quota, const char *limit, uint64_t retry_after_ms,
                      uint64_t timeout_ms)
{
  nsbox_result *r = calloc (1, sizeof *r);
  if (!r)
    return NULL;
  r->exit_code = -1;
  r->quota_refusal = quota;
  snprintf (r->quota_limit, sizeof r->quota_limit, "%s", limit);
  r->retry_after_ms = retry_after_ms;
  r->timeout_ms = timeout_ms;
  return r;
}

const char *
nsbox_result_runtime (const nsbox_result *result)
{
  return result ? result->runtime : NULL;
}

size_t
nsbox_result_file_count (const nsbox_result *result)
{
  return result ? result->n_files : 0;
}

const char *
nsbox_result_file_name (const nsbox_result *result, size_t i)
{
  return result && i < result->n_files ? result->files[i].name : NULL;
}

uint64_t
nsbox_result_file_size (const nsbox_result *result, size_t i)
{
  return result && i < result->n_files ? result->files[i].size : 0;
}

const char *
nsbox_result_file_sha256 (const nsbox_result *result, size_t i)
{
  return result && i < result->n_files ? result->files[i].sha256 : NULL;
}

size_t
nsbox_result_refused_count (const nsbox_result *result)
{
  return result ? result->n_refused : 0;
}

const char *
nsbox_result_refused_name (const nsbox_result *result, size_t i)
{
  return result && i < result->n_refused ? result->refused[i].name : NULL;
}

const char *
nsbox_result_refused_reason (const nsbox_result *result, size_t i)
{
  return result && i < result->n_refused ? result->refused[i].reason : NULL;
}

static const char *const mechanism_names[] = {
  [NSBOX_MECH_NONE] = "none",       [NSBOX_MECH_RLIMIT] = "rlimit",
  [NSBOX_MECH_CGROUP1] = "cgroup1", [NSBOX_MECH_CGROUP2] = "cgroup2",
  [NSBOX_MECH_TMPFS] = "tmpfs",
};

const char *
nsbox_mechanism_name (enum nsbox_mechanism mechanism)
{
  if ((unsigned)mechanism >= ARRAY_SIZE (mechanism_names) || !mechanism_names[mechanism])
    return "unknown";
  return mechanism_names[mechanism];
}

/* Length of the well-formed UTF-8 sequence at s (Unicode table 3-7), or 0
 * when it is ill-formed; *bad_len then holds the length of its maximal
 * subpart, the bytes that one U+FFFD stands for. A byte that breaks a
 * sequence is not part of that subpart: it is read again as a lead, so a
 * cut-off character never swallows the text after it. */
static size_t
utf8_sequence_length (const unsigned char *s, size_t avail, size_t *bad_len)
{
  unsigned char lead = s[0];
  unsigned char second_min = 0x80, second_max = 0xbf;
  size_t need;

  if (lead < 0x80)
    return 1;
  if (lead >= 0xc2 && lead <= 0xdf)
    need = 2;
  else if (lead >= 0xe0 && lead <= 0xef)
    {
      need = 3;
      if (lead == 0xe0)
        second_min = 0xa0; /* overlong */
      else if (lead == 0xed)
        second_max = 0x9f; /* surrogates */
    }
  else if (lead >= 0xf0 && lead <= 0xf4)
    {
      need = 4;
      if (lead == 0xf0)
        second_min = 0x90; /* overlong */
      else if (lead == 0xf4)
        second_max = 0x8f; /* above U+10FFFF */
    }
  else
    {
      *bad_len = 1; /* continuation byte, C0, C1 or F5..FF */
      return 0;
    }

  for (size_t i = 1; i < need; i++)
    {
      unsigned char min = i == 1 ? second_min : 0x80;
      unsigned char max = i == 1 ? second_max : 0xbf;
      if (i >= avail || s[i] < min || s[i] > max)
        {
          *bad_len = i;
          return 0;
        }
    }
  return need;
}

static bool
utf8_is_valid (const char *in, size_t len)
{
  const unsigned char *bytes = (const unsigned char *)in;
  for (size_t i = 0; i < len;)
    {
      size_t bad_len = 0;
      size_t n = utf8_sequence_length (bytes + i, len - i, &bad_len);
      if (n == 0)
        return false;
      i += n;
    }
  return true;
}

/* Writes the repaired text to out when out is non-NULL; returns its length
 * either way, so one call sizes the buffer and a second fills it. */
static size_t
utf8_repair (const char *in, size_t len, char *out)
{
  static const char replacement[] = "\xef\xbf\xbd";
  const unsigned char *bytes = (const unsigned char *)in;
  size_t out_len = 0;

  for (size_t i = 0; i < len;)
    {
      size_t bad_len = 0;
      size_t n = utf8_sequence_length (bytes + i, len - i, &bad_len);
      const char *piece = n ? in + i : replacement;
      size_t piece_len = n ? n : sizeof replacement - 1;
      if (out)
        memcpy (out + out_len, piece, piece_len);
      out_len += piece_len;
      i += n ? n : bad_len;
    }
  return out_len;
}

int
nsbox_utf8_sanitize (const char *in, size_t len, char **out, size_t *out_len)
{
  /* Each input byte grows to at most three output bytes. */
  if (len > (SIZE_MAX - 1) / 3)
    return -ENOMEM;
  size_t repaired_len = utf8_repair (in, len, NULL);
  char *repaired = malloc (repaired_len + 1);
  if (!repaired)
    return -ENOMEM;
  utf8_repair (in, len, repaired);
  repaired[repaired_len] = '\0';
  *out = repaired;
  *out_len = repaired_len;
  return 0;
}

/* Captured output as a JSON string; NULL only when out of memory. */
static json_t *
stream_value (const char *bytes, size_t len)
{
  /* Valid output, the usual case, skips the extra copy. */
  if (utf8_is_valid (bytes, len))
    return json_stringn (bytes, len);
  char *repaired = NULL;
  size_t repaired_len = 0;
  if (nsbox_utf8_sanitize (bytes, len, &repaired, &repaired_len) < 0)
    return NULL;
  json_t *value = json_stringn (repaired, repaired_len);
  free (repaired);
  return value;
}

void
nsbox_signal_name (int sig, char *name, size_t size)
{
  const char *abbrev = sig > 0 ? sigabbrev_np (sig) : NULL;
  if (abbrev)
    snprintf (name, size, "SIG%s", abbrev);
  else if (sig == SIGRTMIN)
    snprintf (name, size, "SIGRTMIN");
  else if (sig > SIGRTMIN && sig <= SIGRTMAX)
    snprintf (name, size, "SIGRTMIN+%d", sig - SIGRTMIN);
  else
    snprintf (name, size, "SIG%d", sig);
}

static json_t *
signal_value (int sig)
{
  if (sig == 0)
    return json_null ();
  char name[32];
  nsbox_signal_name (sig, name, sizeof name);
  return json_string (name);
}

/* json_int_t is signed; counters that do not fit are clamped rather than
 * wrapped to a negative number. */
static json_t *
counter_value (uint64_t value)
{
  return json_integer (value > (uint64_t)INT64_MAX ? INT64_MAX : (json_int_t)value);
}

/* Stores value under key; a NULL value means its constructor ran out of
 * memory. json_object_set_new releases value even when it fails. */
static int
object_add (json_t *object, const char *key, json_t *value)
{
  if (!value || json_object_set_new (object, key, value) < 0)
    return -ENOMEM;
  return 0;
}

static const struct
{
  const char *key;
  enum nsbox_limit limit;
} limit_keys[] = {
  { "memory", NSBOX_LIMIT_MEMORY },
  { "cpus", NSBOX_LIMIT_CPUS },
  { "pids", NSBOX_LIMIT_PIDS },
  { "tmp", NSBOX_LIMIT_TMP },
};

static json_t *
limits_value (const nsbox_result *result)
{
  json_t *limits = json_object ();
  if (!limits)
    return NULL;
  for (size_t i = 0; i < ARRAY_SIZE (limit_keys); i++)
    {
      const char *name = nsbox_mechanism_name (nsbox_result_limit (result, limit_keys[i].limit));
      if (object_add (limits, limit_keys[i].key, json_string (name)) < 0)
        {
          json_decref (limits);
          return NULL;
        }
    }
  return limits;
}

/* A name as the JSON shows it: valid UTF-8 (the entries a program left in
 * /tmp/out may have any bytes). */
static json_t *
name_value (const char *name)
{
  return stream_value (name, strlen (name));
}

static json_t *
files_value (const nsbox_result *result)
{
  json_t *files = json_array ();
  for (size_t i = 0; files && i < result->n_files; i++)
    {
      json_t *f = json_object ();
      if (!f || json_array_append_new (files, f) < 0
          || object_add (f, "name", name_value (result->files[i].name)) < 0
          || object_add (f, "size", counter_value (result->files[i].size)) < 0
          || object_add (f, "sha256", json_string (result->files[i].sha256)) < 0)
        {
          json_decref (files);
          return NULL;
        }
    }
  return files;
}

static json_t *
refused_value (const nsbox_result *result)
{
  json_t *refused = json_array ();
  for (size_t i = 0; refused && i < result->n_refused; i++)
    {
      json_t *f = json_object ();
      if (!f || json_array_append_new (refused, f) < 0
          || object_add (f, "name", name_value (result->refused[i].name)) < 0
          || object_add (f, "reason", name_value (result->refused[i].reason)) < 0)
        {
          json_decref (refused);
          return NULL;
        }
    }
  return refused;
}

static json_t *
quota_refusal_value (const nsbox_result *result)
{
  if (!result->quota_refusal)
    return json_null ();
  json_t *o = json_object ();
  if (!o || object_add (o, "quota", json_string (result->quota_refusal)) < 0
      || object_add (o, "limit", json_string (result->quota_limit)) < 0
      || object_add (o, "retry_after_ms", counter_value (result->retry_after_ms)) < 0)
    {
      json_decref (o);
      return NULL;
    }
  return o;
}

/* The key order is part of the documented format, so members are added in
 * that order and dumped with JSON_PRESERVE_ORDER. */
json_t *
nsbox_result_json_value (const nsbox_result *result)
{
  size_t stdout_len = 0, stderr_len = 0;
  const char *stdout_bytes = nsbox_result_stdout (result, &stdout_len);
  const char *stderr_bytes = nsbox_result_stderr (result, &stderr_len);
  const char *runtime = result->runtime;

  cleanup_json json_t *object = json_object ();
  if (!object)
    return NULL;
  if (object_add (object, "exit_code", json_integer (result->exit_code)) < 0
      || object_add (object, "signal", signal_value (result->signal)) < 0
      || object_add (object, "timed_out", json_boolean (result->timed_out)) < 0
      || object_add (object, "oom_killed", json_boolean (result->oom_killed)) < 0
      || object_add (object, "stdout", stream_value (stdout_bytes, stdout_len)) < 0
      || object_add (object, "stderr", stream_value (stderr_bytes, stderr_len)) < 0
      || object_add (object, "stdout_truncated", json_boolean (result->stdout_truncated)) < 0
      || object_add (object, "stderr_truncated", json_boolean (result->stderr_truncated)) < 0
      || object_add (object, "stdout_omitted_bytes", counter_value (result->stdout_omitted)) < 0
      || object_add (object, "stderr_omitted_bytes", counter_value (result->stderr_omitted)) < 0
      || object_add (object, "duration_ms", counter_value (result->duration_ms)) < 0
      || object_add (object, "cpu_ms", counter_value (result->cpu_ms)) < 0
      || object_add (object, "memory_peak_bytes", counter_value (result->memory_peak_bytes)) < 0
      || object_add (object, "timeout_ms", counter_value (result->timeout_ms)) < 0
      || object_add (object, "memory_limit_bytes", counter_value (result->memory_limit_bytes)) < 0
      || object_add (object, "limits", limits_value (result)) < 0
      || object_add (object, "runtime", runtime ? json_string (runtime) : json_null ()) < 0
      || object_add (object, "served", json_string (result->warm ? "warm" : "cold")) < 0
      || object_add (object, "files", files_value (result)) < 0
      || object_add (object, "files_refused", refused_value (result)) < 0
      || object_add (object, "quota_refusal", quota_refusal_value (result)) < 0
      || object_add (object, "egress",
                     result->egress ? json_deep_copy (result->egress) : json_null ())
             < 0)
    return NULL;
  if (result->in_sandbox
      && (object_add (object, "value",
                      result->value ? stream_value (result->value, result->value_len)
                                    : json_null ())
              < 0
          || object_add (object, "sandbox_id", json_string (result->sandbox_id)) < 0
          || object_add (object, "sandbox_run", counter_value (result->sandbox_run)) < 0
          || object_add (object, "sandbox_lost", json_boolean (result->sandbox_lost)) < 0))
    return NULL;
  return TAKE_PTR (object);
}

struct text_buffer
{
  char *data;
  size_t len;
  size_t cap;
};

/* Collects the dump in memory from malloc, so the caller can free() it
 * whatever allocator jansson was configured with. Keeps room for a NUL. */
static int
text_buffer_append (const char *chunk, size_t size, void *data)
{
  struct text_buffer *buf = data;
  if (size >= SIZE_MAX - buf->len)
    return -1;
  if (buf->len + size + 1 > buf->cap)
    {
      size_t cap = buf->cap ? buf->cap : 4096;
      while (cap < buf->len + size + 1)
        {
          if (cap > SIZE_MAX / 2)
            {
              cap = buf->len + size + 1;
              break;
            }
          cap *= 2;
        }
      char *grown = realloc (buf->data, cap);
      if (!grown)
        return -1;
      buf->data = grown;
      buf->cap = cap;
    }
  memcpy (buf->data + buf->len, chunk, size);
  buf->len += size;
  buf->data[buf->len] = '\0';
  return 0;
}

char *
nsbox_result_to_json (const nsbox_result *result, struct nsbox_error **err)
{
  if (!result)
    {
      nsbox_error_set (err, EINVAL, "encode result as json: no result");
      return NULL;
    }

  cleanup_json json_t *object = nsbox_result_json_value (result);
  if (!object)
    {
      nsbox_error_sys (err, ENOMEM, "encode result as json");
      return NULL;
    }

  /* The only failure of a dump into memory is the buffer not growing. */
  struct text_buffer text = { NULL, 0, 0 };
  if (json_dump_callback (object, text_buffer_append, &text, JSON_COMPACT | JSON_PRESERVE_ORDER) < 0
      || !text.data)
    {
      free (text.data);
      nsbox_error_sys (err, ENOMEM, "encode result as json");
      return NULL;
    }
  return text.data;
}
