/* The paths the layer applier remembers (what each layer wrote, the image's
 * metadata of every entry), as a tree of components: a path is a node
 * naming its parent node and its last component. Remembering a path costs
 * its components not seen before, never a copy of each ancestor, so the
 * memory is linear in what the layers name however deep their paths go.
 * Lookups hash (parent, component) with a keyed hash (siphash.h). */
#ifndef NSBOX_PATHTAB_H
#define NSBOX_PATHTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "siphash.h"
#include "util.h"

#define RT_PATH_ROOT 0u
#define RT_PATH_NONE UINT32_MAX

struct rt_path_node
{
  uint32_t parent;   /* RT_PATH_NONE for the root */
  uint32_t name_off; /* into names */
  uint32_t hash;     /* low bits of the keyed hash of (parent, name) */
  uint32_t meta;     /* the caller's: 0 for none */
  uint32_t mark;     /* the caller's: 0 until set */
  uint16_t depth;    /* components; 0 for the root */
  uint8_t name_len;  /* 1 to 255; 0 for the root */
};

struct rt_pathtab
{
  struct rt_path_node *nodes; /* nodes[RT_PATH_ROOT] is the root */
  size_t count, cap;
  char *names; /* the components, back to back, no terminators */
  size_t names_len, names_cap;
  uint32_t *slots; /* node indices, 0 for empty (the root is never in it) */
  size_t slot_mask;
  struct rt_siphash_key key;
};

/* An empty table holding the root; -ENOMEM. */
NSBOX_INTERNAL int rt_pathtab_init (struct rt_pathtab *table);
NSBOX_INTERNAL void rt_pathtab_free (struct rt_pathtab *table);

/* The child `name` (len bytes, no '/') of `parent`, or RT_PATH_NONE. */
NSBOX_INTERNAL uint32_t rt_pathtab_child (const struct rt_pathtab *table, uint32_t parent,
                                          const char *name, size_t len);
/* The same, added when missing: 1 when added, 0 when it was there,
 * -ENAMETOOLONG for a name over 255 bytes, -ENOMEM. */
NSBOX_INTERNAL int rt_pathtab_add (struct rt_pathtab *table, uint32_t parent, const char *name,
                                   size_t len, uint32_t *out);
/* Follows a clean relative path ("" is `from` itself) from `from`. Without
 * add, *out is RT_PATH_NONE when a component is missing; with add, missing
 * nodes are added and *added (optional) counts them. 0 or -errno. */
NSBOX_INTERNAL int rt_pathtab_walk (struct rt_pathtab *table, uint32_t from, const char *path,
                                    bool add, uint32_t *out, size_t *added);
/* Writes the path of `node` ("" for the root) into buf; its length, or -1
 * when it does not fit in size bytes with its terminator. */
NSBOX_INTERNAL long rt_pathtab_path (const struct rt_pathtab *table, uint32_t node, char *buf,
                                     size_t size);
/* strcmp of the two nodes' paths, without writing them out. */
NSBOX_INTERNAL int rt_pathtab_compare (const struct rt_pathtab *table, uint32_t a, uint32_t b);

static inline struct rt_path_node *
rt_pathtab_node (const struct rt_pathtab *table, uint32_t node)
{
  return &table->nodes[node];
}

#endif
