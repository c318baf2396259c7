/* Inside the configuration: the table of keys (config_keys.c) that the
 * setters and getters (config.c), the YAML loader (config_yaml.c) and the
 * manual page's generator read. */
#ifndef NSBOX_CONFIG_KEYS_H
#define NSBOX_CONFIG_KEYS_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "util.h"

#define ENV_MAX 1024
#define COMMAND_MAX 4096
/* Values quoted in messages are cut to this many bytes. */
#define SHOWN_VALUE_MAX 64
#define SHOWN_SIZE (SHOWN_VALUE_MAX * 4 + 8)

/* The keys. Each setter parses into locals and changes the configuration
 * only once nothing can fail any more. */

struct config_key;
typedef int (*key_set_fn) (nsbox_config *config, const struct config_key *key, const char *value,
                           struct nsbox_error **err);
typedef char *(*key_get_fn) (const nsbox_config *config);

/* How the YAML loader (config_yaml.c) reads a key's value. */
enum config_key_yaml
{
  YAML_SCALAR = 0, /* one scalar */
  YAML_LIST,       /* a list of strings (or one string) applied one by one, like repeated
                    * flags; a null clears the key */
  YAML_ENV,        /* a mapping NAME: VALUE or a list of NAME=VALUE */
  YAML_COMMAND,    /* a list of arguments replacing the command */
};

enum
{
  KEY_BOOLEAN = 1 << 0,    /* a flag without a value on the CLI */
  KEY_REPEATABLE = 1 << 1, /* each use adds to the list */
  KEY_NULLABLE = 1 << 2,   /* an empty value (a YAML null) unsets it */
};

enum config_key_kind
{
  KIND_NUMBER,  /* a uint64_t field: parse, bounds, format */
  KIND_STRING,  /* a char * field: an optional check of the value */
  KIND_BOOLEAN, /* a bool field: true, false, yes, no, 1 or 0 */
  KIND_CUSTOM,  /* its own set and get */
};

/* One row of the table (config_keys.c). */
struct config_key
{
  const char *name;
  const char *expected; /* what a valid value looks like, for messages */
  const char *help;     /* one line for the CLI's --help */
  const char *doc;      /* its entry in nsbox.yaml(5) */
  unsigned flags;
  enum config_key_kind kind;
  size_t offset; /* NUMBER, STRING, BOOLEAN: the field in nsbox_config */
  int (*parse) (const char *text, uint64_t *value); /* NUMBER */
  uint64_t min, max;                                /* NUMBER */
  char *(*format) (uint64_t value);                 /* NUMBER */
  bool (*valid) (const char *value);                /* STRING: NULL for any */
  key_set_fn set;                                   /* CUSTOM */
  key_get_fn get;                                   /* CUSTOM */
  enum config_key_yaml yaml;
};

/* Sets or gets the key of `key`'s row: 0 or -EINVAL/-ENOMEM; a new string,
 * NULL when out of memory. */
int nsbox_config_key_set (nsbox_config *config, const struct config_key *key, const char *value,
                          struct nsbox_error **err) NSBOX_INTERNAL;
char *nsbox_config_key_get (const nsbox_config *config,
                            const struct config_key *key) NSBOX_INTERNAL;

/* The i-th row, NULL past the last. */
const struct config_key *nsbox_config_key_at (size_t i) NSBOX_INTERNAL;

/* "invalid value for 'KEY': 'VALUE' (expected EXPECTED)": -EINVAL. */
int nsbox_config_invalid_value (struct nsbox_error **err, const char *key, const char *value,
                                const char *expected) NSBOX_INTERNAL;

/* Replaces *field with a copy of value, or NULL for an empty value when
 * empty_unsets: 0 or -ENOMEM. */
int nsbox_config_replace_string (char **field, const char *value, bool empty_unsets,
                                 struct nsbox_error **err) NSBOX_INTERNAL;

const struct config_key *nsbox_config_find_key (const char *name) NSBOX_INTERNAL;
/* Its place in the table (fewer than 64). */
unsigned nsbox_config_key_index (const struct config_key *key) NSBOX_INTERNAL;

/* `value` for a message: at most SHOWN_VALUE_MAX bytes, escaped. */
void nsbox_config_show_value (const char *value, char *shown, size_t size) NSBOX_INTERNAL;

/* The length of the NAME of "NAME=VALUE", 0 when it is not a valid name. */
size_t nsbox_env_name_length (const char *text) NSBOX_INTERNAL;

#endif
