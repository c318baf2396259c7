/* The applier's table of paths; see pathtab.h. */
#include "pathtab.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NAME 255
#define MAX_DEPTH UINT16_MAX

static uint32_t
hash_of (const struct rt_pathtab *t, uint32_t parent, const char *name, size_t len)
{
  unsigned char buf[4 + MAX_NAME];
  memcpy (buf, &parent, 4);
  memcpy (buf + 4, name, len);
  return (uint32_t)rt_siphash (&t->key, buf, 4 + len);
}

static bool
node_is (const struct rt_pathtab *t, uint32_t index, uint32_t parent, uint32_t hash,
         const char *name, size_t len)
{
  const struct rt_path_node *n = &t->nodes[index];
  return n->hash == hash && n->parent == parent && n->name_len == len
         && memcmp (t->names + n->name_off, name, len) == 0;
}

/* The slot holding (parent, name), or the empty slot where it would go. */
static uint32_t *
find_slot (const struct rt_pathtab *t, uint32_t parent, uint32_t hash, const char *name, size_t len)
{
  for (size_t i = hash & t->slot_mask;; i = (i + 1) & t->slot_mask)
    {
      uint32_t *slot = &t->slots[i];
      if (!*slot || node_is (t, *slot, parent, hash, name, len))
        return slot;
    }
}

int
rt_pathtab_init (struct rt_pathtab *t)
{
  memset (t, 0, sizeof *t);
  t->cap = 64;
  t->nodes = malloc (t->cap * sizeof *t->nodes);
  t->slot_mask = 127;
  t->slots = calloc (t->slot_mask + 1, sizeof *t->slots);
  if (!t->nodes || !t->slots)
    {
      rt_pathtab_free (t);
      return -ENOMEM;
    }
  t->nodes[RT_PATH_ROOT] = (struct rt_path_node){ .parent = RT_PATH_NONE };
  t->count = 1;
  rt_siphash_key_random (&t->key);
  return 0;
}

void
rt_pathtab_free (struct rt_pathtab *t)
{
  free (t->nodes);
  free (t->names);
  free (t->slots);
  memset (t, 0, sizeof *t);
}

uint32_t
rt_pathtab_child (const struct rt_pathtab *t, uint32_t parent, const char *name, size_t len)
{
  if (len == 0 || len > MAX_NAME)
    return RT_PATH_NONE;
  uint32_t *slot = find_slot (t, parent, hash_of (t, parent, name, len), name, len);
  return *slot ? *slot : RT_PATH_NONE;
}

static int
grow_slots (struct rt_pathtab *t)
{
  size_t cap = (t->slot_mask + 1) * 2;
  uint32_t *slots = calloc (cap, sizeof *slots);
  if (!slots)
    return -ENOMEM;
  free (t->slots);
  t->slots = slots;
  t->slot_mask = cap - 1;
  for (uint32_t i = 1; i < t->count; i++)
    {
      size_t j = t->nodes[i].hash & t->slot_mask;
      while (t->slots[j])
        j = (j + 1) & t->slot_mask;
      t->slots[j] = i;
    }
  return 0;
}

static int
reserve (struct rt_pathtab *t, size_t name_len)
{
  if (t->count >= UINT32_MAX - 1 || t->names_len + name_len > UINT32_MAX)
    return -ENOMEM;
  if (t->count == t->cap)
    {
      struct rt_path_node *nodes = realloc (t->nodes, t->cap * 2 * sizeof *nodes);
      if (!nodes)
        return -ENOMEM;
      t->nodes = nodes;
      t->cap *= 2;
    }
  if (t->names_len + name_len > t->names_cap)
    {
      size_t cap = t->names_cap ? t->names_cap * 2 : 4096;
      while (cap < t->names_len + name_len)
        cap *= 2;
      char *names = realloc (t->names, cap);
      if (!names)
        return -ENOMEM;
      t->names = names;
      t->names_cap = cap;
    }
  /* At most half full. */
  if ((t->count + 1) * 2 > t->slot_mask + 1)
    return grow_slots (t);
  return 0;
}

int
rt_pathtab_add (struct rt_pathtab *t, uint32_t parent, const char *name, size_t len, uint32_t *out)
{
  if (len == 0 || len > MAX_NAME)
    return -ENAMETOOLONG;
  if (t->nodes[parent].depth >= MAX_DEPTH)
    return -ENAMETOOLONG;
  uint32_t hash = hash_of (t, parent, name, len);
  uint32_t *slot = find_slot (t, parent, hash, name, len);
  if (*slot)
    {
      *out = *slot;
      return 0;
    }
  int ret = reserve (t, len);
  if (ret < 0)
    return ret;
  /* reserve may have rehashed. */
  slot = find_slot (t, parent, hash, name, len);
  uint32_t index = (uint32_t)t->count++;
  t->nodes[index] = (struct rt_path_node){
    .parent = parent,
    .name_off = (uint32_t)t->names_len,
    .hash = hash,
    .depth = (uint16_t)(t->nodes[parent].depth + 1),
    .name_len = (uint8_t)len,
  };
  memcpy (t->names + t->names_len, name, len);
  t->names_len += len;
  *slot = index;
  *out = index;
  return 1;
}

int
rt_pathtab_walk (struct rt_pathtab *t, uint32_t from, const char *path, bool add, uint32_t *out,
                 size_t *added)
{
  uint32_t node = from;
  const char *p = path;
  while (*p)
    {
      const char *slash = strchr (p, '/');
      size_t len = slash ? (size_t)(slash - p) : strlen (p);
      if (len > 0)
        {
          if (!add)
            {
              node = rt_pathtab_child (t, node, p, len);
              if (node == RT_PATH_NONE)
                break;
            }
          else
            {
              int ret = rt_pathtab_add (t, node, p, len, &node);
              if (ret < 0)
                return ret;
              if (added)
                *added += (size_t)ret;
            }
        }
      if (!slash)
        break;
      p = slash + 1;
    }
  *out = node;
  return 0;
}

long
rt_pathtab_path (const struct rt_pathtab *t, uint32_t node, char *buf, size_t size)
{
  size_t len = 0;
  for (uint32_t n = node; n != RT_PATH_ROOT; n = t->nodes[n].parent)
    len += t->nodes[n].name_len + (t->nodes[n].parent != RT_PATH_ROOT);
  if (len + 1 > size)
    return -1;
  buf[len] = '\0';
  size_t end = len;
  for (uint32_t n = node; n != RT_PATH_ROOT; n = t->nodes[n].parent)
    {
      const struct rt_path_node *x = &t->nodes[n];
      end -= x->name_len;
      memcpy (buf + end, t->names + x->name_off, x->name_len);
      if (x->parent != RT_PATH_ROOT)
        buf[--end] = '/';
    }
  return (long)len;
}

/* The character of a's path right after its ancestor `at` (whose name
 * ended there): '/' when a goes deeper, the end of the string otherwise. */
static int
after (uint32_t a, uint32_t at)
{
  return a == at ? 0 : '/';
}

int
rt_pathtab_compare (const struct rt_pathtab *t, uint32_t a, uint32_t b)
{
  if (a == b)
    return 0;
  /* Climb to equal depths, then to the children of the common ancestor:
   * the paths agree up to there, and differ in those two names (or one
   * path is a prefix of the other, which sorts first). */
  uint32_t x = a, y = b;
  while (t->nodes[x].depth > t->nodes[y].depth)
    x = t->nodes[x].parent;
  while (t->nodes[y].depth > t->nodes[x].depth)
    y = t->nodes[y].parent;
  if (x == y)
    return t->nodes[a].depth < t->nodes[b].depth ? -1 : 1;
  while (t->nodes[x].parent != t->nodes[y].parent)
    {
      x = t->nodes[x].parent;
      y = t->nodes[y].parent;
    }
  const struct rt_path_node *nx = &t->nodes[x], *ny = &t->nodes[y];
  size_t common = nx->name_len < ny->name_len ? nx->name_len : ny->name_len;
  int c = memcmp (t->names + nx->name_off, t->names + ny->name_off, common);
  if (c != 0)
    return c;
  /* One name is a prefix of the other (siblings differ): compare what
   * follows it in its path with the longer name's next byte. */
  if (nx->name_len < ny->name_len)
    return after (a, x) - (unsigned char)t->names[ny->name_off + common] < 0 ? -1 : 1;
  return (unsigned char)t->names[nx->name_off + common] - after (b, y) < 0 ? -1 : 1;
}
