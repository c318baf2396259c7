/* The layer applier's paths: tar names cleaned and remembered, what each
 * entry creates counted against the limits, the file thread drained, and
 * parents resolved (and made) inside the tree. See layer-apply-private.h. */
#include "layer-apply-private.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "inroot.h"
#include "remove.h"
#include "pathtab.h"
#include "space.h"

#define MAX_COMPONENT_BYTES 255
/* Paths longer than this are cut in messages. */
#define MESSAGE_PATH_BYTES 160

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

int
nsbox_layer_error (struct layer *l, struct nsbox_error **err, int code, const char *path,
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
  return nsbox_layer_error (l, err, code, path, what);
}

/* Names ------------------------------------------------------------------ */

/* Lexically cleans a tar name into a relative path ("" is the root).
 * Anything climbing above the root is a breakout. */
int
nsbox_layer_clean_path (struct layer *l, const char *raw, char **out, struct nsbox_error **err)
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
            return nsbox_layer_error (l, err, EBADMSG, raw, "path escapes the root (breakout)");
          char *slash = memrchr (buf, '/', len);
          len = slash ? (size_t)(slash - buf) : 0;
          continue;
        }
      size_t clen = strlen (comp);
      if (clen > MAX_COMPONENT_BYTES)
        return nsbox_layer_error (l, err, ENAMETOOLONG, raw,
                                  "path component longer than 255 bytes");
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

void
nsbox_layer_split_path (char *path, const char **parent, const char **base)
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
int
nsbox_layer_mark_written (struct layer *l, const char *path, uint32_t *out,
                          struct nsbox_error **err)
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
          return nsbox_layer_error (l, err, -ret, path, strerror (-ret));
        }
      l->mark_parent_node = parent;
    }
  uint32_t node;
  int ret = rt_pathtab_add (t, parent, base, strlen (base), &node);
  if (ret < 0)
    return nsbox_layer_error (l, err, -ret, path, strerror (-ret));
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
bool
nsbox_layer_written_here (struct layer *l, uint32_t parent_node, const char *name)
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
int
nsbox_layer_charge (struct layer *l, const char *path, uint64_t inodes, uint64_t bytes,
                    uint64_t disk_bytes, uint64_t disk_inodes, struct nsbox_error **err)
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
      nsbox_layer_error (l, err, -ret, path, nsbox_error_message (space_err));
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
int
nsbox_layer_charge_other (struct layer *l, const char *path, struct nsbox_error **err)
{
  return nsbox_layer_charge (l, path, 1, RT_INODE_CHARGE, RT_INODE_CHARGE, 1, err);
}

/* The file thread ------------------------------------------------------- */

/* Waits until every queued file is written. Returns 0, or the first
 * failure of a queued file (which came before anything met here since). */
int
nsbox_layer_queue_drain (struct layer *l, struct nsbox_error **err)
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
int
nsbox_layer_queue_wait_for_name (struct layer *l, const char *base, struct nsbox_error **err)
{
  if (!l->queued_names.count)
    return 0;
  cleanup_free char *key = NULL;
  if (!(key = xasprintf ("%ju/%s", (uintmax_t)l->parent_ino, base)))
    return nsbox_error_oom (err);
  if (!rt_strmap_has (&l->queued_names, key))
    return 0;
  return nsbox_layer_queue_drain (l, err);
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
    return nsbox_layer_error (l, err, ENOTDIR, entry, "a parent is not a directory");
  char what[128];
  snprintf (what, sizeof what, "resolve parent: %s", strerror (code));
  return nsbox_layer_error (l, err, code, entry, what);
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
  int ret = nsbox_layer_charge_other (l, entry, err);
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

void
nsbox_layer_forget_parent (struct layer *l)
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
int
nsbox_layer_open_parent (struct layer *l, const char *parent, const char *path,
                         struct nsbox_error **err)
{
  if (l->parent_fd >= 0 && !l->parent_stale && strcmp (l->parent_path, parent) == 0)
    return l->parent_fd;
  nsbox_layer_forget_parent (l);
  int fd = rt_unpack_open_dir (l->u, parent);
  if (fd < 0)
    {
      /* A queued file may be in the way of what is missing. */
      int ret = nsbox_layer_queue_drain (l, err);
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
int
nsbox_layer_before_removal (struct layer *l, struct nsbox_error **err)
{
  l->parent_stale = true;
  return nsbox_layer_queue_drain (l, err);
}

/* Makes room for a new entry: a directory over a directory merges (returns
 * 1); anything else in the way is removed (returns 0). */
int
nsbox_layer_clear_target (struct layer *l, int pfd, const char *base, bool new_is_dir,
                          const char *path, struct nsbox_error **err)
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
  int ret = nsbox_layer_before_removal (l, err);
  if (ret < 0)
    return ret;
  ret = nsbox_remove_at (pfd, base);
  if (ret < 0)
    return nsbox_error_sys (err, -ret, "%s: '%s': remove the existing entry", l->label, path);
  return 0;
}
