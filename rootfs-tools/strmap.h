/* A small string-keyed hash map (open addressing) for per-path state of the
 * layer applier. Keys are copied; values belong to the caller. Keys are
 * names an image chooses: they are hashed with a random key per map
 * (siphash.h). */
#ifndef NSBOX_STRMAP_H
#define NSBOX_STRMAP_H

#include <stdbool.h>
#include <stddef.h>

#include "siphash.h"
#include "util.h"

struct rt_strmap_slot
{
  char *key;
  void *value;
};

struct rt_strmap
{
  struct rt_strmap_slot *slots;
  size_t cap, count;
  struct rt_siphash_key key; /* drawn when the first slots are */
};

NSBOX_INTERNAL void *rt_strmap_get (const struct rt_strmap *map, const char *key);
NSBOX_INTERNAL bool rt_strmap_has (const struct rt_strmap *map, const char *key);
/* Inserts or replaces; *old gets the replaced value (or NULL). */
NSBOX_INTERNAL int rt_strmap_put (struct rt_strmap *map, const char *key, void *value, void **old);
/* Frees the keys, and the values with free_value when non-NULL. */
NSBOX_INTERNAL void rt_strmap_clear (struct rt_strmap *map, void (*free_value) (void *));

#endif
