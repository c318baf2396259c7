/* The layer applier: tar entries from libarchive (reader only) applied by
 * our own code to a private tree, every path resolved inside it. See
 * layer.h; the finishing step (ownership.tsv, added-dirs) is finish.c. */
#include "layer-private.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "decompress.h"
#include "filequeue.h"
#include "inroot.h"
#include "remove.h"
#include "pathtab.h"
#include "space.h"
#include "strmap.h"

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
/* Names of queued files remembered (queued_names) before a drain forgets
 * them all: the queue holds far fewer, and a layer of a million small
 * files must not keep a million names. */
#define QUEUE_MAX_NAMES 8192
/* Paths longer than this are cut in messages. */
#define MESSAGE_PATH_BYTES 160

/* One layer in progress. */
struct layer
{
  struct rt_unpack *u;
  unsigned index;
  char *label;   /* "layer 2 (sha256:...)", for messages */
  uint32_t mark; /* index + 1: marks the paths of rt_unpack.paths this layer wrote */
  /* The lexical parent marked last, and its node. */
  char *mark_parent;
  uint32_t mark_parent_node;
  struct archive *ar;
  struct rt_stream *stream;
  uint64_t bytes, entries; /* bytes: as counted against layer_bytes */
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

/* The path as messages show it: cut after MESSAGE_PATH_BYTES bytes. */
static int
shown_len (const char *path)
{
  size_t len = strlen (path);
  return (int)(len > MESSAGE_PATH_BYTES ? MESSAGE_PATH_BYTES : len);
}

static const char *
shown_tail (const char *path)
{
  return strlen (path) > MESSAGE_PATH_BYTES ? "..." : "";
}

static int
layer_error (struct layer *l, struct nsbox_error **err, int code, const char *path,
             const char *what)
{
  return nsbox_error_set (err, code, "%s: '%.*s%s': %s", l->label, shown_len (path), path,
                          shown_tail (path), what);
}

/* A limit reached: the message says what, the limit and the variable
 * that sets it. */
static int __attribute__ ((format (printf, 5, 6)))
limit_error (struct layer *l, struct nsbox_error **err, int code, const char *path, const char *fmt,
             ...)
{
  va_list ap;
  va_start (ap, fmt);
  cleanup_free char *what = vxasprintf (fmt, ap);
  va_end (ap);
  if (!what)
    return nsbox_error_oom (err);
  return layer_error (l, err, code, path, what);
}

/* Names ------------------------------------------------------------------ */

/* Lexically cleans a tar name into a relative path ("" is the root).
 * Anything climbing above the root is a breakout. */
static int
clean_path (struct layer *l, const char *raw, char **out, struct nsbox_error **err)
{
  size_t raw_len = strlen (raw);
  if (raw_len > MAX_PATH_BYTES)
    return nsbox_error_set (err, ENAMETOOLONG, "%s: path of %zu bytes exceeds %d", l->label,
                            raw_len, MAX_PATH_BYTES);
  cleanup_free char *buf = malloc (raw_len + 1);
  cleanup_free char *copy = strdup (raw);
  if (!buf || !copy)
    return nsbox_error_oom (err);
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
  /* A bound on the directories one entry creates, and on what each entry
   * costs to resolve and remember. */
  size_t depth = len ? 1 : 0;
  for (size_t i = 0; i < len; i++)
    depth += buf[i] == '/';
  uint64_t max_depth = l->u->store->limits.path_depth;
  if (depth > max_depth)
    return limit_error (l, err, ENAMETOOLONG, raw,
                        "path of %zu components exceeds the limit of %" PRIu64
                        " (set NSBOX_MAX_PATH_DEPTH to raise it)",
                        depth, max_depth);
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

/* Remembers path and marks it and its parents as written by this layer;
 * *out gets its node. Entries of a directory come together: the parent
 * marked last is looked up once. */
static int
mark_written (struct layer *l, const char *path, uint32_t *out, struct nsbox_error **err)
{
  struct rt_pathtab *t = &l->u->paths;
  const char *slash = strrchr (path, '/');
  size_t parent_len = slash ? (size_t)(slash - path) : 0;
  const char *base = slash ? slash + 1 : path;
  uint32_t parent = l->mark_parent_node;
  if (!l->mark_parent || strlen (l->mark_parent) != parent_len
      || memcmp (l->mark_parent, path, parent_len) != 0)
    {
      free (l->mark_parent);
      l->mark_parent = strndup (path, parent_len);
      if (!l->mark_parent)
        return nsbox_error_oom (err);
      int ret = rt_pathtab_walk (t, RT_PATH_ROOT, l->mark_parent, true, &parent, NULL);
      if (ret < 0)
        {
          free (TAKE_PTR (l->mark_parent));
          return layer_error (l, err, -ret, path, strerror (-ret));
        }
      l->mark_parent_node = parent;
    }
  uint32_t node;
  int ret = rt_pathtab_add (t, parent, base, strlen (base), &node);
  if (ret < 0)
    return layer_error (l, err, -ret, path, strerror (-ret));
  /* Paths through symlinks (s/s/s/x, s -> .) name nothing new on disk but
   * cost memory here: bounded like the inodes. */
  uint64_t max = l->u->store->limits.image_inodes;
  if (t->count - 1 > max)
    return limit_error (l, err, E2BIG, path,
                        "the image names more than %" PRIu64
                        " distinct paths, the limit of inodes per image (set "
                        "NSBOX_MAX_IMAGE_INODES to raise it)",
                        max);
  for (uint32_t n = node; n != RT_PATH_NONE && rt_pathtab_node (t, n)->mark != l->mark;
       n = rt_pathtab_node (t, n)->parent)
    rt_pathtab_node (t, n)->mark = l->mark;
  *out = node;
  return 0;
}

/* Whether this layer wrote `name` in the lexical directory `parent_node`
 * (RT_PATH_NONE: one nothing was written in), or something below it. */
static bool
written_here (struct layer *l, uint32_t parent_node, const char *name)
{
  if (parent_node == RT_PATH_NONE)
    return false;
  uint32_t node = rt_pathtab_child (&l->u->paths, parent_node, name, strlen (name));
  return node != RT_PATH_NONE && rt_pathtab_node (&l->u->paths, node)->mark == l->mark;
}

/* Budget ----------------------------------------------------------------- */

/* Counts what an entry is about to create against the limits and the free
 * space, before it is created: `inodes` inodes or links and `bytes` bytes
 * as the limits count them, `disk_bytes` and `disk_inodes` as the
 * filesystem will. Nothing beyond a limit is ever created. */
static int
charge (struct layer *l, const char *path, uint64_t inodes, uint64_t bytes, uint64_t disk_bytes,
        uint64_t disk_inodes, struct nsbox_error **err)
{
  struct rt_unpack *u = l->u;
  const struct rt_limits *lim = &u->store->limits;
  if (inodes > lim->image_inodes - u->image_inodes)
    return limit_error (l, err, E2BIG, path,
                        "the image would create %" PRIu64
                        " inodes and links, more than the limit of %" PRIu64
                        " per image (set NSBOX_MAX_IMAGE_INODES to raise it)",
                        u->image_inodes + inodes, lim->image_inodes);
  if (bytes > lim->layer_bytes - l->bytes)
    return limit_error (l, err, EFBIG, path,
                        "this entry brings the layer to %" PRIu64
                        " bytes, which exceeds the limit of %" PRIu64
                        " bytes per layer (set NSBOX_MAX_LAYER_BYTES to raise it)",
                        l->bytes + bytes, lim->layer_bytes);
  if (bytes > lim->image_bytes - u->image_bytes)
    return limit_error (l, err, EFBIG, path,
                        "this entry brings the image to %" PRIu64
                        " bytes, which exceeds the limit of %" PRIu64
                        " bytes per image (set NSBOX_MAX_IMAGE_BYTES to raise it)",
                        u->image_bytes + bytes, lim->image_bytes);
  size_t pending_jobs = 0, pending_bytes = 0;
  rt_file_queue_pending (&l->files, &pending_jobs, &pending_bytes);
  struct nsbox_error *space_err = NULL;
  int ret = rt_space_take (&u->space, disk_bytes, disk_inodes,
                           rt_space_blocks (&u->space, pending_bytes), pending_jobs, &space_err);
  if (ret < 0)
    {
      layer_error (l, err, -ret, path, nsbox_error_message (space_err));
      nsbox_error_free (space_err);
      return ret;
    }
  u->image_inodes += inodes;
  l->bytes += bytes;
  u->image_bytes += bytes;
  return 0;
}

/* A directory, symlink or FIFO: an inode and (for the first two) up to a
 * block on disk. */
static int
charge_other (struct layer *l, const char *path, struct nsbox_error **err)
{
  return charge (l, path, 1, RT_INODE_CHARGE, RT_INODE_CHARGE, 1, err);
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
  return nsbox_error_sys (err, failure, "%s: '%s': %s", l->label, path, step);
}

/* Drains the queue when `base` in the last resolved parent is queued. */
static int
queue_wait_for_name (struct layer *l, const char *base, struct nsbox_error **err)
{
  if (!l->queued_names.count)
    return 0;
  cleanup_free char *key = NULL;
  if (!(key = xasprintf ("%ju/%s", (uintmax_t)l->parent_ino, base)))
    return nsbox_error_oom (err);
  if (!rt_strmap_has (&l->queued_names, key))
    return 0;
  return queue_drain (l, err);
}

/* Resolution ------------------------------------------------------------- */

int
rt_unpack_open_dir (struct rt_unpack *u, const char *path)
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
  if (!(joined = xasprintf ("%s/%s", target[0] == '/' ? "" : dir, target)))
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

static size_t
count_components (const char *path)
{
  size_t n = *path ? 1 : 0;
  for (const char *p = path; *p; p++)
    n += *p == '/';
  return n;
}

/* Why the parent of `entry` cannot be had. */
static int
parent_error (struct layer *l, int code, const char *entry, struct nsbox_error **err)
{
  if (code == ENOTDIR)
    return layer_error (l, err, ENOTDIR, entry, "a parent is not a directory");
  char what[128];
  snprintf (what, sizeof what, "resolve parent: %s", strerror (code));
  return layer_error (l, err, code, entry, what);
}

/* Appends "/name" (or "name" to "") to the growing path *buf. */
static int
append_component (char **buf, size_t *len, size_t *cap, const char *name)
{
  size_t need = *len + 1 + strlen (name) + 1;
  if (need > *cap)
    {
      size_t bigger = *cap ? *cap * 2 : 256;
      while (bigger < need)
        bigger *= 2;
      char *p = realloc (*buf, bigger);
      if (!p)
        return -ENOMEM;
      *buf = p;
      *cap = bigger;
    }
  if (*len)
    (*buf)[(*len)++] = '/';
  strcpy (*buf + *len, name);
  *len += strlen (name);
  return 0;
}

/* Creates the missing directory `name` in dir_fd (0755, counted first) and
 * opens it. */
static int
make_missing_dir (struct layer *l, int dir_fd, const char *name, size_t depth, const char *entry,
                  struct nsbox_error **err)
{
  uint64_t max_depth = l->u->store->limits.path_depth;
  if (depth > max_depth)
    return limit_error (l, err, ENAMETOOLONG, entry,
                        "a parent directory (through a symlink) would be %zu components deep, "
                        "beyond the limit of %" PRIu64 " (set NSBOX_MAX_PATH_DEPTH to raise it)",
                        depth, max_depth);
  int ret = charge_other (l, entry, err);
  if (ret < 0)
    return ret;
  if (mkdirat (dir_fd, name, 0755) < 0)
    return parent_error (l, errno, entry, err);
  int fd = openat (dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return parent_error (l, errno, entry, err);
  fchmod (fd, 0755);
  return fd;
}

/* Opens the directory `path` inside the root, creating what is missing
 * (0755) like mkdir -p, each directory counted against the limits before
 * it is made (entry: the entry's path, for messages). A symlink met on the
 * way whose target cannot be opened (dangling, or through a missing
 * directory) is followed lexically, clamped at the root, and its target
 * created. One step per component, from a descriptor of the last: linear
 * in the path. Returns a directory fd, or -errno with *err filled. */
static int
ensure_dir (struct layer *l, const char *path, const char *entry, unsigned nest,
            struct nsbox_error **err)
{
  int fd = rt_unpack_open_dir (l->u, path);
  if (fd >= 0)
    return fd;
  if (fd != -ENOENT)
    return parent_error (l, -fd, entry, err);
  if (nest > 40)
    return parent_error (l, ELOOP, entry, err);
  cleanup_free char *copy = strdup (path);
  cleanup_free char *resolved = NULL;
  size_t resolved_len = 0, resolved_cap = 0, depth = 0;
  cleanup_close int cur = rt_unpack_open_dir (l->u, "");
  if (!copy || append_component (&resolved, &resolved_len, &resolved_cap, "") < 0)
    return nsbox_error_oom (err);
  if (cur < 0)
    return parent_error (l, -cur, entry, err);
  char *save = NULL;
  for (char *comp = strtok_r (copy, "/", &save); comp; comp = strtok_r (NULL, "/", &save))
    {
      int next = openat (cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (next < 0 && errno == ENOENT)
        {
          next = make_missing_dir (l, cur, comp, depth + 1, entry, err);
          if (next < 0)
            return next;
        }
      else if (next < 0 && errno != ENOTDIR && errno != ELOOP)
        return parent_error (l, errno, entry, err);
      else if (next < 0)
        {
          /* Not a directory: a symlink (else a file in the way). */
          char target[MAX_LINK_BYTES + 1];
          ssize_t n = readlinkat (cur, comp, target, sizeof target - 1);
          if (n <= 0)
            return parent_error (l, ENOTDIR, entry, err);
          target[n] = '\0';
          size_t before = resolved_len;
          if (append_component (&resolved, &resolved_len, &resolved_cap, comp) < 0)
            return nsbox_error_oom (err);
          next = rt_unpack_open_dir (l->u, resolved);
          if (next >= 0)
            {
              close (cur);
              cur = next;
              depth++;
              continue;
            }
          if (next != -ENOENT)
            return parent_error (l, -next, entry, err);
          resolved[resolved_len = before] = '\0';
          char *joined = join_clamped (resolved, target);
          if (!joined)
            return nsbox_error_oom (err);
          next = ensure_dir (l, joined, entry, nest + 1, err);
          if (next < 0)
            {
              free (joined);
              return next;
            }
          free (resolved);
          resolved = joined;
          resolved_len = strlen (joined);
          resolved_cap = resolved_len + 1;
          depth = count_components (joined);
          close (cur);
          cur = next;
          continue;
        }
      if (append_component (&resolved, &resolved_len, &resolved_cap, comp) < 0)
        {
          close (next);
          return nsbox_error_oom (err);
        }
      close (cur);
      cur = next;
      depth++;
    }
  return TAKE_FD (cur);
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
  int fd = rt_unpack_open_dir (l->u, parent);
  if (fd < 0)
    {
      /* A queued file may be in the way of what is missing. */
      int ret = queue_drain (l, err);
      if (ret < 0)
        return ret;
      fd = ensure_dir (l, parent, path, 0, err);
      if (fd < 0)
        return fd;
    }
  struct stat st;
  if (fstat (fd, &st) < 0)
    {
      int saved = errno;
      close (fd);
      return nsbox_error_sys (err, saved, "%s: '%s': resolve parent", l->label, path);
    }
  l->parent_path = strdup (parent);
  if (!l->parent_path)
    {
      close (fd);
      return nsbox_error_oom (err);
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
      return nsbox_error_sys (err, errno, "%s: '%s': stat", l->label, path);
    }
  if (S_ISDIR (st.st_mode) && new_is_dir)
    return 1;
  int ret = before_removal (l, err);
  if (ret < 0)
    return ret;
  ret = nsbox_remove_at (pfd, base);
  if (ret < 0)
    return nsbox_error_sys (err, -ret, "%s: '%s': remove the existing entry", l->label, path);
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
                           "warning: %s: dropping privileged extended attribute '%s' "
                           "of '%s' (and any others like it)",
                           l->label, name, path);
          l->u->warned_xattr = true;
          continue;
        }
      if (fd < 0)
        continue;
      int ret = charge (l, path, 0, size, size, 0, err);
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
      if (l->queue_dirs >= QUEUE_MAX_DIRS && (ret = queue_drain (l, err)) < 0)
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
  if (l->queued_names.count >= QUEUE_MAX_NAMES && (ret = queue_drain (l, err)) < 0)
    return ret;
  if (!rt_file_queue_push (&l->files, TAKE_PTR (job), QUEUE_MAX_JOBS, QUEUE_MAX_BYTES))
    return queue_drain (l, err);
  return 0;
}

static int
write_regular (struct layer *l, struct archive_entry *entry, int pfd, const char *base,
               const char *path, struct nsbox_error **err)
{
  int64_t size = archive_entry_size (entry);
  if (size < 0)
    return layer_error (l, err, EBADMSG, path, "negative file size");
  int ret
      = charge (l, path, 1, (uint64_t)size, rt_space_blocks (&l->u->space, (uint64_t)size), 1, err);
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
      int ret = charge_other (l, path, err);
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
    return layer_error (l, err, EBADMSG, path, "symlink without a target");
  if (strlen (target) > MAX_LINK_BYTES)
    return layer_error (l, err, ENAMETOOLONG, path, "symlink target longer than 4095 bytes");
  int ret = charge_other (l, path, err);
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
  ret = clear_target (l, pfd, base, false, path, err);
  if (ret < 0)
    return ret;
  /* A name, no new inode, on most filesystems; tmpfs counts it against
   * nr_inodes. An entry like any other for the limits. */
  ret = charge (l, path, 1, RT_INODE_CHARGE, 0, 1, err);
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
  int ret = charge_other (l, path, err);
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
      bool keep = written_here (l, node, de->d_name);
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
      int ret = before_removal (l, err);
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
    return layer_error (l, err, EBADMSG, raw, "invalid whiteout");
  if (strncmp (base, ".wh..wh.", 8) == 0)
    return 0; /* other AUFS metadata */
  if (written_here (l, lexical_node (l, parent), name))
    return 0; /* whiteouts hide lower layers only */
  int ret = before_removal (l, err);
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

/* Makes the entry `base` in pfd (its parent) for apply_entry. */
static int
write_entry (struct layer *l, struct archive_entry *entry, const char *hardlink, mode_t type,
             int pfd, const char *base, const char *path, struct nsbox_error **err)
{
  if (hardlink)
    return write_hardlink (l, hardlink, pfd, base, path, err);
  int ret = queue_wait_for_name (l, base, err);
  if (ret < 0)
    return ret;
  ret = clear_target (l, pfd, base, type == AE_IFDIR, path, err);
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

static int
apply_entry (struct layer *l, struct archive_entry *entry, struct nsbox_error **err)
{
  const char *raw = archive_entry_pathname_utf8 (entry);
  if (!raw)
    raw = archive_entry_pathname (entry);
  if (!raw || !*raw)
    return nsbox_error_set (err, EBADMSG, "%s: entry without a name", l->label);
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
    return nsbox_error_oom (err);
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
                     "warning: %s: skipping device node '%s' (not created "
                     "without privileges; the sandbox has its own /dev)",
                     l->label, lexical);
      return 0;
    }
  if (!hardlink && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK && type != AE_IFIFO)
    return layer_error (l, err, EBADMSG, raw, "unsupported entry type");

  int pfd = open_parent (l, parent, raw, err);
  if (pfd < 0)
    return pfd;
  ret = write_entry (l, entry, hardlink, type, pfd, base, lexical, err);
  if (ret < 0)
    return ret;
  /* Remembered once made: what it created was counted first, so a bomb
   * of new paths meets the inode limit, a bomb of aliases (paths through
   * symlinks to what exists) the limit on paths. */
  uint32_t node = RT_PATH_ROOT;
  ret = mark_written (l, lexical, &node, err);
  if (ret < 0)
    return ret;
  if (!hardlink && record_meta (l, node, entry) < 0)
    return nsbox_error_oom (err);
  return 0;
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
    return nsbox_error_oom (err);
  u->store = store;
  u->root_fd = root_fd;
  u->fallback = store->force_resolve_fallback;
  u->copy_buf = malloc (COPY_CHUNK);
  if (!u->copy_buf || rt_pathtab_init (&u->paths) < 0)
    {
      free (u->copy_buf);
      free (u);
      return nsbox_error_oom (err);
    }
  rt_space_init (&u->space, root_fd, (unsigned)store->limits.min_free_percent);
  *out = u;
  return 0;
}

void
rt_unpack_free (struct rt_unpack *u)
{
  if (!u)
    return;
  rt_pathtab_free (&u->paths);
  free (u->metas);
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
    return nsbox_error_set (err, EIO, "%s: '%s': tar header not found in the stream", l->label,
                            name);
  uint64_t header = (uint64_t)data_start - 512;
  unsigned char type;
  if (!byte_at (l, header + 156, &type))
    return nsbox_error_set (err, EIO, "%s: '%s': tar header not found in the stream", l->label,
                            name);
  if (type == '\0' || (type >= '0' && type <= '7'))
    return 0;
  return nsbox_error_set (err, EBADMSG, "%s: '%s': unsupported tar entry type '%c'", l->label, name,
                          type >= 0x20 && type < 0x7f ? type : '?');
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
          return nsbox_error_set (err, code, "%s: invalid tar stream: %s", l->label,
                                  archive_error_string (l->ar));
        }
      if (++l->entries > lim->layer_entries)
        return nsbox_error_set (err, E2BIG,
                                "%s: more than %" PRIu64
                                " entries, the limit per layer (set NSBOX_MAX_LAYER_ENTRIES to "
                                "raise it)",
                                l->label, lim->layer_entries);
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
rt_unpack_layer (struct rt_unpack *u, int blob_fd, const char *digest, const char *diff_id,
                 unsigned index, struct nsbox_error **err)
{
  struct layer l = { .u = u, .index = index, .mark = index + 1, .parent_fd = -1 };
  if (!(l.label = xasprintf ("layer %u (%s)", index, digest)))
    return nsbox_error_oom (err);
  struct rt_limits *lim = &u->store->limits;
  /* Tar headers and padding on top of the file data. */
  uint64_t stream_limit = lim->layer_bytes + lim->layer_bytes / 4 + (64u << 20);
  int ret = rt_stream_new (blob_fd, stream_limit, &l.stream, err);
  if (ret < 0)
    {
      nsbox_error_prefix (err, "%s", l.label);
      goto out;
    }
  l.ar = archive_read_new ();
  if (!l.ar)
    {
      ret = nsbox_error_oom (err);
      goto out;
    }
  archive_read_support_format_tar (l.ar);
  if (archive_read_open (l.ar, &l, NULL, read_callback, NULL) != ARCHIVE_OK)
    {
      ret = nsbox_error_set (err, EBADMSG, "%s: %s", l.label, archive_error_string (l.ar));
      goto out;
    }
  ret = read_entries (&l, err);
  if (ret < 0)
    goto out;
  char computed[RT_DIGEST_LEN + 1];
  ret = rt_stream_finish (l.stream, computed);
  if (ret < 0)
    {
      ret = nsbox_error_set (err, -ret, "%s: %s", l.label, rt_stream_error (l.stream));
      goto out;
    }
  if (strcmp (computed, diff_id) != 0)
    ret = nsbox_error_set (err, EBADMSG,
                           "%s: DiffID mismatch: the config says '%s', the content is '%s'",
                           l.label, diff_id, computed);
out:
  rt_file_queue_stop (&l.files);
  rt_strmap_clear (&l.queued_names, NULL);
  forget_parent (&l);
  if (l.ar)
    archive_read_free (l.ar);
  rt_stream_free (l.stream);
  free (l.mark_parent);
  free (l.label);
  return ret;
}
