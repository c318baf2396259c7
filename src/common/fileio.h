/* Reading files whole, with messages that name them, and reads that
 * retry what the kernel cut short. */
#ifndef NSBOX_FILEIO_H
#define NSBOX_FILEIO_H

#include <stddef.h>
#include <sys/types.h>

#include "util.h"

/* Reads up to size bytes at offset, retrying short reads and EINTR: the
 * bytes read (fewer only at the end of the file), or -errno. */
ssize_t nsbox_pread_full (int fd, void *buffer, size_t size, off_t offset) NSBOX_INTERNAL;
/* The same from the file's position (a pipe or a socket too). */
ssize_t nsbox_read_full (int fd, void *buffer, size_t size) NSBOX_INTERNAL;

/* Reads the regular file `path` whole, at most max bytes, NUL-terminated.
 * `what` names it in the messages ("config", "seccomp policy"): "open
 * WHAT 'PATH': ...", "WHAT 'PATH' is larger than N MiB" (or bytes; EFBIG). */
int nsbox_read_file (const char *path, size_t max, const char *what, char **data, size_t *len,
                     struct nsbox_error **err) NSBOX_INTERNAL;

/* The same for a file already open as fd (path names it in the messages). */
int nsbox_read_fd (int fd, size_t max, const char *what, const char *path, char **data, size_t *len,
                   struct nsbox_error **err) NSBOX_INTERNAL;

#endif
