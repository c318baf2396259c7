/* Free space of the store filesystem while unpacking; see space.h. */
#include "space.h"

#include <errno.h>
#include <inttypes.h>
#include <sys/statvfs.h>

static int
refresh (struct rt_space *s)
{
  struct statvfs fs;
  if (fstatvfs (s->fd, &fs) < 0)
    return -errno;
  uint64_t block = fs.f_frsize ? fs.f_frsize : fs.f_bsize;
  s->blocks_known = fs.f_blocks > 0 && block > 0;
  s->inodes_known = fs.f_files > 0;
  s->block_size = block ? block : 4096;
  s->free_bytes = (uint64_t)fs.f_bavail * s->block_size;
  s->free_inodes = fs.f_favail;
  s->reserve_bytes = (uint64_t)fs.f_blocks * s->percent / 100 * s->block_size;
  s->reserve_inodes = (uint64_t)fs.f_files * s->percent / 100;
  s->taken_bytes = s->taken_inodes = 0;
  return 0;
}

void
rt_space_init (struct rt_space *s, int fd, unsigned percent)
{
  *s = (struct rt_space){ .fd = fd, .percent = percent, .block_size = 4096 };
  refresh (s);
}

uint64_t
rt_space_blocks (const struct rt_space *s, uint64_t bytes)
{
  uint64_t rest = bytes % s->block_size;
  return rest ? bytes + (s->block_size - rest) : bytes;
}

static uint64_t
left (uint64_t free, uint64_t taken)
{
  return free > taken ? free - taken : 0;
}

static int
no_space (const struct rt_space *s, uint64_t bytes, struct nsbox_error **err)
{
  return nsbox_error_set (err, ENOSPC,
                          "disk full: the store's filesystem has %" PRIu64 " bytes free; %" PRIu64
                          " more would leave less than the %" PRIu64
                          " bytes (%u%%) unpacking keeps free (NSBOX_MIN_FREE_PERCENT sets that "
                          "share)",
                          left (s->free_bytes, s->taken_bytes), bytes, s->reserve_bytes,
                          s->percent);
}

static int
no_inodes (const struct rt_space *s, uint64_t inodes, struct nsbox_error **err)
{
  return nsbox_error_set (err, ENOSPC,
                          "disk full: the store's filesystem has %" PRIu64 " inodes free; %" PRIu64
                          " more would leave less than the %" PRIu64
                          " (%u%%) unpacking keeps free (NSBOX_MIN_FREE_PERCENT sets that share)",
                          left (s->free_inodes, s->taken_inodes), inodes, s->reserve_inodes,
                          s->percent);
}

static bool
bytes_fit (const struct rt_space *s, uint64_t bytes)
{
  if (!s->blocks_known)
    return true;
  uint64_t free = left (s->free_bytes, s->taken_bytes);
  return free >= s->reserve_bytes && free - s->reserve_bytes >= bytes;
}

static bool
inodes_fit (const struct rt_space *s, uint64_t inodes)
{
  if (!s->inodes_known)
    return true;
  uint64_t free = left (s->free_inodes, s->taken_inodes);
  return free >= s->reserve_inodes && free - s->reserve_inodes >= inodes;
}

int
rt_space_check_declared (struct rt_space *s, uint64_t bytes, struct nsbox_error **err)
{
  if (!bytes_fit (s, bytes))
    return nsbox_error_set (err, ENOSPC,
                            "disk full: the image's layers alone are %" PRIu64
                            " bytes compressed, and the store's filesystem has %" PRIu64
                            " bytes free, %" PRIu64 " (%u%%) of which unpacking keeps free "
                            "(NSBOX_MIN_FREE_PERCENT sets that share)",
                            bytes, left (s->free_bytes, s->taken_bytes), s->reserve_bytes,
                            s->percent);
  if (!inodes_fit (s, 1))
    return no_inodes (s, 1, err);
  return 0;
}

int
rt_space_take (struct rt_space *s, uint64_t bytes, uint64_t inodes, uint64_t pending_bytes,
               uint64_t pending_inodes, struct nsbox_error **err)
{
  if (!bytes_fit (s, bytes) || !inodes_fit (s, inodes) || s->taken_bytes >= RT_SPACE_RECHECK_BYTES
      || s->taken_inodes >= RT_SPACE_RECHECK_INODES)
    {
      /* Unreadable now: keep the estimate, which is pessimistic. */
      if (refresh (s) == 0)
        {
          s->taken_bytes = pending_bytes;
          s->taken_inodes = pending_inodes;
        }
      if (!bytes_fit (s, bytes))
        return no_space (s, bytes, err);
      if (!inodes_fit (s, inodes))
        return no_inodes (s, inodes, err);
    }
  s->taken_bytes += bytes;
  s->taken_inodes += inodes;
  return 0;
}
