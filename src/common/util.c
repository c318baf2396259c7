/* Helpers of the base layer: see util.h. */
#include "util.h"

#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>

#include "error.h"

char *
xasprintf (const char *fmt, ...)
{
  char *s = NULL;
  va_list ap;
  va_start (ap, fmt);
  if (vasprintf (&s, fmt, ap) < 0)
    s = NULL;
  va_end (ap);
  return s;
}

int
nsbox_write_all (int fd, const void *data, size_t len)
{
  const char *p = data;
  while (len > 0)
    {
      ssize_t n = write (fd, p, len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return -errno;
      if (n == 0)
        return -EIO;
      p += n;
      len -= (size_t)n;
    }
  return 0;
}

int
nsbox_read_file (const char *path, size_t max, const char *what, char **data, size_t *len,
                 struct nsbox_error **err)
{
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return nsbox_error_sys (err, errno, "open %s '%s'", what, path);
  struct stat st;
  if (fstat (fd, &st) < 0)
    return nsbox_error_sys (err, errno, "stat %s '%s'", what, path);
  if (!S_ISREG (st.st_mode))
    return nsbox_error_set (err, EINVAL, "%s '%s' is not a regular file", what, path);
  cleanup_free char *buffer = malloc (max + 1);
  if (!buffer)
    return nsbox_error_oom (err);
  size_t used = 0;
  /* One byte past max tells "exactly max" from "more". */
  while (used <= max)
    {
      ssize_t n = read (fd, buffer + used, max + 1 - used);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return nsbox_error_sys (err, errno, "read %s '%s'", what, path);
      if (n == 0)
        break;
      used += (size_t)n;
    }
  if (used > max && max % (1 << 20) == 0)
    return nsbox_error_set (err, EFBIG, "%s '%s' is larger than %zu MiB", what, path, max >> 20);
  if (used > max)
    return nsbox_error_set (err, EFBIG, "%s '%s' is larger than %zu bytes", what, path, max);
  buffer[used] = '\0';
  *data = TAKE_PTR (buffer);
  *len = used;
  return 0;
}
