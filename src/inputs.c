/* Inputs: regular files the caller names, copied read-only into the
 * sandbox at /mnt/in/NAME. The launcher opens them before clone (so no host
 * path reaches the sandbox and nothing is resolved there); init copies them
 * into a tmpfs of its own and remounts it read-only before the program
 * exists. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "child.h"
#include "error.h"
#include "files.h"
#include "report.h"

/* Length of the UTF-8 sequence at s (of at most len bytes), 0 if invalid. */
static size_t
utf8_sequence (const unsigned char *s, size_t len)
{
  unsigned char c = s[0];
  size_t n;
  uint32_t min, cp;
  if (c < 0x80)
    return 1;
  if (c >= 0xc2 && c <= 0xdf)
    n = 2, min = 0x80, cp = c & 0x1f;
  else if (c >= 0xe0 && c <= 0xef)
    n = 3, min = 0x800, cp = c & 0x0f;
  else if (c >= 0xf0 && c <= 0xf4)
    n = 4, min = 0x10000, cp = c & 0x07;
  else
    return 0;
  if (n > len)
    return 0;
  for (size_t i = 1; i < n; i++)
    {
      if ((s[i] & 0xc0) != 0x80)
        return 0;
      cp = (cp << 6) | (s[i] & 0x3f);
    }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return n;
}

bool
nsbox_file_name_valid (const char *name, size_t len, const char **why)
{
  const char *w = NULL;
  if (len == 0)
    w = "it is empty";
  else if (len > 255)
    w = "it is longer than 255 bytes";
  else if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
    w = "it is '.' or '..'";
  for (size_t i = 0; !w && i < len;)
    {
      unsigned char c = (unsigned char)name[i];
      size_t n = utf8_sequence ((const unsigned char *)name + i, len - i);
      if (c == '/' || c == ':')
        w = "it holds a '/' or ':'";
      else if (c < 0x20 || c == 0x7f)
        w = "it holds a control character";
      else if (n == 0)
        w = "it is not valid UTF-8";
      i += n ? n : 1;
    }
  if (why)
    *why = w;
  return w == NULL;
}

int
nsbox_input_spec_parse (const char *spec, char **path, char **name, struct nsbox_error **err)
{
  const char *colon = strrchr (spec, ':');
  size_t path_len = colon ? (size_t)(colon - spec) : strlen (spec);
  const char *n;
  if (colon)
    n = colon + 1;
  else
    {
      const char *slash = strrchr (spec, '/');
      n = slash ? slash + 1 : spec;
    }
  if (path_len == 0)
    return nsbox_error_set (err, EINVAL, "input '%s': no path before the name", spec);
  const char *why = NULL;
  if (!nsbox_file_name_valid (n, strlen (n), &why))
    return nsbox_error_set (err, EINVAL,
                            "input '%s': name '%s' is not allowed in /mnt/in: %s (give one "
                            "as PATH:NAME)",
                            spec, n, why);
  *path = strndup (spec, path_len);
  *name = strdup (n);
  if (!*path || !*name)
    {
      free (TAKE_PTR (*path));
      free (TAKE_PTR (*name));
      return nsbox_error_oom (err);
    }
  return 0;
}

void
nsbox_inputs_close (struct nsbox_inputs *in)
{
  for (int i = 0; i < in->n; i++)
    if (in->fds[i] >= 0)
      close (TAKE_FD (in->fds[i]));
  in->n = 0;
}

static uint64_t
page_round (uint64_t n)
{
  return (n + 4095) & ~(uint64_t)4095;
}

int
nsbox_inputs_open (char *const *specs, size_t n, struct nsbox_inputs *in, struct nsbox_error **err)
{
  in->n = 0;
  in->total = 0;
  if (n > NSBOX_INPUTS_MAX)
    return nsbox_error_set (err, EINVAL, "too many inputs: %zu (at most %d)", n, NSBOX_INPUTS_MAX);
  uint64_t pages = 0;
  for (size_t i = 0; i < n; i++)
    {
      const char *spec = specs[i], *colon = strrchr (spec, ':');
      if (!colon)
        return nsbox_error_set (err, EINVAL, "input '%s' has no name", spec);
      cleanup_free char *path = strndup (spec, (size_t)(colon - spec));
      if (!path)
        {
          nsbox_inputs_close (in);
          return nsbox_error_oom (err);
        }
      /* O_NONBLOCK: a FIFO named as an input must not hang the launcher. */
      int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
      struct stat st;
      int r = 0;
      if (fd < 0)
        r = nsbox_error_sys (err, errno, "input '%s'", path);
      else if (fstat (fd, &st) < 0)
        r = nsbox_error_sys (err, errno, "input '%s'", path);
      else if (!S_ISREG (st.st_mode))
        r = nsbox_error_set (err, EINVAL, "input '%s' is not a regular file", path);
      else if ((uint64_t)st.st_size > NSBOX_INPUTS_BYTES_MAX - in->total)
        r = nsbox_error_set (err, EFBIG,
                             "input '%s' (%" PRIu64 " bytes) goes past the %" PRIu64
                             " MiB all inputs may hold",
                             path, (uint64_t)st.st_size, NSBOX_INPUTS_BYTES_MAX >> 20);
      for (int j = 0; r == 0 && j < in->n; j++)
        if (strcmp (in->names[j], colon + 1) == 0)
          r = nsbox_error_set (err, EINVAL, "two inputs are named '%s'", colon + 1);
      if (r < 0)
        {
          if (fd >= 0)
            close (fd);
          nsbox_inputs_close (in);
          return r;
        }
      in->fds[in->n] = fd;
      in->names[in->n] = colon + 1;
      in->sizes[in->n] = (uint64_t)st.st_size;
      in->total += (uint64_t)st.st_size;
      pages += page_round ((uint64_t)st.st_size);
      in->n++;
    }
  /* Room for every file's pages and the directory; read-only once filled. */
  snprintf (in->mount_options, sizeof in->mount_options, "size=%" PRIu64 ",nr_inodes=%d,mode=0755",
            pages + 65536, in->n + 8);
  return 0;
}

/* ---- child side ---- */

static void
copy_input (int dirfd, const char *name, int from, uint64_t size)
{
  int to = openat (dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
  if (to < 0)
    nsbox_child_fail (NSBOX_STEP_INPUTS, errno, name);
  /* At most the size the launcher checked: a file growing on the host
   * meanwhile is cut there; one shrinking ends early. */
  off_t offset = 0;
  while ((uint64_t)offset < size)
    {
      size_t want = size - (uint64_t)offset > (1u << 30) ? (1u << 30) : size - (uint64_t)offset;
      ssize_t n = sendfile (to, from, &offset, want);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        nsbox_child_fail (NSBOX_STEP_INPUTS, errno, name);
      if (n == 0)
        break;
    }
  close (to);
  close (from);
}

void
nsbox_inputs_place (const struct nsbox_inputs *in, int first_fd)
{
  if (in->n == 0)
    return;
  unsigned long flags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
  umask (022);
  if (mount ("tmpfs", "mnt", "tmpfs", flags, in->mount_options) < 0)
    nsbox_child_fail (NSBOX_STEP_INPUTS, errno, "/mnt");
  if (mkdir ("mnt/in", 0755) < 0)
    nsbox_child_fail (NSBOX_STEP_INPUTS, errno, "/mnt/in");
  int dirfd = open ("mnt/in", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dirfd < 0)
    nsbox_child_fail (NSBOX_STEP_INPUTS, errno, "/mnt/in");
  for (int i = 0; i < in->n; i++)
    copy_input (dirfd, in->names[i], first_fd + i, in->sizes[i]);
  close (dirfd);
  if (mount ("tmpfs", "mnt", NULL, MS_REMOUNT | MS_RDONLY | flags, in->mount_options) < 0)
    nsbox_child_fail (NSBOX_STEP_INPUTS, errno, "/mnt (read-only)");
}
