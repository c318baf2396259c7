/* The table of configuration keys: one row per key (its name, what its
 * value looks like, its flags, where it lives in nsbox_config and how it
 * is parsed and written back, its YAML loader, its help and its
 * documentation). The C setter and getter, the YAML loader, the CLI flags
 * and nsbox.yaml(5) all read these rows, so the vocabulary cannot drift
 * apart. Numbers, strings and booleans are set and got by generic code
 * from their row; the keys with a shape of their own (lists, uid:gid,
 * enumerations) have their set_ and get_ functions here. */
#include "config_keys.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "egress_names.h"
#include "error.h"
#include "file_names.h"
#include "units.h"

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

/* ---- values in messages and lists ---- */

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

int
nsbox_config_invalid_value (struct nsbox_error **err, const char *key, const char *value,
                            const char *expected)
{
  char shown[SHOWN_SIZE];
  nsbox_config_show_value (value, shown, sizeof shown);
  nsbox_error_set (err, EINVAL, "invalid value for '%s': '%s' (expected %s)", key, shown, expected);
  return -EINVAL;
}

/* Replaces *field with a copy of value, or NULL for an empty value when
 * empty_unsets. */
int
nsbox_config_replace_string (char **field, const char *value, bool empty_unsets,
                             struct nsbox_error **err)
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
    return nsbox_config_invalid_value (err, key->name, value, key->expected);
  *field = parsed;
  return 0;
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
  return nsbox_config_invalid_value (err, key->name, value, key->expected);
}

/* ---- checks of string values ---- */

/* Image references are printable ASCII without spaces. */
static bool
image_valid (const char *value)
{
  for (const char *c = value; *c; c++)
    if (*c <= ' ' || *c >= 0x7f)
      return false;
  return *value != '\0';
}

static bool
network_valid (const char *value)
{
  return strcmp (value, "none") == 0 || strcmp (value, "proxy") == 0;
}

/* `audit-log`: a path, or fd:N for a descriptor the caller keeps open. */
static bool
audit_log_valid (const char *value)
{
  uint64_t fd;
  return strncmp (value, "fd:", 3) != 0
         || (nsbox_parse_count (value + 3, &fd) == 0 && fd <= INT32_MAX);
}

static bool
session_valid_or_empty (const char *value)
{
  return *value == '\0' || nsbox_session_valid (value);
}

static char *
format_count (uint64_t n)
{
  return xasprintf ("%" PRIu64, n);
}

/* ---- keys with a shape of their own ---- */

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
  return nsbox_config_invalid_value (err, key->name, value, key->expected);
}

static char *
get_runtime (const nsbox_config *config)
{
  return strdup (runtime_names[config->runtime]);
}

static int
set_output_capture (nsbox_config *config, const struct config_key *key, const char *value,
                    struct nsbox_error **err)
{
  if (nsbox_capture_mode_parse (value, &config->output_capture) < 0)
    return nsbox_config_invalid_value (err, key->name, value, key->expected);
  return 0;
}

static char *
get_output_capture (const nsbox_config *config)
{
  return strdup (nsbox_capture_mode_name (config->output_capture));
}

static int
set_mcp_state (nsbox_config *config, const struct config_key *key, const char *value,
               struct nsbox_error **err)
{
  if (strcmp (value, "per-call") != 0 && strcmp (value, "per-session") != 0)
    return nsbox_config_invalid_value (err, key->name, value, key->expected);
  config->mcp_per_session = strcmp (value, "per-session") == 0;
  return 0;
}

static char *
get_mcp_state (const nsbox_config *config)
{
  return strdup (config->mcp_per_session ? "per-session" : "per-call");
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
    return nsbox_config_invalid_value (err, key->name, value, key->expected);
  gid = uid;
  if (*s == ':')
    {
      s++;
      if (parse_id (&s, &gid) < 0)
        return nsbox_config_invalid_value (err, key->name, value, key->expected);
    }
  if (*s)
    return nsbox_config_invalid_value (err, key->name, value, key->expected);
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
    return nsbox_config_invalid_value (err, key->name, value, key->expected);
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
set_pull (nsbox_config *config, const struct config_key *key, const char *value,
          struct nsbox_error **err)
{
  if (nsbox_pull_policy_parse (value, &config->pull) < 0)
    return nsbox_config_invalid_value (err, key->name, value, key->expected);
  return 0;
}

static char *
get_pull (const nsbox_config *config)
{
  return strdup (nsbox_pull_policy_name (config->pull));
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
    return nsbox_config_invalid_value (err, key->name, value, key->expected);
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

/* ---- numbers, strings and booleans, from their row ---- */

static uint64_t *
number_field (nsbox_config *config, const struct config_key *key)
{
  return (uint64_t *)(void *)((char *)config + key->offset);
}

static int
set_from_row (nsbox_config *config, const struct config_key *key, const char *value,
              struct nsbox_error **err)
{
  char *base = (char *)config + key->offset;
  switch (key->kind)
    {
    case KIND_NUMBER:
      /* A nullable number: empty (a YAML null) for none, kept as 0. */
      if ((key->flags & KEY_NULLABLE) && *value == '\0')
        {
          *number_field (config, key) = 0;
          return 0;
        }
      return set_uint64 (number_field (config, key), key, value, key->parse, key->min, key->max,
                         err);
    case KIND_STRING:
      if (key->valid && !key->valid (value))
        return nsbox_config_invalid_value (err, key->name, value, key->expected);
      return nsbox_config_replace_string ((char **)(void *)base, value,
                                          (key->flags & KEY_NULLABLE) != 0, err);
    case KIND_BOOLEAN:
      return set_boolean ((bool *)(void *)base, key, value, err);
    case KIND_CUSTOM:
      return key->set (config, key, value, err);
    }
  return -EINVAL;
}

static char *
get_from_row (const nsbox_config *config, const struct config_key *key)
{
  const char *base = (const char *)config + key->offset;
  switch (key->kind)
    {
    case KIND_NUMBER:
      {
        uint64_t n = *(const uint64_t *)(const void *)base;
        return (key->flags & KEY_NULLABLE) && n == 0 ? strdup ("") : key->format (n);
      }
    case KIND_STRING:
      {
        const char *s = *(char *const *)(const void *)base;
        return strdup (s ? s : "");
      }
    case KIND_BOOLEAN:
      return strdup (*(const bool *)(const void *)base ? "true" : "false");
    case KIND_CUSTOM:
      return key->get (config);
    }
  return NULL;
}

int
nsbox_config_key_set (nsbox_config *config, const struct config_key *key, const char *value,
                      struct nsbox_error **err)
{
  return set_from_row (config, key, value, err);
}

char *
nsbox_config_key_get (const nsbox_config *config, const struct config_key *key)
{
  return get_from_row (config, key);
}

/* ---- the table ---- */

#define FIELD(f) .offset = offsetof (nsbox_config, f)
#define NUMBER(f, parse_, min_, max_, format_)                                                     \
  .kind = KIND_NUMBER, FIELD (f), .parse = parse_, .min = min_, .max = max_, .format = format_
#define STRING(f, valid_) .kind = KIND_STRING, FIELD (f), .valid = valid_
#define BOOLEAN(f) .kind = KIND_BOOLEAN, FIELD (f)
#define CUSTOM(id) .kind = KIND_CUSTOM, .set = set_##id, .get = get_##id
#define SCALAR .yaml = YAML_SCALAR
#define LIST .yaml = YAML_LIST

static const struct config_key config_keys[] = {
  { "image",
    .doc = "The OCI image the sandbox runs, resolved through the image store (see nsbox-image(1)) "
           "and pulled per pull; the image config's Env becomes the base environment. Ignored when "
           "rootfs is set.",
    STRING (image, image_valid), SCALAR, .help = "OCI image reference (default python:3.12-slim)",
    .expected = "an image reference such as python:3.12-slim" },
  { "rootfs",
    .doc = "An unpacked root filesystem directory, used instead of the image. It must hold /tmp, "
           "/proc and /dev as directories (not symlinks); it is mounted read-only.",
    STRING (rootfs, NULL), SCALAR, .flags = KEY_NULLABLE,
    .help = "unpacked root filesystem directory, used instead of the image (default unset)",
    .expected = "a directory" },
  { "runtime",
    .doc = "native: the sandbox is built from namespaces, cgroups, seccomp and capabilities by "
           "nsbox itself. runsc: the same job runs under gVisor. auto: runsc when its cached "
           "self-check passed, else native.",
    CUSTOM (runtime), SCALAR, .help = "native, runsc or auto (default native)",
    .expected = "native, runsc or auto" },
  { "timeout",
    .doc = "The wall clock for the whole run, from the code being fed to the last process gone "
           "(500ms, 5s, 1m). At timeout every process of the sandbox is killed and the result says "
           "timed_out; the exit status is 124.",
    NUMBER (timeout_ms, nsbox_parse_duration, 1, TIMEOUT_MAX_MS, nsbox_format_duration), SCALAR,
    .help = "wall-clock limit for the whole run, such as 500ms, 5s or 1m (default 5s)",
    .expected = "a duration such as 5s or 500ms, at most 24h" },
  { "memory",
    .doc
    = "The memory limit of the sandbox (512k, 64m, 1g; powers of 1024), with swap disabled. Past "
      "it the kernel kills the program and the result says oom_killed; the exit status is 137.",
    NUMBER (memory_bytes, nsbox_parse_size, 1, UINT64_MAX, nsbox_format_size), SCALAR,
    .help = "memory limit, swap disabled (default 256m)", .expected = "a size such as 256m" },
  { "cpus",
    .doc = "CPU bandwidth in CPUs (a cpu.max quota over a 100 ms period): 0.5 is half of one CPU.",
    NUMBER (cpus_milli, nsbox_parse_cpus, CPUS_MIN_MILLI, CPUS_MAX_MILLI, nsbox_format_cpus),
    SCALAR, .help = "CPU bandwidth in CPUs, such as 0.5 or 2 (default 0.5)",
    .expected = "a number of CPUs from 0.01 to 1024 such as 0.5" },
  { "pids-limit",
    .doc = "Tasks (processes and threads) the sandbox may hold at once; a fork past it fails with "
           "EAGAIN.",
    NUMBER (pids_limit, nsbox_parse_count, 1, PIDS_MAX, format_count), SCALAR,
    .help = "maximum number of tasks (default 64)",
    .expected = "a whole number from 1 to 4194304" },
  { "max-output-bytes",
    .doc = "The cap on captured output, for stdout and stderr each. Past it the bytes are read and "
           "dropped (the program never blocks) and the result says how many were omitted.",
    NUMBER (max_output_bytes, nsbox_parse_size_or_zero, 0, MAX_OUTPUT_MAX, format_count), SCALAR,
    .help = "cap on captured bytes, stdout and stderr each (default 65536)",
    .expected = "a size from 0 to 1g such as 65536" },
  { "output-capture",
    .doc = "Past max-output-bytes, head-tail keeps the first and the last half of the cap around a "
           "marker line saying how much was omitted; head keeps only the first max-output-bytes.",
    CUSTOM (output_capture), SCALAR,
    .help = "past max-output-bytes keep the head, or the head and the tail (default head-tail)",
    .expected = "head or head-tail" },
  { "tmp-size",
    .doc = "The size of the writable tmpfs at /tmp, and of /dev/shm. The rest of the filesystem is "
           "read-only.",
    NUMBER (tmp_size_bytes, nsbox_parse_size, 1, UINT64_MAX, nsbox_format_size), SCALAR,
    .help = "size of the writable tmpfs at /tmp (default 64m)", .expected = "a size such as 64m" },
  { "network",
    .doc = "none: a private network namespace with loopback only. proxy: the same, plus the "
           "launcher's egress proxy on the sandbox's 127.0.0.1:3128, which reaches only the names "
           "of egress-allow (HTTP CONNECT with a matching TLS server name, or plain HTTP).",
    STRING (network, network_valid), SCALAR,
    .help = "none: loopback only; proxy: only through the launcher's egress proxy (default none)",
    .expected = "none or proxy" },
  { "egress-allow",
    .doc = "With network: proxy, a host name (pypi.org), or *. and a host name (*.example.com: "
           "every name below it, not the name itself), that the sandbox may reach. Never an IP "
           "address: the proxy resolves each name once and refuses private, loopback, link-local "
           "and other special addresses unless egress-resolve pins them.",
    CUSTOM (egress_allow), LIST, .flags = KEY_REPEATABLE | KEY_NULLABLE,
    .help = "network proxy: a host name, or *.name for the names below it, the sandbox may reach, "
            "repeatable",
    .expected = "a host name such as pypi.org or *.example.com, never an IP address" },
  { "egress-resolve",
    .doc = "With network: proxy, NAME=ADDRESS pins an allowed name to an address "
           "(mirror.internal=10.1.2.3): the only way to reach a private address. A second pin of a "
           "name replaces the first.",
    CUSTOM (egress_resolve), LIST, .flags = KEY_REPEATABLE | KEY_NULLABLE,
    .help = "network proxy: NAME=ADDRESS pins an allowed name to an address (the only way to a "
            "private one), repeatable",
    .expected = "NAME=ADDRESS such as mirror.internal=10.1.2.3" },
  { "egress-ports",
    .doc = "With network: proxy, a port the proxy connects to. The first use replaces the default "
           "(80 and 443); an empty value restores it.",
    CUSTOM (egress_ports), LIST, .flags = KEY_REPEATABLE | KEY_NULLABLE,
    .help = "network proxy: a port the proxy connects to, repeatable (default 80 and 443)",
    .expected = "a port from 1 to 65535" },
  { "egress-connections",
    .doc
    = "With network: proxy, the connections a run may open in all; past it the proxy answers 403.",
    NUMBER (egress_connections, nsbox_parse_count, 1, 1000000, format_count), SCALAR,
    .help = "network proxy: connections a run may open in all (default 64)",
    .expected = "a whole number from 1 to 1000000" },
  { "egress-concurrent",
    .doc = "With network: proxy, the connections open at once; past it the proxy answers 403.",
    NUMBER (egress_concurrent, nsbox_parse_count, 1, 1024, format_count), SCALAR,
    .help = "network proxy: connections open at once (default 8)",
    .expected = "a whole number from 1 to 1024" },
  { "egress-bytes",
    .doc = "With network: proxy, the bytes a run may send, and receive, in all (each way); past it "
           "the connection is cut.",
    NUMBER (egress_bytes, nsbox_parse_size, 1, UINT64_MAX, nsbox_format_size), SCALAR,
    .help = "network proxy: bytes a run may send, and receive, in all (default 256m)",
    .expected = "a size such as 256m" },
  { "egress-idle-timeout",
    .doc = "With network: proxy, a connection with no byte either way for this long is closed "
           "(bytes the kernel still hands on from the proxy's socket buffers count as moving).",
    NUMBER (egress_idle_ms, nsbox_parse_duration, 1, TIMEOUT_MAX_MS, nsbox_format_duration), SCALAR,
    .help = "network proxy: a connection with no bytes either way this long is closed (default "
            "30s)",
    .expected = "a duration such as 30s, at most 24h" },
  { "user",
    .doc = "The uid:gid of the program inside the sandbox (a single number sets both). Run by "
           "root, the sandbox user maps to an unprivileged host id, never to host uid 0.",
    CUSTOM (user), SCALAR, .help = "uid:gid inside the sandbox (default 65534:65534)",
    .expected = "uid:gid or uid, numbers from 0 to 4294967294" },
  { "env",
    .doc = "NAME=VALUE added to the base environment (the image's Env; for a bare rootfs PATH and "
           "LANG=C.UTF-8). A later entry of the same name replaces an earlier one. Nothing from "
           "the host's environment enters the sandbox, ever.",
    CUSTOM (env), .yaml = YAML_ENV, .flags = KEY_REPEATABLE,
    .help = "NAME=VALUE added to the environment, repeatable (default HOME=/tmp)",
    .expected = "NAME=VALUE with a name of letters, digits and underscores not starting with a "
                "digit" },
  { "command",
    .doc = "The program and its arguments, run with the code on its standard input. In YAML a list "
           "replacing the default; on the command line, the words after --.",
    CUSTOM (command), .yaml = YAML_COMMAND, .flags = KEY_REPEATABLE,
    .help = "argument appended to the command, repeatable (default python -)",
    .expected = "an argument" },
  { "inputs",
    .doc = "PATH[:NAME]: a regular file copied read-only to /mnt/in/NAME in the sandbox (NAME "
           "defaults to the file's basename). The launcher opens each file before the sandbox "
           "exists; at most 64 files and 64 MiB in all. Native runtime only.",
    CUSTOM (inputs), LIST, .flags = KEY_REPEATABLE | KEY_NULLABLE,
    .help = "PATH[:NAME]: a file copied read-only to /mnt/in/NAME, repeatable (flag --input)",
    .expected = "PATH or PATH:NAME, NAME without '/', ':' or control characters" },
  { "output-dir",
    .doc = "The directory that receives the regular files the program leaves in /tmp/out, copied "
           "after the sandbox is gone with their sizes and SHA-256 digests in the result. A "
           "missing directory is created 0700 with its parents; a file or a symlink there is "
           "refused before the run. Native runtime only.",
    STRING (output_dir, NULL), SCALAR, .flags = KEY_NULLABLE,
    .help = "directory that receives the files the program leaves in /tmp/out (default unset)",
    .expected = "a directory" },
  { "strict",
    .doc = "Refuse to run (exit status 125) when memory, cpus or pids-limit cannot be enforced by "
           "a cgroup, instead of falling back to rlimits and saying so in the result's limits.",
    BOOLEAN (strict), SCALAR, .flags = KEY_BOOLEAN,
    .help = "refuse to run when a limit cannot be enforced (default false)",
    .expected = "true, false, yes, no, 1 or 0" },
  { "seccomp-policy",
    .doc = "A seccomp policy YAML file (its format is policies/POLICY.md) instead of the built-in "
           "policy (policies/default.yaml); see nsbox-security(7).",
    STRING (seccomp_policy, NULL), SCALAR, .flags = KEY_NULLABLE,
    .help = "seccomp policy YAML file (default the built-in policy)", .expected = "a file" },
  { "pull",
    .doc = "When to pull the image from its registry: missing (only when the store lacks it), "
           "always, or never (a missing image is an error).",
    CUSTOM (pull), SCALAR, .help = "pull the image: missing, always or never (default missing)",
    .expected = "missing, always or never" },
  { "store",
    .doc = "The image store directory: by default $NSBOX_STORE, else /var/lib/nsbox for root, else "
           "${XDG_CACHE_HOME:-~/.cache}/nsbox.",
    STRING (store, NULL), SCALAR, .flags = KEY_NULLABLE,
    .help = "image store directory (default $NSBOX_STORE, else the per-user cache)",
    .expected = "a directory" },
  { "audit-log",
    .doc = "Appends one JSON Lines record per run to this file (created 0600, each record chained "
           "to the previous one by its SHA-256), or to fd:N, a descriptor the caller holds open. A "
           "run whose record cannot be written fails; see nsbox audit verify.",
    STRING (audit_log, audit_log_valid), SCALAR, .flags = KEY_NULLABLE,
    .help = "append a JSON Lines record of each run to this file, or fd:N (default unset)",
    .expected = "a file path or fd:N" },
  { "audit-code",
    .doc = "The audit record also holds the code and its output, not only their digests and sizes.",
    BOOLEAN (audit_code), SCALAR, .flags = KEY_BOOLEAN,
    .help = "the audit record also holds the code and its output (default false)",
    .expected = "true, false, yes, no, 1 or 0" },
  { "session",
    .doc = "The caller's session id (1 to 128 of A-Za-z0-9._:@+=/-), written in the audit log and "
           "the key of the quotas.",
    STRING (session, session_valid_or_empty), SCALAR, .flags = KEY_NULLABLE,
    .help = "the caller's session id, for the audit log and the quotas (default unset)",
    .expected = "1 to 128 letters, digits and ._:@+=/-" },
  { "sandbox-idle-timeout",
    .doc
    = "A live sandbox (nsbox repl, nsbox_sandbox_open) with no run for this long is destroyed; "
      "a run asked for later is refused.",
    NUMBER (sandbox_idle_timeout_ms, nsbox_parse_duration, 1000, NSBOX_SANDBOX_IDLE_MAX_MS,
            nsbox_format_duration),
    SCALAR, .help = "a live sandbox idle this long is destroyed (default 10m)",
    .expected = "a duration from 1s to 24h such as 10m" },
  { "sandbox-max-lifetime",
    .doc = "A live sandbox older than this is destroyed, whatever it is doing between runs; a run "
           "asked for later is refused.",
    NUMBER (sandbox_max_lifetime_ms, nsbox_parse_duration, 1000, NSBOX_SANDBOX_LIFETIME_MAX_MS,
            nsbox_format_duration),
    SCALAR, .help = "a live sandbox's whole life (default 1h)",
    .expected = "a duration from 1s to 7 days such as 1h" },
  { "sandbox-max-runs",
    .doc = "Runs a live sandbox may have; the one after the last is refused and the sandbox "
           "destroyed. 0: no limit.",
    NUMBER (sandbox_max_runs, nsbox_parse_count, 0, NSBOX_SANDBOX_RUNS_MAX, format_count), SCALAR,
    .help = "runs a live sandbox may have, 0 for no limit (default 0)",
    .expected = "a whole number from 0 to 1000000000" },
  { "mcp-state",
    .doc = "What nsbox mcp keeps between calls. per-call: nothing, every call a fresh sandbox. "
           "per-session: one live sandbox for the client's session (opened on its first call, "
           "closed when the client goes, after sandbox-idle-timeout, or by the reset tool), whose "
           "variables, imports and files the next call sees.",
    CUSTOM (mcp_state), SCALAR,
    .help = "nsbox mcp: per-call (a fresh sandbox each call) or per-session (default per-call)",
    .expected = "per-call or per-session" },
  { "quota-runs-per-minute",
    .doc
    = "Runs a session may start per minute, in bursts of as many (a token bucket). A refused run "
      "starts nothing; its result names the quota and when to retry, and the exit status is 75.",
    NUMBER (quota_runs_per_minute, nsbox_parse_count, 1, QUOTA_RATE_MAX, format_count), SCALAR,
    .flags = KEY_NULLABLE,
    .help = "runs a session may start per minute, in bursts of as many (default unset: no limit)",
    .expected = "a whole number from 1 to 1000000" },
  { "quota-concurrent",
    .doc = "Runs of one session at once; a run past it is refused before it starts.",
    NUMBER (quota_concurrent, nsbox_parse_count, 1, NSBOX_QUOTA_FLIGHTS_MAX, format_count), SCALAR,
    .flags = KEY_NULLABLE, .help = "runs of a session at once (default unset: no limit)",
    .expected = "a whole number from 1 to 1024" },
  { "quota-cpu-time",
    .doc = "CPU time the runs of a session may use per quota-window (10m). A run is admitted only "
           "while the session has time left, and its own limit is cut to what is left.",
    NUMBER (quota_cpu_ms, nsbox_parse_duration, 1, QUOTA_TIME_MAX_MS, nsbox_format_duration),
    SCALAR, .flags = KEY_NULLABLE,
    .help = "CPU time a session may use per quota-window, such as 10m (default unset: no limit)",
    .expected = "a duration such as 10m, at most 8760h" },
  { "quota-wall-time",
    .doc = "Run time (wall clock) the runs of a session may use per quota-window (1h), counted "
           "like quota-cpu-time.",
    NUMBER (quota_wall_ms, nsbox_parse_duration, 1, QUOTA_TIME_MAX_MS, nsbox_format_duration),
    SCALAR, .flags = KEY_NULLABLE,
    .help = "run time a session may use per quota-window, such as 1h (default unset: no limit)",
    .expected = "a duration such as 1h, at most 8760h" },
  { "quota-window",
    .doc
    = "The rolling window over which quota-cpu-time and quota-wall-time are counted (1s to 744h).",
    NUMBER (quota_window_ms, nsbox_parse_duration, QUOTA_WINDOW_MIN_MS, QUOTA_WINDOW_MAX_MS,
            nsbox_format_duration),
    SCALAR, .help = "the rolling window of quota-cpu-time and quota-wall-time (default 1h)",
    .expected = "a duration from 1s to 744h such as 1h" },
};
_Static_assert(ARRAY_SIZE (config_keys) <= 64, "the YAML loader tracks keys in a uint64_t");

/* What the CLI and the servers list: built once from the rows. */
static struct nsbox_key_info key_infos[ARRAY_SIZE (config_keys) + 1];
static pthread_once_t key_infos_once = PTHREAD_ONCE_INIT;

static void
key_infos_fill (void)
{
  for (size_t i = 0; i < ARRAY_SIZE (config_keys); i++)
    key_infos[i] = (struct nsbox_key_info){
      .name = config_keys[i].name,
      .help = config_keys[i].help,
      .is_boolean = (config_keys[i].flags & KEY_BOOLEAN) != 0,
      .repeatable = (config_keys[i].flags & KEY_REPEATABLE) != 0,
    };
}

const struct nsbox_key_info *
nsbox_config_keys (void)
{
  pthread_once (&key_infos_once, key_infos_fill);
  return key_infos;
}

unsigned
nsbox_config_key_index (const struct config_key *key)
{
  return (unsigned)(key - config_keys);
}

const struct config_key *
nsbox_config_key_at (size_t i)
{
  return i < ARRAY_SIZE (config_keys) ? &config_keys[i] : NULL;
}

const struct config_key *
nsbox_config_find_key (const char *name)
{
  for (size_t i = 0; i < ARRAY_SIZE (config_keys); i++)
    if (strcmp (config_keys[i].name, name) == 0)
      return &config_keys[i];
  return NULL;
}
