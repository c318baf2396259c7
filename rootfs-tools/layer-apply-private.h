/* What the layer applier's files share: one layer in progress. layer.c
 * walks the tar stream and calls layer-entry.c for each entry, which
 * resolves, counts and remembers paths through layer-paths.c; calls go
 * that way only. */
#ifndef NSBOX_LAYER_APPLY_PRIVATE_H
#define NSBOX_LAYER_APPLY_PRIVATE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "filequeue.h"
#include "layer-private.h"
#include "strmap.h"
#include "util.h"

struct archive;
struct archive_entry;
struct rt_stream;

#define MAX_LINK_BYTES 4095
#define COPY_CHUNK (256u << 10)

/* One layer in progress. */
struct layer
{
  struct rt_unpack *u;
  unsigned index;
  char *label;   /* "layer 2 (sha256:...)", for messages */
  uint32_t mark; /* index + 1: marks the paths of rt_unpack.paths this layer wrote */
  /* The lexical parent marked last, and its node. */
  char *mark_parent;
  uint32_t mark_parent_node;
  struct archive *ar;
  struct rt_stream *stream;
  uint64_t bytes, entries; /* bytes: as counted against layer_bytes */
  /* The stream bytes libarchive has seen last, to read the raw typeflag of
   * each entry's header (libarchive maps unknown types to regular files). */
  const unsigned char *chunk;
  size_t chunk_len;
  uint64_t chunk_start;
  unsigned char tail[512];
  size_t tail_len;
  /* The parent directory resolved last (lexical path, O_PATH fd, inode):
   * entries of one directory come together, and a path resolves to the
   * same directory until something is removed from the tree (parent_stale).
   * Creating cannot change where an existing path leads. */
  char *parent_path;
  int parent_fd;
  ino_t parent_ino;
  bool parent_stale;
  /* parent_fd shared with the file jobs queued in it (made on the first),
   * and how many such directories were handed out since the last drain. */
  struct rt_dir_ref *parent_ref;
  unsigned queue_dirs;
  /* The file thread, and the names it was given since it was last drained
   * ("<parent inode>/<base>"): whatever could see or disturb a queued file
   * drains it first (removals, whiteouts, hardlinks, creating missing
   * parents, a second entry for a queued name). */
  struct rt_file_queue files;
  struct rt_strmap queued_names;
};

/* layer-paths.c: messages, names, the budget, the file thread and
 * resolution. */

/* "<label>: '<path>': <what>", the path cut for messages. */
NSBOX_INTERNAL int nsbox_layer_error (struct layer *l, struct nsbox_error **err, int code,
                                      const char *path, const char *what);
/* Lexically cleans a tar name into a relative path ("" is the root). */
NSBOX_INTERNAL int nsbox_layer_clean_path (struct layer *l, const char *raw, char **out,
                                           struct nsbox_error **err);
/* Cuts path at its last slash into parent ("" for none) and base. */
NSBOX_INTERNAL void nsbox_layer_split_path (char *path, const char **parent, const char **base);
/* Remembers path and marks it and its parents as written by this layer. */
NSBOX_INTERNAL int nsbox_layer_mark_written (struct layer *l, const char *path, uint32_t *out,
                                             struct nsbox_error **err);
/* Whether this layer wrote `name` in the lexical directory parent_node. */
NSBOX_INTERNAL bool nsbox_layer_written_here (struct layer *l, uint32_t parent_node,
                                              const char *name);
/* Counts what an entry is about to create against the limits and the free
 * space, before it is created. */
NSBOX_INTERNAL int nsbox_layer_charge (struct layer *l, const char *path, uint64_t inodes,
                                       uint64_t bytes, uint64_t disk_bytes, uint64_t disk_inodes,
                                       struct nsbox_error **err);
/* nsbox_layer_charge for a directory, symlink or FIFO. */
NSBOX_INTERNAL int nsbox_layer_charge_other (struct layer *l, const char *path,
                                             struct nsbox_error **err);
/* Waits until every queued file is written. */
NSBOX_INTERNAL int nsbox_layer_queue_drain (struct layer *l, struct nsbox_error **err);
/* Drains the queue when `base` in the last resolved parent is queued. */
NSBOX_INTERNAL int nsbox_layer_queue_wait_for_name (struct layer *l, const char *base,
                                                    struct nsbox_error **err);
/* Drops the parent directory resolved last. */
NSBOX_INTERNAL void nsbox_layer_forget_parent (struct layer *l);
/* The parent directory of an entry, created as needed; the layer's fd. */
NSBOX_INTERNAL int nsbox_layer_open_parent (struct layer *l, const char *parent, const char *path,
                                            struct nsbox_error **err);
/* Before anything is removed from the tree. */
NSBOX_INTERNAL int nsbox_layer_before_removal (struct layer *l, struct nsbox_error **err);
/* Makes room for a new entry: 1 when a directory merges, else 0. */
NSBOX_INTERNAL int nsbox_layer_clear_target (struct layer *l, int pfd, const char *base,
                                             bool new_is_dir, const char *path,
                                             struct nsbox_error **err);

/* layer-entry.c: applies the entry just read from l->ar. */
NSBOX_INTERNAL int nsbox_layer_apply_entry (struct layer *l, struct archive_entry *entry,
                                            struct nsbox_error **err);

#endif
