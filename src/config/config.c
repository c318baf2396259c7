/* The configuration object: made with the defaults, copied, freed, and set
 * and read by key through the table of config_keys.c, which also drives the
 * YAML loader and the CLI flags, so the vocabulary cannot drift apart.
 *
 * Error codes:
 *  - nsbox_config_set, nsbox_config_set_command, nsbox_config_get: -EINVAL
 *    for an unknown key or an invalid value, -ENOMEM when out of memory.
 *  - nsbox_config_load_yaml: the errno of open/read for a file that cannot
 *    be read (-ENOENT: "open config 'FILE': No such file or directory"),
 *    -EFBIG for a file over 1 MiB, -ENOMEM, and -EBADMSG for anything wrong
 *    inside the file, whether YAML syntax, shape (unknown or duplicated key,
 *    wrong type, alias, several documents) or an invalid value. Those
 *    messages start with "FILE:LINE:COL: " (1-based) and, for an invalid
 *    value, carry the same text as nsbox_config_set. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_keys.h"
#include "error.h"
#include "util.h"

static int
unknown_key (struct nsbox_error **err, const char *name)
{
  char shown[SHOWN_SIZE];
  nsbox_config_show_value (name, shown, sizeof shown);
  nsbox_error_set (err, EINVAL, "unknown key '%s'", shown);
  return -EINVAL;
}

/* The configuration object. */

void
nsbox_config_free (nsbox_config *config)
{
  if (!config)
    return;
  free (config->image);
  free (config->rootfs);
  free (config->network);
  nsbox_strv_free (config->env);
  nsbox_strv_free (config->command);
  nsbox_strv_free (config->inputs);
  nsbox_strv_free (config->egress_allow);
  nsbox_strv_free (config->egress_resolve);
  free (config->output_dir);
  free (config->seccomp_policy);
  free (config->store);
  free (config->audit_log);
  free (config->session);
  free (config->quota_state_dir);
  free (config->image_digest);
  nsbox_strv_free (config->base_env);
  free (config);
}

nsbox_config *
nsbox_config_new (struct nsbox_error **err)
{
  static const char *const default_env[] = { "HOME=/tmp" };
  static const char *const default_command[] = { "python", "-" };
  cleanup_config nsbox_config *config = calloc (1, sizeof *config);
  if (!config)
    {
      nsbox_error_oom (err);
      return NULL;
    }
  config->runtime = NSBOX_RUNTIME_NATIVE;
  config->timeout_ms = 5 * 1000;
  config->memory_bytes = 256ULL << 20;
  config->cpus_milli = 500;
  config->pids_limit = 64;
  config->sandbox_idle_timeout_ms = 10 * 60 * 1000;
  config->sandbox_max_lifetime_ms = 60 * 60 * 1000;
  config->max_output_bytes = 65536;
  config->output_capture = NSBOX_CAPTURE_HEAD_TAIL;
  config->tmp_size_bytes = 64ULL << 20;
  config->uid = 65534;
  config->gid = 65534;
  config->strict = false;
  config->quota_window_ms = 60 * 60 * 1000;
  config->egress_connections = 64;
  config->egress_concurrent = 8;
  config->egress_bytes = 256ULL << 20;
  config->egress_idle_ms = 30 * 1000;
  config->image = strdup ("python:3.12-slim");
  config->network = strdup ("none");
  config->env = nsbox_strv_dup (default_env, ARRAY_SIZE (default_env));
  config->env_len = ARRAY_SIZE (default_env);
  config->command = nsbox_strv_dup (default_command, ARRAY_SIZE (default_command));
  config->command_len = ARRAY_SIZE (default_command);
  if (!config->image || !config->network || !config->env || !config->command)
    {
      nsbox_error_oom (err);
      return NULL;
    }
  return TAKE_PTR (config);
}

static char *
strdup_or_null (const char *text, bool *failed)
{
  char *copy = text ? strdup (text) : NULL;
  if (text && !copy)
    *failed = true;
  return copy;
}

int
nsbox_config_set_image_digest (nsbox_config *config, const char *digest, struct nsbox_error **err)
{
  return nsbox_config_replace_string (&config->image_digest, digest ? digest : "", true, err);
}

int
nsbox_config_set_quota_state (nsbox_config *config, const char *dir, struct nsbox_error **err)
{
  return nsbox_config_replace_string (&config->quota_state_dir, dir ? dir : "", true, err);
}

int
nsbox_config_set_base_env (nsbox_config *config, const char *const *env, size_t len,
                           struct nsbox_error **err)
{
  char **copy = NULL;
  if (env && !(copy = nsbox_strv_dup (env, len)))
    return nsbox_error_oom (err);
  nsbox_strv_free (config->base_env);
  config->base_env = copy;
  config->base_env_len = env ? len : 0;
  return 0;
}

nsbox_config *
nsbox_config_dup (const nsbox_config *config, struct nsbox_error **err)
{
  if (!config)
    {
      nsbox_error_set (err, EINVAL, "no configuration given");
      return NULL;
    }
  cleanup_config nsbox_config *copy = calloc (1, sizeof *copy);
  if (!copy)
    {
      nsbox_error_oom (err);
      return NULL;
    }
  *copy = *config;
  bool failed = false;
  copy->image = strdup_or_null (config->image, &failed);
  copy->rootfs = strdup_or_null (config->rootfs, &failed);
  copy->network = strdup_or_null (config->network, &failed);
  copy->seccomp_policy = strdup_or_null (config->seccomp_policy, &failed);
  copy->store = strdup_or_null (config->store, &failed);
  copy->output_dir = strdup_or_null (config->output_dir, &failed);
  copy->audit_log = strdup_or_null (config->audit_log, &failed);
  copy->session = strdup_or_null (config->session, &failed);
  copy->quota_state_dir = strdup_or_null (config->quota_state_dir, &failed);
  copy->image_digest = strdup_or_null (config->image_digest, &failed);
  copy->inputs = NULL;
  if (config->inputs
      && !(copy->inputs = nsbox_strv_dup ((const char *const *)config->inputs, config->inputs_len)))
    failed = true;
  copy->egress_allow = NULL;
  if (config->egress_allow
      && !(copy->egress_allow
           = nsbox_strv_dup ((const char *const *)config->egress_allow, config->egress_allow_len)))
    failed = true;
  copy->egress_resolve = NULL;
  if (config->egress_resolve
      && !(copy->egress_resolve = nsbox_strv_dup ((const char *const *)config->egress_resolve,
                                                  config->egress_resolve_len)))
    failed = true;
  copy->base_env = NULL;
  if (config->base_env
      && !(copy->base_env
           = nsbox_strv_dup ((const char *const *)config->base_env, config->base_env_len)))
    failed = true;
  copy->env = nsbox_strv_dup ((const char *const *)config->env, config->env_len);
  copy->command = nsbox_strv_dup ((const char *const *)config->command, config->command_len);
  if (failed || !copy->env || !copy->command)
    {
      nsbox_error_oom (err);
      return NULL;
    }
  return TAKE_PTR (copy);
}

int
nsbox_config_set (nsbox_config *config, const char *key, const char *value,
                  struct nsbox_error **err)
{
  if (!config || !key)
    return nsbox_error_set (err, EINVAL, "no configuration or key given");
  const struct config_key *entry = nsbox_config_find_key (key);
  if (!entry)
    return unknown_key (err, key);
  if (!value)
    return nsbox_error_set (err, EINVAL, "missing value for '%s'", entry->name);
  return nsbox_config_key_set (config, entry, value, err);
}

int
nsbox_config_set_command (nsbox_config *config, size_t argc, const char *const *argv,
                          struct nsbox_error **err)
{
  if (!config || argc == 0 || !argv)
    return nsbox_error_set (err, EINVAL, "'command' must have at least one argument");
  if (argc > COMMAND_MAX)
    return nsbox_error_set (err, EINVAL, "too many entries in 'command' (at most %d)", COMMAND_MAX);
  for (size_t i = 0; i < argc; i++)
    if (!argv[i])
      return nsbox_error_set (err, EINVAL, "'command' argument %zu is missing", i);
  if (argv[0][0] == '\0')
    return nsbox_error_set (err, EINVAL, "the program in 'command' must not be empty");
  char **command = nsbox_strv_dup (argv, argc);
  if (!command)
    return nsbox_error_oom (err);
  nsbox_strv_free (config->command);
  config->command = command;
  config->command_len = argc;
  return 0;
}

char *
nsbox_config_get (const nsbox_config *config, const char *key, struct nsbox_error **err)
{
  if (!config || !key)
    {
      nsbox_error_set (err, EINVAL, "no configuration or key given");
      return NULL;
    }
  const struct config_key *entry = nsbox_config_find_key (key);
  if (!entry)
    {
      unknown_key (err, key);
      return NULL;
    }
  char *value = nsbox_config_key_get (config, entry);
  if (!value)
    nsbox_error_oom (err);
  return value;
}
