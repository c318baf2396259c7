/* nsbox_store_unpack: manifest and config checks, ChainID, and a tree that
 * appears in rootfs/ only when complete. See store.h. */
#include "store-private.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz-entry.h"
#include "remove.h"
#include "layer.h"
#include "space.h"

struct layer_desc
{
  const char *digest;
  int64_t size;
  const char *diff_id;
};

int
rt_chain_id (json_t *diff_ids, char out[RT_DIGEST_LEN + 1], struct nsbox_error **err)
{
  char chain[RT_DIGEST_LEN + 1] = "";
  size_t i;
  json_t *v;
  json_array_foreach (diff_ids, i, v)
  {
    const char *d = json_string_value (v);
    if (!nsbox_digest_valid (d))
      return nsbox_error_set (err, EBADMSG, "invalid diff_id '%s'", d ? d : "(not a string)");
    if (i == 0)
      snprintf (chain, sizeof chain, "%s", d);
    else
      {
        char buf[2 * RT_DIGEST_LEN + 2];
        snprintf (buf, sizeof buf, "%s %s", chain, d);
        if (rt_sha256_buffer (buf, strlen (buf), chain) < 0)
          return nsbox_error_oom (err);
      }
  }
  if (!chain[0])
    return nsbox_error_set (err, EBADMSG, "image has no layers");
  memcpy (out, chain, sizeof chain);
  return 0;
}

int
rt_check_layer_count (struct nsbox_store *store, json_t *layers, const char *image,
                      struct nsbox_error **err)
{
  size_t n = json_array_size (layers);
  uint64_t max = store->limits.layers;
  if (n <= max)
    return 0;
  const char *first = json_string_value (json_object_get (json_array_get (layers, max), "digest"));
  return nsbox_error_set (
      err, E2BIG,
      "image '%s' has %zu layers, more than the limit of %" PRIu64
      " (set NSBOX_MAX_LAYERS to raise it); the first beyond it is layer %" PRIu64 " ('%s')",
      image, n, max, max, first ? first : "?");
}

bool
rt_layer_media_type_ok (const char *media)
{
  static const char *const ok[] = {
    "application/vnd.oci.image.layer.v1.tar",
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.oci.image.layer.v1.tar+zstd",
    "application/vnd.oci.image.layer.nondistributable.v1.tar",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "application/vnd.docker.image.rootfs.diff.tar",
  };
  for (size_t i = 0; media && i < ARRAY_SIZE (ok); i++)
    if (strcmp (media, ok[i]) == 0)
      return true;
  return false;
}

/* The manifest's config and layer descriptors, checked. */
static int
check_manifest (json_t *manifest, const char *digest, json_t **config_desc,
                struct nsbox_error **err)
{
  if (json_object_get (manifest, "manifests"))
    return nsbox_error_set (
        err, EBADMSG, "manifest '%s' holds both 'manifests' and an image (or is an index)", digest);
  const char *media = json_string_value (json_object_get (manifest, "mediaType"));
  if (media && strcmp (media, MEDIA_OCI_MANIFEST) != 0
      && strcmp (media, MEDIA_DOCKER_MANIFEST) != 0)
    return nsbox_error_set (err, EBADMSG, "manifest '%s': unsupported media type '%s'", digest,
                            media);
  json_t *config = json_object_get (manifest, "config");
  json_t *layers = json_object_get (manifest, "layers");
  if (!json_is_object (config) || !json_is_array (layers))
    return nsbox_error_set (err, EBADMSG, "manifest '%s': no config or layers", digest);
  size_t i;
  json_t *l;
  json_array_foreach (layers, i, l)
  {
    const char *ld = json_string_value (json_object_get (l, "digest"));
    const char *lm = json_string_value (json_object_get (l, "mediaType"));
    if (!nsbox_digest_valid (ld) || !json_is_integer (json_object_get (l, "size")))
      return nsbox_error_set (err, EBADMSG, "manifest '%s': layer %zu: bad descriptor", digest, i);
    if (!lm || !rt_layer_media_type_ok (lm))
      return nsbox_error_set (err, EBADMSG, "manifest '%s': layer %zu: unsupported media type '%s'",
                              digest, i, lm ? lm : "(none)");
  }
  *config_desc = config;
  return 0;
}

static int
load_config (struct nsbox_store *store, json_t *desc, json_t *layers, json_t **out,
             struct nsbox_error **err)
{
  const char *digest = json_string_value (json_object_get (desc, "digest"));
  json_t *size = json_object_get (desc, "size");
  if (!nsbox_digest_valid (digest) || !json_is_integer (size))
    return nsbox_error_set (err, EBADMSG, "bad config descriptor");
  cleanup_free char *data = NULL;
  size_t len = 0;
  int ret = nsbox_store_read_blob (store, digest, RT_MAX_JSON_BYTES, &data, &len, err);
  if (ret < 0)
    return nsbox_error_prefix (err, "config");
  if ((json_int_t)len != json_integer_value (size))
    return nsbox_error_set (err, EBADMSG,
                            "config '%s': size %zu, the manifest says %" JSON_INTEGER_FORMAT,
                            digest, len, json_integer_value (size));
  char computed[RT_DIGEST_LEN + 1];
  if (rt_sha256_buffer (data, len, computed) < 0)
    return nsbox_error_oom (err);
  if (strcmp (computed, digest) != 0)
    return nsbox_error_set (err, EBADMSG, "config '%s': digest mismatch (got '%s')", digest,
                            computed);
  json_error_t jerr;
  cleanup_json json_t *config = json_loadb (data, len, 0, &jerr);
  if (!json_is_object (config))
    return nsbox_error_set (err, EBADMSG, "config '%s': invalid JSON at %d:%d: %s", digest,
                            jerr.line, jerr.column, jerr.text);
  json_t *rootfs = json_object_get (config, "rootfs");
  const char *type = json_string_value (json_object_get (rootfs, "type"));
  if (!type || strcmp (type, "layers") != 0)
    return nsbox_error_set (err, EBADMSG, "config '%s': rootfs.type is not \"layers\"", digest);
  json_t *diff_ids = json_object_get (rootfs, "diff_ids");
  if (!json_is_array (diff_ids) || json_array_size (diff_ids) != json_array_size (layers))
    return nsbox_error_set (err, EBADMSG, "config '%s': %zu diff_ids for %zu layers", digest,
                            json_array_size (diff_ids), json_array_size (layers));
  *out = TAKE_PTR (config);
  return 0;
}

static int
env_from_config (json_t *config, char ***out, struct nsbox_error **err)
{
  json_t *env = json_object_get (json_object_get (config, "config"), "Env");
  size_t n = json_array_size (env);
  char **strv = calloc (n + 1, sizeof *strv);
  if (!strv)
    return nsbox_error_oom (err);
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    {
      const char *s = json_string_value (json_array_get (env, i));
      if (!s || !strchr (s, '='))
        continue;
      strv[k] = strdup (s);
      if (!strv[k++])
        {
          nsbox_strv_free (strv);
          return nsbox_error_oom (err);
        }
    }
  *out = strv;
  return 0;
}

static int
write_text_at (int dir_fd, const char *name, const char *data, size_t len, struct nsbox_error **err)
{
  cleanup_close int fd
      = openat (dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    return nsbox_error_sys (err, errno, "create '%s'", name);
  int r = nsbox_write_all (fd, data, len);
  if (r < 0)
    return nsbox_error_sys (err, -r, "write '%s'", name);
  if (fsync (fd) < 0)
    return nsbox_error_sys (err, errno, "fsync '%s'", name);
  return 0;
}

static int
stream_to_file (int dir_fd, const char *name, FILE **out, struct nsbox_error **err)
{
  int fd = openat (dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    return nsbox_error_sys (err, errno, "create '%s'", name);
  *out = fdopen (fd, "w");
  if (!*out)
    {
      close (fd);
      return nsbox_error_oom (err);
    }
  return 0;
}

/* Builds the tree in the locked work directory tmp_fd. */
static int
build_tree (struct nsbox_store *store, json_t *layers, json_t *diff_ids, json_t *config, int tmp_fd,
            struct nsbox_error **err)
{
  if (mkdirat (tmp_fd, "rootfs", 0700) < 0)
    return nsbox_error_sys (err, errno, "create rootfs directory");
  cleanup_close int root_fd
      = openat (tmp_fd, "rootfs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (root_fd < 0)
    return nsbox_error_sys (err, errno, "open rootfs directory");
  struct rt_unpack *u = NULL;
  cleanup_free char *text = NULL;
  int ret = rt_unpack_new (store, root_fd, &u, err);
  if (ret < 0)
    return ret;
  size_t i;
  json_t *l;
  json_array_foreach (layers, i, l)
  {
    const char *digest = json_string_value (json_object_get (l, "digest"));
    json_int_t size = json_integer_value (json_object_get (l, "size"));
    cleanup_close int fd = -1;
    ret = nsbox_store_open_blob (store, digest, &fd, err);
    if (ret < 0)
      goto out;
    struct stat st;
    if (fstat (fd, &st) < 0 || st.st_size != size)
      {
        ret = nsbox_error_set (err, EBADMSG,
                               "layer %zu: blob '%s' is not %" JSON_INTEGER_FORMAT
                               " bytes as its descriptor says",
                               i, digest, size);
        goto out;
      }
    ret = rt_unpack_layer (u, fd, digest, json_string_value (json_array_get (diff_ids, i)),
                           (unsigned)i, err);
    if (ret < 0)
      goto out;
  }
  {
    cleanup_fclose FILE *ownership = NULL, *added = NULL;
    ret = stream_to_file (tmp_fd, "ownership.tsv", &ownership, err);
    if (ret >= 0)
      ret = stream_to_file (tmp_fd, "added-dirs", &added, err);
    if (ret >= 0)
      ret = rt_unpack_finish (u, ownership, added, err);
    if (ret >= 0 && (fflush (ownership) != 0 || fflush (added) != 0))
      ret = nsbox_error_sys (err, errno, "write ownership.tsv");
  }
  if (ret < 0)
    goto out;
  text = json_dumps (config, JSON_INDENT (2) | JSON_SORT_KEYS);
  if (!text)
    {
      ret = nsbox_error_oom (err);
      goto out;
    }
  ret = write_text_at (tmp_fd, "config.json", text, strlen (text), err);
  if (ret >= 0)
    ret = write_text_at (tmp_fd, ".complete", "", 0, err);
out:
  rt_unpack_free (u);
  return ret;
}

static int
tree_path (struct nsbox_store *store, const char *name, char **out)
{
  return (*out = xasprintf ("%s/rootfs/%s/rootfs", store->root, name)) ? 0 : -ENOMEM;
}

static bool
tree_complete (struct nsbox_store *store, const char *name)
{
  char rel[160];
  snprintf (rel, sizeof rel, "rootfs/%s/.complete", name);
  if (faccessat (store->root_fd, rel, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
    return false;
  /* Records the last use (gc keeps recently used trees). */
  utimensat (store->root_fd, rel, NULL, AT_SYMLINK_NOFOLLOW);
  return true;
}

/* Before anything is written: the layers' declared (compressed) sizes, a
 * floor for what they unpack to, must fit in the free space of the
 * filesystem the tree is built on, above the reserve (space.h). */
static int
check_free_space (struct nsbox_store *store, json_t *layers, struct nsbox_error **err)
{
  uint64_t declared = 0;
  size_t i;
  json_t *l;
  json_array_foreach (layers, i, l)
  {
    json_int_t size = json_integer_value (json_object_get (l, "size"));
    if (size > 0 && (uint64_t)size <= UINT64_MAX - declared)
      declared += (uint64_t)size;
  }
  cleanup_close int fd = openat (store->root_fd, "tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return nsbox_error_sys (err, errno, "open '%s/tmp'", store->root);
  struct rt_space space;
  rt_space_init (&space, fd, (unsigned)store->limits.min_free_percent);
  return rt_space_check_declared (&space, declared, err);
}

static int
unpack_into_store (struct nsbox_store *store, json_t *layers, json_t *diff_ids, json_t *config,
                   const char *name, struct nsbox_error **err)
{
  int ret = check_free_space (store, layers, err);
  if (ret < 0)
    return ret;
  char tmp_name[64];
  cleanup_close int tmp_fd = -1;
  ret = rt_store_make_tmp (store, tmp_name, &tmp_fd, err);
  if (ret < 0)
    return ret;
  char tmp_rel[96], final_rel[160];
  snprintf (tmp_rel, sizeof tmp_rel, "tmp/%s", tmp_name);
  snprintf (final_rel, sizeof final_rel, "rootfs/%s", name);
  ret = build_tree (store, layers, diff_ids, config, tmp_fd, err);
  if (ret >= 0)
    {
      ret = renameat2 (store->root_fd, tmp_rel, store->root_fd, final_rel, RENAME_NOREPLACE);
      if (ret == 0)
        return 0;
      if (errno != EEXIST && errno != ENOTEMPTY)
        ret = nsbox_error_sys (err, errno, "rename '%s' to '%s'", tmp_rel, final_rel);
      else
        ret = 0; /* another process won: use its tree */
    }
  nsbox_remove_at (store->root_fd, tmp_rel);
  return ret;
}

int
nsbox_store_unpack (struct nsbox_store *store, const char *manifest_digest, char **rootfs,
                    char ***env, struct nsbox_error **err)
{
  cleanup_json json_t *manifest = NULL;
  int ret = rt_store_read_json (store, manifest_digest, &manifest, err);
  if (ret < 0)
    return nsbox_error_prefix (err, "unpack");
  json_t *config_desc = NULL;
  ret = check_manifest (manifest, manifest_digest, &config_desc, err);
  if (ret < 0)
    return ret;
  json_t *layers = json_object_get (manifest, "layers");
  ret = rt_check_layer_count (store, layers, manifest_digest, err);
  if (ret < 0)
    return ret;
  cleanup_json json_t *config = NULL;
  ret = load_config (store, config_desc, layers, &config, err);
  if (ret < 0)
    return nsbox_error_prefix (err, "image '%s'", manifest_digest);
  json_t *diff_ids = json_object_get (json_object_get (config, "rootfs"), "diff_ids");
  char chain[RT_DIGEST_LEN + 1];
  ret = rt_chain_id (diff_ids, chain, err);
  if (ret < 0)
    return nsbox_error_prefix (err, "image '%s'", manifest_digest);
  char name[128];
  snprintf (name, sizeof name, "%s.%s", chain + 7, RT_UNPACK_VERSION);

  if (!tree_complete (store, name))
    {
      /* One unpacker per tree at a time; the loser of a race waits and
       * finds the tree complete. */
      char lock_name[160];
      snprintf (lock_name, sizeof lock_name, "%s.unpack.lock", name);
      cleanup_close int lock = rt_store_lock (store, lock_name, LOCK_EX, err);
      if (lock < 0)
        return lock;
      if (!tree_complete (store, name))
        {
          ret = unpack_into_store (store, layers, diff_ids, config, name, err);
          if (ret < 0)
            return nsbox_error_prefix (err, "unpack image '%s'", manifest_digest);
        }
    }
  cleanup_free char *path = NULL;
  if (tree_path (store, name, &path) < 0)
    return nsbox_error_oom (err);
  char **strv = NULL;
  if (env)
    {
      ret = env_from_config (config, &strv, err);
      if (ret < 0)
        return ret;
      *env = strv;
    }
  *rootfs = TAKE_PTR (path);
  return 0;
}

/* The tree name of a manifest already in the store, or -errno. */
static int
tree_name_of (struct nsbox_store *store, const char *manifest_digest, char name[128])
{
  cleanup_json json_t *manifest = NULL;
  if (rt_store_read_json (store, manifest_digest, &manifest, NULL) < 0)
    return -ENOENT;
  const char *config_digest
      = json_string_value (json_object_get (json_object_get (manifest, "config"), "digest"));
  cleanup_json json_t *config = NULL;
  if (!nsbox_digest_valid (config_digest)
      || rt_store_read_json (store, config_digest, &config, NULL) < 0)
    return -ENOENT;
  char chain[RT_DIGEST_LEN + 1];
  if (rt_chain_id (json_object_get (json_object_get (config, "rootfs"), "diff_ids"), chain, NULL)
      < 0)
    return -EBADMSG;
  snprintf (name, 128, "%s.%s", chain + 7, RT_UNPACK_VERSION);
  return 0;
}

void
nsbox_store_images_free (struct nsbox_store_image *images, size_t count)
{
  if (!images)
    return;
  for (size_t i = 0; i < count; i++)
    {
      free (images[i].ref);
      free (images[i].manifest_digest);
      free (images[i].platform);
      free (images[i].rootfs);
    }
  free (images);
}

int
nsbox_store_list (struct nsbox_store *store, struct nsbox_store_image **images, size_t *count,
                  struct nsbox_error **err)
{
  cleanup_json json_t *index = NULL;
  json_t *manifests;
  int ret = rt_store_load_index (store, &index, &manifests, err);
  if (ret < 0)
    return ret;
  size_t n = json_array_size (manifests);
  struct nsbox_store_image *out = calloc (n + 1, sizeof *out);
  if (!out)
    return nsbox_error_oom (err);
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    {
      json_t *e = json_array_get (manifests, i);
      json_t *ann = json_object_get (e, "annotations");
      const char *ref
          = json_string_value (json_object_get (ann, "org.opencontainers.image.ref.name"));
      const char *digest = json_string_value (json_object_get (e, "digest"));
      const char *platform = json_string_value (json_object_get (ann, "nsbox.platform"));
      if (!ref || !nsbox_digest_valid (digest))
        continue;
      struct nsbox_store_image *img = &out[k++];
      img->ref = strdup (ref);
      img->manifest_digest = strdup (digest);
      img->platform = strdup (platform ? platform : "");
      char name[128];
      if (tree_name_of (store, digest, name) == 0 && tree_complete (store, name))
        tree_path (store, name, &img->rootfs);
      if (!img->ref || !img->manifest_digest || !img->platform)
        {
          nsbox_store_images_free (out, k);
          return nsbox_error_oom (err);
        }
    }
  *images = out;
  *count = k;
  return 0;
}

/* Entry points for tests/fuzz (fuzz-entry.h). */

int
rt_fuzz_check_manifest (json_t *manifest, struct nsbox_error **err)
{
  json_t *config_desc = NULL;
  return check_manifest (manifest, "fuzz", &config_desc, err);
}

int
rt_fuzz_env_from_config (json_t *config, char ***env, struct nsbox_error **err)
{
  return env_from_config (config, env, err);
}
