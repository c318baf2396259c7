/* Inputs: regular files the caller names, copied read-only into the
 * sandbox at /mnt/in/NAME. The launcher opens them before clone (so no host
 * path reaches the sandbox and nothing is resolved there); init copies them
 * into a tmpfs of its own and remounts it read-only before the program
 * exists. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include "child.h"
#include "error.h"
#include "files.h"
#include "report.h"
#include "userns.h"

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

/* ---- a live sandbox's run: the launcher's side ---- */

/* What the sandbox's program can cause in its own /tmp: the run is then
 * refused with NSBOX_INPUTS_REFUSED first; anything else is the host's. */
static int
refused (struct nsbox_error **err, int e, const char *what)
{
  bool sandbox = e == ENOSPC || e == EDQUOT || e == EEXIST || e == ELOOP || e == ENOTDIR
                 || e == EISDIR || e == EACCES || e == EPERM || e == EXDEV || e == ENOENT
                 || e == ENOTEMPTY || e == EMLINK;
  nsbox_error_sys (err, e, "%s", what);
  return sandbox ? nsbox_error_prefix (err, "%s", NSBOX_INPUTS_REFUSED) : -e;
}

static int
copy_beneath (int tmp_fd, const struct nsbox_inputs *in, struct nsbox_error **err)
{
  if (mkdirat (tmp_fd, "in", 0755) < 0 && errno != EEXIST)
    return refused (err, errno, "create /tmp/in");
  cleanup_close int dir = nsbox_open_beneath (tmp_fd, "in", O_RDONLY | O_DIRECTORY);
  if (dir < 0)
    return refused (err, errno, "open /tmp/in (it must be a directory, not a link)");
  for (int i = 0; i < in->n; i++)
    {
      const char *name = in->names[i];
      char what[NAME_MAX + 64];
      if (unlinkat (dir, name, 0) < 0 && errno != ENOENT)
        {
          int e = errno;
          snprintf (what, sizeof what, "replace /tmp/in/%s", name);
          return refused (err, e, what);
        }
      cleanup_close int to
          = openat (dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
      if (to < 0)
        {
          int e = errno;
          snprintf (what, sizeof what, "create /tmp/in/%s", name);
          return refused (err, e, what);
        }
      if (fchmod (to, 0444) < 0) /* whatever the launcher's umask */
        return nsbox_error_sys (err, errno, "input '%s': set its mode", name);
      /* From its start, at most the size checked when it was opened. */
      off_t offset = 0;
      while ((uint64_t)offset < in->sizes[i])
        {
          uint64_t left = in->sizes[i] - (uint64_t)offset;
          ssize_t n = sendfile (to, in->fds[i], &offset, left > (1u << 30) ? (1u << 30) : left);
          if (n < 0 && errno == EINTR)
            continue;
          if (n < 0 && (errno == ENOSPC || errno == EDQUOT))
            {
              int e = errno;
              snprintf (what, sizeof what, "copy /tmp/in/%s: /tmp is full (its tmp-size)", name);
              return refused (err, e, what);
            }
          if (n < 0)
            return nsbox_error_sys (err, errno, "input '%s': copy into /tmp/in", name);
          if (n == 0)
            break;
        }
    }
  return 0;
}

int
nsbox_inputs_copy_beneath (int tmp_fd, const struct nsbox_inputs *in, struct nsbox_error **err)
{
  if (in->n == 0)
    return 0;
  /* The sandbox's tmpfs takes only the ids its user namespace maps: a
   * launcher run by root writes as the sandbox's host user, with no more
   * rights there than its program. setfsuid is this thread's alone. */
  if (geteuid () != 0)
    return copy_beneath (tmp_fd, in, err);
  int old_gid = setfsgid (NSBOX_ROOT_HOST_ID), old_uid = setfsuid (NSBOX_ROOT_HOST_ID);
  if (setfsuid ((uid_t)-1) != NSBOX_ROOT_HOST_ID || setfsgid ((gid_t)-1) != NSBOX_ROOT_HOST_ID)
    {
      setfsuid ((uid_t)old_uid);
      setfsgid ((gid_t)old_gid);
      return nsbox_error_set (err, EPERM, "cannot write as the sandbox's user");
    }
  int r = copy_beneath (tmp_fd, in, err);
  setfsuid ((uid_t)old_uid);
  setfsgid ((gid_t)old_gid);
  return r;
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
