/* What layer.c, layer-entry.c and layer-paths.c (applying layers) and
 * finish.c (the step after the last) share: the unpack's state. */
#ifndef NSBOX_LAYER_PRIVATE_H
#define NSBOX_LAYER_PRIVATE_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "layer.h"
#include "pathtab.h"
#include "space.h"

#define MAX_PATH_BYTES 4096

/* What the image said about one path: applied to directories at the end,
 * written to ownership.tsv for everything. */
struct path_meta
{
  int64_t uid, gid;
  struct timespec mtime;
  mode_t mode;   /* type and permission bits from the header */
  uint32_t node; /* in rt_unpack.paths */
};

struct rt_unpack
{
  struct nsbox_store *store;
  int root_fd; /* O_RDONLY|O_DIRECTORY, the tree's root */
  bool fallback;
  /* What the image created so far, against the per-image limits. */
  uint64_t image_bytes, image_inodes;
  struct rt_space space;
  /* Every path an entry named, with its parents; a node's meta is 1 + its
   * index in metas, its mark 1 + the index of the layer that last wrote
   * it or something below it. */
  struct rt_pathtab paths;
  struct path_meta *metas;
  size_t n_metas, metas_cap;
  bool warned_xattr, warned_user_xattr;
  char *copy_buf;
};

/* An O_PATH fd of the directory `path` ("" the root) inside the tree, or
 * -errno. */
NSBOX_INTERNAL int rt_unpack_open_dir (struct rt_unpack *u, const char *path);

#endif
