/* Inside the configuration: the key table shared by the setters and
 * getters (config.c) and the YAML loader (config_yaml.c). */
#ifndef NSBOX_CONFIG_KEYS_H
#define NSBOX_CONFIG_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <yaml.h>

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

const struct config_key *nsbox_config_find_key (const char *name) NSBOX_INTERNAL;
/* Its place in the table (fewer than 64). */
unsigned nsbox_config_key_index (const struct config_key *key) NSBOX_INTERNAL;

/* `value` for a message: at most SHOWN_VALUE_MAX bytes, escaped. */
void nsbox_config_show_value (const char *value, char *shown, size_t size) NSBOX_INTERNAL;

/* The length of the NAME of "NAME=VALUE", 0 when it is not a valid name. */
size_t nsbox_env_name_length (const char *text) NSBOX_INTERNAL;

/* The YAML loaders of the keys (config_yaml.c). */
int nsbox_config_load_scalar (struct config_loader *loader, const struct config_key *key,
                              yaml_event_t *value) NSBOX_INTERNAL;
int nsbox_config_load_env (struct config_loader *loader, const struct config_key *key,
                           yaml_event_t *value) NSBOX_INTERNAL;
/* A list of strings (or one string) applied one by one, like repeated
 * flags; a null clears the key. */
int nsbox_config_load_list (struct config_loader *loader, const struct config_key *key,
                            yaml_event_t *value) NSBOX_INTERNAL;
int nsbox_config_load_command (struct config_loader *loader, const struct config_key *key,
                               yaml_event_t *value) NSBOX_INTERNAL;

#endif
