/* In-root path resolution and fd-based removal; see inroot.h. */
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
          if (asprintf (&joined, "%s/%s", target, cursor) < 0)
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

/* Directories this deep are emptied by flatten_dir rather than recursed
 * into: a tree can be deeper than the fds a process may hold (an image
 * builds one by resolving each level through a symlink to the last), and
 * the recursion holds two per level. */
#define REMOVE_RECURSE_DEPTH 32

/* Opens the directory name in dir_fd to empty it, making it ours to write
 * (a 0000 or 0555 directory from an unpacked image). Only called for a
 * name unlinkat refused as a directory, so the chmod follows no symlink. */
static int
open_own_dir (int dir_fd, const char *name)
{
  int child = openat (dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (child < 0 && errno == EACCES && fchmodat (dir_fd, name, 0700, 0) == 0)
    child = openat (dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (child < 0)
    return -errno;
  struct stat st;
  if (fstat (child, &st) == 0 && (st.st_mode & 0700) != 0700)
    fchmod (child, (st.st_mode & 07777) | 0700);
  return child;
}

static DIR *
open_dir_stream (int dir_fd)
{
  int dup_fd = openat (dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dup_fd < 0)
    return NULL;
  DIR *dir = fdopendir (dup_fd);
  if (!dir)
    {
      int saved = errno;
      close (dup_fd);
      errno = saved;
    }
  return dir;
}

/* Moves the directory name out of from_fd into to_fd under a fresh name. */
static int
move_up (int from_fd, const char *name, int to_fd, unsigned long *serial)
{
  /* Moving a directory rewrites its "..": it must be writable. */
  int fd = open_own_dir (from_fd, name);
  if (fd < 0)
    return fd;
  close (fd);
  for (;;)
    {
      char fresh[48];
      snprintf (fresh, sizeof fresh, ".nsbox-rm-%lu", (*serial)++);
      if (renameat2 (from_fd, name, to_fd, fresh, RENAME_NOREPLACE) == 0)
        return 0;
      if (errno == EEXIST)
        continue;
      if (errno != EINVAL)
        return -errno;
      /* No RENAME_NOREPLACE here (NFS, some FUSE): the tree is ours alone,
       * so checking first is enough. */
      struct stat st;
      if (fstatat (to_fd, fresh, &st, AT_SYMLINK_NOFOLLOW) == 0)
        continue;
      return renameat (from_fd, name, to_fd, fresh) == 0 ? 0 : -errno;
    }
}

/* Empties dir_fd with two fds whatever its depth: each child directory
 * gives its own subdirectories up to dir_fd (under fresh names) and is
 * removed; passes repeat until dir_fd is empty, one level per pass. */
static int
flatten_dir (int dir_fd)
{
  unsigned long serial = 0;
  for (;;)
    {
      DIR *dir = open_dir_stream (dir_fd);
      if (!dir)
        return -errno;
      bool seen = false;
      int ret = 0;
      struct dirent *de;
      while ((errno = 0, de = readdir (dir)))
        {
          if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
            continue;
          seen = true;
          if (unlinkat (dir_fd, de->d_name, 0) == 0 || errno == ENOENT)
            continue;
          if (errno != EISDIR && errno != EPERM)
            {
              ret = -errno;
              break;
            }
          int child = open_own_dir (dir_fd, de->d_name);
          if (child < 0)
            {
              ret = child;
              break;
            }
          DIR *sub = open_dir_stream (child);
          if (!sub)
            {
              ret = -errno;
              close (child);
              break;
            }
          struct dirent *se;
          while (ret == 0 && (errno = 0, se = readdir (sub)))
            {
              if (strcmp (se->d_name, ".") == 0 || strcmp (se->d_name, "..") == 0)
                continue;
              if (unlinkat (child, se->d_name, 0) == 0 || errno == ENOENT)
                continue;
              if (errno != EISDIR && errno != EPERM)
                ret = -errno;
              else
                ret = move_up (child, se->d_name, dir_fd, &serial);
            }
          if (ret == 0 && errno != 0)
            ret = -errno;
          closedir (sub);
          close (child);
          if (ret == 0 && unlinkat (dir_fd, de->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT)
            ret = -errno;
          if (ret < 0)
            break;
        }
      if (ret == 0 && !de && errno != 0)
        ret = -errno;
      closedir (dir);
      if (ret < 0 || !seen)
        return ret;
    }
}

static int
remove_dir_contents (int dir_fd, unsigned depth)
{
  if (depth >= REMOVE_RECURSE_DEPTH)
    return flatten_dir (dir_fd);
  DIR *dir = open_dir_stream (dir_fd);
  if (!dir)
    return -errno;
  int ret = 0;
  struct dirent *de;
  while ((errno = 0, de = readdir (dir)))
    {
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (unlinkat (dir_fd, de->d_name, 0) == 0 || errno == ENOENT)
        continue;
      if (errno != EISDIR && errno != EPERM)
        {
          ret = -errno;
          break;
        }
      int child = open_own_dir (dir_fd, de->d_name);
      if (child < 0)
        {
          ret = child;
          break;
        }
      ret = remove_dir_contents (child, depth + 1);
      close (child);
      if (ret < 0)
        break;
      if (unlinkat (dir_fd, de->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        {
          ret = -errno;
          break;
        }
    }
  if (ret == 0 && !de && errno != 0)
    ret = -errno;
  closedir (dir);
  return ret;
}

int
rt_empty_dir_at (int dir_fd, const char *name)
{
  int fd = openat (dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? 0 : -errno;
  struct stat st;
  if (fstat (fd, &st) == 0 && (st.st_mode & 0700) != 0700)
    fchmod (fd, (st.st_mode & 07777) | 0700);
  int ret = remove_dir_contents (fd, 0);
  close (fd);
  return ret;
}

int
rt_remove_at (int dir_fd, const char *name)
{
  if (unlinkat (dir_fd, name, 0) == 0 || errno == ENOENT)
    return 0;
  if (errno != EISDIR && errno != EPERM)
    return -errno;
  int ret = rt_empty_dir_at (dir_fd, name);
  if (ret < 0)
    return ret;
  if (unlinkat (dir_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
    return -errno;
  return 0;
}
