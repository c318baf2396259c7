/* Removal of trees by fd, symlink-safe and of any depth; see remove.h. */
#include "remove.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Directories this deep are emptied by flatten_dir rather than recursed
 * into: a tree can be deeper than the fds a process may hold (an image
 * builds one by resolving each level through a symlink to the last), and
 * the recursion holds two per level. */
#define REMOVE_RECURSE_DEPTH 32

/* Opens the directory name in dir_fd to empty it, making it ours to write
 * (a 0000 or 0555 directory from an unpacked image). The chmod never
 * follows a symlink, even one swapped in after the open was refused:
 * glibc's AT_SYMLINK_NOFOLLOW opens the name O_PATH|O_NOFOLLOW and changes
 * what it opened. */
static int
open_own_dir (int dir_fd, const char *name)
{
  int child = openat (dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (child < 0 && errno == EACCES && fchmodat (dir_fd, name, 0700, AT_SYMLINK_NOFOLLOW) == 0)
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

/* Removes every entry of dir_fd that is not a directory, and calls
 * on_dir(dir_fd, name, data) for each one that is (unlinkat refuses it),
 * until one fails. 0 or -errno. */
static int
unlink_entries (int dir_fd, int (*on_dir) (int dir_fd, const char *name, void *data), void *data)
{
  DIR *dir = open_dir_stream (dir_fd);
  if (!dir)
    return -errno;
  int ret = 0;
  struct dirent *de;
  while (ret == 0 && (errno = 0, de = readdir (dir)))
    {
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (unlinkat (dir_fd, de->d_name, 0) == 0 || errno == ENOENT)
        continue;
      ret = errno == EISDIR || errno == EPERM ? on_dir (dir_fd, de->d_name, data) : -errno;
    }
  if (ret == 0 && errno != 0)
    ret = -errno;
  closedir (dir);
  return ret;
}

/* Empties the directory name of dir_fd with on_dir for its directories,
 * then removes it. */
static int
remove_dir_with (int dir_fd, const char *name,
                 int (*on_dir) (int dir_fd, const char *name, void *data), void *data)
{
  int child = open_own_dir (dir_fd, name);
  if (child < 0)
    return child;
  int ret = unlink_entries (child, on_dir, data);
  close (child);
  if (ret == 0 && unlinkat (dir_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
    ret = -errno;
  return ret;
}

struct flatten
{
  int top_fd; /* the directory being emptied */
  unsigned long serial;
  bool moved; /* this pass gave top_fd new entries */
};

static int
move_to_top (int dir_fd, const char *name, void *data)
{
  struct flatten *f = data;
  f->moved = true;
  return move_up (dir_fd, name, f->top_fd, &f->serial);
}

static int
flatten_child (int dir_fd, const char *name, void *data)
{
  return remove_dir_with (dir_fd, name, move_to_top, data);
}

/* Empties dir_fd with a few fds whatever its depth: each child directory
 * gives its own subdirectories up to dir_fd (under fresh names) and is
 * removed; passes repeat until one moves nothing up, one level per pass. */
static int
flatten_dir (int dir_fd)
{
  struct flatten f = { dir_fd, 0, true };
  int ret = 0;
  while (ret == 0 && f.moved)
    {
      f.moved = false;
      ret = unlink_entries (dir_fd, flatten_child, &f);
    }
  return ret;
}

static int remove_dir_contents (int dir_fd, unsigned depth);

/* Two fds a level, down to REMOVE_RECURSE_DEPTH. */
static int
remove_subdir (int dir_fd, const char *name, void *data)
{
  unsigned depth = *(const unsigned *)data;
  int child = open_own_dir (dir_fd, name);
  if (child < 0)
    return child;
  int ret = remove_dir_contents (child, depth + 1);
  close (child);
  if (ret == 0 && unlinkat (dir_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
    ret = -errno;
  return ret;
}

static int
remove_dir_contents (int dir_fd, unsigned depth)
{
  if (depth >= REMOVE_RECURSE_DEPTH)
    return flatten_dir (dir_fd);
  return unlink_entries (dir_fd, remove_subdir, &depth);
}

int
nsbox_empty_dir_at (int dir_fd, const char *name)
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
nsbox_remove_at (int dir_fd, const char *name)
{
  if (unlinkat (dir_fd, name, 0) == 0 || errno == ENOENT)
    return 0;
  if (errno != EISDIR && errno != EPERM)
    return -errno;
  int ret = nsbox_empty_dir_at (dir_fd, name);
  if (ret < 0)
    return ret;
  if (unlinkat (dir_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
    return -errno;
  return 0;
}
