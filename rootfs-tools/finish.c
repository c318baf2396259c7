/* The finishing step of an unpack, once every layer is applied: the
 * launcher's mount points, the directories' modes and times as the image
 * gave them (deepest first, so that a read-only directory does not stop
 * the work below it), and ownership.tsv: what the image said of each path's
 * owner and mode, which an unprivileged unpack cannot apply. */
#include "layer-private.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "remove.h"

static int
ensure_launcher_dir (struct rt_unpack *u, const char *name, mode_t mode, FILE *added,
                     struct nsbox_error **err)
{
  struct stat st;
  if (fstatat (u->root_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
    {
      if (S_ISDIR (st.st_mode))
        return 0;
      rt_store_warn (u->store, "warning: the image's /%s is not a directory; replacing it", name);
      int ret = nsbox_remove_at (u->root_fd, name);
      if (ret < 0)
        return nsbox_error_sys (err, -ret, "remove '/%s'", name);
    }
  if (mkdirat (u->root_fd, name, 0700) < 0)
    return nsbox_error_sys (err, errno, "create '/%s'", name);
  cleanup_close int fd = openat (u->root_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  /* A fixed time, so every unpack of the image gives the same tree. */
  static const struct timespec epoch[2] = { { 0, 0 }, { 0, 0 } };
  if (fd < 0 || fchmod (fd, mode) < 0 || futimens (fd, epoch) < 0)
    return nsbox_error_sys (err, errno, "chmod '/%s'", name);
  fprintf (added, "%s\n", name);
  return 0;
}

/* Orders of metas indices (qsort_r; data is the rt_unpack). */
static int
deeper_first (const void *a, const void *b, void *data)
{
  const struct rt_unpack *u = data;
  uint32_t x = u->metas[*(const uint32_t *)a].node, y = u->metas[*(const uint32_t *)b].node;
  unsigned dx = rt_pathtab_node (&u->paths, x)->depth, dy = rt_pathtab_node (&u->paths, y)->depth;
  if (dx != dy)
    return dx < dy ? 1 : -1;
  return rt_pathtab_compare (&u->paths, x, y);
}

static int
by_path (const void *a, const void *b, void *data)
{
  const struct rt_unpack *u = data;
  return rt_pathtab_compare (&u->paths, u->metas[*(const uint32_t *)a].node,
                             u->metas[*(const uint32_t *)b].node);
}

/* The directory resolved last, for the walks over sorted paths below
 * (nothing is removed meanwhile). */
struct dir_cache
{
  uint32_t node;
  int fd;
};

static void
dir_cache_clear (struct dir_cache *c)
{
  if (c->fd >= 0)
    close (c->fd);
  c->fd = -1;
}

/* Writes the path of `node` to path (MAX_PATH_BYTES + 1 bytes), points
 * *base at its last component and returns its parent directory; -errno
 * when it is gone. The fd stays the cache's. */
static int
entry_parent (struct rt_unpack *u, struct dir_cache *c, uint32_t node, char *path,
              const char **base)
{
  if (rt_pathtab_path (&u->paths, node, path, MAX_PATH_BYTES + 1) < 0)
    return -ENAMETOOLONG;
  char *slash = strrchr (path, '/');
  *base = slash ? slash + 1 : path;
  uint32_t parent = rt_pathtab_node (&u->paths, node)->parent;
  if (c->fd >= 0 && c->node == parent)
    return c->fd;
  dir_cache_clear (c);
  if (slash)
    *slash = '\0';
  int fd = rt_unpack_open_dir (u, slash ? path : "");
  if (slash)
    *slash = '/';
  if (fd < 0)
    return fd;
  c->node = parent;
  c->fd = fd;
  return fd;
}

static void
write_tsv_path (FILE *f, const char *path)
{
  fputc ('/', f);
  for (const char *p = path; *p; p++)
    switch (*p)
      {
      case '\t':
        fputs ("\\t", f);
        break;
      case '\n':
        fputs ("\\n", f);
        break;
      case '\\':
        fputs ("\\\\", f);
        break;
      default:
        fputc (*p, f);
      }
}

int
rt_unpack_finish (struct rt_unpack *u, FILE *ownership, FILE *added, struct nsbox_error **err)
{
  int ret = ensure_launcher_dir (u, "proc", 0755, added, err);
  if (ret >= 0)
    ret = ensure_launcher_dir (u, "dev", 0755, added, err);
  if (ret >= 0)
    ret = ensure_launcher_dir (u, "tmp", 01777, added, err);
  if (ret < 0)
    return ret;
  cleanup_free uint32_t *items = calloc (u->n_metas + 1, sizeof *items);
  cleanup_free char *path = malloc (MAX_PATH_BYTES + 1);
  if (!items || !path)
    return nsbox_error_oom (err);
  size_t n = u->n_metas;
  for (size_t i = 0; i < n; i++)
    items[i] = (uint32_t)i;
  qsort_r (items, n, sizeof *items, deeper_first, u);
  struct dir_cache cache = { 0, -1 };
  for (size_t i = 0; i < n; i++)
    {
      const struct path_meta *m = &u->metas[items[i]];
      if (!S_ISDIR (m->mode))
        continue;
      const char *base;
      int pfd = entry_parent (u, &cache, m->node, path, &base);
      cleanup_close int fd
          = pfd < 0 ? -1 : openat (pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0)
        continue; /* removed or replaced by a later layer */
      struct timespec ts[2] = { m->mtime, m->mtime };
      if (fchmod (fd, m->mode & 07777) < 0 || futimens (fd, ts) < 0)
        {
          ret = nsbox_error_sys (err, errno, "set mode and times of '/%s'", path);
          dir_cache_clear (&cache);
          return ret;
        }
    }
  dir_cache_clear (&cache);
  /* Layers cannot carry the root's metadata (a root entry is ignored): a
   * fixed mode and time keep the tree the same whatever the unpack time. */
  static const struct timespec epoch[2] = { { 0, 0 }, { 0, 0 } };
  if (fchmod (u->root_fd, 0755) < 0 || futimens (u->root_fd, epoch) < 0)
    return nsbox_error_sys (err, errno, "chmod the rootfs");

  qsort_r (items, n, sizeof *items, by_path, u);
  fputs ("# path\tuid\tgid\tmode (as in the image; the files belong to the unpacking user)\n",
         ownership);
  for (size_t i = 0; i < n; i++)
    {
      const struct path_meta *m = &u->metas[items[i]];
      const char *base;
      int pfd = entry_parent (u, &cache, m->node, path, &base);
      struct stat st;
      if (pfd < 0 || fstatat (pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0
          || (st.st_mode & S_IFMT) != (m->mode & S_IFMT))
        continue;
      write_tsv_path (ownership, path);
      fprintf (ownership, "\t%" PRId64 "\t%" PRId64 "\t%04o\n", m->uid, m->gid,
               (unsigned)(m->mode & 07777));
    }
  dir_cache_clear (&cache);
  if (ferror (ownership) || ferror (added))
    return nsbox_error_set (err, EIO, "write ownership.tsv");
  return 0;
}
