/* The layer applier: tar entries from libarchive (reader only) applied by
 * our own code to a private tree, every path resolved inside it. See
 * layer.h and ../shared/OCI.md sections 3 and 4. */
#include "layer.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "decompress.h"
#include "filequeue.h"
#include "inroot.h"
#include "strmap.h"

#define MAX_PATH_BYTES 4096
#define MAX_COMPONENT_BYTES 255
#define MAX_LINK_BYTES 4095
#define MAX_XATTR_BYTES (64u << 10)
#define COPY_CHUNK (256u << 10)
/* Regular files up to JOB_MAX_BYTES without xattrs are written by the file
 * thread (filequeue.h); the reader runs ahead of it by at most
 * QUEUE_MAX_BYTES and QUEUE_MAX_JOBS. */
#define JOB_MAX_BYTES (1u << 20)
#define QUEUE_MAX_BYTES (16u << 20)
#define QUEUE_MAX_JOBS 1024
/* Directories the queued files may sit in (each holds an fd until its last
 * file is written): beyond that the applier lets the queue drain. */
#define QUEUE_MAX_DIRS 64

/* What the image said about one path: applied to directories at the end,
 * written to ownership.tsv for everything. */
struct path_meta
{
  mode_t mode; /* type and permission bits from the header */
  int64_t uid, gid;
  struct timespec mtime;
};

struct rt_unpack
{
  struct nsbox_store *store;
  int root_fd; /* O_RDONLY|O_DIRECTORY, the tree's root */
  bool fallback;
  uint64_t image_bytes;
  struct rt_strmap meta; /* path -> struct path_meta */
  bool warned_xattr, warned_user_xattr;
  char *copy_buf;
};

/* One layer in progress. */
struct layer
{
  struct rt_unpack *u;
  unsigned index;
  struct archive *ar;
  struct rt_stream *stream;
  struct rt_strmap written; /* paths written by this layer, with their ancestors */
  uint64_t bytes, entries;
  /* The stream bytes libarchive has seen last, to read the raw typeflag of
   * each entry's header (libarchive maps unknown types to regular files). */
  const unsigned char *chunk;
  size_t chunk_len;
  uint64_t chunk_start;
  unsigned char tail[512];
  size_t tail_len;
  /* The parent directory resolved last (lexical path, O_PATH fd, inode):
   * entries of one directory come together, and a path resolves to the
   * same directory until something is removed from the tree (parent_stale).
   * Creating cannot change where an existing path leads. */
  char *parent_path;
  int parent_fd;
  ino_t parent_ino;
  bool parent_stale;
  /* parent_fd shared with the file jobs queued in it (made on the first),
   * and how many such directories were handed out since the last drain. */
  struct rt_dir_ref *parent_ref;
  unsigned queue_dirs;
  /* The file thread, and the names it was given since it was last drained
   * ("<parent inode>/<base>"): whatever could see or disturb a queued file
   * drains it first (removals, whiteouts, hardlinks, creating missing
   * parents, a second entry for a queued name). */
  struct rt_file_queue files;
  struct rt_strmap queued_names;
};

static int
layer_error (struct layer *l, struct nsbox_error **err, int code, const char *path,
             const char *what)
{
  return nsbox_error_set (err, code, "layer %u: '%s': %s", l->index, path, what);
}

/* Names ------------------------------------------------------------------ */

/* Lexically cleans a tar name into a relative path ("" is the root).
 * Anything climbing above the root is a breakout. */
static int
clean_path (struct layer *l, const char *raw, char **out, struct nsbox_error **err)
{
  size_t raw_len = strlen (raw);
  if (raw_len > MAX_PATH_BYTES)
    return nsbox_error_set (err, ENAMETOOLONG, "layer %u: path of %zu bytes exceeds %d", l->index,
                            raw_len, MAX_PATH_BYTES);
  cleanup_free char *buf = malloc (raw_len + 1);
  cleanup_free char *copy = strdup (raw);
  if (!buf || !copy)
    return nsbox_error_set (err, ENOMEM, "out of memory");
  size_t len = 0;
  char *save = NULL;
  for (char *comp = strtok_r (copy, "/", &save); comp; comp = strtok_r (NULL, "/", &save))
    {
      if (strcmp (comp, ".") == 0)
        continue;
      if (strcmp (comp, "..") == 0)
        {
          if (len == 0)
            return layer_error (l, err, EBADMSG, raw, "path escapes the root (breakout)");
          char *slash = memrchr (buf, '/', len);
          len = slash ? (size_t)(slash - buf) : 0;
          continue;
        }
      size_t clen = strlen (comp);
      if (clen > MAX_COMPONENT_BYTES)
        return layer_error (l, err, ENAMETOOLONG, raw, "path component longer than 255 bytes");
      if (len)
        buf[len++] = '/';
      memcpy (buf + len, comp, clen);
      len += clen;
    }
  buf[len] = '\0';
  *out = TAKE_PTR (buf);
  return 0;
}

static void
split_path (char *path, const char **parent, const char **base)
{
  char *slash = strrchr (path, '/');
  if (slash)
    {
      *slash = '\0';
      *parent = path;
      *base = slash + 1;
    }
  else
    {
      *parent = "";
      *base = path;
    }
}

/* Marks path and its ancestors as written by this layer. */
static int
mark_written (struct layer *l, const char *path)
{
  cleanup_free char *copy = strdup (path);
  if (!copy)
    return -ENOMEM;
  for (;;)
    {
      if (rt_strmap_has (&l->written, copy))
        return 0;
      if (rt_strmap_put (&l->written, copy, NULL, NULL) < 0)
        return -ENOMEM;
      char *slash = strrchr (copy, '/');
      if (!slash)
        return 0;
      *slash = '\0';
    }
}

/* The file thread ------------------------------------------------------- */

/* Waits until every queued file is written. Returns 0, or the first
 * failure of a queued file (which came before anything met here since). */
static int
queue_drain (struct layer *l, struct nsbox_error **err)
{
  rt_strmap_clear (&l->queued_names, NULL);
  const char *path, *step;
  int failure = rt_file_queue_drain (&l->files, &path, &step);
  l->queue_dirs = l->parent_ref ? 1 : 0;
  if (!failure)
    return 0;
  return nsbox_error_sys (err, failure, "layer %u: '%s': %s", l->index, path, step);
}

/* Drains the queue when `base` in the last resolved parent is queued. */
static int
queue_wait_for_name (struct layer *l, const char *base, struct nsbox_error **err)
{
  if (!l->queued_names.count)
    return 0;
  cleanup_free char *key = NULL;
  if (asprintf (&key, "%ju/%s", (uintmax_t)l->parent_ino, base) < 0)
    return nsbox_error_set (err, ENOMEM, "out of memory");
  if (!rt_strmap_has (&l->queued_names, key))
    return 0;
  return queue_drain (l, err);
}

/* Resolution ------------------------------------------------------------- */

static int
open_dir (struct rt_unpack *u, const char *path)
{
  return rt_open_dir_in_root (u->root_fd, path, u->fallback);
}

/* Lexically joins a symlink's directory and target the way in-root
 * resolution reads them: absolute targets start at the root, ".." stops
 * there. */
static char *
join_clamped (const char *dir, const char *target)
{
  char *joined = NULL;
  if (asprintf (&joined, "%s/%s", target[0] == '/' ? "" : dir, target) < 0)
    return NULL;
  char *out = malloc (strlen (joined) + 1);
  if (!out)
    {
      free (joined);
      return NULL;
    }
  size_t len = 0;
  char *save = NULL;
  for (char *c = strtok_r (joined, "/", &save); c; c = strtok_r (NULL, "/", &save))
    {
      if (strcmp (c, ".") == 0)
        continue;
      if (strcmp (c, "..") == 0)
        {
          char *slash = len ? memrchr (out, '/', len) : NULL;
          len = slash ? (size_t)(slash - out) : 0;
          continue;
        }
      if (len)
        out[len++] = '/';
      memcpy (out + len, c, strlen (c));
      len += strlen (c);
    }
  out[len] = '\0';
  free (joined);
  return out;
}

/* Opens the directory `path` inside the root, creating what is missing
 * (0755) like mkdir -p. A symlink met on the way whose target cannot be
 * opened (dangling, or through a missing directory) is followed lexically,
 * clamped at the root, and its target created. Returns an O_PATH fd or
 * -errno. */
static int
ensure_dir (struct layer *l, const char *path, unsigned depth)
{
  int fd = open_dir (l->u, path);
  if (fd != -ENOENT)
    return fd;
  if (depth > 40)
    return -ELOOP;
  cleanup_free char *copy = strdup (path);
  cleanup_free char *resolved = strdup ("");
  if (!copy || !resolved)
    return -ENOMEM;
  char *save = NULL;
  for (char *comp = strtok_r (copy, "/", &save); comp; comp = strtok_r (NULL, "/", &save))
    {
      char *candidate = NULL;
      if (asprintf (&candidate, "%s%s%s", resolved, *resolved ? "/" : "", comp) < 0)
        return -ENOMEM;
      fd = open_dir (l->u, candidate);
      if (fd >= 0)
        {
          close (fd);
          free (resolved);
          resolved = candidate;
          continue;
        }
      if (fd != -ENOENT)
        {
          free (candidate);
          return fd;
        }
      int pfd = open_dir (l->u, resolved);
      if (pfd < 0)
        {
          free (candidate);
          return pfd;
        }
      if (mkdirat (pfd, comp, 0755) == 0)
        {
          int dfd = openat (pfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (dfd >= 0)
            {
              fchmod (dfd, 0755);
              close (dfd);
            }
          free (resolved);
          resolved = candidate;
        }
      else if (errno == EEXIST)
        {
          char target[MAX_LINK_BYTES + 1];
          ssize_t n = readlinkat (pfd, comp, target, sizeof target - 1);
          free (candidate);
          if (n <= 0)
            {
              close (pfd);
              return -ENOTDIR;
            }
          target[n] = '\0';
          char *joined = join_clamped (resolved, target);
          if (!joined)
            {
              close (pfd);
              return -ENOMEM;
            }
          int sub = ensure_dir (l, joined, depth + 1);
          if (sub < 0)
            {
              free (joined);
              close (pfd);
              return sub;
            }
          close (sub);
          free (resolved);
          resolved = joined;
        }
      else
        {
          int saved = errno;
          free (candidate);
          close (pfd);
          return -saved;
        }
      close (pfd);
    }
  return open_dir (l->u, resolved);
}

static void
forget_parent (struct layer *l)
{
  if (l->parent_fd >= 0)
    close (l->parent_fd);
  l->parent_fd = -1;
  rt_dir_ref_put (TAKE_PTR (l->parent_ref));
  free (l->parent_path);
  l->parent_path = NULL;
}

/* The parent directory of an entry, created as needed; the fd stays the
 * layer's (callers do not close it). */
static int
open_parent (struct layer *l, const char *parent, const char *path, struct nsbox_error **err)
{
  if (l->parent_fd >= 0 && !l->parent_stale && strcmp (l->parent_path, parent) == 0)
    return l->parent_fd;
  forget_parent (l);
  int fd = open_dir (l->u, parent);
  if (fd < 0)
    {
      /* A queued file may be in the way of what is missing. */
      int ret = queue_drain (l, err);
      if (ret < 0)
        return ret;
      fd = ensure_dir (l, parent, 0);
    }
  if (fd == -ENOTDIR)
    return layer_error (l, err, ENOTDIR, path, "a parent is not a directory");
  if (fd < 0)
    return nsbox_error_set (err, -fd, "layer %u: '%s': resolve parent: %s", l->index, path,
                            strerror (-fd));
  struct stat st;
  if (fstat (fd, &st) < 0)
    {
      int saved = errno;
      close (fd);
      return nsbox_error_sys (err, saved, "layer %u: '%s': resolve parent", l->index, path);
    }
  l->parent_path = strdup (parent);
  if (!l->parent_path)
    {
      close (fd);
      return nsbox_error_set (err, ENOMEM, "out of memory");
    }
  l->parent_fd = fd;
  l->parent_ino = st.st_ino;
  l->parent_stale = false;
  return fd;
}

/* Before anything is removed from the tree: queued files are written, and
 * paths must resolve afresh. */
static int
before_removal (struct layer *l, struct nsbox_error **err)
{
  l->parent_stale = true;
  return queue_drain (l, err);
}

/* Makes room for a new entry: a directory over a directory merges (returns
 * 1); anything else in the way is removed (returns 0). */
static int
clear_target (struct layer *l, int pfd, const char *base, bool new_is_dir, const char *path,
              struct nsbox_error **err)
{
  struct stat st;
  if (fstatat (pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
    {
      if (errno == ENOENT)
        return 0;
      return nsbox_error_sys (err, errno, "layer %u: '%s': stat", l->index, path);
    }
  if (S_ISDIR (st.st_mode) && new_is_dir)
    return 1;
  int ret = before_removal (l, err);
  if (ret < 0)
    return ret;
  ret = rt_remove_at (pfd, base);
  if (ret < 0)
    return nsbox_error_sys (err, -ret, "layer %u: '%s': remove the existing entry", l->index, path);
  return 0;
}

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
        return layer_error (l, err, E2BIG, path, "extended attribute larger than 64 KiB");
      if (!xattr_is_user (name))
        {
          /* security.capability, security.selinux, trusted.*, system.*:
           * privileged or host-specific; a set-cap binary would be set-cap
           * for us. */
          if (!l->u->warned_xattr)
            rt_store_warn (l->u->store,
                           "warning: layer %u: dropping privileged extended attribute '%s' "
                           "of '%s' (and any others like it)",
                           l->index, name, path);
          l->u->warned_xattr = true;
          continue;
        }
      if (fd < 0)
        continue;
      if (fsetxattr (fd, name, value, size, 0) < 0 && !l->u->warned_user_xattr)
        {
          rt_store_warn (l->u->store,
                         "warning: layer %u: cannot set extended attribute '%s' on '%s': %s "
                         "(ignoring such failures)",
                         l->index, name, path, strerror (errno));
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
record_meta (struct layer *l, const char *path, struct archive_entry *entry)
{
  struct path_meta *m = malloc (sizeof *m);
  if (!m)
    return -ENOMEM;
  m->mode = archive_entry_mode (entry);
  m->uid = archive_entry_uid (entry);
  m->gid = archive_entry_gid (entry);
  m->mtime.tv_sec = archive_entry_mtime (entry);
  m->mtime.tv_nsec = archive_entry_mtime_nsec (entry);
  void *old = NULL;
  if (rt_strmap_put (&l->u->meta, path, m, &old) < 0)
    {
      free (m);
      return -ENOMEM;
    }
  free (old);
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
    return nsbox_error_set (err, EBADMSG, "layer %u: '%s': %s", l->index, path,
                            archive_error_string (l->ar));
  *copied += n;
  if (*copied > size)
    return layer_error (l, err, EBADMSG, path, "more data than the header says");
  return n;
}

/* At the end of an entry's data: all `size` bytes came. */
static int
check_entry_end (struct layer *l, int64_t copied, int64_t size, const char *path,
                 struct nsbox_error **err)
{
  return copied == size ? 0 : layer_error (l, err, EBADMSG, path, "truncated file data");
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
    return nsbox_error_set (err, ENOMEM, "out of memory");
  job->path = strdup (path);
  job->len = (size_t)size;
  job->data = size > 0 ? malloc ((size_t)size) : NULL;
  if (!job->path || (size > 0 && !job->data))
    return nsbox_error_set (err, ENOMEM, "out of memory");
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
      if (l->queue_dirs >= QUEUE_MAX_DIRS && (ret = queue_drain (l, err)) < 0)
        return ret;
      struct rt_dir_ref *ref = rt_dir_ref_new (pfd);
      if (!ref)
        return nsbox_error_sys (err, errno, "layer %u: '%s': create", l->index, path);
      l->queue_dirs++;
      if (!shared)
        job->dir = ref;
      else
        l->parent_ref = ref;
    }
  if (shared)
    job->dir = rt_dir_ref_get (l->parent_ref);
  cleanup_free char *key = NULL;
  if (asprintf (&key, "%ju/%s", (uintmax_t)l->parent_ino, job->base) < 0
      || rt_strmap_put (&l->queued_names, key, NULL, NULL) < 0)
    return nsbox_error_set (err, ENOMEM, "out of memory");
  l->bytes += (uint64_t)size;
  l->u->image_bytes += (uint64_t)size;
  if (!rt_file_queue_push (&l->files, TAKE_PTR (job), QUEUE_MAX_JOBS, QUEUE_MAX_BYTES))
    return queue_drain (l, err);
  return 0;
}

static int
write_regular (struct layer *l, struct archive_entry *entry, int pfd, const char *base,
               const char *path, struct nsbox_error **err)
{
  struct rt_limits *lim = &l->u->store->limits;
  int64_t size = archive_entry_size (entry);
  if (size < 0 || (uint64_t)size > lim->layer_bytes - l->bytes
      || (uint64_t)size > lim->image_bytes - l->u->image_bytes)
    return nsbox_error_set (err, EFBIG,
                            "layer %u: '%s': file of %" PRId64
                            " bytes exceeds the limit of %" PRIu64 " bytes per layer or %" PRIu64
                            " per image",
                            l->index, path, size, lim->layer_bytes, lim->image_bytes);
  if ((uint64_t)size <= JOB_MAX_BYTES && archive_entry_xattr_count (entry) == 0
      && rt_file_queue_start (&l->files))
    return queue_regular (l, entry, pfd, size, path, err);
  cleanup_close int fd
      = openat (pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return nsbox_error_sys (err, errno, "layer %u: '%s': create", l->index, path);
  int64_t copied = 0;
  for (;;)
    {
      la_ssize_t n = read_entry_chunk (l, l->u->copy_buf, COPY_CHUNK, size, &copied, path, err);
      if (n < 0)
        return (int)n;
      if (n == 0)
        break;
      for (la_ssize_t off = 0; off < n;)
        {
          ssize_t w = write (fd, l->u->copy_buf + off, (size_t)(n - off));
          if (w < 0 && errno == EINTR)
            continue;
          if (w < 0)
            return nsbox_error_sys (err, errno, "layer %u: '%s': write", l->index, path);
          off += w;
        }
    }
  int ret = check_entry_end (l, copied, size, path, err);
  if (ret < 0)
    return ret;
  l->bytes += (uint64_t)size;
  l->u->image_bytes += (uint64_t)size;
  mode_t mode = archive_entry_perm (entry) & 07777 & ~(mode_t)(S_ISUID | S_ISGID);
  ret = apply_xattrs (l, entry, fd, path, err);
  if (ret < 0)
    return ret;
  if (fchmod (fd, mode) < 0)
    return nsbox_error_sys (err, errno, "layer %u: '%s': chmod", l->index, path);
  struct timespec ts[2];
  entry_times (entry, ts);
  if (futimens (fd, ts) < 0)
    return nsbox_error_sys (err, errno, "layer %u: '%s': set times", l->index, path);
  return 0;
}

static int
write_directory (struct layer *l, struct archive_entry *entry, int pfd, const char *base,
                 bool exists, const char *path, struct nsbox_error **err)
{
  if (!exists && mkdirat (pfd, base, 0700) < 0)
    return nsbox_error_sys (err, errno, "layer %u: '%s': mkdir", l->index, path);
  cleanup_close int fd = openat (pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return nsbox_error_sys (err, errno, "layer %u: '%s': open directory", l->index, path);
  /* Final modes come last (rt_unpack_finish); until then we must be able
   * to write into it. */
  if (fchmod (fd, (archive_entry_perm (entry) & 07777) | 0700) < 0)
    return nsbox_error_sys (err, errno, "layer %u: '%s': chmod", l->index, path);
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
    return layer_error (l, err, EBADMSG, path, "symlink without a target");
  if (strlen (target) > MAX_LINK_BYTES)
    return layer_error (l, err, ENAMETOOLONG, path, "symlink target longer than 4095 bytes");
  if (symlinkat (target, pfd, base) < 0)
    return nsbox_error_sys (err, errno, "layer %u: '%s': symlink", l->index, path);
  struct timespec ts[2];
  entry_times (entry, ts);
  if (utimensat (pfd, base, ts, AT_SYMLINK_NOFOLLOW) < 0)
    return nsbox_error_sys (err, errno, "layer %u: '%s': set times", l->index, path);
  return apply_xattrs (l, entry, -1, path, err);
}

static int
write_hardlink (struct layer *l, const char *raw_target, int pfd, const char *base,
                const char *path, struct nsbox_error **err)
{
  if (strlen (raw_target) > MAX_LINK_BYTES)
    return layer_error (l, err, ENAMETOOLONG, path, "hardlink target longer than 4095 bytes");
  /* The target may be a queued file. */
  int ret = queue_drain (l, err);
  if (ret < 0)
    return ret;
  cleanup_free char *target = NULL;
  ret = clean_path (l, raw_target, &target, err);
  if (ret < 0)
    return ret;
  if (!*target)
    return layer_error (l, err, EBADMSG, path, "hardlink to the root directory");
  if (strcmp (target, path) == 0)
    return 0;
  const char *tparent, *tbase;
  split_path (target, &tparent, &tbase);
  int tfd = open_dir (l->u, tparent);
  if (tfd < 0)
    return nsbox_error_set (err, EBADMSG, "layer %u: '%s': hardlink target '%s' not found: %s",
                            l->index, path, raw_target, strerror (-tfd));
  cleanup_close int tpfd = tfd;
  struct stat st;
  if (fstatat (tpfd, tbase, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return nsbox_error_set (err, EBADMSG, "layer %u: '%s': hardlink target '%s' not found",
                            l->index, path, raw_target);
  if (S_ISDIR (st.st_mode))
    return nsbox_error_set (err, EBADMSG, "layer %u: '%s': hardlink to directory '%s'", l->index,
                            path, raw_target);
  ret = clear_target (l, pfd, base, false, path, err);
  if (ret < 0)
    return ret;
  /* Links the entry itself (a symlink stays a symlink): never follows. */
  if (linkat (tpfd, tbase, pfd, base, 0) < 0)
    return nsbox_error_sys (err, errno, "layer %u: '%s': hardlink to '%s'", l->index, path,
                            raw_target);
  return 0;
}

static int
write_fifo (struct layer *l, struct archive_entry *entry, int pfd, const char *base,
            const char *path, struct nsbox_error **err)
{
  if (mknodat (pfd, base, S_IFIFO | 0600, 0) < 0)
    return nsbox_error_sys (err, errno, "layer %u: '%s': mkfifo", l->index, path);
  cleanup_close int fd = openat (pfd, base, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return nsbox_error_sys (err, errno, "layer %u: '%s': open fifo", l->index, path);
  if (fchmod (fd, archive_entry_perm (entry) & 07777 & ~(mode_t)(S_ISUID | S_ISGID)) < 0)
    return nsbox_error_sys (err, errno, "layer %u: '%s': chmod", l->index, path);
  struct timespec ts[2];
  entry_times (entry, ts);
  if (futimens (fd, ts) < 0)
    return nsbox_error_sys (err, errno, "layer %u: '%s': set times", l->index, path);
  return 0;
}

/* Whiteouts -------------------------------------------------------------- */

/* Removes what lower layers left below dir_fd (lexical path `path`), keeping
 * what this layer wrote. */
static int
opaque_clean (struct layer *l, int dir_fd, const char *path, unsigned depth,
              struct nsbox_error **err)
{
  if (depth > 512)
    return layer_error (l, err, ELOOP, path, "directory tree too deep");
  int fd = openat (dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return nsbox_error_sys (err, errno, "layer %u: '%s': open", l->index, path);
  DIR *dir = fdopendir (fd);
  if (!dir)
    {
      close (fd);
      return nsbox_error_set (err, ENOMEM, "out of memory");
    }
  int ret = 0;
  struct dirent *de;
  while ((de = readdir (dir)))
    {
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      cleanup_free char *child = NULL;
      if (asprintf (&child, "%s%s%s", path, *path ? "/" : "", de->d_name) < 0)
        {
          ret = nsbox_error_set (err, ENOMEM, "out of memory");
          break;
        }
      if (!rt_strmap_has (&l->written, child))
        {
          ret = rt_remove_at (dir_fd, de->d_name);
          if (ret < 0)
            {
              ret = nsbox_error_sys (err, -ret, "layer %u: '%s': remove (opaque whiteout)",
                                     l->index, child);
              break;
            }
          continue;
        }
      int cfd = openat (dir_fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (cfd < 0)
        continue; /* a file (or symlink) this layer wrote */
      ret = opaque_clean (l, cfd, child, depth + 1, err);
      close (cfd);
      if (ret < 0)
        break;
    }
  closedir (dir);
  return ret;
}

static int
apply_whiteout (struct layer *l, const char *parent, const char *base, const char *raw,
                struct nsbox_error **err)
{
  if (strcmp (base, ".wh..wh..opq") == 0)
    {
      int ret = before_removal (l, err);
      if (ret < 0)
        return ret;
      int fd = open_dir (l->u, parent);
      if (fd == -ENOENT || fd == -ENOTDIR)
        return 0;
      if (fd < 0)
        return nsbox_error_sys (err, -fd, "layer %u: '%s': resolve", l->index, raw);
      ret = opaque_clean (l, fd, parent, 0, err);
      close (fd);
      return ret;
    }
  const char *name = base + 4;
  if (!*name || strcmp (name, ".") == 0 || strcmp (name, "..") == 0)
    return layer_error (l, err, EBADMSG, raw, "invalid whiteout");
  if (strncmp (base, ".wh..wh.", 8) == 0)
    return 0; /* other AUFS metadata */
  cleanup_free char *victim = NULL;
  if (asprintf (&victim, "%s%s%s", parent, *parent ? "/" : "", name) < 0)
    return nsbox_error_set (err, ENOMEM, "out of memory");
  if (rt_strmap_has (&l->written, victim))
    return 0; /* whiteouts hide lower layers only */
  int ret = before_removal (l, err);
  if (ret < 0)
    return ret;
  int fd = open_dir (l->u, parent);
  if (fd == -ENOENT || fd == -ENOTDIR)
    return 0;
  if (fd < 0)
    return nsbox_error_sys (err, -fd, "layer %u: '%s': resolve", l->index, raw);
  ret = rt_remove_at (fd, name);
  close (fd);
  if (ret < 0)
    return nsbox_error_sys (err, -ret, "layer %u: '%s': apply whiteout", l->index, raw);
  return 0;
}

/* One entry -------------------------------------------------------------- */

static int
apply_entry (struct layer *l, struct archive_entry *entry, struct nsbox_error **err)
{
  const char *raw = archive_entry_pathname_utf8 (entry);
  if (!raw)
    raw = archive_entry_pathname (entry);
  if (!raw || !*raw)
    return nsbox_error_set (err, EBADMSG, "layer %u: entry without a name", l->index);
  cleanup_free char *path = NULL;
  int ret = clean_path (l, raw, &path, err);
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
      return layer_error (l, err, EBADMSG, raw, "root entry is not a directory");
    }
  if (archive_entry_sparse_count (entry) > 0)
    return layer_error (l, err, EBADMSG, raw, "sparse files are not supported");

  cleanup_free char *lexical = strdup (path);
  if (!lexical)
    return nsbox_error_set (err, ENOMEM, "out of memory");
  const char *parent, *base;
  split_path (path, &parent, &base);
  if (strncmp (base, ".wh.", 4) == 0)
    return apply_whiteout (l, parent, base, raw, err);

  if (!hardlink && (type == AE_IFCHR || type == AE_IFBLK))
    {
      if (archive_entry_rdevmajor (entry) > 0xffffffffu
          || archive_entry_rdevminor (entry) > 0xffffffffu)
        return layer_error (l, err, EBADMSG, raw, "device number out of range");
      rt_store_warn (l->u->store,
                     "warning: layer %u: skipping device node '%s' (not created "
                     "without privileges; the sandbox has its own /dev)",
                     l->index, lexical);
      return 0;
    }
  if (!hardlink && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK && type != AE_IFIFO)
    return layer_error (l, err, EBADMSG, raw, "unsupported entry type");

  if (mark_written (l, lexical) < 0)
    return nsbox_error_set (err, ENOMEM, "out of memory");
  int pfd = open_parent (l, parent, raw, err);
  if (pfd < 0)
    return pfd;
  if (hardlink)
    return write_hardlink (l, hardlink, pfd, base, lexical, err);

  ret = queue_wait_for_name (l, base, err);
  if (ret < 0)
    return ret;
  ret = clear_target (l, pfd, base, type == AE_IFDIR, lexical, err);
  if (ret < 0)
    return ret;
  if (record_meta (l, lexical, entry) < 0)
    return nsbox_error_set (err, ENOMEM, "out of memory");
  switch (type)
    {
    case AE_IFDIR:
      return write_directory (l, entry, pfd, base, ret == 1, lexical, err);
    case AE_IFLNK:
      return write_symlink (l, entry, pfd, base, lexical, err);
    case AE_IFIFO:
      return write_fifo (l, entry, pfd, base, lexical, err);
    default:
      return write_regular (l, entry, pfd, base, lexical, err);
    }
}

/* Layers ----------------------------------------------------------------- */

static la_ssize_t
read_callback (struct archive *ar, void *data, const void **buf)
{
  struct layer *l = data;
  /* Keep the last 512 bytes before the new chunk. */
  if (l->chunk_len >= sizeof l->tail)
    {
      memcpy (l->tail, l->chunk + l->chunk_len - sizeof l->tail, sizeof l->tail);
      l->tail_len = sizeof l->tail;
    }
  else if (l->chunk_len > 0)
    {
      size_t keep = sizeof l->tail - l->chunk_len;
      if (keep > l->tail_len)
        keep = l->tail_len;
      memmove (l->tail, l->tail + l->tail_len - keep, keep);
      memcpy (l->tail + keep, l->chunk, l->chunk_len);
      l->tail_len = keep + l->chunk_len;
    }
  l->chunk_start += l->chunk_len;
  l->chunk_len = 0;
  ssize_t n = rt_stream_read (l->stream, buf);
  if (n < 0)
    {
      archive_set_error (ar, (int)-n, "%s", rt_stream_error (l->stream));
      return -1;
    }
  l->chunk = *buf;
  l->chunk_len = (size_t)n;
  return n;
}

int
rt_unpack_new (struct nsbox_store *store, int root_fd, struct rt_unpack **out,
               struct nsbox_error **err)
{
  struct rt_unpack *u = calloc (1, sizeof *u);
  if (!u)
    return nsbox_error_set (err, ENOMEM, "out of memory");
  u->store = store;
  u->root_fd = root_fd;
  u->fallback = store->force_resolve_fallback;
  u->copy_buf = malloc (COPY_CHUNK);
  if (!u->copy_buf)
    {
      free (u);
      return nsbox_error_set (err, ENOMEM, "out of memory");
    }
  *out = u;
  return 0;
}

void
rt_unpack_free (struct rt_unpack *u)
{
  if (!u)
    return;
  rt_strmap_clear (&u->meta, free);
  free (u->copy_buf);
  free (u);
}

static bool
byte_at (const struct layer *l, uint64_t offset, unsigned char *out)
{
  if (offset >= l->chunk_start && offset - l->chunk_start < l->chunk_len)
    {
      *out = l->chunk[offset - l->chunk_start];
      return true;
    }
  if (offset < l->chunk_start && l->chunk_start - offset <= l->tail_len)
    {
      *out = l->tail[l->tail_len - (l->chunk_start - offset)];
      return true;
    }
  return false;
}

/* The header block of the entry just read ends where its data starts; its
 * typeflag must be a type we know (sparse 'S', GNU 'D', 'M', 'V' and
 * unknown letters are errors, not regular files). */
static int
check_typeflag (struct layer *l, const char *name, struct nsbox_error **err)
{
  int64_t data_start = archive_filter_bytes (l->ar, 0);
  if (data_start < 512)
    return nsbox_error_set (err, EIO, "layer %u: '%s': tar header not found in the stream",
                            l->index, name);
  uint64_t header = (uint64_t)data_start - 512;
  unsigned char type;
  if (!byte_at (l, header + 156, &type))
    return nsbox_error_set (err, EIO, "layer %u: '%s': tar header not found in the stream",
                            l->index, name);
  if (type == '\0' || (type >= '0' && type <= '7'))
    return 0;
  return nsbox_error_set (err, EBADMSG, "layer %u: '%s': unsupported tar entry type '%c'", l->index,
                          name, type >= 0x20 && type < 0x7f ? type : '?');
}

static int
apply_entries (struct layer *l, struct nsbox_error **err)
{
  struct rt_limits *lim = &l->u->store->limits;
  for (;;)
    {
      struct archive_entry *entry = NULL;
      int r = archive_read_next_header (l->ar, &entry);
      if (r == ARCHIVE_EOF)
        return 0;
      if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
        {
          int code = archive_errno (l->ar);
          if (code != EFBIG && code != EIO && code != ENOMEM)
            code = EBADMSG;
          return nsbox_error_set (err, code, "layer %u: invalid tar stream: %s", l->index,
                                  archive_error_string (l->ar));
        }
      if (++l->entries > lim->layer_entries)
        return nsbox_error_set (err, E2BIG, "layer %u: more than %" PRIu64 " entries", l->index,
                                lim->layer_entries);
      int ret = check_typeflag (l, archive_entry_pathname (entry) ?: "?", err);
      if (ret < 0)
        return ret;
      ret = apply_entry (l, entry, err);
      if (ret < 0)
        return ret;
    }
}

/* Applies every entry and waits for the queued files. A queued file that
 * failed came before whatever failed here since: its error is the one. */
static int
read_entries (struct layer *l, struct nsbox_error **err)
{
  struct nsbox_error *entry_err = NULL;
  int ret = apply_entries (l, &entry_err);
  int drained = queue_drain (l, err);
  if (drained < 0)
    {
      nsbox_error_free (entry_err);
      return drained;
    }
  if (err && !*err)
    *err = entry_err;
  else
    nsbox_error_free (entry_err);
  return ret;
}

int
rt_unpack_layer (struct rt_unpack *u, int blob_fd, const char *diff_id, unsigned index,
                 struct nsbox_error **err)
{
  struct layer l = { .u = u, .index = index, .parent_fd = -1 };
  struct rt_limits *lim = &u->store->limits;
  /* The compressed size is a floor for what the layer will take. */
  struct stat blob;
  struct statvfs fs;
  if (fstat (blob_fd, &blob) == 0 && fstatvfs (u->root_fd, &fs) == 0
      && (uint64_t)fs.f_bavail * fs.f_frsize < (uint64_t)blob.st_size)
    return nsbox_error_set (err, ENOSPC, "layer %u: %llu bytes free, the layer alone is %lld",
                            index, (unsigned long long)fs.f_bavail * fs.f_frsize,
                            (long long)blob.st_size);
  /* Tar headers and padding on top of the file data. */
  uint64_t stream_limit = lim->layer_bytes + lim->layer_bytes / 4 + (64u << 20);
  int ret = rt_stream_new (blob_fd, stream_limit, &l.stream, err);
  if (ret < 0)
    return nsbox_error_prefix (err, "layer %u", index);
  l.ar = archive_read_new ();
  if (!l.ar)
    {
      rt_stream_free (l.stream);
      return nsbox_error_set (err, ENOMEM, "out of memory");
    }
  archive_read_support_format_tar (l.ar);
  if (archive_read_open (l.ar, &l, NULL, read_callback, NULL) != ARCHIVE_OK)
    {
      ret = nsbox_error_set (err, EBADMSG, "layer %u: %s", index, archive_error_string (l.ar));
      goto out;
    }
  ret = read_entries (&l, err);
  if (ret < 0)
    goto out;
  char computed[RT_DIGEST_LEN + 1];
  ret = rt_stream_finish (l.stream, computed);
  if (ret < 0)
    {
      ret = nsbox_error_set (err, -ret, "layer %u: %s", index, rt_stream_error (l.stream));
      goto out;
    }
  if (strcmp (computed, diff_id) != 0)
    ret = nsbox_error_set (err, EBADMSG,
                           "layer %u: DiffID mismatch: the config says '%s', the content is '%s'",
                           index, diff_id, computed);
out:
  rt_file_queue_stop (&l.files);
  rt_strmap_clear (&l.queued_names, NULL);
  forget_parent (&l);
  archive_read_free (l.ar);
  rt_stream_free (l.stream);
  rt_strmap_clear (&l.written, NULL);
  return ret;
}

/* Finishing -------------------------------------------------------------- */

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
      int ret = rt_remove_at (u->root_fd, name);
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

struct dir_item
{
  const char *path;
  size_t depth;
  const struct path_meta *meta;
};

static int
deeper_first (const void *a, const void *b)
{
  const struct dir_item *x = a, *y = b;
  if (x->depth != y->depth)
    return x->depth < y->depth ? 1 : -1;
  return strcmp (x->path, y->path);
}

static int
by_path (const void *a, const void *b)
{
  return strcmp (((const struct dir_item *)a)->path, ((const struct dir_item *)b)->path);
}

/* The directory resolved last, for the walks over sorted paths below
 * (nothing is removed meanwhile). */
struct dir_cache
{
  char *path;
  int fd;
};

static void
dir_cache_clear (struct dir_cache *c)
{
  if (c->fd >= 0)
    close (c->fd);
  c->fd = -1;
  free (c->path);
  c->path = NULL;
}

/* The parent of path (lexical, below the root) and, in *base, its last
 * component; -errno when it is gone. The fd stays the cache's. */
static int
entry_parent (struct rt_unpack *u, struct dir_cache *c, const char *path, const char **base)
{
  const char *slash = strrchr (path, '/');
  size_t len = slash ? (size_t)(slash - path) : 0;
  *base = slash ? slash + 1 : path;
  if (c->fd >= 0 && strlen (c->path) == len && memcmp (c->path, path, len) == 0)
    return c->fd;
  dir_cache_clear (c);
  char *parent = strndup (path, len);
  if (!parent)
    return -ENOMEM;
  int fd = open_dir (u, parent);
  if (fd < 0)
    {
      free (parent);
      return fd;
    }
  c->path = parent;
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
  cleanup_free struct dir_item *items = calloc (u->meta.count + 1, sizeof *items);
  if (!items)
    return nsbox_error_set (err, ENOMEM, "out of memory");
  size_t n = 0;
  for (size_t i = 0; i < u->meta.cap; i++)
    {
      struct rt_strmap_slot *slot = &u->meta.slots[i];
      if (!slot->key)
        continue;
      size_t depth = 0;
      for (const char *p = slot->key; *p; p++)
        depth += *p == '/';
      items[n++] = (struct dir_item){ slot->key, depth, slot->value };
    }
  qsort (items, n, sizeof *items, deeper_first);
  struct dir_cache cache = { NULL, -1 };
  for (size_t i = 0; i < n; i++)
    {
      if (!S_ISDIR (items[i].meta->mode))
        continue;
      const char *base;
      int pfd = entry_parent (u, &cache, items[i].path, &base);
      cleanup_close int fd
          = pfd < 0 ? -1 : openat (pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0)
        continue; /* removed or replaced by a later layer */
      struct timespec ts[2] = { items[i].meta->mtime, items[i].meta->mtime };
      if (fchmod (fd, items[i].meta->mode & 07777) < 0 || futimens (fd, ts) < 0)
        {
          ret = nsbox_error_sys (err, errno, "set mode and times of '/%s'", items[i].path);
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

  qsort (items, n, sizeof *items, by_path);
  fputs ("# path\tuid\tgid\tmode (as in the image; the files belong to the unpacking user)\n",
         ownership);
  for (size_t i = 0; i < n; i++)
    {
      const char *base;
      int pfd = entry_parent (u, &cache, items[i].path, &base);
      struct stat st;
      if (pfd < 0 || fstatat (pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0
          || (st.st_mode & S_IFMT) != (items[i].meta->mode & S_IFMT))
        continue;
      write_tsv_path (ownership, items[i].path);
      fprintf (ownership, "\t%" PRId64 "\t%" PRId64 "\t%04o\n", items[i].meta->uid,
               items[i].meta->gid, (unsigned)(items[i].meta->mode & 07777));
    }
  dir_cache_clear (&cache);
  if (ferror (ownership) || ferror (added))
    return nsbox_error_set (err, EIO, "write ownership.tsv");
  return 0;
}
