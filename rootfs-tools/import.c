/* nsbox_store_import: docker-archive (legacy `docker save` and OCI-layout
 * forms), oci: directories and oci-archive tarballs, every blob verified.
 * Tarballs are streamed once; only allowed member names are read, and only
 * into the store (never extracted by name). The store: store.h. */
#include "store-private.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "decompress.h"
#include "platform.h"
#include "reference.h"
#include "strmap.h"

#define MAX_INDEX_DEPTH 4
#define COPY_CHUNK (256u << 10)

enum source_kind
{
  SOURCE_DOCKER_ARCHIVE,
  SOURCE_OCI_DIR,
  SOURCE_OCI_ARCHIVE,
};

struct member
{
  char digest[RT_DIGEST_LEN + 1];
  int64_t size;
};

struct import
{
  struct nsbox_store *store;
  enum source_kind kind;
  char *path;               /* FILE or DIR */
  char *ref;                /* REF or TAG, or NULL */
  int dir_fd;               /* oci: directory, else -1 */
  json_t *index;            /* index.json */
  json_t *layout;           /* oci-layout */
  json_t *legacy;           /* manifest.json */
  struct rt_strmap members; /* legacy member name -> struct member */
  char *copy_buf;
};

static int
parse_source (const char *source, struct import *im, struct nsbox_error **err)
{
  static const struct
  {
    const char *prefix;
    enum source_kind kind;
  } kinds[] = {
    { "docker-archive:", SOURCE_DOCKER_ARCHIVE },
    { "oci-archive:", SOURCE_OCI_ARCHIVE },
    { "oci:", SOURCE_OCI_DIR },
  };
  for (size_t i = 0; i < ARRAY_SIZE (kinds); i++)
    {
      size_t n = strlen (kinds[i].prefix);
      if (strncmp (source, kinds[i].prefix, n) != 0)
        continue;
      const char *rest = source + n;
      const char *colon = strchr (rest, ':');
      im->kind = kinds[i].kind;
      im->path = colon ? strndup (rest, (size_t)(colon - rest)) : strdup (rest);
      if (colon && colon[1])
        im->ref = strdup (colon + 1);
      if (!im->path || (colon && colon[1] && !im->ref))
        return nsbox_error_oom (err);
      if (!*im->path)
        return nsbox_error_set (err, EINVAL, "'%s': no file or directory given", source);
      return 0;
    }
  return nsbox_error_set (err, EINVAL,
                          "'%s': unknown source (docker-archive:FILE[:REF], oci:DIR[:TAG], "
                          "oci-archive:FILE[:TAG])",
                          source);
}

static void
import_clear (struct import *im)
{
  free (im->path);
  free (im->ref);
  if (im->dir_fd >= 0)
    close (im->dir_fd);
  if (im->index)
    json_decref (im->index);
  if (im->layout)
    json_decref (im->layout);
  if (im->legacy)
    json_decref (im->legacy);
  rt_strmap_clear (&im->members, free);
  free (im->copy_buf);
}

/* Streaming members ------------------------------------------------------ */

static bool
is_hex64 (const char *s, size_t len)
{
  if (len != 64)
    return false;
  for (size_t i = 0; i < len; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return false;
  return true;
}

/* A plain name: letters, digits, '.', '_', '-', not starting with '.'. */
static bool
plain_name (const char *s, size_t len)
{
  if (len == 0 || len > 200 || s[0] == '.')
    return false;
  for (size_t i = 0; i < len; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')
          || (s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == '_' || s[i] == '-'))
      return false;
  return true;
}

static bool
has_suffix (const char *s, const char *suffix)
{
  size_t n = strlen (s), m = strlen (suffix);
  return n >= m && strcmp (s + n - m, suffix) == 0;
}

enum member_kind
{
  MEMBER_SKIP,
  MEMBER_BLOB,   /* blobs/sha256/<hex>: verified against its name */
  MEMBER_JSON,   /* index.json, oci-layout, manifest.json */
  MEMBER_LEGACY, /* <hex>.json, <x>.tar, <id>/layer.tar: hashed, remembered */
};

static enum member_kind
classify (const char *name)
{
  if (strncmp (name, "./", 2) == 0)
    name += 2;
  if (strncmp (name, "blobs/sha256/", 13) == 0 && is_hex64 (name + 13, strlen (name + 13)))
    return MEMBER_BLOB;
  if (strcmp (name, "index.json") == 0 || strcmp (name, "oci-layout") == 0
      || strcmp (name, "manifest.json") == 0)
    return MEMBER_JSON;
  const char *slash = strchr (name, '/');
  if (!slash && plain_name (name, strlen (name))
      && (has_suffix (name, ".json") || has_suffix (name, ".tar")))
    return MEMBER_LEGACY;
  if (slash && strcmp (slash, "/layer.tar") == 0 && plain_name (name, (size_t)(slash - name)))
    return MEMBER_LEGACY;
  return MEMBER_SKIP;
}

static int
read_json_member (struct archive *ar, const char *name, int64_t size, json_t **out,
                  struct nsbox_error **err)
{
  if (size < 0 || size > (int64_t)RT_MAX_JSON_BYTES)
    return nsbox_error_set (err, EFBIG, "'%s' is larger than %u bytes", name, RT_MAX_JSON_BYTES);
  cleanup_free char *buf = malloc ((size_t)size + 1);
  if (!buf)
    return nsbox_error_oom (err);
  la_ssize_t got = archive_read_data (ar, buf, (size_t)size);
  if (got != size)
    return nsbox_error_set (err, EBADMSG, "'%s': truncated", name);
  json_error_t jerr;
  json_t *doc = json_loadb (buf, (size_t)size, 0, &jerr);
  if (!doc)
    return nsbox_error_set (err, EBADMSG, "'%s':%d:%d: %s", name, jerr.line, jerr.column,
                            jerr.text);
  if (*out)
    json_decref (*out);
  *out = doc;
  return 0;
}

/* Copies the member's data into an ingest. */
static int
copy_member (struct import *im, struct archive *ar, struct nsbox_ingest *ingest, const char *name,
             struct nsbox_error **err)
{
  for (;;)
    {
      la_ssize_t n = archive_read_data (ar, im->copy_buf, COPY_CHUNK);
      if (n < 0)
        return nsbox_error_set (err, EBADMSG, "'%s': %s", name, archive_error_string (ar));
      if (n == 0)
        return 0;
      int ret = nsbox_ingest_write (ingest, im->copy_buf, (size_t)n, err);
      if (ret < 0)
        return ret;
    }
}

static int
take_member (struct import *im, struct archive *ar, struct archive_entry *entry,
             struct nsbox_error **err)
{
  const char *name = archive_entry_pathname (entry);
  if (!name || archive_entry_filetype (entry) != AE_IFREG || archive_entry_hardlink (entry))
    return 0;
  int64_t size = archive_entry_size (entry);
  const char *plain = strncmp (name, "./", 2) == 0 ? name + 2 : name;
  int ret;
  switch (classify (name))
    {
    case MEMBER_BLOB:
      {
        char digest[RT_DIGEST_LEN + 1];
        snprintf (digest, sizeof digest, "sha256:%s", plain + 13);
        struct nsbox_ingest *ingest = NULL;
        bool already = false;
        ret = nsbox_store_ingest_begin (im->store, digest, size, &ingest, &already, NULL, err);
        if (ret < 0 || already)
          return ret;
        ret = nsbox_ingest_restart (ingest, err);
        if (ret >= 0)
          ret = copy_member (im, ar, ingest, plain, err);
        if (ret < 0)
          {
            nsbox_ingest_abort (ingest, false);
            return ret;
          }
        return nsbox_ingest_commit (ingest, err);
      }
    case MEMBER_JSON:
      if (strcmp (plain, "index.json") == 0)
        return read_json_member (ar, plain, size, &im->index, err);
      if (strcmp (plain, "oci-layout") == 0)
        return read_json_member (ar, plain, size, &im->layout, err);
      return read_json_member (ar, plain, size, &im->legacy, err);
    case MEMBER_LEGACY:
      {
        struct nsbox_ingest *ingest = NULL;
        ret = rt_ingest_begin_anon (im->store, &ingest, err);
        if (ret < 0)
          return ret;
        ret = copy_member (im, ar, ingest, plain, err);
        if (ret < 0)
          {
            nsbox_ingest_abort (ingest, false);
            return ret;
          }
        struct member *m = calloc (1, sizeof *m);
        if (!m)
          {
            nsbox_ingest_abort (ingest, false);
            return nsbox_error_oom (err);
          }
        m->size = (int64_t)nsbox_ingest_offset (ingest);
        /* A legacy config is named by its digest: hold it to that. */
        char expected[RT_DIGEST_LEN + 1];
        bool named = has_suffix (plain, ".json") && strlen (plain) == 69 && is_hex64 (plain, 64);
        if (named)
          snprintf (expected, sizeof expected, "sha256:%.64s", plain);
        ret = rt_ingest_commit_anon (ingest, named ? expected : NULL, m->digest, err);
        void *old = NULL;
        if (ret < 0 || rt_strmap_put (&im->members, plain, m, &old) < 0)
          {
            free (m);
            return ret < 0 ? ret : nsbox_error_oom (err);
          }
        free (old);
        return 0;
      }
    case MEMBER_SKIP:
    default:
      return 0;
    }
}

static int
stream_archive (struct import *im, struct nsbox_error **err)
{
  struct archive *ar = archive_read_new ();
  if (!ar)
    return nsbox_error_oom (err);
  archive_read_support_format_tar (ar);
  archive_read_support_filter_gzip (ar);
  archive_read_support_filter_zstd (ar);
  int ret = 0;
  if (archive_read_open_filename (ar, im->path, 1 << 16) != ARCHIVE_OK)
    {
      int code = archive_errno (ar) > 0 ? archive_errno (ar) : EBADMSG;
      ret = nsbox_error_set (err, code, "open '%s': %s", im->path, archive_error_string (ar));
      goto out;
    }
  for (;;)
    {
      struct archive_entry *entry;
      int r = archive_read_next_header (ar, &entry);
      if (r == ARCHIVE_EOF)
        break;
      if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
        {
          ret = nsbox_error_set (err, EBADMSG, "read '%s': %s", im->path,
                                 archive_error_string (ar));
          goto out;
        }
      ret = take_member (im, ar, entry, err);
      if (ret < 0)
        {
          nsbox_error_prefix (err, "import '%s'", im->path);
          goto out;
        }
    }
out:
  archive_read_free (ar);
  return ret;
}

/* Blobs of an oci: directory ------------------------------------------- */

/* Makes sure a blob named by a descriptor is in the store with that size,
 * copying it from an oci: directory (verified) when needed. */
static int
ensure_blob (struct import *im, const char *digest, json_int_t size, struct nsbox_error **err)
{
  if (!nsbox_digest_valid (digest))
    return nsbox_error_set (err, EBADMSG, "invalid digest '%s'", digest ? digest : "(none)");
  if (!nsbox_store_has_blob (im->store, digest))
    {
      if (im->dir_fd < 0)
        return nsbox_error_set (err, EBADMSG, "blob '%s' is missing from '%s'", digest, im->path);
      char rel[96];
      snprintf (rel, sizeof rel, "blobs/sha256/%s", digest + 7);
      cleanup_close int fd = openat (im->dir_fd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0)
        return nsbox_error_sys (err, errno, "open '%s/%s'", im->path, rel);
      struct nsbox_ingest *ingest = NULL;
      bool already = false;
      int ret = nsbox_store_ingest_begin (im->store, digest, size, &ingest, &already, NULL, err);
      if (ret < 0)
        return ret;
      if (!already)
        {
          ret = nsbox_ingest_restart (ingest, err);
          for (;;)
            {
              if (ret < 0)
                {
                  nsbox_ingest_abort (ingest, false);
                  return ret;
                }
              ssize_t n = read (fd, im->copy_buf, COPY_CHUNK);
              if (n < 0 && errno == EINTR)
                continue;
              if (n < 0)
                ret = nsbox_error_sys (err, errno, "read '%s/%s'", im->path, rel);
              else if (n == 0)
                break;
              else
                ret = nsbox_ingest_write (ingest, im->copy_buf, (size_t)n, err);
            }
          ret = nsbox_ingest_commit (ingest, err);
          if (ret < 0)
            return ret;
        }
    }
  cleanup_close int fd = -1;
  int ret = nsbox_store_open_blob (im->store, digest, &fd, err);
  if (ret < 0)
    return ret;
  struct stat st;
  if (fstat (fd, &st) < 0 || st.st_size != size)
    return nsbox_error_set (err, EBADMSG,
                            "blob '%s': size differs from its descriptor's %" JSON_INTEGER_FORMAT,
                            digest, size);
  return 0;
}

/* Checks each layer's DiffID against the config now, so a bad import fails
 * at import time. */
static int
verify_image (struct import *im, const char *manifest_digest, char platform[64],
              struct nsbox_error **err)
{
  cleanup_json json_t *manifest = NULL;
  int ret = rt_store_read_json (im->store, manifest_digest, &manifest, err);
  if (ret < 0)
    return ret;
  if (json_object_get (manifest, "manifests"))
    return nsbox_error_set (err, EBADMSG, "manifest '%s' is an index", manifest_digest);
  json_t *cdesc = json_object_get (manifest, "config");
  json_t *layers = json_object_get (manifest, "layers");
  if (!json_is_array (layers))
    return nsbox_error_set (err, EBADMSG, "manifest '%s' has no layers", manifest_digest);
  ret = rt_check_layer_count (im->store, layers, manifest_digest, err);
  if (ret < 0)
    return ret;
  const char *cdigest = json_string_value (json_object_get (cdesc, "digest"));
  ret = ensure_blob (im, cdigest, json_integer_value (json_object_get (cdesc, "size")), err);
  if (ret < 0)
    return nsbox_error_prefix (err, "config");
  cleanup_json json_t *config = NULL;
  ret = rt_store_read_json (im->store, cdigest, &config, err);
  if (ret < 0)
    return ret;
  const char *os = json_string_value (json_object_get (config, "os"));
  const char *arch = json_string_value (json_object_get (config, "architecture"));
  const char *variant = json_string_value (json_object_get (config, "variant"));
  snprintf (platform, 64, "%s/%s%s%s", os ? os : "linux", arch ? arch : "unknown",
            variant ? "/" : "", variant ? variant : "");
  json_t *diff_ids = json_object_get (json_object_get (config, "rootfs"), "diff_ids");
  if (json_array_size (diff_ids) != json_array_size (layers))
    return nsbox_error_set (err, EBADMSG, "config '%s': %zu diff_ids for %zu layers", cdigest,
                            json_array_size (diff_ids), json_array_size (layers));
  size_t i;
  json_t *l;
  json_array_foreach (layers, i, l)
  {
    const char *ld = json_string_value (json_object_get (l, "digest"));
    ret = ensure_blob (im, ld, json_integer_value (json_object_get (l, "size")), err);
    if (ret < 0)
      return nsbox_error_prefix (err, "layer %zu", i);
    cleanup_close int fd = -1;
    ret = nsbox_store_open_blob (im->store, ld, &fd, err);
    if (ret < 0)
      return ret;
    struct rt_stream *stream = NULL;
    ret = rt_stream_new (
        fd, im->store->limits.layer_bytes + im->store->limits.layer_bytes / 4 + (64u << 20),
        &stream, err);
    if (ret < 0)
      return ret;
    char diff_id[RT_DIGEST_LEN + 1];
    ret = rt_stream_finish (stream, diff_id);
    if (ret < 0)
      ret = nsbox_error_set (err, -ret, "layer %zu: %s", i, rt_stream_error (stream));
    rt_stream_free (stream);
    if (ret < 0)
      return ret;
    const char *want = json_string_value (json_array_get (diff_ids, i));
    if (!want || strcmp (want, diff_id) != 0)
      return nsbox_error_set (
          err, EBADMSG, "layer %zu: DiffID mismatch: the config says '%s', the content is '%s'", i,
          want ? want : "(none)", diff_id);
  }
  return 0;
}

/* OCI layouts ------------------------------------------------------------ */

static bool
is_index_type (const char *media)
{
  return media && (strcmp (media, MEDIA_OCI_INDEX) == 0 || strcmp (media, MEDIA_DOCKER_LIST) == 0);
}

static const char *
entry_name (json_t *entry)
{
  /* Docker 25 and containerd put the full reference here; skopeo and umoci
   * write only the tag into ref.name. */
  json_t *ann = json_object_get (entry, "annotations");
  const char *name = json_string_value (json_object_get (ann, "io.containerd.image.name"));
  return name ? name
              : json_string_value (json_object_get (ann, "org.opencontainers.image.ref.name"));
}

static bool
name_matches (const char *name, const char *want)
{
  if (!name)
    return false;
  if (strcmp (name, want) == 0)
    return true;
  size_t n = strlen (name), w = strlen (want);
  /* A full reference matches its tag ("docker.io/x/y:t" ~ "t"). */
  if (n > w + 1 && name[n - w - 1] == ':' && strcmp (name + n - w, want) == 0)
    return true;
  cleanup_free char *a = rt_normalize_ref (name);
  cleanup_free char *b = rt_normalize_ref (want);
  return a && b && strcmp (a, b) == 0;
}

static int
select_manifest (struct import *im, char **digest_out, char **name_out, struct nsbox_error **err)
{
  if (!im->layout
      || strcmp (json_string_value (json_object_get (im->layout, "imageLayoutVersion")) ?: "",
                 "1.0.0")
             != 0)
    return nsbox_error_set (err, EBADMSG, "'%s': oci-layout missing or not version 1.0.0",
                            im->path);
  json_t *manifests = json_object_get (im->index, "manifests");
  if (!json_is_array (manifests) || json_array_size (manifests) == 0)
    return nsbox_error_set (err, EBADMSG, "'%s': index.json lists no image", im->path);
  json_t *entry = NULL;
  if (im->ref)
    {
      size_t i;
      json_t *e;
      json_array_foreach (manifests, i, e)
      {
        if (name_matches (entry_name (e), im->ref))
          {
            entry = e;
            break;
          }
      }
      if (!entry)
        return nsbox_error_set (err, ENOENT, "'%s': no image named '%s'", im->path, im->ref);
    }
  else if (json_array_size (manifests) == 1)
    entry = json_array_get (manifests, 0);
  else
    return nsbox_error_set (err, EINVAL, "'%s' holds %zu images: name one with :TAG", im->path,
                            json_array_size (manifests));
  const char *name = entry_name (entry);
  cleanup_json json_t *holder = NULL;
  for (unsigned depth = 0;; depth++)
    {
      const char *digest = json_string_value (json_object_get (entry, "digest"));
      json_int_t size = json_integer_value (json_object_get (entry, "size"));
      int ret = ensure_blob (im, digest, size, err);
      if (ret < 0)
        return ret;
      cleanup_json json_t *doc = NULL;
      ret = rt_store_read_json (im->store, digest, &doc, err);
      if (ret < 0)
        return ret;
      const char *media = json_string_value (json_object_get (entry, "mediaType"));
      if (!is_index_type (media) && !json_object_get (doc, "manifests"))
        {
          *digest_out = strdup (digest);
          *name_out = name ? strdup (name) : NULL;
          if (!*digest_out)
            return nsbox_error_oom (err);
          return 0;
        }
      if (depth >= MAX_INDEX_DEPTH)
        return nsbox_error_set (err, EBADMSG, "'%s': indexes nested too deep", im->path);
      if (json_object_get (doc, "layers") || json_object_get (doc, "config"))
        return nsbox_error_set (err, EBADMSG, "index '%s' also holds an image", digest);
      struct nsbox_platform want;
      nsbox_platform_host (&want);
      json_t *chosen = NULL;
      ret = nsbox_platform_select (doc, &want, im->path, &chosen, err);
      if (ret < 0)
        return ret;
      json_incref (chosen);
      if (holder)
        json_decref (holder);
      holder = chosen;
      entry = chosen;
    }
}

/* Legacy docker save ----------------------------------------------------- */

static const char *
sniff_layer_type (struct import *im, const char *digest)
{
  cleanup_close int fd = -1;
  unsigned char magic[4] = { 0 };
  if (nsbox_store_open_blob (im->store, digest, &fd, NULL) < 0 || read (fd, magic, 4) < 2)
    return MEDIA_OCI_LAYER;
  if (magic[0] == 0x1f && magic[1] == 0x8b)
    return MEDIA_OCI_LAYER "+gzip";
  if (magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd)
    return MEDIA_OCI_LAYER "+zstd";
  return MEDIA_OCI_LAYER;
}

static struct member *
find_member (struct import *im, const char *name)
{
  if (!name)
    return NULL;
  if (strncmp (name, "./", 2) == 0)
    name += 2;
  return rt_strmap_get (&im->members, name);
}

static int
legacy_manifest (struct import *im, char **digest_out, char **name_out, struct nsbox_error **err)
{
  if (!json_is_array (im->legacy) || json_array_size (im->legacy) == 0)
    return nsbox_error_set (err, EBADMSG, "'%s': manifest.json lists no image", im->path);
  json_t *entry = NULL;
  const char *tag = NULL;
  size_t i, k;
  json_t *e, *t;
  json_array_foreach (im->legacy, i, e)
  {
    json_array_foreach (json_object_get (e, "RepoTags"), k, t)
    {
      if (!entry && (!im->ref || name_matches (json_string_value (t), im->ref)))
        {
          entry = e;
          tag = json_string_value (t);
        }
    }
  }
  if (!entry && json_array_size (im->legacy) == 1)
    entry = json_array_get (im->legacy, 0);
  if (!entry)
    return nsbox_error_set (err, ENOENT, "'%s': no image tagged '%s'", im->path,
                            im->ref ? im->ref : "(any)");
  struct member *config = find_member (im, json_string_value (json_object_get (entry, "Config")));
  if (!config)
    return nsbox_error_set (err, EBADMSG, "'%s': the config of the image is missing", im->path);
  json_t *layers = json_array ();
  cleanup_json json_t *manifest
      = json_pack ("{s:i, s:s, s:{s:s, s:s, s:I}, s:o}", "schemaVersion", 2, "mediaType",
                   MEDIA_OCI_MANIFEST, "config", "mediaType", MEDIA_OCI_CONFIG, "digest",
                   config->digest, "size", (json_int_t)config->size, "layers", layers);
  if (!manifest)
    return nsbox_error_oom (err);
  json_array_foreach (json_object_get (entry, "Layers"), i, e)
  {
    struct member *m = find_member (im, json_string_value (e));
    if (!m)
      return nsbox_error_set (err, EBADMSG, "'%s': layer '%s' is missing", im->path,
                              json_string_value (e) ?: "?");
    json_array_append_new (layers, json_pack ("{s:s, s:s, s:I}", "mediaType",
                                              sniff_layer_type (im, m->digest), "digest", m->digest,
                                              "size", (json_int_t)m->size));
  }
  cleanup_free char *text = json_dumps (manifest, JSON_COMPACT | JSON_SORT_KEYS);
  if (!text)
    return nsbox_error_oom (err);
  int ret = nsbox_store_put_blob (im->store, NULL, text, strlen (text), digest_out, err);
  if (ret < 0)
    return ret;
  *name_out = tag ? strdup (tag) : NULL;
  return 0;
}

/* Entry point ------------------------------------------------------------ */

static char *
ref_for (struct import *im, const char *name)
{
  const char *given = im->kind == SOURCE_DOCKER_ARCHIVE && im->ref ? im->ref : name;
  if (given && (strchr (given, '/') || im->kind == SOURCE_DOCKER_ARCHIVE))
    return rt_normalize_ref (given);
  cleanup_free char *copy = strdup (im->path);
  if (!copy)
    return NULL;
  char *base = basename (copy);
  char *dot = strrchr (base, '.');
  if (dot && dot != base)
    *dot = '\0';
  char *candidate = NULL;
  if (!(candidate = xasprintf ("localhost/import/%s:%s", base, given ? given : "latest")))
    return NULL;
  char *normal = rt_normalize_ref (candidate);
  if (!normal)
    {
      free (candidate);
      if (!(candidate = xasprintf ("localhost/import/image:%s", given ? given : "latest")))
        return NULL;
      normal = rt_normalize_ref (candidate);
    }
  free (candidate);
  return normal;
}

int
nsbox_store_import (struct nsbox_store *store, const char *source, char **ref_out,
                    char **manifest_digest, struct nsbox_error **err)
{
  struct import im = { .store = store, .dir_fd = -1 };
  cleanup_free char *digest = NULL, *name = NULL, *ref = NULL;
  int ret = parse_source (source, &im, err);
  if (ret < 0)
    goto out;
  im.copy_buf = malloc (COPY_CHUNK);
  if (!im.copy_buf)
    {
      ret = nsbox_error_oom (err);
      goto out;
    }
  if (im.kind == SOURCE_OCI_DIR)
    {
      im.dir_fd = open (im.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (im.dir_fd < 0)
        {
          ret = nsbox_error_sys (err, errno, "open '%s'", im.path);
          goto out;
        }
      static const char *const files[] = { "oci-layout", "index.json" };
      for (size_t i = 0; i < 2 && ret >= 0; i++)
        {
          cleanup_close int fd = openat (im.dir_fd, files[i], O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
          json_error_t jerr;
          json_t *doc = fd < 0 ? NULL : json_loadfd (fd, 0, &jerr);
          if (!doc)
            ret = nsbox_error_set (err, EBADMSG, "'%s/%s': missing or invalid", im.path, files[i]);
          else if (i == 0)
            im.layout = doc;
          else
            im.index = doc;
        }
    }
  else
    ret = stream_archive (&im, err);
  if (ret < 0)
    goto out;
  if (im.index && im.layout)
    ret = select_manifest (&im, &digest, &name, err);
  else if (im.kind == SOURCE_DOCKER_ARCHIVE && im.legacy)
    ret = legacy_manifest (&im, &digest, &name, err);
  else
    ret = nsbox_error_set (err, EBADMSG, "'%s' is neither an OCI layout nor a docker save archive",
                           im.path);
  if (ret < 0)
    goto out;
  char platform[64];
  ret = verify_image (&im, digest, platform, err);
  if (ret < 0)
    {
      nsbox_error_prefix (err, "import '%s'", source);
      goto out;
    }
  ref = ref_for (&im, name);
  if (!ref)
    {
      ret = nsbox_error_set (err, EINVAL, "import '%s': no usable image name (give one: %s:REF)",
                             source,
                             im.kind == SOURCE_DOCKER_ARCHIVE ? "docker-archive:FILE" : "oci:DIR");
      goto out;
    }
  ret = nsbox_store_tag (store, ref, digest, platform, err);
  if (ret < 0)
    goto out;
  if (ref_out)
    *ref_out = TAKE_PTR (ref);
  if (manifest_digest)
    *manifest_digest = TAKE_PTR (digest);
out:
  import_clear (&im);
  return ret;
}
