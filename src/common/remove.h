/* Removal of directory trees by fd: never through a symlink, whatever the
 * tree's depth, with a bounded number of fds. Used on trees that others may
 * have shaped: an image's layers (rootfs-tools), and a runsc work directory
 * that processes of gVisor's host uid could write. */
#ifndef NSBOX_REMOVE_H
#define NSBOX_REMOVE_H

#include "util.h"

/* Removes dir_fd/name whatever it is, recursively for directories, without
 * following symlinks, making directories u+rwx on the way (trees unpacked as
 * a user may hold 0555 directories). Any depth: beyond a few dozen levels
 * subdirectories are moved up rather than descended into, so it holds a
 * bounded number of fds. ENOENT is success. Returns 0 or -errno. */
int nsbox_remove_at (int dir_fd, const char *name) NSBOX_INTERNAL;

/* Removes every entry of the directory dir_fd/name (not the directory). */
int nsbox_empty_dir_at (int dir_fd, const char *name) NSBOX_INTERNAL;

#endif
