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
#include <yaml.h>

#include "error.h"
#include "util.h"

#define CONFIG_FILE_MAX (1024 * 1024)
#define TIMEOUT_MAX_MS (24ULL * 60 * 60 * 1000)
/* cpu.max refuses a quota below 1ms per 100ms period. */
#define CPUS_MIN_MILLI 10ULL
#define CPUS_MAX_MILLI (1024ULL * 1000)
/* PID_MAX_LIMIT: no kernel can have more tasks than this. */
#define PIDS_MAX 4194304ULL
/* Each stream is held in the launcher's memory up to this cap. */
#define MAX_OUTPUT_MAX (1ULL << 30)
/* (uid_t) -1 means "unchanged" to setuid and friends. */
#define ID_MAX 4294967294ULL
#define ENV_MAX 1024
#define COMMAND_MAX 4096
/* Values quoted in messages are cut to this many bytes. */
#define SHOWN_VALUE_MAX 64

/* Parsing of numbers. Parsers check syntax and overflow; the setters check
 * the range of each key. */

struct decimal
{
  uint64_t whole;
  uint64_t fraction; /* digits after the point, trailing zeros removed */
  unsigned fraction_digits;
};

static bool
is_digit (char c)
{
  return c >= '0' && c <= '9';
}

/* Reads one or more decimal digits: -EINVAL when there is none, -ERANGE on
 * overflow. */
static int
parse_digits (const char **text, uint64_t *value)
{
  const char *s = *text;
  uint64_t v = 0;
  if (!is_digit (*s))
    return -EINVAL;
  for (; is_digit (*s); s++)
    if (__builtin_mul_overflow (v, 10, &v) || __builtin_add_overflow (v, (uint64_t)(*s - '0'), &v))
      return -ERANGE;
  *text = s;
  *value = v;
  return 0;
}

/* Reads "12" or "12.50"; a point needs digits on both sides. */
static int
parse_decimal (const char **text, struct decimal *out)
{
  const char *s = *text;
  struct decimal d = { 0, 0, 0 };
  int r = parse_digits (&s, &d.whole);
  if (r < 0)
    return r;
  if (*s == '.')
    {
      const char *digits = ++s;
      while (is_digit (*s))
        s++;
      const char *end = s;
      while (end > digits && end[-1] == '0')
        end--;
      if (s == digits)
        return -EINVAL;
      /* More significant fractional digits than this can never scale to a
       * whole number of bytes, milliseconds or thousandths. */
      if (end - digits > 18)
        return -EINVAL;
      for (const char *p = digits; p < end; p++)
        d.fraction = d.fraction * 10 + (uint64_t)(*p - '0');
      d.fraction_digits = (unsigned)(end - digits);
    }
  *text = s;
  *out = d;
  return 0;
}

/* d * unit, which must come out whole: "2.5" seconds is 2500 ms, "0.0001"
 * CPUs is not a whole number of thousandths. */
static int
scale_decimal (const struct decimal *d, uint64_t unit, uint64_t *out)
{
  uint64_t power = 1;
  for (unsigned i = 0; i < d->fraction_digits; i++)
    power *= 10;
  unsigned __int128 fraction = (unsigned __int128)d->fraction * unit;
  if (fraction % power != 0)
    return -EINVAL;
  uint64_t whole;
  if (__builtin_mul_overflow (d->whole, unit, &whole)
      || __builtin_add_overflow (whole, (uint64_t)(fraction / power), &whole))
    return -ERANGE;
  *out = whole;
  return 0;
}

/* "", "b", "k", "kb", "ki", "kib", ... "t..."; case-insensitive. */
static int
size_unit (const char *suffix, uint64_t *factor)
{
  static const char letters[] = "kmgt";
  const char *letter = *suffix ? strchr (letters, tolower ((unsigned char)*suffix)) : NULL;
  uint64_t f = 1;
  if (letter)
    {
      f = 1ULL << (10 * (letter - letters + 1));
      suffix++;
      if (tolower ((unsigned char)*suffix) == 'i')
        suffix++;
    }
  if (tolower ((unsigned char)*suffix) == 'b')
    suffix++;
  if (*suffix)
    return -EINVAL;
  *factor = f;
  return 0;
}

/* Like nsbox_parse_size, but zero is a valid size. */
static int
parse_size_or_zero (const char *text, uint64_t *bytes)
{
  if (!text)
    return -EINVAL;
  struct decimal d;
  uint64_t factor;
  int r = parse_decimal (&text, &d);
  if (r < 0)
    return r;
  r = size_unit (text, &factor);
  if (r < 0)
    return r;
  return scale_decimal (&d, factor, bytes);
}

int
nsbox_parse_size (const char *text, uint64_t *bytes)
{
  uint64_t parsed;
  int r = parse_size_or_zero (text, &parsed);
  if (r < 0)
    return r;
  if (parsed == 0)
    return -EINVAL;
  *bytes = parsed;
  return 0;
}

int
nsbox_parse_duration (const char *text, uint64_t *ms)
{
  static const struct
  {
    const char *suffix;
    uint64_t ms;
  } units[] = {
    { "", 1000 }, { "ms", 1 }, { "s", 1000 }, { "m", 60 * 1000 }, { "h", 60 * 60 * 1000 },
  };
  if (!text)
    return -EINVAL;
  struct decimal d;
  int r = parse_decimal (&text, &d);
  if (r < 0)
    return r;
  for (size_t i = 0; i < ARRAY_SIZE (units); i++)
    if (strcmp (text, units[i].suffix) == 0)
      return scale_decimal (&d, units[i].ms, ms);
  return -EINVAL;
}

int
nsbox_parse_cpus (const char *text, uint64_t *milli)
{
  if (!text)
    return -EINVAL;
  struct decimal d;
  int r = parse_decimal (&text, &d);
  if (r < 0)
    return r;
  if (*text)
    return -EINVAL;
  return scale_decimal (&d, 1000, milli);
}

static int
parse_count (const char *text, uint64_t *value)
{
  uint64_t parsed;
  int r = parse_digits (&text, &parsed);
  if (r < 0)
    return r;
  if (*text)
    return -EINVAL;
  *value = parsed;
  return 0;
}

/* Formatting, the inverse of the parsers: what nsbox_config_get returns
 * parses back to the same value. */

static char *format_string (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

static char *
format_string (const char *fmt, ...)
{
  char *text = NULL;
  va_list ap;
  va_start (ap, fmt);
  if (vasprintf (&text, fmt, ap) < 0)
    text = NULL;
  va_end (ap);
  return text;
}

static char *
format_size (uint64_t bytes)
{
  static const char letters[] = "kmgt";
  for (int i = 3; i >= 0; i--)
    {
      uint64_t factor = 1ULL << (10 * (i + 1));
      if (bytes > 0 && bytes % factor == 0)
        return format_string ("%" PRIu64 "%c", bytes / factor, letters[i]);
    }
  return format_string ("%" PRIu64, bytes);
}

static char *
format_duration (uint64_t ms)
{
  static const struct
  {
    const char *suffix;
    uint64_t ms;
  } units[] = { { "h", 60 * 60 * 1000 }, { "m", 60 * 1000 }, { "s", 1000 } };
  for (size_t i = 0; i < ARRAY_SIZE (units); i++)
    if (ms > 0 && ms % units[i].ms == 0)
      return format_string ("%" PRIu64 "%s", ms / units[i].ms, units[i].suffix);
  return format_string ("%" PRIu64 "ms", ms);
}

static char *
format_cpus (uint64_t milli)
{
  if (milli % 1000 == 0)
    return format_string ("%" PRIu64, milli / 1000);
  char *text = format_string ("%" PRIu64 ".%03" PRIu64, milli / 1000, milli % 1000);
  if (text)
    {
      size_t len = strlen (text);
      while (text[len - 1] == '0')
        text[--len] = '\0';
    }
  return text;
}

/* A JSON (and YAML flow) array of strings, for the list keys. */
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
static void
show_value (const char *value, char *shown, size_t size)
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

#define SHOWN_SIZE (SHOWN_VALUE_MAX * 4 + 8)

static int
invalid_value (struct nsbox_error **err, const char *key, const char *value, const char *expected)
{
  char shown[SHOWN_SIZE];
  show_value (value, shown, sizeof shown);
  nsbox_error_set (err, EINVAL, "invalid value for '%s': '%s' (expected %s)", key, shown, expected);
  return -EINVAL;
}

static int
out_of_memory (struct nsbox_error **err)
{
  nsbox_error_set (err, ENOMEM, "out of memory");
  return -ENOMEM;
}

/* String lists (env, command): NULL-terminated, with a separate count. */

static void
string_list_free (char **items)
{
  if (!items)
    return;
  for (char **p = items; *p; p++)
    free (*p);
  free (items);
}

static char **
string_list_dup (const char *const *items, size_t count)
{
  char **copy = calloc (count + 1, sizeof *copy);
  if (!copy)
    return NULL;
  for (size_t i = 0; i < count; i++)
    if (!(copy[i] = strdup (items[i])))
      {
        string_list_free (copy);
        return NULL;
      }
  return copy;
}

/* Appends item (taking it) to *items; on failure nothing changes. */
static int
string_list_append (char ***items, size_t *count, char *item)
{
  char **grown = realloc (*items, (*count + 2) * sizeof *grown);
  if (!grown)
    return -ENOMEM;
  grown[(*count)++] = item;
  grown[*count] = NULL;
  *items = grown;
  return 0;
}

/* Replaces *field with a copy of value, or NULL for an empty value when
 * empty_unsets. */
static int
replace_string (char **field, const char *value, bool empty_unsets, struct nsbox_error **err)
{
  char *copy = NULL;
  if (!(empty_unsets && *value == '\0') && !(copy = strdup (value)))
    return out_of_memory (err);
  free (*field);
  *field = copy;
  return 0;
}

/* The keys. Each setter parses into locals and changes the configuration
 * only once nothing can fail any more. */

struct config_key;
typedef int (*key_set_fn) (nsbox_config *config, const struct config_key *key, const char *value,
                           struct nsbox_error **err);
typedef char *(*key_get_fn) (const nsbox_config *config);

struct config_loader;
typedef int (*key_load_fn) (struct config_loader *loader, const struct config_key *key,
                            yaml_event_t *value);

enum
{
  KEY_BOOLEAN = 1 << 0,    /* a flag without a value on the CLI */
  KEY_REPEATABLE = 1 << 1, /* each use adds to the list */
  KEY_NULLABLE = 1 << 2,   /* an empty value (a YAML null) unsets it */
};

struct config_key
{
  const char *name;
  const char *expected; /* what a valid value looks like, for messages */
  unsigned flags;
  key_set_fn set;
  key_get_fn get;
  key_load_fn load;
};

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
  return format_duration (config->timeout_ms);
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
  return format_size (config->memory_bytes);
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
  return format_cpus (config->cpus_milli);
}

static int
set_pids_limit (nsbox_config *config, const struct config_key *key, const char *value,
                struct nsbox_error **err)
{
  return set_uint64 (&config->pids_limit, key, value, parse_count, 1, PIDS_MAX, err);
}

static char *
get_pids_limit (const nsbox_config *config)
{
  return format_string ("%" PRIu64, config->pids_limit);
}

static int
set_max_output_bytes (nsbox_config *config, const struct config_key *key, const char *value,
                      struct nsbox_error **err)
{
  return set_uint64 (&config->max_output_bytes, key, value, parse_size_or_zero, 0, MAX_OUTPUT_MAX,
                     err);
}

static char *
get_max_output_bytes (const nsbox_config *config)
{
  return format_string ("%" PRIu64, config->max_output_bytes);
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
  return format_size (config->tmp_size_bytes);
}

static int
set_network (nsbox_config *config, const struct config_key *key, const char *value,
             struct nsbox_error **err)
{
  if (strcmp (value, "none") != 0)
    {
      char shown[SHOWN_SIZE];
      show_value (value, shown, sizeof shown);
      return nsbox_error_set (err, EINVAL,
                              "unsupported value for '%s': '%s' (only 'none' is supported today)",
                              key->name, shown);
    }
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
  int r = parse_digits (text, &parsed);
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
  return format_string ("%" PRIu64 ":%" PRIu64, (uint64_t)config->uid, (uint64_t)config->gid);
}

static bool
is_name_char (char c, bool first)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!first && is_digit (c));
}

/* Length of a valid variable name at the start of text, or 0. */
static size_t
env_name_length (const char *text)
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
  size_t name_len = env_name_length (value);
  if (name_len == 0 || value[name_len] != '=')
    return invalid_value (err, key->name, value, key->expected);
  size_t found = 0;
  while (found < config->env_len && strncmp (config->env[found], value, name_len + 1) != 0)
    found++;
  if (found == config->env_len && config->env_len >= ENV_MAX)
    return nsbox_error_set (err, EINVAL, "too many entries in '%s' (at most %d)", key->name,
                            ENV_MAX);
  char *entry = strdup (value);
  if (!entry)
    return out_of_memory (err);
  if (found < config->env_len)
    {
      free (config->env[found]);
      config->env[found] = entry;
      return 0;
    }
  if (string_list_append (&config->env, &config->env_len, entry) < 0)
    {
      free (entry);
      return out_of_memory (err);
    }
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
  char *argument = strdup (value);
  if (!argument)
    return out_of_memory (err);
  if (string_list_append (&config->command, &config->command_len, argument) < 0)
    {
      free (argument);
      return out_of_memory (err);
    }
  return 0;
}

static char *
get_command (const nsbox_config *config)
{
  return format_string_list (config->command, config->command_len);
}

static int
set_strict (nsbox_config *config, const struct config_key *key, const char *value,
            struct nsbox_error **err)
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
        config->strict = words[i].value;
        return 0;
      }
  return invalid_value (err, key->name, value, key->expected);
}

static char *
get_strict (const nsbox_config *config)
{
  return strdup (config->strict ? "true" : "false");
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

/* Values in the order of enum nsbox_pull_policy. */
static const char *const pull_names[] = { "missing", "always", "never" };

static int
set_pull (nsbox_config *config, const struct config_key *key, const char *value,
          struct nsbox_error **err)
{
  for (size_t i = 0; i < ARRAY_SIZE (pull_names); i++)
    if (strcmp (value, pull_names[i]) == 0)
      {
        config->pull = (int)i;
        return 0;
      }
  return invalid_value (err, key->name, value, key->expected);
}

static char *
get_pull (const nsbox_config *config)
{
  return strdup (pull_names[config->pull]);
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

static int load_scalar (struct config_loader *loader, const struct config_key *key,
                        yaml_event_t *value);
static int load_env (struct config_loader *loader, const struct config_key *key,
                     yaml_event_t *value);
static int load_command (struct config_loader *loader, const struct config_key *key,
                         yaml_event_t *value);

/* The one table of keys: (identifier, name, flags, YAML loader, help for the
 * CLI, what a valid value looks like). Setter and getter are set_<id> and
 * get_<id>. */
#define CONFIG_KEYS(X)                                                                             \
  X (image, "image", 0, load_scalar, "OCI image reference (default python:3.12-slim)",             \
     "an image reference such as python:3.12-slim")                                                \
  X (rootfs, "rootfs", KEY_NULLABLE, load_scalar,                                                  \
     "unpacked root filesystem directory, used instead of the image (default unset)",              \
     "a directory")                                                                                \
  X (runtime, "runtime", 0, load_scalar, "native, runsc or auto (default native)",                 \
     "native, runsc or auto")                                                                      \
  X (timeout, "timeout", 0, load_scalar,                                                           \
     "wall-clock limit for the whole run, such as 500ms, 5s or 1m (default 5s)",                   \
     "a duration such as 5s or 500ms, at most 24h")                                                \
  X (memory, "memory", 0, load_scalar, "memory limit, swap disabled (default 256m)",               \
     "a size such as 256m")                                                                        \
  X (cpus, "cpus", 0, load_scalar, "CPU bandwidth in CPUs, such as 0.5 or 2 (default 0.5)",        \
     "a number of CPUs from 0.01 to 1024 such as 0.5")                                             \
  X (pids_limit, "pids-limit", 0, load_scalar, "maximum number of tasks (default 64)",             \
     "a whole number from 1 to 4194304")                                                           \
  X (max_output_bytes, "max-output-bytes", 0, load_scalar,                                         \
     "cap on captured bytes, stdout and stderr each (default 65536)",                              \
     "a size from 0 to 1g such as 65536")                                                          \
  X (tmp_size, "tmp-size", 0, load_scalar, "size of the writable tmpfs at /tmp (default 64m)",     \
     "a size such as 64m")                                                                         \
  X (network, "network", 0, load_scalar, "network mode, only none today (default none)", "none")   \
  X (user, "user", 0, load_scalar, "uid:gid inside the sandbox (default 65534:65534)",             \
     "uid:gid or uid, numbers from 0 to 4294967294")                                               \
  X (env, "env", KEY_REPEATABLE, load_env,                                                         \
     "NAME=VALUE added to the environment, repeatable (default HOME=/tmp)",                        \
     "NAME=VALUE with a name of letters, digits and underscores not starting with a digit")        \
  X (command, "command", KEY_REPEATABLE, load_command,                                             \
     "argument appended to the command, repeatable (default python -)", "an argument")             \
  X (strict, "strict", KEY_BOOLEAN, load_scalar,                                                   \
     "refuse to run when a limit cannot be enforced (default false)",                              \
     "true, false, yes, no, 1 or 0")                                                               \
  X (seccomp_policy, "seccomp-policy", KEY_NULLABLE, load_scalar,                                  \
     "seccomp policy YAML file (default the built-in policy)", "a file")                           \
  X (pull, "pull", 0, load_scalar, "pull the image: missing, always or never (default missing)",   \
     "missing, always or never")                                                                   \
  X (store, "store", KEY_NULLABLE, load_scalar,                                                    \
     "image store directory (default $NSBOX_STORE, else the per-user cache)", "a directory")

#define KEY_INFO(id, name, flags, load, help, expected)                                            \
  { name, help, ((flags)&KEY_BOOLEAN) != 0, ((flags)&KEY_REPEATABLE) != 0 },
static const struct nsbox_key_info key_infos[]
    = { CONFIG_KEYS (KEY_INFO){ NULL, NULL, false, false } };
#undef KEY_INFO

#define KEY_ENTRY(id, name, flags, load, help, expected)                                           \
  { name, expected, flags, set_##id, get_##id, load },
static const struct config_key config_keys[] = { CONFIG_KEYS (KEY_ENTRY) };
#undef KEY_ENTRY

const struct nsbox_key_info *
nsbox_config_keys (void)
{
  return key_infos;
}

static const struct config_key *
find_key (const char *name)
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
  show_value (name, shown, sizeof shown);
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
  string_list_free (config->env);
  string_list_free (config->command);
  free (config->seccomp_policy);
  free (config->store);
  string_list_free (config->base_env);
  free (config);
}

#define cleanup_config __attribute__ ((cleanup (config_freep)))
static void
config_freep (nsbox_config **config)
{
  nsbox_config_free (*config);
}

nsbox_config *
nsbox_config_new (struct nsbox_error **err)
{
  static const char *const default_env[] = { "HOME=/tmp" };
  static const char *const default_command[] = { "python", "-" };
  cleanup_config nsbox_config *config = calloc (1, sizeof *config);
  if (!config)
    {
      out_of_memory (err);
      return NULL;
    }
  config->runtime = NSBOX_RUNTIME_NATIVE;
  config->timeout_ms = 5 * 1000;
  config->memory_bytes = 256ULL << 20;
  config->cpus_milli = 500;
  config->pids_limit = 64;
  config->max_output_bytes = 65536;
  config->tmp_size_bytes = 64ULL << 20;
  config->uid = 65534;
  config->gid = 65534;
  config->strict = false;
  config->image = strdup ("python:3.12-slim");
  config->network = strdup ("none");
  config->env = string_list_dup (default_env, ARRAY_SIZE (default_env));
  config->env_len = ARRAY_SIZE (default_env);
  config->command = string_list_dup (default_command, ARRAY_SIZE (default_command));
  config->command_len = ARRAY_SIZE (default_command);
  if (!config->image || !config->network || !config->env || !config->command)
    {
      out_of_memory (err);
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
nsbox_config_set_base_env (nsbox_config *config, const char *const *env, size_t len,
                           struct nsbox_error **err)
{
  char **copy = NULL;
  if (env && !(copy = string_list_dup (env, len)))
    return out_of_memory (err);
  string_list_free (config->base_env);
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
      out_of_memory (err);
      return NULL;
    }
  *copy = *config;
  bool failed = false;
  copy->image = strdup_or_null (config->image, &failed);
  copy->rootfs = strdup_or_null (config->rootfs, &failed);
  copy->network = strdup_or_null (config->network, &failed);
  copy->seccomp_policy = strdup_or_null (config->seccomp_policy, &failed);
  copy->store = strdup_or_null (config->store, &failed);
  copy->base_env = NULL;
  if (config->base_env
      && !(copy->base_env
           = string_list_dup ((const char *const *)config->base_env, config->base_env_len)))
    failed = true;
  copy->env = string_list_dup ((const char *const *)config->env, config->env_len);
  copy->command = string_list_dup ((const char *const *)config->command, config->command_len);
  if (failed || !copy->env || !copy->command)
    {
      out_of_memory (err);
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
  const struct config_key *entry = find_key (key);
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
  char **command = string_list_dup (argv, argc);
  if (!command)
    return out_of_memory (err);
  string_list_free (config->command);
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
  const struct config_key *entry = find_key (key);
  if (!entry)
    {
      unknown_key (err, key);
      return NULL;
    }
  char *value = entry->get (config);
  if (!value)
    out_of_memory (err);
  return value;
}

/* YAML. The file is read through libyaml's event parser so that every
 * node's position is known and anchors, aliases and extra documents can be
 * refused before anything is applied. Values land in a copy of the
 * configuration that replaces the original only when the whole file is
 * good. */

struct config_loader
{
  const char *path;
  const char *text;
  size_t text_len;
  yaml_parser_t parser;
  nsbox_config *config;
  struct nsbox_error **err;
};

static void
event_deletep (yaml_event_t *event)
{
  yaml_event_delete (event);
}

#define cleanup_event __attribute__ ((cleanup (event_deletep)))

/* Fails with "FILE:LINE:COL: message", taking message (NULL when it could
 * not be formatted). */
static int
fail_at (struct config_loader *loader, const yaml_mark_t *mark, char *message)
{
  if (!message)
    return out_of_memory (loader->err);
  nsbox_error_set (loader->err, EBADMSG, "%s:%zu:%zu: %s", loader->path, mark->line + 1,
                   mark->column + 1, message);
  free (message);
  return -EBADMSG;
}

/* libyaml reports reader errors (bad encoding, control characters) as a
 * byte offset only. */
static yaml_mark_t
mark_of_offset (const char *text, size_t text_len, size_t offset)
{
  yaml_mark_t mark = { offset, 0, 0 };
  for (size_t i = 0; i < offset && i < text_len; i++)
    if (text[i] == '\n')
      {
        mark.line++;
        mark.column = 0;
      }
    else if (((unsigned char)text[i] & 0xc0) != 0x80)
      mark.column++;
  return mark;
}

static int
parser_failed (struct config_loader *loader)
{
  const yaml_parser_t *parser = &loader->parser;
  if (parser->error == YAML_MEMORY_ERROR)
    return out_of_memory (loader->err);
  yaml_mark_t mark = parser->problem_mark;
  if (parser->error == YAML_READER_ERROR)
    mark = mark_of_offset (loader->text, loader->text_len, parser->problem_offset);
  const char *problem = parser->problem ? parser->problem : "invalid YAML";
  if (parser->context)
    return fail_at (loader, &mark, format_string ("%s (%s)", problem, parser->context));
  return fail_at (loader, &mark, strdup (problem));
}

/* Reads the next event and refuses what the configuration never uses:
 * aliases, anchors and tags. */
static int
next_event (struct config_loader *loader, yaml_event_t *event)
{
  if (!yaml_parser_parse (&loader->parser, event))
    return parser_failed (loader);
  const yaml_char_t *anchor = NULL, *tag = NULL;
  if (event->type == YAML_ALIAS_EVENT)
    return fail_at (loader, &event->start_mark, format_string ("aliases are not supported"));
  if (event->type == YAML_SCALAR_EVENT)
    {
      anchor = event->data.scalar.anchor;
      tag = event->data.scalar.tag;
    }
  else if (event->type == YAML_SEQUENCE_START_EVENT)
    {
      anchor = event->data.sequence_start.anchor;
      tag = event->data.sequence_start.tag;
    }
  else if (event->type == YAML_MAPPING_START_EVENT)
    {
      anchor = event->data.mapping_start.anchor;
      tag = event->data.mapping_start.tag;
    }
  if (anchor)
    return fail_at (loader, &event->start_mark, format_string ("anchors are not supported"));
  if (tag)
    return fail_at (loader, &event->start_mark, format_string ("tags are not supported"));
  return 0;
}

static const char *
node_kind (const yaml_event_t *event)
{
  if (event->type == YAML_SCALAR_EVENT)
    return "a scalar";
  if (event->type == YAML_SEQUENCE_START_EVENT)
    return "a list";
  if (event->type == YAML_MAPPING_START_EVENT)
    return "a mapping";
  return "nothing";
}

static int
wrong_type (struct config_loader *loader, const yaml_event_t *event, const char *key,
            const char *expected)
{
  return fail_at (loader, &event->start_mark,
                  format_string ("wrong type for '%s': expected %s, found %s", key, expected,
                                 node_kind (event)));
}

/* The text of a scalar event; NUL can only come from an escape. */
static int
scalar_text (struct config_loader *loader, const yaml_event_t *event, const char **text)
{
  const char *value = (const char *)event->data.scalar.value;
  if (strlen (value) != event->data.scalar.length)
    return fail_at (loader, &event->start_mark,
                    format_string ("values must not contain a NUL character"));
  *text = value;
  return 0;
}

static bool
is_null_scalar (const yaml_event_t *event)
{
  static const char *const nulls[] = { "", "~", "null", "Null", "NULL" };
  if (event->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
    return false;
  for (size_t i = 0; i < ARRAY_SIZE (nulls); i++)
    if (strcmp ((const char *)event->data.scalar.value, nulls[i]) == 0)
      return true;
  return false;
}

/* Applies one value through the key's setter; its message gains the
 * position. */
static int
apply_at (struct config_loader *loader, const yaml_mark_t *mark, const struct config_key *key,
          const char *value)
{
  cleanup_error struct nsbox_error *error = NULL;
  int r = key->set (loader->config, key, value, &error);
  if (r == -ENOMEM)
    return out_of_memory (loader->err);
  if (r < 0)
    return fail_at (loader, mark, strdup (nsbox_error_message (error)));
  return 0;
}

static int
load_scalar (struct config_loader *loader, const struct config_key *key, yaml_event_t *value)
{
  const char *text = NULL;
  if (value->type != YAML_SCALAR_EVENT)
    return wrong_type (loader, value, key->name, "a scalar");
  if (is_null_scalar (value))
    {
      if (!(key->flags & KEY_NULLABLE))
        return fail_at (loader, &value->start_mark,
                        format_string ("missing value for '%s'", key->name));
      return apply_at (loader, &value->start_mark, key, "");
    }
  int r = scalar_text (loader, value, &text);
  if (r < 0)
    return r;
  return apply_at (loader, &value->start_mark, key, text);
}

/* One entry of an env mapping, NAME: VALUE, from its name on. */
static int
load_env_pair (struct config_loader *loader, const struct config_key *key, yaml_event_t *name)
{
  cleanup_event yaml_event_t value = { 0 };
  const char *name_text = NULL, *value_text = NULL;
  int r = scalar_text (loader, name, &name_text);
  if (r < 0)
    return r;
  size_t name_len = env_name_length (name_text);
  if (name_len == 0 || name_text[name_len] != '\0')
    {
      char shown[SHOWN_SIZE];
      show_value (name_text, shown, sizeof shown);
      return fail_at (
          loader, &name->start_mark,
          format_string ("invalid variable name in '%s': '%s' (expected letters, digits and "
                         "underscores not starting with a digit)",
                         key->name, shown));
    }
  if ((r = next_event (loader, &value)) < 0)
    return r;
  if (value.type != YAML_SCALAR_EVENT)
    return wrong_type (loader, &value, key->name, "a string value");
  if ((r = scalar_text (loader, &value, &value_text)) < 0)
    return r;
  cleanup_free char *entry = format_string ("%s=%s", name_text, value_text);
  if (!entry)
    return out_of_memory (loader->err);
  return apply_at (loader, &value.start_mark, key, entry);
}

static int
load_env_mapping (struct config_loader *loader, const struct config_key *key)
{
  cleanup_free char **seen = NULL; /* copies of the names so far */
  size_t seen_len = 0;
  int r = 0;
  for (;;)
    {
      cleanup_event yaml_event_t name = { 0 };
      if ((r = next_event (loader, &name)) < 0)
        break;
      if (name.type == YAML_MAPPING_END_EVENT)
        break;
      if (name.type != YAML_SCALAR_EVENT)
        {
          r = wrong_type (loader, &name, key->name, "variable names");
          break;
        }
      const char *text = (const char *)name.data.scalar.value;
      for (size_t i = 0; i < seen_len && r == 0; i++)
        if (strcmp (seen[i], text) == 0)
          r = fail_at (loader, &name.start_mark,
                       format_string ("duplicate key '%s' in '%s'", seen[i], key->name));
      if (r < 0 || (r = load_env_pair (loader, key, &name)) < 0)
        break;
      char *copy = strdup (text);
      if (!copy || string_list_append (&seen, &seen_len, copy) < 0)
        {
          free (copy);
          r = out_of_memory (loader->err);
          break;
        }
    }
  for (size_t i = 0; i < seen_len; i++)
    free (seen[i]);
  return r;
}

static int
load_env_list (struct config_loader *loader, const struct config_key *key)
{
  for (;;)
    {
      cleanup_event yaml_event_t item = { 0 };
      const char *text = NULL;
      int r = next_event (loader, &item);
      if (r < 0)
        return r;
      if (item.type == YAML_SEQUENCE_END_EVENT)
        return 0;
      if (item.type != YAML_SCALAR_EVENT)
        return wrong_type (loader, &item, key->name, "NAME=VALUE strings");
      if ((r = scalar_text (loader, &item, &text)) < 0
          || (r = apply_at (loader, &item.start_mark, key, text)) < 0)
        return r;
    }
}

/* env adds to (or replaces variables of) what is already set, like the
 * setter does. */
static int
load_env (struct config_loader *loader, const struct config_key *key, yaml_event_t *value)
{
  if (value->type == YAML_MAPPING_START_EVENT)
    return load_env_mapping (loader, key);
  if (value->type == YAML_SEQUENCE_START_EVENT)
    return load_env_list (loader, key);
  return wrong_type (loader, value, key->name, "a mapping or a list");
}

static int
set_command_at (struct config_loader *loader, const yaml_mark_t *mark, const char *const *argv,
                size_t argc)
{
  cleanup_error struct nsbox_error *error = NULL;
  int r = nsbox_config_set_command (loader->config, argc, argv, &error);
  if (r == -ENOMEM)
    return out_of_memory (loader->err);
  if (r < 0)
    return fail_at (loader, mark, strdup (nsbox_error_message (error)));
  return 0;
}

static int
load_command_list (struct config_loader *loader, const struct config_key *key,
                   const yaml_mark_t *start)
{
  char **argv = NULL;
  size_t argc = 0;
  int r;
  for (;;)
    {
      cleanup_event yaml_event_t item = { 0 };
      const char *text = NULL;
      if ((r = next_event (loader, &item)) < 0)
        break;
      if (item.type == YAML_SEQUENCE_END_EVENT)
        {
          r = set_command_at (loader, start, (const char *const *)argv, argc);
          break;
        }
      if (item.type != YAML_SCALAR_EVENT)
        {
          r = wrong_type (loader, &item, key->name, "strings");
          break;
        }
      if ((r = scalar_text (loader, &item, &text)) < 0)
        break;
      if (argc >= COMMAND_MAX)
        {
          r = fail_at (
              loader, &item.start_mark,
              format_string ("too many entries in '%s' (at most %d)", key->name, COMMAND_MAX));
          break;
        }
      char *copy = strdup (text);
      if (!copy || string_list_append (&argv, &argc, copy) < 0)
        {
          free (copy);
          r = out_of_memory (loader->err);
          break;
        }
    }
  string_list_free (argv);
  return r;
}

/* command in a file replaces the whole command: a list of arguments, or one
 * string taken as a single argument (never split like a shell would). */
static int
load_command (struct config_loader *loader, const struct config_key *key, yaml_event_t *value)
{
  if (value->type == YAML_SEQUENCE_START_EVENT)
    return load_command_list (loader, key, &value->start_mark);
  if (value->type != YAML_SCALAR_EVENT)
    return wrong_type (loader, value, key->name, "a list or a string");
  const char *text = NULL;
  if (is_null_scalar (value))
    return fail_at (loader, &value->start_mark,
                    format_string ("missing value for '%s'", key->name));
  int r = scalar_text (loader, value, &text);
  if (r < 0)
    return r;
  const char *argv[] = { text, NULL };
  return set_command_at (loader, &value->start_mark, argv, 1);
}

static int
load_entry (struct config_loader *loader, yaml_event_t *name, uint64_t *seen)
{
  const char *text = NULL;
  if (name->type != YAML_SCALAR_EVENT)
    return fail_at (loader, &name->start_mark,
                    format_string ("expected a key, found %s", node_kind (name)));
  int r = scalar_text (loader, name, &text);
  if (r < 0)
    return r;
  const struct config_key *key = find_key (text);
  if (!key)
    {
      char shown[SHOWN_SIZE];
      show_value (text, shown, sizeof shown);
      return fail_at (loader, &name->start_mark, format_string ("unknown key '%s'", shown));
    }
  uint64_t bit = 1ULL << (key - config_keys);
  if (*seen & bit)
    return fail_at (loader, &name->start_mark, format_string ("duplicate key '%s'", key->name));
  *seen |= bit;
  cleanup_event yaml_event_t value = { 0 };
  if ((r = next_event (loader, &value)) < 0)
    return r;
  return key->load (loader, key, &value);
}

static int
load_top_mapping (struct config_loader *loader)
{
  _Static_assert(ARRAY_SIZE (config_keys) <= 64, "duplicate keys are tracked in a uint64_t");
  cleanup_event yaml_event_t start = { 0 };
  int r = next_event (loader, &start);
  if (r < 0)
    return r;
  if (start.type != YAML_MAPPING_START_EVENT)
    return fail_at (loader, &start.start_mark,
                    format_string ("expected a mapping of keys, found %s", node_kind (&start)));
  uint64_t seen = 0;
  for (;;)
    {
      cleanup_event yaml_event_t name = { 0 };
      if ((r = next_event (loader, &name)) < 0)
        return r;
      if (name.type == YAML_MAPPING_END_EVENT)
        return 0;
      if ((r = load_entry (loader, &name, &seen)) < 0)
        return r;
    }
}

/* Expects `type` next; anything else is a document structure error. */
static int
expect_event (struct config_loader *loader, yaml_event_type_t type, const char *problem)
{
  cleanup_event yaml_event_t event = { 0 };
  int r = next_event (loader, &event);
  if (r < 0)
    return r;
  if (event.type != type)
    return fail_at (loader, &event.start_mark, strdup (problem));
  return 0;
}

/* A stream without any document (an empty or all-comment file) changes
 * nothing. */
static int
load_stream (struct config_loader *loader)
{
  cleanup_event yaml_event_t start = { 0 };
  cleanup_event yaml_event_t document = { 0 };
  int r;
  if ((r = next_event (loader, &start)) < 0 || (r = next_event (loader, &document)) < 0)
    return r;
  if (document.type == YAML_STREAM_END_EVENT)
    return 0;
  if ((r = load_top_mapping (loader)) < 0)
    return r;
  if ((r = expect_event (loader, YAML_DOCUMENT_END_EVENT, "expected the end of the document")) < 0)
    return r;
  return expect_event (loader, YAML_STREAM_END_EVENT, "multiple documents are not supported");
}

static int
read_config_file (const char *path, char **text, size_t *text_len, struct nsbox_error **err)
{
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return nsbox_error_sys (err, errno, "open config '%s'", path);
  cleanup_free char *buffer = malloc (CONFIG_FILE_MAX + 1);
  if (!buffer)
    return out_of_memory (err);
  size_t used = 0;
  while (used <= CONFIG_FILE_MAX)
    {
      ssize_t n = read (fd, buffer + used, CONFIG_FILE_MAX + 1 - used);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return nsbox_error_sys (err, errno, "read config '%s'", path);
      if (n == 0)
        break;
      used += (size_t)n;
    }
  if (used > CONFIG_FILE_MAX)
    return nsbox_error_set (err, EFBIG, "config '%s' is larger than 1 MiB", path);
  *text = TAKE_PTR (buffer);
  *text_len = used;
  return 0;
}

static void
swap_config (nsbox_config *a, nsbox_config *b)
{
  nsbox_config saved = *a;
  *a = *b;
  *b = saved;
}

int
nsbox_config_load_yaml (nsbox_config *config, const char *path, struct nsbox_error **err)
{
  if (!config || !path)
    return nsbox_error_set (err, EINVAL, "no configuration or path given");
  cleanup_free char *text = NULL;
  size_t text_len = 0;
  int r = read_config_file (path, &text, &text_len, err);
  if (r < 0)
    return r;
  cleanup_config nsbox_config *copy = nsbox_config_dup (config, err);
  if (!copy)
    return -ENOMEM;
  struct config_loader loader
      = { .path = path, .text = text, .text_len = text_len, .config = copy, .err = err };
  if (!yaml_parser_initialize (&loader.parser))
    return out_of_memory (err);
  yaml_parser_set_input_string (&loader.parser, (const unsigned char *)text, text_len);
  r = load_stream (&loader);
  yaml_parser_delete (&loader.parser);
  if (r < 0)
    return r;
  swap_config (config, copy);
  return 0;
}
