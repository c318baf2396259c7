/* String hash map; see strmap.h. */
#include "strmap.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t
hash_key (const struct rt_strmap *map, const char *key)
{
  return rt_siphash (&map->key, key, strlen (key));
}

static struct rt_strmap_slot *
find (const struct rt_strmap *map, const char *key)
{
  if (!map->cap)
    return NULL;
  size_t mask = map->cap - 1;
  for (size_t i = hash_key (map, key) & mask;; i = (i + 1) & mask)
    {
      struct rt_strmap_slot *slot = &map->slots[i];
      if (!slot->key || strcmp (slot->key, key) == 0)
        return slot;
    }
}

void *
rt_strmap_get (const struct rt_strmap *map, const char *key)
{
  struct rt_strmap_slot *slot = find (map, key);
  return slot && slot->key ? slot->value : NULL;
}

bool
rt_strmap_has (const struct rt_strmap *map, const char *key)
{
  struct rt_strmap_slot *slot = find (map, key);
  return slot && slot->key;
}

static int
grow (struct rt_strmap *map)
{
  size_t cap = map->cap ? map->cap * 2 : 64;
  struct rt_strmap_slot *slots = calloc (cap, sizeof *slots);
  if (!slots)
    return -ENOMEM;
  if (!map->cap)
    rt_siphash_key_random (&map->key);
  struct rt_strmap bigger = { slots, cap, map->count, map->key };
  for (size_t i = 0; i < map->cap; i++)
    if (map->slots[i].key)
      *find (&bigger, map->slots[i].key) = map->slots[i];
  free (map->slots);
  *map = bigger;
  return 0;
}

int
rt_strmap_put (struct rt_strmap *map, const char *key, void *value, void **old)
{
  if (old)
    *old = NULL;
  if ((map->count + 1) * 2 > map->cap && grow (map) < 0)
    return -ENOMEM;
  struct rt_strmap_slot *slot = find (map, key);
  if (slot->key)
    {
      if (old)
        *old = slot->value;
      slot->value = value;
      return 0;
    }
  slot->key = strdup (key);
  if (!slot->key)
    return -ENOMEM;
  slot->value = value;
  map->count++;
  return 0;
}

void
rt_strmap_clear (struct rt_strmap *map, void (*free_value) (void *))
{
  for (size_t i = 0; i < map->cap; i++)
    if (map->slots[i].key)
      {
        free (map->slots[i].key);
        if (free_value)
          free_value (map->slots[i].value);
      }
  free (map->slots);
  map->slots = NULL;
  map->cap = map->count = 0;
}
