/* The layer applier's entries: one tar entry made in the tree (regular
 * files, directories, symlinks, hardlinks, FIFOs), with its metadata, or a
 * whiteout applied. See layer-apply-private.h. */
#include "layer-apply-private.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "remove.h"
#include "pathtab.h"
#include "space.h"

#define MAX_XATTR_BYTES (64u << 10)
/* Regular files up to JOB_MAX_BYTES without xattrs are written by the file
 * thread (filequeue.h); the reader runs ahead of it by at most
 * QUEUE_MAX_BYTES and QUEUE_MAX_JOBS. */
#define JOB_MAX_BYTES (1u << 20)
#define QUEUE_MAX_BYTES (16u << 20)
#define QUEUE_MAX_JOBS 1024
/* Directories the queued files may sit in (each holds an fd until its last
 * file is written): beyond that the applier lets the queue drain. */
#define QUEUE_MAX_DIRS 64
/* Names of queued files remembered (queued_names) before a drain forgets
 * them all: the queue holds far fewer, and a layer of a million small
 * files must not keep a million names. */
#define QUEUE_MAX_NAMES 8192

/* Metadata --------------------------------------------------------------- */

static bool
xattr_is_user (const char *name)
{
  return strncmp (name, "user.", 5) == 0 && !strstr (name, ".overlay.");
}

static int
apply_xattrs (struct layer *l, struct archive_entry *entry, int fd, const char *path,
              struct nsbox_error **err)
{
  const char *name;
  const void *value;
  size_t size;
  archive_entry_xattr_reset (entry);
  while (archive_entry_xattr_next (entry, &name, &value, &size) == ARCHIVE_OK)
    {
      if (size > MAX_XATTR_BYTES)
        return nsbox_layer_error (l, err, E2BIG, path, "extended attribute larger than 64 KiB");
      if (!xattr_is_user (name))
        {
          /* security.capability, security.selinux, trusted.*, system.*:
           * privileged or host-specific; a set-cap binary would be set-cap
           * for us. */
          if (!l->u->warned_xattr)
            rt_store_warn (l->u->store,
                           "warning: %s: dropping privileged extended attribute '%s' "
                           "of '%s' (and any others like it)",
                           l->label, name, path);
          l->u->warned_xattr = true;
          continue;
        }
      if (fd < 0)
        continue;
      int ret = nsbox_layer_charge (l, path, 0, size, size, 0, err);
      if (ret < 0)
        return ret;
      if (fsetxattr (fd, name, value, size, 0) < 0 && !l->u->warned_user_xattr)
        {
          rt_store_warn (l->u->store,
                         "warning: %s: cannot set extended attribute '%s' on '%s': %s "
                         "(ignoring such failures)",
                         l->label, name, path, strerror (errno));
          l->u->warned_user_xattr = true;
        }
    }
  return 0;
}

static void
entry_times (struct archive_entry *entry, struct timespec ts[2])
{
  ts[1].tv_sec = archive_entry_mtime (entry);
  ts[1].tv_nsec = archive_entry_mtime_nsec (entry);
  ts[0] = ts[1];
  if (archive_entry_atime_is_set (entry) && archive_entry_atime (entry) > ts[1].tv_sec)
    {
      ts[0].tv_sec = archive_entry_atime (entry);
      ts[0].tv_nsec = archive_entry_atime_nsec (entry);
    }
}

static int
record_meta (struct layer *l, uint32_t node, struct archive_entry *entry)
{
  struct rt_unpack *u = l->u;
  struct rt_path_node *n = rt_pathtab_node (&u->paths, node);
  if (!n->meta)
    {
      if (u->n_metas == u->metas_cap)
        {
          size_t cap = u->metas_cap ? u->metas_cap * 2 : 256;
          struct path_meta *metas = realloc (u->metas, cap * sizeof *metas);
          if (!metas)
            return -ENOMEM;
          u->metas = metas;
          u->metas_cap = cap;
        }
      n->meta = (uint32_t)++u->n_metas;
    }
  struct path_meta *m = &u->metas[n->meta - 1];
  m->node = node;
  m->mode = archive_entry_mode (entry);
  m->uid = archive_entry_uid (entry);
  m->gid = archive_entry_gid (entry);
  m->mtime.tv_sec = archive_entry_mtime (entry);
  m->mtime.tv_nsec = archive_entry_mtime_nsec (entry);
  return 0;
}

/* Entry types ------------------------------------------------------------ */

/* The next piece of an entry's data, at most `room` bytes into `into`:
 * its length, 0 at the end of the data, or an error for an archive error
 * or data beyond the header's `size` (*copied counts what was read). */
static la_ssize_t
read_entry_chunk (struct layer *l, void *into, size_t room, int64_t size, int64_t *copied,
                  const char *path, struct nsbox_error **err)
{
  la_ssize_t n = archive_read_data (l->ar, into, room);
  if (n < 0)
    return nsbox_error_set (err, EBADMSG, "%s: '%s': %s", l->label, path,
                            archive_error_string (l->ar));
  *copied += n;
  if (*copied > size)
    return nsbox_layer_error (l, err, EBADMSG, path, "more data than the header says");
  return n;
}

/* At the end of an entry's data: all `size` bytes came. */
static int
check_entry_end (struct layer *l, int64_t copied, int64_t size, const char *path,
                 struct nsbox_error **err)
{
  return copied == size ? 0 : nsbox_layer_error (l, err, EBADMSG, path, "truncated file data");
}

/* Reads exactly size bytes of entry data into buf (NULL when size is 0). */
static int
read_file_data (struct layer *l, unsigned char *buf, int64_t size, const char *path,
                struct nsbox_error **err)
{
  int64_t copied = 0;
  for (;;)
    {
      /* Past size: room to see data the header did not announce. */
      void *into = copied < size ? (void *)(buf + copied) : (void *)l->u->copy_buf;
      size_t room = copied < size ? (size_t)(size - copied) : COPY_CHUNK;
      la_ssize_t n = read_entry_chunk (l, into, room, size, &copied, path, err);
      if (n <= 0)
        return n < 0 ? (int)n : check_entry_end (l, copied, size, path, err);
    }
}

/* write_regular through the file thread, for small files without xattrs:
 * the data is read here, the file made there. */
static int
queue_regular (struct layer *l, struct archive_entry *entry, int pfd, int64_t size,
               const char *path, struct nsbox_error **err)
{
  cleanup_file_job struct rt_file_job *job = calloc (1, sizeof *job);
  if (!job)
    return nsbox_error_oom (err);
  job->path = strdup (path);
  job->len = (size_t)size;
  job->data = size > 0 ? malloc ((size_t)size) : NULL;
  if (!job->path || (size > 0 && !job->data))
    return nsbox_error_oom (err);
  const char *slash = strrchr (job->path, '/');
  job->base = slash ? slash + 1 : job->path;
  job->mode = archive_entry_perm (entry) & 07777 & ~(mode_t)(S_ISUID | S_ISGID);
  entry_times (entry, job->times);
  int ret = read_file_data (l, job->data, size, path, err);
  if (ret < 0)
    return ret;
  bool shared = pfd == l->parent_fd;
  if (!shared || !l->parent_ref)
    {
      if (l->queue_dirs >= QUEUE_MAX_DIRS && (ret = nsbox_layer_queue_drain (l, err)) < 0)
        return ret;
      struct rt_dir_ref *ref = rt_dir_ref_new (pfd);
      if (!ref)
        return nsbox_error_sys (err, errno, "%s: '%s': create", l->label, path);
      l->queue_dirs++;
      if (!shared)
        job->dir = ref;
      else
        l->parent_ref = ref;
    }
  if (shared)
    job->dir = rt_dir_ref_get (l->parent_ref);
  cleanup_free char *key = NULL;
  if (!(key = xasprintf ("%ju/%s", (uintmax_t)l->parent_ino, job->base))
      || rt_strmap_put (&l->queued_names, key, NULL, NULL) < 0)
    return nsbox_error_oom (err);
  if (l->queued_names.count >= QUEUE_MAX_NAMES && (ret = nsbox_layer_queue_drain (l, err)) < 0)
    return ret;
  if (!rt_file_queue_push (&l->files, TAKE_PTR (job), QUEUE_MAX_JOBS, QUEUE_MAX_BYTES))
    return nsbox_layer_queue_drain (l, err);
  return 0;
}

static int
write_regular (struct layer *l, struct archive_entry *entry, int pfd, const char *base,
               const char *path, struct nsbox_error **err)
{
  int64_t size = archive_entry_size (entry);
  if (size < 0)
    return nsbox_layer_error (l, err, EBADMSG, path, "negative file size");
  int ret = nsbox_layer_charge (l, path, 1, (uint64_t)size,
                                rt_space_blocks (&l->u->space, (uint64_t)size), 1, err);
  if (ret < 0)
    return ret;
  if ((uint64_t)size <= JOB_MAX_BYTES && archive_entry_xattr_count (entry) == 0
      && rt_file_queue_start (&l->files))
    return queue_regular (l, entry, pfd, size, path, err);
  cleanup_close int fd
      = openat (pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return nsbox_error_sys (err, errno, "%s: '%s': create", l->label, path);
  int64_t copied = 0;
  for (;;)
    {
      la_ssize_t n = read_entry_chunk (l, l->u->copy_buf, COPY_CHUNK, size, &copied, path, err);
      if (n < 0)
        return (int)n;
      if (n == 0)
        break;
      int w = nsbox_write_all (fd, l->u->copy_buf, (size_t)n);
      if (w < 0)
        return nsbox_error_sys (err, -w, "%s: '%s': write", l->label, path);
    }
  ret = check_entry_end (l, copied, size, path, err);
  if (ret < 0)
    return ret;
  mode_t mode = archive_entry_perm (entry) & 07777 & ~(mode_t)(S_ISUID | S_ISGID);
  ret = apply_xattrs (l, entry, fd, path, err);
  if (ret < 0)
    return ret;
  if (fchmod (fd, mode) < 0)
    return nsbox_error_sys (err, errno, "%s: '%s': chmod", l->label, path);
  struct timespec ts[2];
  entry_times (entry, ts);
  if (futimens (fd, ts) < 0)
    return nsbox_error_sys (err, errno, "%s: '%s': set times", l->label, path);
  return 0;
}

static int
write_directory (struct layer *l, struct archive_entry *entry, int pfd, const char *base,
                 bool exists, const char *path, struct nsbox_error **err)
{
  if (!exists)
    {
      int ret = nsbox_layer_charge_other (l, path, err);
      if (ret < 0)
        return ret;
      if (mkdirat (pfd, base, 0700) < 0)
        return nsbox_error_sys (err, errno, "%s: '%s': mkdir", l->label, path);
    }
  cleanup_close int fd = openat (pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return nsbox_error_sys (err, errno, "%s: '%s': open directory", l->label, path);
  /* Final modes come last (rt_unpack_finish); until then we must be able
   * to write into it. */
  if (fchmod (fd, (archive_entry_perm (entry) & 07777) | 0700) < 0)
    return nsbox_error_sys (err, errno, "%s: '%s': chmod", l->label, path);
  return apply_xattrs (l, entry, fd, path, err);
}

static int
write_symlink (struct layer *l, struct archive_entry *entry, int pfd, const char *base,
               const char *path, struct nsbox_error **err)
{
  const char *target = archive_entry_symlink_utf8 (entry);
  if (!target)
    target = archive_entry_symlink (entry);
  if (!target || !*target)
    return nsbox_layer_error (l, err, EBADMSG, path, "symlink without a target");
  if (strlen (target) > MAX_LINK_BYTES)
    return nsbox_layer_error (l, err, ENAMETOOLONG, path, "symlink target longer than 4095 bytes");
  int ret = nsbox_layer_charge_other (l, path, err);
  if (ret < 0)
    return ret;
  if (symlinkat (target, pfd, base) < 0)
    return nsbox_error_sys (err, errno, "%s: '%s': symlink", l->label, path);
  struct timespec ts[2];
  entry_times (entry, ts);
  if (utimensat (pfd, base, ts, AT_SYMLINK_NOFOLLOW) < 0)
    return nsbox_error_sys (err, errno, "%s: '%s': set times", l->label, path);
  return apply_xattrs (l, entry, -1, path, err);
}

static int
write_hardlink (struct layer *l, const char *raw_target, int pfd, const char *base,
                const char *path, struct nsbox_error **err)
{
  if (strlen (raw_target) > MAX_LINK_BYTES)
    return nsbox_layer_error (l, err, ENAMETOOLONG, path, "hardlink target longer than 4095 bytes");
  /* The target may be a queued file. */
  int ret = nsbox_layer_queue_drain (l, err);
  if (ret < 0)
    return ret;
  cleanup_free char *target = NULL;
  ret = nsbox_layer_clean_path (l, raw_target, &target, err);
  if (ret < 0)
    return ret;
  if (!*target)
    return nsbox_layer_error (l, err, EBADMSG, path, "hardlink to the root directory");
  if (strcmp (target, path) == 0)
    return 0;
  const char *tparent, *tbase;
  nsbox_layer_split_path (target, &tparent, &tbase);
  int tfd = rt_unpack_open_dir (l->u, tparent);
  if (tfd < 0)
    return nsbox_error_set (err, EBADMSG, "%s: '%s': hardlink target '%s' not found: %s", l->label,
                            path, raw_target, strerror (-tfd));
  cleanup_close int tpfd = tfd;
  struct stat st;
  if (fstatat (tpfd, tbase, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return nsbox_error_set (err, EBADMSG, "%s: '%s': hardlink target '%s' not found", l->label,
                            path, raw_target);
  if (S_ISDIR (st.st_mode))
    return nsbox_error_set (err, EBADMSG, "%s: '%s': hardlink to directory '%s'", l->label, path,
                            raw_target);
  ret = nsbox_layer_clear_target (l, pfd, base, false, path, err);
  if (ret < 0)
    return ret;
  /* A name, no new inode, on most filesystems; tmpfs counts it against
   * nr_inodes. An entry like any other for the limits. */
  ret = nsbox_layer_charge (l, path, 1, RT_INODE_CHARGE, 0, 1, err);
  if (ret < 0)
    return ret;
  /* Links the entry itself (a symlink stays a symlink): never follows. */
  if (linkat (tpfd, tbase, pfd, base, 0) < 0)
    return nsbox_error_sys (err, errno, "%s: '%s': hardlink to '%s'", l->label, path, raw_target);
  return 0;
}

static int
write_fifo (struct layer *l, struct archive_entry *entry, int pfd, const char *base,
            const char *path, struct nsbox_error **err)
{
  int ret = nsbox_layer_charge_other (l, path, err);
  if (ret < 0)
    return ret;
  if (mknodat (pfd, base, S_IFIFO | 0600, 0) < 0)
    return nsbox_error_sys (err, errno, "%s: '%s': mkfifo", l->label, path);
  cleanup_close int fd = openat (pfd, base, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return nsbox_error_sys (err, errno, "%s: '%s': open fifo", l->label, path);
  if (fchmod (fd, archive_entry_perm (entry) & 07777 & ~(mode_t)(S_ISUID | S_ISGID)) < 0)
    return nsbox_error_sys (err, errno, "%s: '%s': chmod", l->label, path);
  struct timespec ts[2];
  entry_times (entry, ts);
  if (futimens (fd, ts) < 0)
    return nsbox_error_sys (err, errno, "%s: '%s': set times", l->label, path);
  return 0;
}

/* Whiteouts -------------------------------------------------------------- */

/* Removes what lower layers left below dir_fd (lexical path `path`, node
 * `node`, RT_PATH_NONE when this layer wrote nothing below it), keeping
 * what this layer wrote. Recurses only into directories this layer wrote
 * something in: no deeper than its paths. */
static int
opaque_clean (struct layer *l, int dir_fd, const char *path, uint32_t node,
              struct nsbox_error **err)
{
  int fd = openat (dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return nsbox_error_sys (err, errno, "%s: '%s': open", l->label, path);
  DIR *dir = fdopendir (fd);
  if (!dir)
    {
      close (fd);
      return nsbox_error_oom (err);
    }
  int ret = 0;
  struct dirent *de;
  while ((de = readdir (dir)))
    {
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      bool keep = nsbox_layer_written_here (l, node, de->d_name);
      int cfd = -1;
      if (keep)
        {
          cfd = openat (dir_fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (cfd < 0)
            continue; /* a file (or symlink) this layer wrote */
        }
      cleanup_free char *child = NULL;
      if (!(child = xasprintf ("%s%s%s", path, *path ? "/" : "", de->d_name)))
        {
          if (cfd >= 0)
            close (cfd);
          ret = nsbox_error_oom (err);
          break;
        }
      if (!keep)
        {
          ret = nsbox_remove_at (dir_fd, de->d_name);
          if (ret < 0)
            {
              ret = nsbox_error_sys (err, -ret, "%s: '%s': remove (opaque whiteout)", l->label,
                                     child);
              break;
            }
          continue;
        }
      uint32_t child_node = rt_pathtab_child (&l->u->paths, node, de->d_name, strlen (de->d_name));
      ret = opaque_clean (l, cfd, child, child_node, err);
      close (cfd);
      if (ret < 0)
        break;
    }
  closedir (dir);
  return ret;
}

/* The node of the lexical directory `parent`, RT_PATH_NONE when no entry
 * named it or anything below. */
static uint32_t
lexical_node (struct layer *l, const char *parent)
{
  uint32_t node = RT_PATH_NONE;
  rt_pathtab_walk (&l->u->paths, RT_PATH_ROOT, parent, false, &node, NULL);
  return node;
}

static int
apply_whiteout (struct layer *l, const char *parent, const char *base, const char *raw,
                struct nsbox_error **err)
{
  if (strcmp (base, ".wh..wh..opq") == 0)
    {
      int ret = nsbox_layer_before_removal (l, err);
      if (ret < 0)
        return ret;
      int fd = rt_unpack_open_dir (l->u, parent);
      if (fd == -ENOENT || fd == -ENOTDIR)
        return 0;
      if (fd < 0)
        return nsbox_error_sys (err, -fd, "%s: '%s': resolve", l->label, raw);
      ret = opaque_clean (l, fd, parent, lexical_node (l, parent), err);
      close (fd);
      return ret;
    }
  const char *name = base + 4;
  if (!*name || strcmp (name, ".") == 0 || strcmp (name, "..") == 0)
    return nsbox_layer_error (l, err, EBADMSG, raw, "invalid whiteout");
  if (strncmp (base, ".wh..wh.", 8) == 0)
    return 0; /* other AUFS metadata */
  if (nsbox_layer_written_here (l, lexical_node (l, parent), name))
    return 0; /* whiteouts hide lower layers only */
  int ret = nsbox_layer_before_removal (l, err);
  if (ret < 0)
    return ret;
  int fd = rt_unpack_open_dir (l->u, parent);
  if (fd == -ENOENT || fd == -ENOTDIR)
    return 0;
  if (fd < 0)
    return nsbox_error_sys (err, -fd, "%s: '%s': resolve", l->label, raw);
  ret = nsbox_remove_at (fd, name);
  close (fd);
  if (ret < 0)
    return nsbox_error_sys (err, -ret, "%s: '%s': apply whiteout", l->label, raw);
  return 0;
}

/* One entry -------------------------------------------------------------- */

/* Makes the entry `base` in pfd (its parent) for nsbox_layer_apply_entry. */
static int
write_entry (struct layer *l, struct archive_entry *entry, const char *hardlink, mode_t type,
             int pfd, const char *base, const char *path, struct nsbox_error **err)
{
  if (hardlink)
    return write_hardlink (l, hardlink, pfd, base, path, err);
  int ret = nsbox_layer_queue_wait_for_name (l, base, err);
  if (ret < 0)
    return ret;
  ret = nsbox_layer_clear_target (l, pfd, base, type == AE_IFDIR, path, err);
  if (ret < 0)
    return ret;
  switch (type)
    {
    case AE_IFDIR:
      return write_directory (l, entry, pfd, base, ret == 1, path, err);
    case AE_IFLNK:
      return write_symlink (l, entry, pfd, base, path, err);
    case AE_IFIFO:
      return write_fifo (l, entry, pfd, base, path, err);
    default:
      return write_regular (l, entry, pfd, base, path, err);
    }
}

int
nsbox_layer_apply_entry (struct layer *l, struct archive_entry *entry, struct nsbox_error **err)
{
  const char *raw = archive_entry_pathname_utf8 (entry);
  if (!raw)
    raw = archive_entry_pathname (entry);
  if (!raw || !*raw)
    return nsbox_error_set (err, EBADMSG, "%s: entry without a name", l->label);
  cleanup_free char *path = NULL;
  int ret = nsbox_layer_clean_path (l, raw, &path, err);
  if (ret < 0)
    return ret;
  const char *hardlink = archive_entry_hardlink_utf8 (entry);
  if (!hardlink)
    hardlink = archive_entry_hardlink (entry);
  mode_t type = archive_entry_filetype (entry);
  if (!*path)
    {
      if (type == AE_IFDIR && !hardlink)
        return 0;
      return nsbox_layer_error (l, err, EBADMSG, raw, "root entry is not a directory");
    }
  if (archive_entry_sparse_count (entry) > 0)
    return nsbox_layer_error (l, err, EBADMSG, raw, "sparse files are not supported");

  cleanup_free char *lexical = strdup (path);
  if (!lexical)
    return nsbox_error_oom (err);
  const char *parent, *base;
  nsbox_layer_split_path (path, &parent, &base);
  if (strncmp (base, ".wh.", 4) == 0)
    return apply_whiteout (l, parent, base, raw, err);

  if (!hardlink && (type == AE_IFCHR || type == AE_IFBLK))
    {
      if (archive_entry_rdevmajor (entry) > 0xffffffffu
          || archive_entry_rdevminor (entry) > 0xffffffffu)
        return nsbox_layer_error (l, err, EBADMSG, raw, "device number out of range");
      rt_store_warn (l->u->store,
                     "warning: %s: skipping device node '%s' (not created "
                     "without privileges; the sandbox has its own /dev)",
                     l->label, lexical);
      return 0;
    }
  if (!hardlink && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK && type != AE_IFIFO)
    return nsbox_layer_error (l, err, EBADMSG, raw, "unsupported entry type");

  int pfd = nsbox_layer_open_parent (l, parent, raw, err);
  if (pfd < 0)
    return pfd;
  ret = write_entry (l, entry, hardlink, type, pfd, base, lexical, err);
  if (ret < 0)
    return ret;
  /* Remembered once made: what it created was counted first, so a bomb
   * of new paths meets the inode limit, a bomb of aliases (paths through
   * symlinks to what exists) the limit on paths. */
  uint32_t node = RT_PATH_ROOT;
  ret = nsbox_layer_mark_written (l, lexical, &node, err);
  if (ret < 0)
    return ret;
  if (!hardlink && record_meta (l, node, entry) < 0)
    return nsbox_error_oom (err);
  return 0;
}
