/* In-root path resolution; see inroot.h. */
#include "inroot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_SYMLINKS 40
#define MAX_DEPTH 4096

static int
sys_openat2 (int dir_fd, const char *path, struct open_how *how)
{
  return (int)syscall (SYS_openat2, dir_fd, path, how, sizeof *how);
}

bool
rt_have_openat2 (void)
{
  static int state; /* 0 unknown, 1 yes, -1 no */
  if (state == 0)
    {
      struct open_how how = { .flags = O_PATH | O_CLOEXEC | O_DIRECTORY,
                              .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
      int fd = sys_openat2 (AT_FDCWD, "/", &how);
      if (fd >= 0)
        close (fd);
      __atomic_store_n (&state, (fd >= 0 || (errno != ENOSYS && errno != EPERM)) ? 1 : -1,
                        __ATOMIC_RELAXED);
    }
  return state > 0;
}

static int
open_with_openat2 (int root_fd, const char *path)
{
  struct open_how how = {
    .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
  };
  for (int attempt = 0; attempt < 64; attempt++)
    {
      int fd = sys_openat2 (root_fd, *path ? path : ".", &how);
      if (fd >= 0)
        return fd;
      if (errno != EAGAIN)
        return -errno;
    }
  return -EAGAIN;
}

/* The userspace walker: a stack of directory fds, one per resolved
 * component, so ".." pops (clamped at the root) and an absolute symlink
 * target unwinds to the root. Symlinks are read with readlinkat and their
 * targets pushed in front of the remaining components. */
struct walk
{
  int *fds;
  size_t depth, cap;
};

static void
walk_unwind (struct walk *w, size_t depth)
{
  while (w->depth > depth)
    close (w->fds[--w->depth]);
}

static int
walk_push (struct walk *w, int fd)
{
  if (w->depth == w->cap)
    {
      size_t cap = w->cap ? w->cap * 2 : 16;
      if (cap > MAX_DEPTH)
        {
          close (fd);
          return -ENAMETOOLONG;
        }
      int *fds = realloc (w->fds, cap * sizeof *fds);
      if (!fds)
        {
          close (fd);
          return -ENOMEM;
        }
      w->fds = fds;
      w->cap = cap;
    }
  w->fds[w->depth++] = fd;
  return 0;
}

static int
open_with_walker (int root_fd, const char *path)
{
  struct walk w = { 0 };
  int links = 0, ret;
  /* `rest` owns the not yet resolved part of the path. */
  char *rest = strdup (path);
  if (!rest)
    return -ENOMEM;
  char *cursor = rest;
  for (;;)
    {
      while (*cursor == '/')
        cursor++;
      if (!*cursor)
        break;
      char *slash = strchr (cursor, '/');
      size_t len = slash ? (size_t)(slash - cursor) : strlen (cursor);
      char comp[256];
      if (len >= sizeof comp)
        {
          ret = -ENAMETOOLONG;
          goto out;
        }
      memcpy (comp, cursor, len);
      comp[len] = '\0';
      cursor += len;
      if (strcmp (comp, ".") == 0)
        continue;
      if (strcmp (comp, "..") == 0)
        {
          if (w.depth > 0)
            walk_unwind (&w, w.depth - 1);
          continue;
        }
      int cur = w.depth ? w.fds[w.depth - 1] : root_fd;
      int fd = openat (cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0)
        {
          ret = -errno;
          goto out;
        }
      struct stat st;
      if (fstat (fd, &st) < 0)
        {
          ret = -errno;
          close (fd);
          goto out;
        }
      if (S_ISLNK (st.st_mode))
        {
          char target[4096];
          ssize_t n = readlinkat (fd, "", target, sizeof target - 1);
          close (fd);
          if (n < 0)
            {
              ret = -errno;
              goto out;
            }
          target[n] = '\0';
          if (++links > MAX_SYMLINKS)
            {
              ret = -ELOOP;
              goto out;
            }
          if (target[0] == '/')
            walk_unwind (&w, 0);
          char *joined = NULL;
          if (!(joined = xasprintf ("%s/%s", target, cursor)))
            {
              ret = -ENOMEM;
              goto out;
            }
          free (rest);
          rest = cursor = joined;
          continue;
        }
      if (!S_ISDIR (st.st_mode))
        {
          close (fd);
          ret = -ENOTDIR;
          goto out;
        }
      ret = walk_push (&w, fd);
      if (ret < 0)
        goto out;
    }
  if (w.depth == 0)
    {
      ret = openat (root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (ret < 0)
        ret = -errno;
    }
  else
    ret = w.fds[--w.depth];
out:
  walk_unwind (&w, 0);
  free (w.fds);
  free (rest);
  return ret;
}

int
rt_open_dir_in_root (int root_fd, const char *path, bool use_fallback)
{
  if (!use_fallback && rt_have_openat2 ())
    return open_with_openat2 (root_fd, path);
  return open_with_walker (root_fd, path);
}
