/* Reading files whole: see fileio.h. */
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"

/* offset < 0: read() from the file's position. */
static ssize_t
read_full (int fd, void *buffer, size_t size, off_t offset)
{
  size_t done = 0;
  while (done < size)
    {
      ssize_t n = offset < 0 ? read (fd, (char *)buffer + done, size - done)
                             : pread (fd, (char *)buffer + done, size - done, offset + (off_t)done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return -errno;
      if (n == 0)
        break;
      done += (size_t)n;
    }
  return (ssize_t)done;
}

ssize_t
nsbox_pread_full (int fd, void *buffer, size_t size, off_t offset)
{
  if (offset < 0)
    return -EINVAL;
  return read_full (fd, buffer, size, offset);
}

ssize_t
nsbox_read_full (int fd, void *buffer, size_t size)
{
  return read_full (fd, buffer, size, -1);
}

int
nsbox_read_file (const char *path, size_t max, const char *what, char **data, size_t *len,
                 struct nsbox_error **err)
{
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return nsbox_error_sys (err, errno, "open %s '%s'", what, path);
  return nsbox_read_fd (fd, max, what, path, data, len, err);
}

int
nsbox_read_fd (int fd, size_t max, const char *what, const char *path, char **data, size_t *len,
               struct nsbox_error **err)
{
  struct stat st;
  if (fstat (fd, &st) < 0)
    return nsbox_error_sys (err, errno, "stat %s '%s'", what, path);
  if (!S_ISREG (st.st_mode))
    return nsbox_error_set (err, EINVAL, "%s '%s' is not a regular file", what, path);
  cleanup_free char *buffer = malloc (max + 1);
  if (!buffer)
    return nsbox_error_oom (err);
  /* One byte past max tells "exactly max" from "more". */
  ssize_t n = nsbox_pread_full (fd, buffer, max + 1, 0);
  if (n < 0)
    return nsbox_error_sys (err, (int)-n, "read %s '%s'", what, path);
  size_t used = (size_t)n;
  if (used > max && max % (1 << 20) == 0)
    return nsbox_error_set (err, EFBIG, "%s '%s' is larger than %zu MiB", what, path, max >> 20);
  if (used > max)
    return nsbox_error_set (err, EFBIG, "%s '%s' is larger than %zu bytes", what, path, max);
  buffer[used] = '\0';
  *data = TAKE_PTR (buffer);
  *len = used;
  return 0;
}
