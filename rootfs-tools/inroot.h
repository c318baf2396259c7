/* Path resolution inside an untrusted tree and fd-based tree removal
 * (../shared/OCI.md section 4). Nothing here follows a symlink out of the
 * tree: paths resolve with chroot semantics, by openat2(RESOLVE_IN_ROOT) or,
 * where that is missing, by a userspace walker with the same semantics. */
#ifndef NSBOX_INROOT_H
#define NSBOX_INROOT_H

#include <stdbool.h>

#include "util.h"

/* Opens `path` (relative, lexically clean, "" for the root itself) below
 * root_fd as an O_PATH|O_DIRECTORY fd, following symlinks inside the tree
 * only. use_fallback forces the userspace walker. Returns the fd or -errno
 * (ENOENT, ENOTDIR, ELOOP, ...). */
NSBOX_INTERNAL int rt_open_dir_in_root (int root_fd, const char *path, bool use_fallback);

/* Whether openat2 works here (probed once). */
NSBOX_INTERNAL bool rt_have_openat2 (void);

/* Removes dir_fd/name whatever it is, recursively for directories, without
 * following symlinks, making directories u+rwx on the way (trees unpacked as
 * a user may hold 0555 directories). Any depth: beyond a few dozen levels
 * subdirectories are moved up rather than descended into, so it holds a
 * bounded number of fds. ENOENT is success. Returns 0 or -errno. */
NSBOX_INTERNAL int rt_remove_at (int dir_fd, const char *name);

/* Removes every entry of the directory dir_fd/name (not the directory). */
NSBOX_INTERNAL int rt_empty_dir_at (int dir_fd, const char *name);

#endif
