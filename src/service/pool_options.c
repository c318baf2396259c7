/* The options of a warm pool (nsbox_pool_options_*) and of one of its runs
 * (nsbox_run_options_*): their keys, bounds and errors. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_keys.h"
#include "error.h"
#include "files.h"
#include "pool-private.h"
#include "units.h"
#include "util.h"

nsbox_pool_options *
nsbox_pool_options_new (struct nsbox_error **err)
{
  nsbox_pool_options *o = calloc (1, sizeof *o);
  if (!o)
    {
      nsbox_error_oom (err);
      return NULL;
    }
  o->size = 2;
  o->sandboxes = 1;
  o->max_age_ms = 300000;
  o->refill = 1;
  return o;
}

void
nsbox_pool_options_free (nsbox_pool_options *options)
{
  free (options);
}

/* A count of pool option `key`, from min to max (`what` it counts, for
 * the error). */
static int
set_count (const char *key, const char *value, uint64_t min, uint64_t max, const char *what,
           uint64_t *out, struct nsbox_error **err)
{
  uint64_t v = 0;
  if (nsbox_parse_count (value, &v) < 0 || v < min || v > max)
    return nsbox_error_set (err, EINVAL,
                            "invalid value '%s' for pool option '%s': expected a number%s from "
                            "%" PRIu64 " to %" PRIu64,
                            value, key, what, min, max);
  *out = v;
  return 0;
}

int
nsbox_pool_options_set (nsbox_pool_options *o, const char *key, const char *value,
                        struct nsbox_error **err)
{
  if (!o || !key || !value)
    return nsbox_error_set (err, EINVAL, "nsbox_pool_options_set: invalid arguments");
  if (strcmp (key, "size") == 0)
    return set_count (key, value, 0, POOL_MAX_SIZE, " of sandboxes", &o->size, err);
  if (strcmp (key, "sandboxes") == 0)
    return set_count (key, value, 0, POOL_MAX_SIZE, " of live sandboxes", &o->sandboxes, err);
  if (strcmp (key, "refill-concurrency") == 0)
    return set_count (key, value, 1, POOL_MAX_REFILL, "", &o->refill, err);
  if (strcmp (key, "max-age") == 0)
    {
      /* At least a second: a shorter life would start and discard
       * entries without end. */
      uint64_t v = 0;
      if (nsbox_parse_duration (value, &v) < 0 || v < 1000)
        return nsbox_error_set (err, EINVAL,
                                "invalid value '%s' for pool option 'max-age': expected a "
                                "duration of at least 1s, such as 60s",
                                value);
      o->max_age_ms = v;
      return 0;
    }
  return nsbox_error_set (err, EINVAL,
                          "unknown pool option '%s' (known: size, sandboxes, max-age, "
                          "refill-concurrency)",
                          key);
}

nsbox_run_options *
nsbox_run_options_new (struct nsbox_error **err)
{
  nsbox_run_options *o = calloc (1, sizeof *o);
  if (!o)
    {
      nsbox_error_oom (err);
      return NULL;
    }
  o->max_output_bytes = UINT64_MAX;
  o->cancel_fd = -1;
  return o;
}

/* *field becomes a copy of value (NULL: unset); -ENOMEM leaves it. */
static int
replace_option (char **field, const char *value)
{
  char *copy = value ? strdup (value) : NULL;
  if (value && !copy)
    return -ENOMEM;
  free (*field);
  *field = copy;
  return 0;
}

int
nsbox_run_options_set_client (nsbox_run_options *options, const char *client)
{
  return replace_option (&options->client, client);
}

int
nsbox_run_options_set_quota_scope (nsbox_run_options *options, const char *scope)
{
  return replace_option (&options->quota_scope, scope);
}

void
nsbox_run_options_set_output (nsbox_run_options *options, nsbox_output_fn output, void *data)
{
  if (!options)
    return;
  options->output = output;
  options->output_data = data;
}

void
nsbox_run_options_set_cancel_fd (nsbox_run_options *options, int fd, bool half_close_is_gone)
{
  options->cancel_fd = fd;
  options->cancel_on_half_close = half_close_is_gone;
}

void
nsbox_run_options_free (nsbox_run_options *options)
{
  if (!options)
    return;
  nsbox_strv_free (options->inputs);
  free (options->output_dir);
  free (options->session);
  free (options->client);
  free (options->quota_scope);
  free (options);
}

static int
add_input (nsbox_run_options *o, const char *value, struct nsbox_error **err)
{
  if (o->inputs_len >= NSBOX_INPUTS_MAX)
    return nsbox_error_set (err, EINVAL, "too many inputs (at most %d)", NSBOX_INPUTS_MAX);
  cleanup_free char *path = NULL, *name = NULL;
  int r = nsbox_input_spec_parse (value, &path, &name, err);
  if (r < 0)
    return r;
  for (size_t i = 0; i < o->inputs_len; i++)
    if (strcmp (strrchr (o->inputs[i], ':') + 1, name) == 0)
      return nsbox_error_set (err, EINVAL, "two inputs are named '%s'", name);
  if (nsbox_strv_append (&o->inputs, &o->inputs_len, xasprintf ("%s:%s", path, name)) < 0)
    return nsbox_error_oom (err);
  return 0;
}

int
nsbox_run_options_set (nsbox_run_options *o, const char *key, const char *value,
                       struct nsbox_error **err)
{
  if (!o || !key || !value)
    return nsbox_error_set (err, EINVAL, "nsbox_run_options_set: invalid arguments");
  uint64_t v = 0;
  if (strcmp (key, "timeout") == 0)
    {
      if (nsbox_parse_duration (value, &v) < 0 || v == 0)
        return nsbox_error_set (err, EINVAL,
                                "invalid value '%s' for key 'timeout': expected a duration "
                                "such as 5s or 500ms",
                                value);
      o->timeout_ms = v;
      return 0;
    }
  if (strcmp (key, "max-output-bytes") == 0)
    {
      if (nsbox_parse_size_or_zero (value, &v) < 0)
        return nsbox_error_set (err, EINVAL,
                                "invalid value '%s' for key 'max-output-bytes': expected a "
                                "size such as 64k",
                                value);
      o->max_output_bytes = v;
      return 0;
    }
  if (strcmp (key, "inputs") == 0)
    return add_input (o, value, err);
  if (strcmp (key, "session") == 0)
    {
      if (!nsbox_session_valid (value))
        return nsbox_error_set (err, EINVAL,
                                "invalid value for key 'session': expected 1 to %d letters, "
                                "digits and ._:@+=/-",
                                NSBOX_SESSION_MAX);
      return replace_option (&o->session, value) < 0 ? nsbox_error_oom (err) : 0;
    }
  if (strcmp (key, "output-dir") == 0)
    {
      if (!*value)
        return nsbox_error_set (err, EINVAL,
                                "invalid value '' for key 'output-dir': expected "
                                "a directory");
      return replace_option (&o->output_dir, value) < 0 ? nsbox_error_oom (err) : 0;
    }
  if (strcmp (key, "audit-log") == 0 || strcmp (key, "audit-code") == 0)
    return nsbox_error_set (err, EINVAL,
                            "key '%s' cannot be set per run: the audit log is the pool's "
                            "(configure it on the pool)",
                            key);
  if (strncmp (key, "quota-", 6) == 0 && nsbox_config_find_key (key))
    return nsbox_error_set (err, EINVAL,
                            "key '%s' cannot be set per run: the quotas are the pool's "
                            "(configure them on the pool)",
                            key);
  const struct nsbox_key_info *keys = nsbox_config_keys ();
  for (size_t i = 0; keys[i].name; i++)
    if (strcmp (keys[i].name, key) == 0)
      return nsbox_error_set (err, EINVAL,
                              "key '%s' cannot be set per run: it needs a different "
                              "sandbox (a run takes only timeout, max-output-bytes, inputs, "
                              "output-dir and session; configure '%s' on the pool or run it "
                              "without one)",
                              key, key);
  return nsbox_error_set (err, EINVAL, "unknown key '%s'", key);
}
