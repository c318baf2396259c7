/* A result rebuilt from its JSON form (result.h): `nsbox run --server`
 * shows a server's answer through the same code as a local result. */
#include "result.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "error.h"
#include "util.h"

static int
bad (struct nsbox_error **err, const char *key, const char *expected)
{
  return nsbox_error_set (err, EBADMSG, "result json: '%s' is missing or not %s", key, expected);
}

/* An optional boolean (false when absent). */
static int
get_bool (json_t *o, const char *key, bool *out, struct nsbox_error **err)
{
  json_t *v = json_object_get (o, key);
  if (v && !json_is_boolean (v))
    return bad (err, key, "a boolean");
  *out = json_is_true (v);
  return 0;
}

/* An optional counter (0 when absent). */
static int
get_counter (json_t *o, const char *key, uint64_t *out, struct nsbox_error **err)
{
  json_t *v = json_object_get (o, key);
  if (v && (!json_is_integer (v) || json_integer_value (v) < 0))
    return bad (err, key, "a whole number");
  *out = v ? (uint64_t)json_integer_value (v) : 0;
  return 0;
}

static int
get_stream (json_t *o, const char *key, char **buf, size_t *len, struct nsbox_error **err)
{
  json_t *v = json_object_get (o, key);
  if (!json_is_string (v))
    return bad (err, key, "a string");
  size_t n = json_string_length (v);
  char *copy = malloc (n ? n : 1);
  if (!copy)
    return nsbox_error_oom (err);
  memcpy (copy, json_string_value (v), n);
  *buf = copy;
  *len = n;
  return 0;
}

/* The number of a signal from the name nsbox_signal_name gives it. */
static int
get_signal (json_t *o, int *sig, struct nsbox_error **err)
{
  json_t *v = json_object_get (o, "signal");
  if (!v || json_is_null (v))
    return 0;
  const char *name = json_string_value (v);
  if (!name)
    return bad (err, "signal", "a string or null");
  for (int s = 1; s <= SIGRTMAX; s++)
    {
      char known[32];
      nsbox_signal_name (s, known, sizeof known);
      if (strcmp (known, name) == 0)
        {
          *sig = s;
          return 0;
        }
    }
  return bad (err, "signal", "a signal name");
}

static int
get_limits (json_t *o, nsbox_result *r)
{
  static const char *const keys[] = { [NSBOX_LIMIT_MEMORY] = "memory",
                                      [NSBOX_LIMIT_CPUS] = "cpus",
                                      [NSBOX_LIMIT_PIDS] = "pids",
                                      [NSBOX_LIMIT_TMP] = "tmp" };
  json_t *limits = json_object_get (o, "limits");
  for (int i = 0; i < NSBOX_LIMIT_COUNT_; i++)
    {
      const char *name = json_string_value (json_object_get (limits, keys[i]));
      for (int m = NSBOX_MECH_NONE; name && m <= NSBOX_MECH_TMPFS; m++)
        if (strcmp (name, nsbox_mechanism_name ((enum nsbox_mechanism)m)) == 0)
          r->limits[i] = (enum nsbox_mechanism)m;
    }
  return 0;
}

/* files and files_refused: optional arrays of objects. */
static int
get_files (json_t *o, nsbox_result *r, struct nsbox_error **err)
{
  json_t *files = json_object_get (o, "files"), *refused = json_object_get (o, "files_refused");
  if ((files && !json_is_array (files)) || (refused && !json_is_array (refused)))
    return bad (err, files && !json_is_array (files) ? "files" : "files_refused", "an array");
  size_t nf = json_array_size (files), nr = json_array_size (refused);
  r->files = nf ? calloc (nf, sizeof *r->files) : NULL;
  r->refused = nr ? calloc (nr, sizeof *r->refused) : NULL;
  if ((nf && !r->files) || (nr && !r->refused))
    return nsbox_error_oom (err);
  for (size_t i = 0; i < nf; i++)
    {
      json_t *f = json_array_get (files, i), *size = json_object_get (f, "size");
      const char *name = json_string_value (json_object_get (f, "name"));
      const char *sha = json_string_value (json_object_get (f, "sha256"));
      if (!name || !sha || strlen (sha) != 64 || !json_is_integer (size)
          || json_integer_value (size) < 0)
        return bad (err, "files", "a list of {name, size, sha256}");
      if (!(r->files[i].name = strdup (name)))
        return nsbox_error_oom (err);
      r->n_files++;
      r->files[i].size = (uint64_t)json_integer_value (size);
      memcpy (r->files[i].sha256, sha, 65);
    }
  for (size_t i = 0; i < nr; i++)
    {
      json_t *f = json_array_get (refused, i);
      const char *name = json_string_value (json_object_get (f, "name"));
      const char *reason = json_string_value (json_object_get (f, "reason"));
      if (!name || !reason)
        return bad (err, "files_refused", "a list of {name, reason}");
      r->refused[i].name = strdup (name);
      r->refused[i].reason = strdup (reason);
      r->n_refused++;
      if (!r->refused[i].name || !r->refused[i].reason)
        return nsbox_error_oom (err);
    }
  return 0;
}

/* quota_refusal: null (or missing), or {quota, limit, retry_after_ms}. */
static int
get_quota_refusal (json_t *o, nsbox_result *r, struct nsbox_error **err)
{
  json_t *q = json_object_get (o, "quota_refusal");
  if (!q || json_is_null (q))
    return 0;
  const char *quota = json_string_value (json_object_get (q, "quota"));
  const char *limit = json_string_value (json_object_get (q, "limit"));
  for (enum nsbox_quota_kind k = NSBOX_QUOTA_RATE; quota && k <= NSBOX_QUOTA_WALL; k++)
    if (strcmp (quota, nsbox_quota_kind_name (k)) == 0)
      r->quota_refusal = nsbox_quota_kind_name (k);
  if (!json_is_object (q) || !r->quota_refusal || !limit || strlen (limit) >= sizeof r->quota_limit)
    return bad (err, "quota_refusal", "null or {quota, limit, retry_after_ms}");
  snprintf (r->quota_limit, sizeof r->quota_limit, "%s", limit);
  return get_counter (q, "retry_after_ms", &r->retry_after_ms, err);
}

/* egress: null (or missing), or the egress report, kept as it came. */
static int
get_egress (json_t *o, nsbox_result *r, struct nsbox_error **err)
{
  json_t *e = json_object_get (o, "egress");
  if (!e || json_is_null (e))
    return 0;
  if (!json_is_object (e))
    return bad (err, "egress", "null or an object");
  r->egress = json_deep_copy (e);
  return r->egress ? 0 : nsbox_error_oom (err);
}

static int
fill (json_t *o, nsbox_result *r, struct nsbox_error **err)
{
  json_t *code = json_object_get (o, "exit_code");
  if (!json_is_integer (code))
    return bad (err, "exit_code", "a whole number");
  r->exit_code = (int)json_integer_value (code);
  const char *runtime = json_string_value (json_object_get (o, "runtime"));
  r->runtime = runtime && strcmp (runtime, "runsc") == 0 ? "runsc" : "native";
  const char *served = json_string_value (json_object_get (o, "served"));
  r->warm = served && strcmp (served, "warm") == 0;
  int ret;
  if ((ret = get_signal (o, &r->signal, err)) < 0
      || (ret = get_bool (o, "timed_out", &r->timed_out, err)) < 0
      || (ret = get_bool (o, "oom_killed", &r->oom_killed, err)) < 0
      || (ret = get_stream (o, "stdout", &r->stdout_buf, &r->stdout_len, err)) < 0
      || (ret = get_stream (o, "stderr", &r->stderr_buf, &r->stderr_len, err)) < 0
      || (ret = get_bool (o, "stdout_truncated", &r->stdout_truncated, err)) < 0
      || (ret = get_bool (o, "stderr_truncated", &r->stderr_truncated, err)) < 0
      || (ret = get_counter (o, "stdout_omitted_bytes", &r->stdout_omitted, err)) < 0
      || (ret = get_counter (o, "stderr_omitted_bytes", &r->stderr_omitted, err)) < 0
      || (ret = get_counter (o, "duration_ms", &r->duration_ms, err)) < 0
      || (ret = get_counter (o, "cpu_ms", &r->cpu_ms, err)) < 0
      || (ret = get_counter (o, "memory_peak_bytes", &r->memory_peak_bytes, err)) < 0
      || (ret = get_counter (o, "timeout_ms", &r->timeout_ms, err)) < 0
      || (ret = get_counter (o, "memory_limit_bytes", &r->memory_limit_bytes, err)) < 0
      || (ret = get_files (o, r, err)) < 0 || (ret = get_quota_refusal (o, r, err)) < 0
      || (ret = get_egress (o, r, err)) < 0)
    return ret;
  return get_limits (o, r);
}

int
nsbox_result_from_json (const char *json, size_t len, nsbox_result **result,
                        struct nsbox_error **err)
{
  json_error_t jerr;
  cleanup_json json_t *o = json_loadb (json, len, JSON_ALLOW_NUL, &jerr);
  if (!json_is_object (o))
    return nsbox_error_set (err, EBADMSG, "result json: not a json object");
  nsbox_result *r = calloc (1, sizeof *r);
  if (!r)
    return nsbox_error_oom (err);
  int ret = fill (o, r, err);
  if (ret < 0)
    {
      nsbox_result_free (r);
      return ret;
    }
  *result = r;
  return 0;
}
