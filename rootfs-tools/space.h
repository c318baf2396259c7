/* The store filesystem's free space while an image is unpacked. Before, the
 * layers' declared (compressed) sizes, a floor for what they unpack to,
 * must fit above a reserve of NSBOX_MIN_FREE_PERCENT of the filesystem's
 * blocks and inodes. During, every entry's blocks and inodes are taken
 * from an estimate, and statvfs is asked again whenever the estimate comes
 * near the reserve (and after RT_SPACE_RECHECK_BYTES or _INODES anyway, as
 * others write there too): an unpack stops before it eats into the
 * reserve, not at ENOSPC with the filesystem full. Filesystems that report
 * no blocks or no inodes (btrfs has no inode count) are not checked for
 * them. */
#ifndef NSBOX_SPACE_H
#define NSBOX_SPACE_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "util.h"

#define RT_SPACE_RECHECK_BYTES (64u << 20)
#define RT_SPACE_RECHECK_INODES 4096u

struct rt_space
{
  int fd; /* on the filesystem; the caller's */
  unsigned percent;
  bool blocks_known, inodes_known;
  uint64_t block_size;
  uint64_t free_bytes, free_inodes; /* at the last statvfs */
  uint64_t reserve_bytes, reserve_inodes;
  uint64_t taken_bytes, taken_inodes; /* since then */
};

/* Reads the filesystem of fd once (a failure leaves it unchecked). */
NSBOX_INTERNAL void rt_space_init (struct rt_space *space, int fd, unsigned percent);
/* -ENOSPC unless `bytes` fit above the reserve, with at least the reserve
 * of inodes left. */
NSBOX_INTERNAL int rt_space_check_declared (struct rt_space *space, uint64_t bytes,
                                            struct nsbox_error **err);
/* Takes bytes and inodes; -ENOSPC when they would eat into the reserve.
 * pending_bytes and pending_inodes were taken but may not be written yet
 * (queued files): a fresh statvfs cannot show them. */
NSBOX_INTERNAL int rt_space_take (struct rt_space *space, uint64_t bytes, uint64_t inodes,
                                  uint64_t pending_bytes, uint64_t pending_inodes,
                                  struct nsbox_error **err);
/* bytes rounded up to whole blocks of the filesystem. */
NSBOX_INTERNAL uint64_t rt_space_blocks (const struct rt_space *space, uint64_t bytes);

#endif
