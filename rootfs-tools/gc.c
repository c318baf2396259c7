/* nsbox_store_gc: mark from index.json, sweep blobs, trees, stale ingest
 * files and unlocked work directories. See store.h. */
#include "store-private.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "remove.h"
#include "strmap.h"

#define STALE_INGEST_SECONDS (24 * 60 * 60)
#define MAX_INDEX_DEPTH 4

struct marks
{
  struct rt_strmap blobs; /* digest hex */
  struct rt_strmap trees; /* "<chainhex>.<ver>" */
};

static void
mark_blob (struct marks *m, const char *digest)
{
  if (nsbox_digest_valid (digest))
    rt_strmap_put (&m->blobs, digest + 7, NULL, NULL);
}

static void
mark_manifest (struct nsbox_store *store, struct marks *m, const char *digest, unsigned depth)
{
  if (!nsbox_digest_valid (digest) || depth > MAX_INDEX_DEPTH)
    return;
  mark_blob (m, digest);
  cleanup_json json_t *doc = NULL;
  if (rt_store_read_json (store, digest, &doc, NULL) < 0)
    return;
  size_t i;
  json_t *d;
  json_array_foreach (json_object_get (doc, "manifests"), i, d)
      mark_manifest (store, m, json_string_value (json_object_get (d, "digest")), depth + 1);
  const char *config
      = json_string_value (json_object_get (json_object_get (doc, "config"), "digest"));
  mark_blob (m, config);
  json_array_foreach (json_object_get (doc, "layers"), i, d)
      mark_blob (m, json_string_value (json_object_get (d, "digest")));
  cleanup_json json_t *cfg = NULL;
  if (!nsbox_digest_valid (config) || rt_store_read_json (store, config, &cfg, NULL) < 0)
    return;
  char chain[RT_DIGEST_LEN + 1];
  if (rt_chain_id (json_object_get (json_object_get (cfg, "rootfs"), "diff_ids"), chain, NULL) < 0)
    return;
  char name[128];
  snprintf (name, sizeof name, "%s.%s", chain + 7, RT_UNPACK_VERSION);
  rt_strmap_put (&m->trees, name, NULL, NULL);
}

static uint64_t
entry_bytes (int dir_fd, const char *name)
{
  struct stat st;
  return fstatat (dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? (uint64_t)st.st_size : 0;
}

typedef bool (*keep_fn) (struct nsbox_store *store, struct marks *m, int dir_fd, const char *name);

/* Removes the entries of `dir` that keep() rejects; returns how many. */
static int
sweep (struct nsbox_store *store, struct marks *m, const char *dir, keep_fn keep, size_t *removed,
       uint64_t *bytes, struct nsbox_error **err)
{
  int fd = openat (store->root_fd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return nsbox_error_sys (err, errno, "open '%s/%s'", store->root, dir);
  DIR *d = fdopendir (fd);
  if (!d)
    {
      close (fd);
      return nsbox_error_oom (err);
    }
  int ret = 0;
  struct dirent *de;
  while ((de = readdir (d)))
    {
      if (de->d_name[0] == '.' && (!de->d_name[1] || strcmp (de->d_name, "..") == 0))
        continue;
      if (keep (store, m, fd, de->d_name))
        continue;
      uint64_t size = entry_bytes (fd, de->d_name);
      int r = nsbox_remove_at (fd, de->d_name);
      if (r < 0)
        {
          ret = nsbox_error_sys (err, -r, "remove '%s/%s/%s'", store->root, dir, de->d_name);
          break;
        }
      (*removed)++;
      *bytes += size;
    }
  closedir (d);
  return ret;
}

static bool
keep_blob (struct nsbox_store *store, struct marks *m, int dir_fd, const char *name)
{
  (void)store;
  (void)dir_fd;
  return rt_strmap_has (&m->blobs, name);
}

static bool
keep_tree (struct nsbox_store *store, struct marks *m, int dir_fd, const char *name)
{
  (void)store;
  (void)dir_fd;
  return rt_strmap_has (&m->trees, name);
}

static bool
keep_ingest (struct nsbox_store *store, struct marks *m, int dir_fd, const char *name)
{
  (void)store;
  (void)m;
  struct stat st;
  if (fstatat (dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return true;
  return time (NULL) - st.st_mtime < STALE_INGEST_SECONDS;
}

/* Work directories are flock'ed by their builder while in use. */
static bool
keep_tmp (struct nsbox_store *store, struct marks *m, int dir_fd, const char *name)
{
  (void)store;
  (void)m;
  int fd = openat (dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT;
  bool busy = flock (fd, LOCK_EX | LOCK_NB) < 0;
  close (fd);
  return busy;
}

/* Lock files of blobs and trees pile up; with the store held exclusively
 * nobody else can be using them, but a held one is kept all the same. */
static bool
keep_lock (struct nsbox_store *store, struct marks *m, int dir_fd, const char *name)
{
  if (strcmp (name, "store.lock") == 0)
    return true;
  return keep_tmp (store, m, dir_fd, name);
}

int
nsbox_store_gc (struct nsbox_store *store, struct nsbox_store_gc_stats *stats,
                struct nsbox_error **err)
{
  /* Trade our shared lock for an exclusive one: nobody else may be
   * pulling or unpacking. A failed conversion may drop the shared lock, so
   * it is taken back. */
  if (flock (store->lock_fd, LOCK_EX | LOCK_NB) < 0)
    {
      int saved = errno;
      flock (store->lock_fd, LOCK_SH);
      if (saved == EWOULDBLOCK)
        return nsbox_error_set (err, EBUSY, "gc: the store '%s' is in use by another process",
                                store->root);
      return nsbox_error_sys (err, saved, "gc: lock '%s'", store->root);
    }
  struct nsbox_store_gc_stats s = { 0 };
  struct marks m = { 0 };
  cleanup_json json_t *index = NULL;
  json_t *manifests;
  int ret = rt_store_load_index (store, &index, &manifests, err);
  if (ret >= 0)
    {
      size_t i;
      json_t *e;
      json_array_foreach (manifests, i, e)
          mark_manifest (store, &m, json_string_value (json_object_get (e, "digest")), 0);
      ret = sweep (store, &m, "tmp", keep_tmp, &s.tmp_removed, &s.bytes_freed, err);
    }
  if (ret >= 0)
    ret = sweep (store, &m, "rootfs", keep_tree, &s.trees_removed, &s.bytes_freed, err);
  if (ret >= 0)
    ret = sweep (store, &m, "blobs/sha256", keep_blob, &s.blobs_removed, &s.bytes_freed, err);
  if (ret >= 0)
    ret = sweep (store, &m, "ingest", keep_ingest, &s.ingest_removed, &s.bytes_freed, err);
  if (ret >= 0)
    {
      size_t locks = 0;
      uint64_t lock_bytes = 0;
      ret = sweep (store, &m, "locks", keep_lock, &locks, &lock_bytes, err);
    }
  rt_strmap_clear (&m.blobs, NULL);
  rt_strmap_clear (&m.trees, NULL);
  flock (store->lock_fd, LOCK_SH);
  if (ret < 0)
    return ret;
  if (stats)
    *stats = s;
  return 0;
}
