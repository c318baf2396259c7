/* The content-addressed image store: layout, blobs, index.json; the
 * ingest of new blobs is store-ingest.c. See store.h. */
#include "store-private.h"

#include "error.h"
#include "reference.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* sha256 ---------------------------------------------------------------- */

/* Over the one SHA-256 of src/common (digest.c), with the store's
 * "sha256:" prefix. */
int
rt_sha256_init (struct rt_sha256 *h)
{
  h->failed = false;
  return nsbox_sha256_init (&h->digest, NULL);
}

void
rt_sha256_update (struct rt_sha256 *h, const void *data, size_t len)
{
  if (nsbox_sha256_update (&h->digest, data, len) < 0)
    h->failed = true;
}

void
rt_sha256_final (struct rt_sha256 *h, char out[RT_DIGEST_LEN + 1])
{
  char hex[NSBOX_SHA256_HEX];
  if (h->failed || nsbox_sha256_final (&h->digest, hex) < 0)
    {
      /* Matches no digest, and is no valid one. */
      memset (hex, '?', sizeof hex - 1);
      hex[sizeof hex - 1] = '\0';
    }
  snprintf (out, RT_DIGEST_LEN + 1, "sha256:%s", hex);
  rt_sha256_free (h);
}

void
rt_sha256_free (struct rt_sha256 *h)
{
  nsbox_sha256_free (&h->digest);
  h->failed = false;
}

int
rt_sha256_buffer (const void *data, size_t len, char out[RT_DIGEST_LEN + 1])
{
  char hex[NSBOX_SHA256_HEX];
  int ret = nsbox_sha256_hex (data, len, hex, NULL);
  if (ret < 0)
    return ret;
  snprintf (out, RT_DIGEST_LEN + 1, "sha256:%s", hex);
  return 0;
}

bool
nsbox_digest_valid (const char *digest)
{
  if (!digest || strncmp (digest, "sha256:", 7) != 0 || strlen (digest) != RT_DIGEST_LEN)
    return false;
  for (const char *p = digest + 7; *p; p++)
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
      return false;
  return true;
}

uint64_t
nsbox_store_random_u64 (void)
{
  static uint64_t counter;
  uint64_t rnd = 0;
  if (getrandom (&rnd, sizeof rnd, 0) != sizeof rnd)
    rnd = ((uint64_t)time (NULL) << 32) ^ ((uint64_t)getpid () << 12);
  return rnd ^ __atomic_add_fetch (&counter, 1, __ATOMIC_RELAXED);
}

/* opening ---------------------------------------------------------------- */

static int
mkdir_p (const char *path, mode_t mode)
{
  cleanup_free char *copy = strdup (path);
  if (!copy)
    return -ENOMEM;
  for (char *p = copy + 1; *p; p++)
    if (*p == '/')
      {
        *p = '\0';
        if (mkdir (copy, 0755) < 0 && errno != EEXIST)
          return -errno;
        *p = '/';
      }
  if (mkdir (copy, mode) < 0 && errno != EEXIST)
    return -errno;
  return 0;
}

/* The limits, their variables, defaults and accepted ranges. Ranges: byte
 * limits stay far from overflowing the stream limit derived from them
 * (layer.c); inodes are counted in 32 bits; no path has more components
 * than PATH_MAX allows (4096 bytes: 2048 one-letter names); 0 % keeps no
 * reserve, which is meaningful, a maximum of 0 is not. */
static const struct
{
  const char *name;
  size_t offset;
  uint64_t fallback, min, max;
} limit_vars[] = {
  { "NSBOX_MAX_LAYER_BYTES", offsetof (struct rt_limits, layer_bytes), 8ull << 30, 1, 1ull << 60 },
  { "NSBOX_MAX_IMAGE_BYTES", offsetof (struct rt_limits, image_bytes), 16ull << 30, 1, 1ull << 60 },
  { "NSBOX_MAX_LAYER_ENTRIES", offsetof (struct rt_limits, layer_entries), 1000000, 1, UINT32_MAX },
  { "NSBOX_MAX_IMAGE_INODES", offsetof (struct rt_limits, image_inodes), 1000000, 1,
    UINT32_MAX - 1 },
  { "NSBOX_MAX_LAYERS", offsetof (struct rt_limits, layers), 128, 1, 65535 },
  { "NSBOX_MAX_PATH_DEPTH", offsetof (struct rt_limits, path_depth), 256, 1, 2048 },
  { "NSBOX_MIN_FREE_PERCENT", offsetof (struct rt_limits, min_free_percent), 2, 0, 90 },
};

/* Unset or empty means the default. Digits only: no sign, no spaces, no
 * suffix (strtoull alone would take " 12", "+12" and wrap "-1"). */
static int
limit_from_env (size_t i, uint64_t *out, struct nsbox_error **err)
{
  const char *v = getenv (limit_vars[i].name);
  if (!v || !*v)
    {
      *out = limit_vars[i].fallback;
      return 0;
    }
  char *end = NULL;
  errno = 0;
  unsigned long long n = strtoull (v, &end, 10);
  if (*v < '0' || *v > '9' || errno || *end || n < limit_vars[i].min || n > limit_vars[i].max)
    return nsbox_error_set (err, EINVAL,
                            "invalid %s '%s': want a whole number from %" PRIu64 " to %" PRIu64,
                            limit_vars[i].name, v, limit_vars[i].min, limit_vars[i].max);
  *out = n;
  return 0;
}

int
rt_limits_from_env (struct rt_limits *limits, struct nsbox_error **err)
{
  struct rt_limits parsed;
  for (size_t i = 0; i < ARRAY_SIZE (limit_vars); i++)
    {
      uint64_t value;
      int ret = limit_from_env (i, &value, err);
      if (ret < 0)
        return ret;
      memcpy ((char *)&parsed + limit_vars[i].offset, &value, sizeof value);
    }
  *limits = parsed;
  return 0;
}

static int
write_file_at (int dir_fd, const char *name, const char *data, size_t len, mode_t mode)
{
  char tmp[128];
  snprintf (tmp, sizeof tmp, ".%s.%016" PRIx64 ".tmp", name, nsbox_store_random_u64 ());
  cleanup_close int fd = openat (dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0)
    return -errno;
  int r = nsbox_write_all (fd, data, len);
  if (r == 0 && (fsync (fd) < 0 || renameat (dir_fd, tmp, dir_fd, name) < 0))
    r = -errno;
  if (r < 0)
    unlinkat (dir_fd, tmp, 0);
  return r;
}

static int
init_layout (struct nsbox_store *store, struct nsbox_error **err)
{
  static const char *const dirs[] = { "blobs", "blobs/sha256", "ingest", "tmp", "rootfs", "locks" };
  for (size_t i = 0; i < ARRAY_SIZE (dirs); i++)
    if (mkdirat (store->root_fd, dirs[i], 0700) < 0 && errno != EEXIST)
      return nsbox_error_sys (err, errno, "create '%s/%s'", store->root, dirs[i]);
  if (faccessat (store->root_fd, "oci-layout", F_OK, AT_SYMLINK_NOFOLLOW) < 0)
    {
      static const char layout[] = "{\"imageLayoutVersion\":\"1.0.0\"}";
      int ret = write_file_at (store->root_fd, "oci-layout", layout, sizeof layout - 1, 0644);
      if (ret < 0)
        return nsbox_error_sys (err, -ret, "write '%s/oci-layout'", store->root);
    }
  return 0;
}

int
nsbox_store_open (const char *root, struct nsbox_store **out, struct nsbox_error **err)
{
  cleanup_free char *path = root ? strdup (root) : nsbox_default_store ();
  if (!path)
    return root ? nsbox_error_oom (err)
                : nsbox_error_set (err, EINVAL, "no image store location: set NSBOX_STORE or HOME");
  if (!*path)
    return nsbox_error_set (err, EINVAL, "image store path is empty");
  /* Before anything is created: a bad limit is the caller's mistake. */
  struct rt_limits limits;
  int ret = rt_limits_from_env (&limits, err);
  if (ret < 0)
    return ret;
  ret = mkdir_p (path, 0700);
  if (ret < 0)
    return nsbox_error_sys (err, -ret, "create image store '%s'", path);
  struct nsbox_store *store = calloc (1, sizeof *store);
  if (!store)
    return nsbox_error_oom (err);
  store->root_fd = store->lock_fd = -1;
  store->root = TAKE_PTR (path);
  store->limits = limits;
  const char *fallback = getenv ("NSBOX_RESOLVE_FALLBACK");
  store->force_resolve_fallback = fallback && strcmp (fallback, "1") == 0;
  store->root_fd = open (store->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (store->root_fd < 0)
    {
      ret = nsbox_error_sys (err, errno, "open image store '%s'", store->root);
      goto fail;
    }
  ret = init_layout (store, err);
  if (ret < 0)
    goto fail;
  store->lock_fd = rt_store_lock (store, "store.lock", LOCK_SH, err);
  if (store->lock_fd < 0)
    {
      ret = store->lock_fd;
      goto fail;
    }
  *out = store;
  return 0;
fail:
  nsbox_store_close (store);
  return ret;
}

int
nsbox_store_lock_fd (const struct nsbox_store *store)
{
  return store->lock_fd;
}

void
nsbox_store_close (struct nsbox_store *store)
{
  if (!store)
    return;
  if (store->lock_fd >= 0)
    close (store->lock_fd);
  if (store->root_fd >= 0)
    close (store->root_fd);
  free (store->root);
  free (store);
}

const char *
nsbox_store_root (const struct nsbox_store *store)
{
  return store->root;
}

void
nsbox_store_set_log (struct nsbox_store *store, nsbox_store_log_fn log, void *data)
{
  store->log = log;
  store->log_data = data;
}

void
rt_store_warn (struct nsbox_store *store, const char *fmt, ...)
{
  if (!store->log)
    return;
  va_list ap;
  va_start (ap, fmt);
  cleanup_free char *message = vxasprintf (fmt, ap);
  va_end (ap);
  if (message)
    store->log (store->log_data, message);
}

int
rt_store_lock (struct nsbox_store *store, const char *name, int op, struct nsbox_error **err)
{
  char path[128];
  snprintf (path, sizeof path, "locks/%s", name);
  int fd = openat (store->root_fd, path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return nsbox_error_sys (err, errno, "open lock '%s/%s'", store->root, path);
  while (flock (fd, op) < 0)
    {
      if (errno == EINTR)
        continue;
      int saved = errno;
      close (fd);
      if (saved == EWOULDBLOCK)
        return nsbox_error_set (err, EBUSY, "'%s/%s' is locked by another process", store->root,
                                path);
      return nsbox_error_sys (err, saved, "lock '%s/%s'", store->root, path);
    }
  return fd;
}

/* Each unpack builds its tree in a tmp/<random> directory of its own. The
 * top-of-hierarchy flag on tmp/ (chattr +T) has ext4's Orlov allocator
 * place each of them in a block group of its own instead of beside its
 * siblings. On ext4 without a journal, creating an inode skips every inode
 * of its group freed in the last seconds (or minutes, while their blocks
 * are dirty), one by one: a tree unpacked where another was just removed
 * (by gc, or by hand) took several times longer. Best effort: other
 * filesystems lack the flag. */
static void
spread_tmp_trees (struct nsbox_store *store)
{
  cleanup_close int fd
      = openat (store->root_fd, "tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  int flags = 0;
  if (fd < 0 || ioctl (fd, FS_IOC_GETFLAGS, &flags) < 0 || (flags & FS_TOPDIR_FL))
    return;
  flags |= FS_TOPDIR_FL;
  (void)ioctl (fd, FS_IOC_SETFLAGS, &flags);
}

int
rt_store_make_tmp (struct nsbox_store *store, char name[64], int *dir_fd, struct nsbox_error **err)
{
  spread_tmp_trees (store);
  for (int attempt = 0; attempt < 16; attempt++)
    {
      uint64_t rnd = 0;
      if (getrandom (&rnd, sizeof rnd, 0) != sizeof rnd)
        rnd = (uint64_t)time (NULL) ^ ((uint64_t)getpid () << 20) ^ (uint64_t)attempt;
      char rel[96];
      snprintf (name, 64, "%016" PRIx64, rnd);
      snprintf (rel, sizeof rel, "tmp/%s", name);
      if (mkdirat (store->root_fd, rel, 0700) < 0)
        {
          if (errno == EEXIST)
            continue;
          return nsbox_error_sys (err, errno, "create '%s/%s'", store->root, rel);
        }
      int fd = openat (store->root_fd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0 || flock (fd, LOCK_EX | LOCK_NB) < 0)
        {
          /* Only gc (holding the store exclusively) could have it. */
          int saved = errno;
          if (fd >= 0)
            close (fd);
          return nsbox_error_sys (err, saved, "lock '%s/%s'", store->root, rel);
        }
      *dir_fd = fd;
      return 0;
    }
  return nsbox_error_set (err, EEXIST, "no free name in '%s/tmp'", store->root);
}

/* blobs ------------------------------------------------------------------ */

void
nsbox_store_blob_path (const char *digest, char out[96])
{
  snprintf (out, 96, "blobs/sha256/%s", digest + 7);
}

bool
nsbox_store_has_blob (struct nsbox_store *store, const char *digest)
{
  if (!nsbox_digest_valid (digest))
    return false;
  char path[96];
  nsbox_store_blob_path (digest, path);
  struct stat st;
  return fstatat (store->root_fd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG (st.st_mode);
}

int
nsbox_store_open_blob (struct nsbox_store *store, const char *digest, int *fd,
                       struct nsbox_error **err)
{
  if (!nsbox_digest_valid (digest))
    return nsbox_error_set (err, EINVAL, "invalid digest '%s'", digest ? digest : "");
  char path[96];
  nsbox_store_blob_path (digest, path);
  int f = openat (store->root_fd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (f < 0)
    return nsbox_error_sys (err, errno, "open blob '%s'", digest);
  *fd = f;
  return 0;
}

int
nsbox_store_read_blob (struct nsbox_store *store, const char *digest, size_t max_size, char **data,
                       size_t *len, struct nsbox_error **err)
{
  cleanup_close int fd = -1;
  int ret = nsbox_store_open_blob (store, digest, &fd, err);
  if (ret < 0)
    return ret;
  struct stat st;
  if (fstat (fd, &st) < 0)
    return nsbox_error_sys (err, errno, "stat blob '%s'", digest);
  if ((uint64_t)st.st_size > max_size)
    return nsbox_error_set (err, EFBIG, "blob '%s' is %lld bytes, more than the limit of %zu",
                            digest, (long long)st.st_size, max_size);
  cleanup_free char *buf = malloc ((size_t)st.st_size + 1);
  if (!buf)
    return nsbox_error_oom (err);
  size_t got = 0;
  while (got < (size_t)st.st_size)
    {
      ssize_t n = read (fd, buf + got, (size_t)st.st_size - got);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return nsbox_error_sys (err, errno, "read blob '%s'", digest);
      if (n == 0)
        break;
      got += (size_t)n;
    }
  buf[got] = '\0';
  *data = TAKE_PTR (buf);
  *len = got;
  return 0;
}

int
rt_store_read_json (struct nsbox_store *store, const char *digest, json_t **out,
                    struct nsbox_error **err)
{
  cleanup_free char *data = NULL;
  size_t len = 0;
  int ret = nsbox_store_read_blob (store, digest, RT_MAX_JSON_BYTES, &data, &len, err);
  if (ret < 0)
    return ret;
  json_error_t jerr;
  json_t *doc = json_loadb (data, len, JSON_REJECT_DUPLICATES, &jerr);
  if (!doc)
    return nsbox_error_set (err, EBADMSG, "blob '%s': invalid JSON at %d:%d: %s", digest, jerr.line,
                            jerr.column, jerr.text);
  if (!json_is_object (doc))
    {
      json_decref (doc);
      return nsbox_error_set (err, EBADMSG, "blob '%s': not a JSON object", digest);
    }
  *out = doc;
  return 0;
}

/* index.json ------------------------------------------------------------- */

static int
index_loaded (json_t *doc, json_t **out, json_t **manifests)
{
  if (manifests)
    *manifests = json_object_get (doc, "manifests");
  *out = doc;
  return 0;
}

int
rt_store_load_index (struct nsbox_store *store, json_t **out, json_t **manifests,
                     struct nsbox_error **err)
{
  cleanup_close int fd = openat (store->root_fd, "index.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  json_t *doc = NULL;
  if (fd < 0)
    {
      if (errno != ENOENT)
        return nsbox_error_sys (err, errno, "open '%s/index.json'", store->root);
      doc = json_pack ("{s:i, s:s, s:[]}", "schemaVersion", 2, "mediaType", MEDIA_OCI_INDEX,
                       "manifests");
      if (!doc)
        return nsbox_error_oom (err);
      return index_loaded (doc, out, manifests);
    }
  json_error_t jerr;
  cleanup_fclose FILE *f = fdopen (TAKE_FD (fd), "r");
  if (!f)
    return nsbox_error_sys (err, errno, "open '%s/index.json'", store->root);
  doc = json_loadf (f, 0, &jerr);
  if (!doc)
    return nsbox_error_set (err, EBADMSG, "%s/index.json:%d:%d: %s", store->root, jerr.line,
                            jerr.column, jerr.text);
  if (!json_is_array (json_object_get (doc, "manifests")))
    {
      json_decref (doc);
      return nsbox_error_set (err, EBADMSG, "%s/index.json: no manifests array", store->root);
    }
  return index_loaded (doc, out, manifests);
}

static int
save_index (struct nsbox_store *store, json_t *index, struct nsbox_error **err)
{
  cleanup_free char *text = json_dumps (index, JSON_INDENT (2) | JSON_SORT_KEYS);
  if (!text)
    return nsbox_error_oom (err);
  size_t len = strlen (text);
  text[len] = '\0';
  int ret = write_file_at (store->root_fd, "index.json", text, len, 0644);
  if (ret < 0)
    return nsbox_error_sys (err, -ret, "write '%s/index.json'", store->root);
  return 0;
}

static const char *
entry_ref (json_t *entry)
{
  json_t *ann = json_object_get (entry, "annotations");
  return json_string_value (json_object_get (ann, "org.opencontainers.image.ref.name"));
}

static json_t *
platform_object (const char *platform)
{
  char buf[128];
  snprintf (buf, sizeof buf, "%s", platform);
  char *os = buf, *arch = strchr (buf, '/');
  if (!arch)
    return NULL;
  *arch++ = '\0';
  char *variant = strchr (arch, '/');
  if (variant)
    *variant++ = '\0';
  json_t *obj = json_pack ("{s:s, s:s}", "architecture", arch, "os", os);
  if (obj && variant && *variant)
    json_object_set_new (obj, "variant", json_string (variant));
  return obj;
}

int
nsbox_store_tag (struct nsbox_store *store, const char *ref, const char *manifest_digest,
                 const char *platform, struct nsbox_error **err)
{
  if (!ref || !*ref)
    return nsbox_error_set (err, EINVAL, "empty image reference");
  cleanup_json json_t *manifest = NULL;
  int ret = rt_store_read_json (store, manifest_digest, &manifest, err);
  if (ret < 0)
    return nsbox_error_prefix (err, "tag '%s'", ref);
  const char *media = json_string_value (json_object_get (manifest, "mediaType"));
  if (!media)
    media = MEDIA_OCI_MANIFEST;
  struct stat st;
  char path[96];
  nsbox_store_blob_path (manifest_digest, path);
  if (fstatat (store->root_fd, path, &st, 0) < 0)
    return nsbox_error_sys (err, errno, "stat blob '%s'", manifest_digest);

  cleanup_close int lock = rt_store_lock (store, "index.lock", LOCK_EX, err);
  if (lock < 0)
    return lock;
  cleanup_json json_t *index = NULL;
  json_t *manifests;
  ret = rt_store_load_index (store, &index, &manifests, err);
  if (ret < 0)
    return ret;
  for (size_t i = json_array_size (manifests); i-- > 0;)
    {
      const char *name = entry_ref (json_array_get (manifests, i));
      if (name && strcmp (name, ref) == 0)
        json_array_remove (manifests, i);
    }
  json_t *ann = json_pack ("{s:s, s:s}", "org.opencontainers.image.ref.name", ref,
                           "io.containerd.image.name", ref);
  json_t *entry = json_pack ("{s:s, s:s, s:I, s:o}", "mediaType", media, "digest", manifest_digest,
                             "size", (json_int_t)st.st_size, "annotations", ann);
  if (!ann || !entry)
    return nsbox_error_oom (err);
  if (platform && *platform)
    {
      json_object_set_new (ann, "nsbox.platform", json_string (platform));
      json_t *p = platform_object (platform);
      if (p)
        json_object_set_new (entry, "platform", p);
    }
  json_array_append_new (manifests, entry);
  return save_index (store, index, err);
}

int
nsbox_store_untag (struct nsbox_store *store, const char *ref, struct nsbox_error **err)
{
  cleanup_close int lock = rt_store_lock (store, "index.lock", LOCK_EX, err);
  if (lock < 0)
    return lock;
  cleanup_json json_t *index = NULL;
  json_t *manifests;
  int ret = rt_store_load_index (store, &index, &manifests, err);
  if (ret < 0)
    return ret;
  cleanup_free char *normal = rt_normalize_ref (ref);
  bool found = false;
  for (size_t i = json_array_size (manifests); i-- > 0;)
    {
      const char *name = entry_ref (json_array_get (manifests, i));
      if (name && (strcmp (name, ref) == 0 || (normal && strcmp (name, normal) == 0)))
        {
          json_array_remove (manifests, i);
          found = true;
        }
    }
  if (!found)
    return nsbox_error_set (err, ENOENT, "image '%s' is not in the store", ref);
  return save_index (store, index, err);
}

int
nsbox_store_resolve (struct nsbox_store *store, const char *ref, char **manifest_digest,
                     struct nsbox_error **err)
{
  cleanup_json json_t *index = NULL;
  json_t *manifests;
  int ret = rt_store_load_index (store, &index, &manifests, err);
  if (ret < 0)
    return ret;
  size_t i;
  json_t *entry;
  json_array_foreach (manifests, i, entry)
  {
    const char *name = entry_ref (entry);
    const char *digest = json_string_value (json_object_get (entry, "digest"));
    if (name && strcmp (name, ref) == 0 && nsbox_digest_valid (digest))
      {
        char *copy = strdup (digest);
        if (!copy)
          return nsbox_error_oom (err);
        *manifest_digest = copy;
        return 0;
      }
  }
  return nsbox_error_set (err, ENOENT, "image '%s' is not in the store", ref);
}

int
nsbox_store_lookup (struct nsbox_store *store, const char *ref, char **manifest_digest,
                    struct nsbox_error **err)
{
  cleanup_error struct nsbox_error *first = NULL;
  int ret = nsbox_store_resolve (store, ref, manifest_digest, &first);
  if (ret != -ENOENT)
    {
      if (ret < 0 && err && !*err)
        *err = TAKE_PTR (first);
      return ret;
    }
  cleanup_free char *normal = rt_normalize_ref (ref);
  if (normal && strcmp (normal, ref) != 0)
    {
      ret = nsbox_store_resolve (store, normal, manifest_digest, NULL);
      if (ret != -ENOENT)
        return ret < 0 ? nsbox_store_resolve (store, normal, manifest_digest, err) : ret;
    }
  return nsbox_error_set (err, ENOENT, "image '%s' is not in the store", ref);
}

/* References and platforms ------------------------------------------------ */

char *
rt_normalize_ref (const char *ref)
{
  struct nsbox_reference *parsed = NULL;
  if (!ref || nsbox_reference_parse (ref, &parsed, NULL) < 0)
    return NULL;
  char *out = nsbox_reference_string (parsed);
  nsbox_reference_free (parsed);
  return out;
}
