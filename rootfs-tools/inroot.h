/* Path resolution inside an untrusted tree (its removal: remove.h).
 * Nothing here follows a symlink out of the tree: paths resolve with chroot
 * semantics, by openat2(RESOLVE_IN_ROOT) or, where that is missing, by a
 * userspace walker with the same semantics. */
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

#endif
