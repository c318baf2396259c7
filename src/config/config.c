/* The configuration: one table of keys drives the C setter and getter, the
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

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "config_keys.h"
#include "egress_names.h"
#include "error.h"
#include "file_names.h"
#include "util.h"

#define TIMEOUT_MAX_MS (24ULL * 60 * 60 * 1000)
/* cpu.max refuses a quota below 1ms per 100ms period. */
#define CPUS_MIN_MILLI 10ULL
#define CPUS_MAX_MILLI (1024ULL * 1000)
/* PID_MAX_LIMIT: no kernel can have more tasks than this. */
#define PIDS_MAX 4194304ULL
/* Quotas: a token every 60 µs at most; a year of CPU or run time; a
 * window of a second (buckets of 16 ms) to a month. */
#define QUOTA_RATE_MAX 1000000ULL
#define QUOTA_TIME_MAX_MS (8760ULL * 60 * 60 * 1000)
#define QUOTA_WINDOW_MIN_MS 1000ULL
#define QUOTA_WINDOW_MAX_MS (744ULL * 60 * 60 * 1000)
/* Each stream is held in the launcher's memory up to this cap. */
#define MAX_OUTPUT_MAX (1ULL << 30)
/* (uid_t) -1 means "unchanged" to setuid and friends. */
#define ID_MAX 4294967294ULL

static char *
format_string_list (char *const *items, size_t count)
{
  char *text = NULL;
  size_t len = 0;
  cleanup_fclose FILE *out = open_memstream (&text, &len);
  if (!out)
    return NULL;
  fputc ('[', out);
  for (size_t i = 0; i < count; i++)
    {
      fputs (i ? ", \"" : "\"", out);
      for (const unsigned char *c = (const unsigned char *)items[i]; *c; c++)
        {
          if (*c == '"' || *c == '\\')
            fprintf (out, "\\%c", *c);
          else if (*c == '\n')
            fputs ("\\n", out);
          else if (*c < 0x20 || *c == 0x7f)
            fprintf (out, "\\u%04x", *c);
          else
            fputc (*c, out);
        }
      fputc ('"', out);
    }
  fputc (']', out);
  bool failed = ferror (out) != 0;
  if (fclose (TAKE_PTR (out)) != 0 || failed)
    {
      free (text);
      return NULL;
    }
  return text;
}

/* Messages. */

/* Copies value for a message: control characters escaped and long values
 * cut, so the message stays one readable line. */
void
nsbox_config_show_value (const char *value, char *shown, size_t size)
{
  size_t used = 0;
  const unsigned char *start = (const unsigned char *)(value ? value : "");
  const unsigned char *c = start;
  for (; *c && used + 8 < size && c - start < SHOWN_VALUE_MAX; c++)
    {
      if (*c < 0x20 || *c == 0x7f)
        used += (size_t)snprintf (shown + used, size - used, "\\x%02x", *c);
      else
        shown[used++] = (char)*c;
    }
  if (*c)
    used += (size_t)snprintf (shown + used, size - used, "...");
  shown[used] = '\0';
}

static int
invalid_value (struct nsbox_error **err, const char *key, const char *value, const char *expected)
{
  char shown[SHOWN_SIZE];
  nsbox_config_show_value (value, shown, sizeof shown);
  nsbox_error_set (err, EINVAL, "invalid value for '%s': '%s' (expected %s)", key, shown, expected);
  return -EINVAL;
}

/* Replaces *field with a copy of value, or NULL for an empty value when
 * empty_unsets. */
static int
replace_string (char **field, const char *value, bool empty_unsets, struct nsbox_error **err)
{
  char *copy = NULL;
  if (!(empty_unsets && *value == '\0') && !(copy = strdup (value)))
    return nsbox_error_oom (err);
  free (*field);
  *field = copy;
  return 0;
}

static int
set_uint64 (uint64_t *field, const struct config_key *key, const char *value,
            int (*parse) (const char *, uint64_t *), uint64_t min, uint64_t max,
            struct nsbox_error **err)
{
  uint64_t parsed;
  if (parse (value, &parsed) < 0 || parsed < min || parsed > max)
    return invalid_value (err, key->name, value, key->expected);
  *field = parsed;
  return 0;
}

static int
set_image (nsbox_config *config, const struct config_key *key, const char *value,
           struct nsbox_error **err)
{
  /* Image references are printable ASCII without spaces. */
  for (const char *c = value; *c; c++)
    if (*c <= ' ' || *c >= 0x7f)
      return invalid_value (err, key->name, value, key->expected);
  if (*value == '\0')
    return invalid_value (err, key->name, value, key->expected);
  return replace_string (&config->image, value, false, err);
}

static char *
get_image (const nsbox_config *config)
{
  return strdup (config->image);
}

static int
set_rootfs (nsbox_config *config, const struct config_key *key, const char *value,
            struct nsbox_error **err)
{
  (void)key;
  return replace_string (&config->rootfs, value, true, err);
}

static char *
get_rootfs (const nsbox_config *config)
{
  return strdup (config->rootfs ? config->rootfs : "");
}

static const char *const runtime_names[] = {
  [NSBOX_RUNTIME_NATIVE] = "native",
  [NSBOX_RUNTIME_RUNSC] = "runsc",
  [NSBOX_RUNTIME_AUTO] = "auto",
};

static int
set_runtime (nsbox_config *config, const struct config_key *key, const char *value,
             struct nsbox_error **err)
{
  for (size_t i = 0; i < ARRAY_SIZE (runtime_names); i++)
    if (strcmp (value, runtime_names[i]) == 0)
      {
        config->runtime = (enum nsbox_runtime)i;
        return 0;
      }
  return invalid_value (err, key->name, value, key->expected);
}

static char *
get_runtime (const nsbox_config *config)
{
  return strdup (runtime_names[config->runtime]);
}

static int
set_timeout (nsbox_config *config, const struct config_key *key, const char *value,
             struct nsbox_error **err)
{
  return set_uint64 (&config->timeout_ms, key, value, nsbox_parse_duration, 1, TIMEOUT_MAX_MS, err);
}

static char *
get_timeout (const nsbox_config *config)
{
  return nsbox_format_duration (config->timeout_ms);
}

static int
set_memory (nsbox_config *config, const struct config_key *key, const char *value,
            struct nsbox_error **err)
{
  return set_uint64 (&config->memory_bytes, key, value, nsbox_parse_size, 1, UINT64_MAX, err);
}

static char *
get_memory (const nsbox_config *config)
{
  return nsbox_format_size (config->memory_bytes);
}

static int
set_cpus (nsbox_config *config, const struct config_key *key, const char *value,
          struct nsbox_error **err)
{
  return set_uint64 (&config->cpus_milli, key, value, nsbox_parse_cpus, CPUS_MIN_MILLI,
                     CPUS_MAX_MILLI, err);
}

static char *
get_cpus (const nsbox_config *config)
{
  return nsbox_format_cpus (config->cpus_milli);
}

static int
set_pids_limit (nsbox_config *config, const struct config_key *key, const char *value,
                struct nsbox_error **err)
{
  return set_uint64 (&config->pids_limit, key, value, nsbox_parse_count, 1, PIDS_MAX, err);
}

static char *
get_pids_limit (const nsbox_config *config)
{
  return xasprintf ("%" PRIu64, config->pids_limit);
}

static int
set_max_output_bytes (nsbox_config *config, const struct config_key *key, const char *value,
                      struct nsbox_error **err)
{
  return set_uint64 (&config->max_output_bytes, key, value, nsbox_parse_size_or_zero, 0,
                     MAX_OUTPUT_MAX, err);
}

static char *
get_max_output_bytes (const nsbox_config *config)
{
  return xasprintf ("%" PRIu64, config->max_output_bytes);
}

static int
set_output_capture (nsbox_config *config, const struct config_key *key, const char *value,
                    struct nsbox_error **err)
{
  if (nsbox_capture_mode_parse (value, &config->output_capture) < 0)
    return invalid_value (err, key->name, value, key->expected);
  return 0;
}

static char *
get_output_capture (const nsbox_config *config)
{
  return strdup (nsbox_capture_mode_name (config->output_capture));
}

static int
set_tmp_size (nsbox_config *config, const struct config_key *key, const char *value,
              struct nsbox_error **err)
{
  return set_uint64 (&config->tmp_size_bytes, key, value, nsbox_parse_size, 1, UINT64_MAX, err);
}

static char *
get_tmp_size (const nsbox_config *config)
{
  return nsbox_format_size (config->tmp_size_bytes);
}

static int
set_network (nsbox_config *config, const struct config_key *key, const char *value,
             struct nsbox_error **err)
{
  if (strcmp (value, "none") != 0 && strcmp (value, "proxy") != 0)
    return invalid_value (err, key->name, value, key->expected);
  return replace_string (&config->network, value, false, err);
}

static char *
get_network (const nsbox_config *config)
{
  return strdup (config->network);
}

static int
parse_id (const char **text, uint64_t *id)
{
  uint64_t parsed;
  int r = nsbox_parse_digits (text, &parsed);
  if (r < 0)
    return r;
  if (parsed > ID_MAX)
    return -ERANGE;
  *id = parsed;
  return 0;
}

static int
set_user (nsbox_config *config, const struct config_key *key, const char *value,
          struct nsbox_error **err)
{
  const char *s = value;
  uint64_t uid, gid;
  if (parse_id (&s, &uid) < 0)
    return invalid_value (err, key->name, value, key->expected);
  gid = uid;
  if (*s == ':')
    {
      s++;
      if (parse_id (&s, &gid) < 0)
        return invalid_value (err, key->name, value, key->expected);
    }
  if (*s)
    return invalid_value (err, key->name, value, key->expected);
  config->uid = (uid_t)uid;
  config->gid = (gid_t)gid;
  return 0;
}

static char *
get_user (const nsbox_config *config)
{
  return xasprintf ("%" PRIu64 ":%" PRIu64, (uint64_t)config->uid, (uint64_t)config->gid);
}

static bool
is_name_char (char c, bool first)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'
         || (!first && nsbox_is_digit (c));
}

/* Length of a valid variable name at the start of text, or 0. */
size_t
nsbox_env_name_length (const char *text)
{
  size_t len = 0;
  while (is_name_char (text[len], len == 0))
    len++;
  return len;
}

static int
set_env (nsbox_config *config, const struct config_key *key, const char *value,
         struct nsbox_error **err)
{
  size_t name_len = nsbox_env_name_length (value);
  if (name_len == 0 || value[name_len] != '=')
    return invalid_value (err, key->name, value, key->expected);
  size_t found = 0;
  while (found < config->env_len && strncmp (config->env[found], value, name_len + 1) != 0)
    found++;
  if (found == config->env_len && config->env_len >= ENV_MAX)
    return nsbox_error_set (err, EINVAL, "too many entries in '%s' (at most %d)", key->name,
                            ENV_MAX);
  if (found == config->env_len)
    return nsbox_strv_append (&config->env, &config->env_len, strdup (value)) < 0
               ? nsbox_error_oom (err)
               : 0;
  char *entry = strdup (value);
  if (!entry)
    return nsbox_error_oom (err);
  free (config->env[found]);
  config->env[found] = entry;
  return 0;
}

static char *
get_env (const nsbox_config *config)
{
  return format_string_list (config->env, config->env_len);
}

/* `command` through the setter appends one argument. */
static int
set_command (nsbox_config *config, const struct config_key *key, const char *value,
             struct nsbox_error **err)
{
  if (config->command_len >= COMMAND_MAX)
    return nsbox_error_set (err, EINVAL, "too many entries in '%s' (at most %d)", key->name,
                            COMMAND_MAX);
  if (nsbox_strv_append (&config->command, &config->command_len, strdup (value)) < 0)
    return nsbox_error_oom (err);
  return 0;
}

static char *
get_command (const nsbox_config *config)
{
  return format_string_list (config->command, config->command_len);
}

/* `inputs` through the setter adds one "PATH[:NAME]"; an empty value
 * clears the list. */
static int
set_inputs (nsbox_config *config, const struct config_key *key, const char *value,
            struct nsbox_error **err)
{
  if (*value == '\0')
    {
      nsbox_strv_free (TAKE_PTR (config->inputs));
      config->inputs_len = 0;
      return 0;
    }
  if (config->inputs_len >= NSBOX_INPUTS_MAX)
    return nsbox_error_set (err, EINVAL, "too many entries in '%s' (at most %d)", key->name,
                            NSBOX_INPUTS_MAX);
  cleanup_free char *path = NULL, *name = NULL;
  int r = nsbox_input_spec_parse (value, &path, &name, err);
  if (r < 0)
    return r;
  for (size_t i = 0; i < config->inputs_len; i++)
    if (strcmp (strrchr (config->inputs[i], ':') + 1, name) == 0)
      return nsbox_error_set (err, EINVAL, "two inputs are named '%s' (give another as PATH:NAME)",
                              name);
  if (nsbox_strv_append (&config->inputs, &config->inputs_len, xasprintf ("%s:%s", path, name)) < 0)
    return nsbox_error_oom (err);
  return 0;
}

static char *
get_inputs (const nsbox_config *config)
{
  return format_string_list (config->inputs, config->inputs_len);
}

static int
set_output_dir (nsbox_config *config, const struct config_key *key, const char *value,
                struct nsbox_error **err)
{
  (void)key;
  return replace_string (&config->output_dir, value, true, err);
}

static char *
get_output_dir (const nsbox_config *config)
{
  return strdup (config->output_dir ? config->output_dir : "");
}

static int
set_boolean (bool *field, const struct config_key *key, const char *value, struct nsbox_error **err)
{
  static const struct
  {
    const char *text;
    bool value;
  } words[] = {
    { "true", true },   { "yes", true }, { "1", true },
    { "false", false }, { "no", false }, { "0", false },
  };
  for (size_t i = 0; i < ARRAY_SIZE (words); i++)
    if (strcasecmp (value, words[i].text) == 0)
      {
        *field = words[i].value;
        return 0;
      }
  return invalid_value (err, key->name, value, key->expected);
}

static int
set_strict (nsbox_config *config, const struct config_key *key, const char *value,
            struct nsbox_error **err)
{
  return set_boolean (&config->strict, key, value, err);
}

static char *
get_strict (const nsbox_config *config)
{
  return strdup (config->strict ? "true" : "false");
}

/* `audit-log`: a path, or fd:N for a descriptor the caller keeps open. */
static int
set_audit_log (nsbox_config *config, const struct config_key *key, const char *value,
               struct nsbox_error **err)
{
  if (strncmp (value, "fd:", 3) == 0)
    {
      uint64_t fd;
      if (nsbox_parse_count (value + 3, &fd) < 0 || fd > INT32_MAX)
        return invalid_value (err, key->name, value, key->expected);
    }
  return replace_string (&config->audit_log, value, true, err);
}

static char *
get_audit_log (const nsbox_config *config)
{
  return strdup (config->audit_log ? config->audit_log : "");
}

static int
set_audit_code (nsbox_config *config, const struct config_key *key, const char *value,
                struct nsbox_error **err)
{
  return set_boolean (&config->audit_code, key, value, err);
}

static char *
get_audit_code (const nsbox_config *config)
{
  return strdup (config->audit_code ? "true" : "false");
}

bool
nsbox_session_valid (const char *value)
{
  size_t len = strlen (value);
  if (len == 0 || len > NSBOX_SESSION_MAX)
    return false;
  for (size_t i = 0; i < len; i++)
    if (!isalnum ((unsigned char)value[i]) && !strchr ("._:@+=/-", value[i]))
      return false;
  return true;
}

static int
set_session (nsbox_config *config, const struct config_key *key, const char *value,
             struct nsbox_error **err)
{
  if (*value && !nsbox_session_valid (value))
    return invalid_value (err, key->name, value, key->expected);
  return replace_string (&config->session, value, true, err);
}

static char *
get_session (const nsbox_config *config)
{
  return strdup (config->session ? config->session : "");
}

static int
set_seccomp_policy (nsbox_config *config, const struct config_key *key, const char *value,
                    struct nsbox_error **err)
{
  (void)key;
  return replace_string (&config->seccomp_policy, value, true, err);
}

static char *
get_seccomp_policy (const nsbox_config *config)
{
  return strdup (config->seccomp_policy ? config->seccomp_policy : "");
}

static int
set_pull (nsbox_config *config, const struct config_key *key, const char *value,
          struct nsbox_error **err)
{
  if (nsbox_pull_policy_parse (value, &config->pull) < 0)
    return invalid_value (err, key->name, value, key->expected);
  return 0;
}

static char *
get_pull (const nsbox_config *config)
{
  return strdup (nsbox_pull_policy_name (config->pull));
}

static int
set_store (nsbox_config *config, const struct config_key *key, const char *value,
           struct nsbox_error **err)
{
  (void)key;
  return replace_string (&config->store, value, true, err);
}

static char *
get_store (const nsbox_config *config)
{
  return strdup (config->store ? config->store : "");
}

/* Quotas: empty (a YAML null) for none. */
static int
set_quota (uint64_t *field, const struct config_key *key, const char *value,
           int (*parse) (const char *, uint64_t *), uint64_t max, struct nsbox_error **err)
{
  if (*value == '\0')
    {
      *field = 0;
      return 0;
    }
  return set_uint64 (field, key, value, parse, 1, max, err);
}

static int
set_quota_runs_per_minute (nsbox_config *config, const struct config_key *key, const char *value,
                           struct nsbox_error **err)
{
  return set_quota (&config->quota_runs_per_minute, key, value, nsbox_parse_count, QUOTA_RATE_MAX,
                    err);
}

static char *
get_quota_runs_per_minute (const nsbox_config *config)
{
  return config->quota_runs_per_minute ? xasprintf ("%" PRIu64, config->quota_runs_per_minute)
                                       : strdup ("");
}

static int
set_quota_concurrent (nsbox_config *config, const struct config_key *key, const char *value,
                      struct nsbox_error **err)
{
  return set_quota (&config->quota_concurrent, key, value, nsbox_parse_count,
                    NSBOX_QUOTA_FLIGHTS_MAX, err);
}

static char *
get_quota_concurrent (const nsbox_config *config)
{
  return config->quota_concurrent ? xasprintf ("%" PRIu64, config->quota_concurrent) : strdup ("");
}

static int
set_quota_cpu_time (nsbox_config *config, const struct config_key *key, const char *value,
                    struct nsbox_error **err)
{
  return set_quota (&config->quota_cpu_ms, key, value, nsbox_parse_duration, QUOTA_TIME_MAX_MS,
                    err);
}

static char *
get_quota_cpu_time (const nsbox_config *config)
{
  return config->quota_cpu_ms ? nsbox_format_duration (config->quota_cpu_ms) : strdup ("");
}

static int
set_quota_wall_time (nsbox_config *config, const struct config_key *key, const char *value,
                     struct nsbox_error **err)
{
  return set_quota (&config->quota_wall_ms, key, value, nsbox_parse_duration, QUOTA_TIME_MAX_MS,
                    err);
}

static char *
get_quota_wall_time (const nsbox_config *config)
{
  return config->quota_wall_ms ? nsbox_format_duration (config->quota_wall_ms) : strdup ("");
}

static int
set_quota_window (nsbox_config *config, const struct config_key *key, const char *value,
                  struct nsbox_error **err)
{
  return set_uint64 (&config->quota_window_ms, key, value, nsbox_parse_duration,
                     QUOTA_WINDOW_MIN_MS, QUOTA_WINDOW_MAX_MS, err);
}

static char *
get_quota_window (const nsbox_config *config)
{
  return nsbox_format_duration (config->quota_window_ms);
}

/* network: proxy. Lists: each use adds one entry, an empty value clears. */
static int
add_egress_entry (char ***list, size_t *len, const struct config_key *key, const char *value,
                  const char *normalised, const char *why, struct nsbox_error **err)
{
  if (why)
    {
      char shown[SHOWN_SIZE];
      nsbox_config_show_value (value, shown, sizeof shown);
      return nsbox_error_set (err, EINVAL, "invalid value for '%s': '%s': %s (expected %s)",
                              key->name, shown, why, key->expected);
    }
  for (size_t i = 0; i < *len; i++)
    if (strcmp ((*list)[i], normalised) == 0)
      return 0;
  if (*len >= NSBOX_EGRESS_LIST_MAX)
    return nsbox_error_set (err, EINVAL, "too many entries in '%s' (at most %d)", key->name,
                            NSBOX_EGRESS_LIST_MAX);
  if (nsbox_strv_append (list, len, strdup (normalised)) < 0)
    return nsbox_error_oom (err);
  return 0;
}

static void
clear_list (char ***list, size_t *len)
{
  nsbox_strv_free (TAKE_PTR (*list));
  *len = 0;
}

static int
set_egress_allow (nsbox_config *config, const struct config_key *key, const char *value,
                  struct nsbox_error **err)
{
  if (*value == '\0')
    {
      clear_list (&config->egress_allow, &config->egress_allow_len);
      return 0;
    }
  char pattern[NSBOX_EGRESS_HOST_MAX + 3];
  const char *why = nsbox_egress_pattern_normalize (value, pattern);
  return add_egress_entry (&config->egress_allow, &config->egress_allow_len, key, value, pattern,
                           why, err);
}

static char *
get_egress_allow (const nsbox_config *config)
{
  return format_string_list (config->egress_allow, config->egress_allow_len);
}

/* A name is pinned to one address: a second pin of it replaces the first. */
static int
set_egress_resolve (nsbox_config *config, const struct config_key *key, const char *value,
                    struct nsbox_error **err)
{
  if (*value == '\0')
    {
      clear_list (&config->egress_resolve, &config->egress_resolve_len);
      return 0;
    }
  char name[NSBOX_EGRESS_HOST_MAX + 1], shown[INET6_ADDRSTRLEN];
  struct sockaddr_storage address;
  const char *why = nsbox_egress_pin_parse (value, name, &address);
  cleanup_free char *entry = NULL;
  if (!why)
    {
      nsbox_egress_address_text ((const struct sockaddr *)&address, shown, sizeof shown);
      if (!(entry = xasprintf ("%s=%s", name, shown)))
        return nsbox_error_oom (err);
      size_t nl = strlen (name) + 1;
      for (size_t i = 0; i < config->egress_resolve_len; i++)
        if (strncmp (config->egress_resolve[i], entry, nl) == 0)
          {
            free (config->egress_resolve[i]);
            config->egress_resolve[i] = TAKE_PTR (entry);
            return 0;
          }
    }
  return add_egress_entry (&config->egress_resolve, &config->egress_resolve_len, key, value, entry,
                           why, err);
}

static char *
get_egress_resolve (const nsbox_config *config)
{
  return format_string_list (config->egress_resolve, config->egress_resolve_len);
}

static int
set_egress_ports (nsbox_config *config, const struct config_key *key, const char *value,
                  struct nsbox_error **err)
{
  if (*value == '\0')
    {
      config->egress_ports_len = 0;
      return 0;
    }
  uint64_t port;
  if (nsbox_parse_count (value, &port) < 0 || port < 1 || port > 65535)
    return invalid_value (err, key->name, value, key->expected);
  for (size_t i = 0; i < config->egress_ports_len; i++)
    if (config->egress_ports[i] == port)
      return 0;
  if (config->egress_ports_len >= NSBOX_EGRESS_PORTS_MAX)
    return nsbox_error_set (err, EINVAL, "too many entries in '%s' (at most %d)", key->name,
                            NSBOX_EGRESS_PORTS_MAX);
  config->egress_ports[config->egress_ports_len++] = (uint16_t)port;
  return 0;
}

static char *
get_egress_ports (const nsbox_config *config)
{
  static const uint16_t dflt[] = NSBOX_EGRESS_DEFAULT_PORTS;
  const uint16_t *ports = config->egress_ports_len ? config->egress_ports : dflt;
  size_t n = config->egress_ports_len ? config->egress_ports_len : ARRAY_SIZE (dflt);
  char *text = strdup ("[");
  for (size_t i = 0; text && i < n; i++)
    {
      char *next = xasprintf ("%s%s%u", text, i ? ", " : "", (unsigned)ports[i]);
      free (text);
      text = next;
    }
  char *done = text ? xasprintf ("%s]", text) : NULL;
  free (text);
  return done;
}

static int
set_egress_connections (nsbox_config *config, const struct config_key *key, const char *value,
                        struct nsbox_error **err)
{
  return set_uint64 (&config->egress_connections, key, value, nsbox_parse_count, 1, 1000000, err);
}

static char *
get_egress_connections (const nsbox_config *config)
{
  return xasprintf ("%" PRIu64, config->egress_connections);
}

static int
set_egress_concurrent (nsbox_config *config, const struct config_key *key, const char *value,
                       struct nsbox_error **err)
{
  return set_uint64 (&config->egress_concurrent, key, value, nsbox_parse_count, 1, 1024, err);
}

static char *
get_egress_concurrent (const nsbox_config *config)
{
  return xasprintf ("%" PRIu64, config->egress_concurrent);
}

static int
set_egress_bytes (nsbox_config *config, const struct config_key *key, const char *value,
                  struct nsbox_error **err)
{
  return set_uint64 (&config->egress_bytes, key, value, nsbox_parse_size, 1, UINT64_MAX, err);
}

static char *
get_egress_bytes (const nsbox_config *config)
{
  return nsbox_format_size (config->egress_bytes);
}

static int
set_egress_idle_timeout (nsbox_config *config, const struct config_key *key, const char *value,
                         struct nsbox_error **err)
{
  return set_uint64 (&config->egress_idle_ms, key, value, nsbox_parse_duration, 1, TIMEOUT_MAX_MS,
                     err);
}

static char *
get_egress_idle_timeout (const nsbox_config *config)
{
  return nsbox_format_duration (config->egress_idle_ms);
}

/* The one table of keys: (identifier, name, flags, YAML loader, help for the
 * CLI, what a valid value looks like). Setter and getter are set_<id> and
 * get_<id>. */
#define CONFIG_KEYS(X)                                                                             \
  X (image, "image", 0, nsbox_config_load_scalar,                                                  \
     "OCI image reference (default python:3.12-slim)",                                             \
     "an image reference such as python:3.12-slim")                                                \
  X (rootfs, "rootfs", KEY_NULLABLE, nsbox_config_load_scalar,                                     \
     "unpacked root filesystem directory, used instead of the image (default unset)",              \
     "a directory")                                                                                \
  X (runtime, "runtime", 0, nsbox_config_load_scalar, "native, runsc or auto (default native)",    \
     "native, runsc or auto")                                                                      \
  X (timeout, "timeout", 0, nsbox_config_load_scalar,                                              \
     "wall-clock limit for the whole run, such as 500ms, 5s or 1m (default 5s)",                   \
     "a duration such as 5s or 500ms, at most 24h")                                                \
  X (memory, "memory", 0, nsbox_config_load_scalar, "memory limit, swap disabled (default 256m)",  \
     "a size such as 256m")                                                                        \
  X (cpus, "cpus", 0, nsbox_config_load_scalar,                                                    \
     "CPU bandwidth in CPUs, such as 0.5 or 2 (default 0.5)",                                      \
     "a number of CPUs from 0.01 to 1024 such as 0.5")                                             \
  X (pids_limit, "pids-limit", 0, nsbox_config_load_scalar,                                        \
     "maximum number of tasks (default 64)", "a whole number from 1 to 4194304")                   \
  X (max_output_bytes, "max-output-bytes", 0, nsbox_config_load_scalar,                            \
     "cap on captured bytes, stdout and stderr each (default 65536)",                              \
     "a size from 0 to 1g such as 65536")                                                          \
  X (output_capture, "output-capture", 0, nsbox_config_load_scalar,                                \
     "past max-output-bytes keep the head, or the head and the tail (default head-tail)",          \
     "head or head-tail")                                                                          \
  X (tmp_size, "tmp-size", 0, nsbox_config_load_scalar,                                            \
     "size of the writable tmpfs at /tmp (default 64m)", "a size such as 64m")                     \
  X (network, "network", 0, nsbox_config_load_scalar,                                              \
     "none: loopback only; proxy: only through the launcher's egress proxy (default none)",        \
     "none or proxy")                                                                              \
  X (egress_allow, "egress-allow", KEY_REPEATABLE | KEY_NULLABLE, nsbox_config_load_list,          \
     "network proxy: a host name, or *.name for the names below it, the sandbox may reach, "       \
     "repeatable",                                                                                 \
     "a host name such as pypi.org or *.example.com, never an IP address")                         \
  X (egress_resolve, "egress-resolve", KEY_REPEATABLE | KEY_NULLABLE, nsbox_config_load_list,      \
     "network proxy: NAME=ADDRESS pins an allowed name to an address (the only way to a private "  \
     "one), repeatable",                                                                           \
     "NAME=ADDRESS such as mirror.internal=10.1.2.3")                                              \
  X (egress_ports, "egress-ports", KEY_REPEATABLE | KEY_NULLABLE, nsbox_config_load_list,          \
     "network proxy: a port the proxy connects to, repeatable (default 80 and 443)",               \
     "a port from 1 to 65535")                                                                     \
  X (egress_connections, "egress-connections", 0, nsbox_config_load_scalar,                        \
     "network proxy: connections a run may open in all (default 64)",                              \
     "a whole number from 1 to 1000000")                                                           \
  X (egress_concurrent, "egress-concurrent", 0, nsbox_config_load_scalar,                          \
     "network proxy: connections open at once (default 8)", "a whole number from 1 to 1024")       \
  X (egress_bytes, "egress-bytes", 0, nsbox_config_load_scalar,                                    \
     "network proxy: bytes a run may send, and receive, in all (default 256m)",                    \
     "a size such as 256m")                                                                        \
  X (egress_idle_timeout, "egress-idle-timeout", 0, nsbox_config_load_scalar,                      \
     "network proxy: a connection with no bytes either way this long is closed (default 30s)",     \
     "a duration such as 30s, at most 24h")                                                        \
  X (user, "user", 0, nsbox_config_load_scalar,                                                    \
     "uid:gid inside the sandbox (default 65534:65534)",                                           \
     "uid:gid or uid, numbers from 0 to 4294967294")                                               \
  X (env, "env", KEY_REPEATABLE, nsbox_config_load_env,                                            \
     "NAME=VALUE added to the environment, repeatable (default HOME=/tmp)",                        \
     "NAME=VALUE with a name of letters, digits and underscores not starting with a digit")        \
  X (command, "command", KEY_REPEATABLE, nsbox_config_load_command,                                \
     "argument appended to the command, repeatable (default python -)", "an argument")             \
  X (inputs, "inputs", KEY_REPEATABLE | KEY_NULLABLE, nsbox_config_load_list,                      \
     "PATH[:NAME]: a file copied read-only to /mnt/in/NAME, repeatable (flag --input)",            \
     "PATH or PATH:NAME, NAME without '/', ':' or control characters")                             \
  X (output_dir, "output-dir", KEY_NULLABLE, nsbox_config_load_scalar,                             \
     "directory that receives the files the program leaves in /tmp/out (default unset)",           \
     "a directory")                                                                                \
  X (strict, "strict", KEY_BOOLEAN, nsbox_config_load_scalar,                                      \
     "refuse to run when a limit cannot be enforced (default false)",                              \
     "true, false, yes, no, 1 or 0")                                                               \
  X (seccomp_policy, "seccomp-policy", KEY_NULLABLE, nsbox_config_load_scalar,                     \
     "seccomp policy YAML file (default the built-in policy)", "a file")                           \
  X (pull, "pull", 0, nsbox_config_load_scalar,                                                    \
     "pull the image: missing, always or never (default missing)", "missing, always or never")     \
  X (store, "store", KEY_NULLABLE, nsbox_config_load_scalar,                                       \
     "image store directory (default $NSBOX_STORE, else the per-user cache)", "a directory")       \
  X (audit_log, "audit-log", KEY_NULLABLE, nsbox_config_load_scalar,                               \
     "append a JSON Lines record of each run to this file, or fd:N (default unset)",               \
     "a file path or fd:N")                                                                        \
  X (audit_code, "audit-code", KEY_BOOLEAN, nsbox_config_load_scalar,                              \
     "the audit record also holds the code and its output (default false)",                        \
     "true, false, yes, no, 1 or 0")                                                               \
  X (session, "session", KEY_NULLABLE, nsbox_config_load_scalar,                                   \
     "the caller's session id, for the audit log and the quotas (default unset)",                  \
     "1 to 128 letters, digits and ._:@+=/-")                                                      \
  X (quota_runs_per_minute, "quota-runs-per-minute", KEY_NULLABLE, nsbox_config_load_scalar,       \
     "runs a session may start per minute, in bursts of as many (default unset: no limit)",        \
     "a whole number from 1 to 1000000")                                                           \
  X (quota_concurrent, "quota-concurrent", KEY_NULLABLE, nsbox_config_load_scalar,                 \
     "runs of a session at once (default unset: no limit)", "a whole number from 1 to 1024")       \
  X (quota_cpu_time, "quota-cpu-time", KEY_NULLABLE, nsbox_config_load_scalar,                     \
     "CPU time a session may use per quota-window, such as 10m (default unset: no limit)",         \
     "a duration such as 10m, at most 8760h")                                                      \
  X (quota_wall_time, "quota-wall-time", KEY_NULLABLE, nsbox_config_load_scalar,                   \
     "run time a session may use per quota-window, such as 1h (default unset: no limit)",          \
     "a duration such as 1h, at most 8760h")                                                       \
  X (quota_window, "quota-window", 0, nsbox_config_load_scalar,                                    \
     "the rolling window of quota-cpu-time and quota-wall-time (default 1h)",                      \
     "a duration from 1s to 744h such as 1h")

#define KEY_INFO(id, name, flags, load, help, expected)                                            \
  { name, help, ((flags)&KEY_BOOLEAN) != 0, ((flags)&KEY_REPEATABLE) != 0 },
static const struct nsbox_key_info key_infos[]
    = { CONFIG_KEYS (KEY_INFO){ NULL, NULL, false, false } };
#undef KEY_INFO

#define KEY_ENTRY(id, name, flags, load, help, expected)                                           \
  { name, expected, flags, set_##id, get_##id, load },
static const struct config_key config_keys[] = { CONFIG_KEYS (KEY_ENTRY) };
#undef KEY_ENTRY
_Static_assert(ARRAY_SIZE (config_keys) <= 64, "the YAML loader tracks keys in a uint64_t");

unsigned
nsbox_config_key_index (const struct config_key *key)
{
  return (unsigned)(key - config_keys);
}

const struct nsbox_key_info *
nsbox_config_keys (void)
{
  return key_infos;
}

const struct config_key *
nsbox_config_find_key (const char *name)
{
  for (size_t i = 0; i < ARRAY_SIZE (config_keys); i++)
    if (strcmp (config_keys[i].name, name) == 0)
      return &config_keys[i];
  return NULL;
}

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
  return replace_string (&config->image_digest, digest ? digest : "", true, err);
}

int
nsbox_config_set_quota_state (nsbox_config *config, const char *dir, struct nsbox_error **err)
{
  return replace_string (&config->quota_state_dir, dir ? dir : "", true, err);
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
  return entry->set (config, entry, value, err);
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
  char *value = entry->get (config);
  if (!value)
    nsbox_error_oom (err);
  return value;
}
