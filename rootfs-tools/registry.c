/* nsbox_image_pull: reference -> (index ->) manifest -> config + layers,
 * every document and blob verified by size and digest before it enters the
 * store, then the reference is tagged (the OCI distribution spec, with
 * Docker's schema 2 manifests and manifest lists). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "fuzz-entry.h"
#include "pull.h"
#include "platform.h"
#include "registry.h"
#include "store-private.h"
#include "util.h"

#define MAX_INDEX_DEPTH 4
#define MAX_BLOB_RECONNECTS 5
#define MAX_LAYER_BYTES (8LL << 30)

#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"

static const char manifest_accept[]
    = "Accept: " MT_OCI_INDEX ", " MT_DOCKER_LIST ", " MT_OCI_MANIFEST ", " MT_DOCKER_MANIFEST;

static const char *const config_media_types[] = {
  "application/vnd.oci.image.config.v1+json",
  "application/vnd.docker.container.image.v1+json",
};

static bool
in_list (const char *s, const char *const *list, size_t n)
{
  for (size_t i = 0; s && i < n; i++)
    if (strcmp (s, list[i]) == 0)
      return true;
  return false;
}

static bool
is_index_type (const char *t)
{
  return t && (strcmp (t, MT_OCI_INDEX) == 0 || strcmp (t, MT_DOCKER_LIST) == 0);
}

static bool
is_manifest_type (const char *t)
{
  return t && (strcmp (t, MT_OCI_MANIFEST) == 0 || strcmp (t, MT_DOCKER_MANIFEST) == 0);
}

/* A descriptor read from a manifest or index. */
struct descriptor
{
  const char *media_type;
  const char *digest;
  int64_t size;
};

static int
descriptor_read (json_t *obj, const char *what, struct descriptor *out, struct nsbox_error **err)
{
  json_t *size = json_object_get (obj, "size");
  struct descriptor d = {
    json_string_value (json_object_get (obj, "mediaType")),
    json_string_value (json_object_get (obj, "digest")),
    json_is_integer (size) ? (int64_t)json_integer_value (size) : -1,
  };
  if (!json_is_object (obj) || !d.digest || !nsbox_reference_digest_valid (d.digest))
    return nsbox_error_set (err, EBADMSG, "%s: missing or unsupported digest '%s'", what,
                            d.digest ? d.digest : "");
  if (d.size < 0)
    return nsbox_error_set (err, EBADMSG, "%s %s: missing or negative size", what, d.digest);
  *out = d;
  return 0;
}

/* ---- registry setup ---- */

static void
registry_free (struct registry *reg)
{
  if (reg->curl)
    curl_easy_cleanup (reg->curl);
  nsbox_reference_free (reg->ref);
  free (reg->ref_string);
  free (reg->host);
  free (reg->base_url);
  free (reg->default_scope);
  if (reg->authorization)
    explicit_bzero (reg->authorization, strlen (reg->authorization));
  free (reg->authorization);
  free (reg->token_scope);
  free (reg->last_warning);
  nsbox_credentials_clear (&reg->credentials);
}

/* NSBOX_IMAGE_STALL_SECONDS: the stall window, whole seconds. Unset or
 * empty means the default; anything else that is not a number in range is
 * an error rather than a silent default, so a typo cannot turn the
 * detection off or make it trip on every pull. */
static int
stall_seconds_from_env (unsigned *out, struct nsbox_error **err)
{
  const char *v = getenv ("NSBOX_IMAGE_STALL_SECONDS");
  if (!v || !*v)
    {
      *out = REGISTRY_STALL_SECONDS_DEFAULT;
      return 0;
    }
  char *end = NULL;
  errno = 0;
  unsigned long n = strtoul (v, &end, 10);
  if (*v < '0' || *v > '9' || errno || *end || n == 0 || n > REGISTRY_STALL_SECONDS_MAX)
    return nsbox_error_set (err, EINVAL,
                            "invalid NSBOX_IMAGE_STALL_SECONDS '%s': want whole seconds from 1 "
                            "to %u",
                            v, REGISTRY_STALL_SECONDS_MAX);
  *out = (unsigned)n;
  return 0;
}

static int
registry_init (struct registry *reg, struct nsbox_store *store, const char *text,
               const struct nsbox_pull_options *options, struct nsbox_error **err)
{
  int r = stall_seconds_from_env (&reg->stall_seconds, err);
  if (r < 0)
    return r;
  r = nsbox_reference_parse (text, &reg->ref, err);
  if (r < 0)
    return r;
  reg->store = store;
  reg->insecure = options ? options->insecure_registries : NULL;
  reg->progress = options ? options->progress : NULL;
  reg->progress_data = options ? options->progress_data : NULL;
  reg->ref_string = nsbox_reference_string (reg->ref);
  reg->host = strdup (nsbox_reference_registry_host (reg->ref));
  if (!reg->ref_string || !reg->host)
    return nsbox_error_oom (err);
  reg->plain_http = registry_host_insecure_ok (reg->host, reg->insecure);
  if (!(reg->base_url = xasprintf ("%s://%s", reg->plain_http ? "http" : "https", reg->host))
      || !(reg->default_scope = xasprintf ("repository:%s:pull", reg->ref->path)))
    return nsbox_error_oom (err);
  static bool curl_ready;
  if (!curl_ready)
    {
      /* Idempotent after the first success; thread-safe since 7.84. */
      if (curl_global_init (CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return nsbox_error_set (err, ENOMEM, "initialise libcurl");
      curl_ready = true;
    }
  reg->curl = curl_easy_init ();
  if (!reg->curl)
    return nsbox_error_set (err, ENOMEM, "initialise libcurl");
  return 0;
}

/* ---- manifests ---- */

struct manifest
{
  char digest[72];
  char *media_type;
  char *body;
  size_t len;
  json_t *json;
};

static void
manifest_clear (struct manifest *m)
{
  free (m->media_type);
  free (m->body);
  json_decref (m->json);
  memset (m, 0, sizeof *m);
}

/* Checks a manifest or index body: JSON, its mediaType (when present)
 * equal to the type the registry sent, not both an index and a manifest
 * (CVE-2021-41190), a type we know. */
static int
manifest_parse (struct registry *reg, struct manifest *m, const char *content_type,
                const char *what, struct nsbox_error **err)
{
  json_error_t jerr;
  m->json = json_loadb (m->body, m->len, JSON_REJECT_DUPLICATES, &jerr);
  if (!json_is_object (m->json))
    return nsbox_error_set (err, EBADMSG, "%s: not a JSON object (%d:%d: %s)", what, jerr.line,
                            jerr.column, jerr.text);
  const char *body_type = json_string_value (json_object_get (m->json, "mediaType"));
  bool has_manifests = json_object_get (m->json, "manifests") != NULL;
  bool has_image = json_object_get (m->json, "layers") || json_object_get (m->json, "config");
  if (has_manifests && has_image)
    return nsbox_error_set (
        err, EBADMSG, "%s: ambiguous document with both 'manifests' and 'layers'/'config'", what);
  if (content_type && body_type && strcmp (content_type, body_type) != 0)
    return nsbox_error_set (err, EBADMSG,
                            "%s: mediaType '%s' differs from the Content-Type '%s' the registry "
                            "sent",
                            what, body_type, content_type);
  const char *type = content_type ? content_type : body_type;
  if (!type)
    type = has_manifests ? MT_OCI_INDEX : MT_OCI_MANIFEST;
  if (!is_index_type (type) && !is_manifest_type (type))
    return nsbox_error_set (err, EPROTONOSUPPORT,
                            "%s: unsupported manifest type '%s' for '%s' (want an OCI or Docker "
                            "schema 2 manifest or index)",
                            what, type, reg->ref_string);
  if ((is_index_type (type) && has_image) || (is_manifest_type (type) && has_manifests))
    return nsbox_error_set (err, EBADMSG, "%s: content does not match its type '%s'", what, type);
  m->media_type = strdup (type);
  return m->media_type ? 0 : nsbox_error_oom (err);
}

static int
manifest_from_store (struct registry *reg, const char *digest, struct manifest *m,
                     struct nsbox_error **err)
{
  int r
      = nsbox_store_read_blob (reg->store, digest, REGISTRY_MAX_JSON_BYTES, &m->body, &m->len, err);
  if (r < 0)
    return r;
  snprintf (m->digest, sizeof m->digest, "%s", digest);
  return manifest_parse (reg, m, NULL, "stored manifest", err);
}

/* Fetches a manifest by tag or digest; `expected` (from an index) pins its
 * digest, size and type. With use_head, a HEAD first: a digest already in
 * the store is read from there. */
static int
manifest_fetch (struct registry *reg, const char *reference, const struct descriptor *expected,
                bool use_head, struct manifest *m, struct nsbox_error **err)
{
  cleanup_free char *url = NULL;
  char what[256];
  bool by_digest = nsbox_reference_digest_valid (reference);
  snprintf (what, sizeof what, "manifest '%s'", reference);
  if (!(url = xasprintf ("%s/v2/%s/manifests/%s", reg->base_url, reg->ref->path, reference)))
    return nsbox_error_oom (err);

  if (by_digest && nsbox_store_has_blob (reg->store, reference))
    {
      int r = manifest_from_store (reg, reference, m, err);
      if (r >= 0 && expected && (int64_t)m->len != expected->size)
        r = nsbox_error_set (err, EBADMSG, "%s: stored size %zu, descriptor says %lld", what,
                             m->len, (long long)expected->size);
      return r;
    }

  struct registry_response resp = { .body_max = REGISTRY_MAX_JSON_BYTES, .content_length = -1 };
  int r;
  if (use_head)
    {
      reg->manifest_requests++;
      r = registry_request (reg, REGISTRY_HEAD, url, manifest_accept, 0, NULL, &resp, what, err);
      if (r < 0)
        goto out;
      if (resp.status == 200 && resp.docker_digest
          && nsbox_reference_digest_valid (resp.docker_digest)
          && nsbox_store_has_blob (reg->store, resp.docker_digest))
        {
          r = manifest_from_store (reg, resp.docker_digest, m, err);
          goto out;
        }
    }
  reg->manifest_requests++;
  r = registry_request (reg, REGISTRY_GET, url, manifest_accept, 0, NULL, &resp, what, err);
  if (r < 0)
    goto out;
  if (resp.status != 200)
    {
      r = registry_status_error (reg, &resp, what, err);
      goto out;
    }
  m->body = TAKE_PTR (resp.body);
  m->len = resp.body_len;
  if (!m->body)
    {
      m->body = strdup ("");
      if (!m->body)
        {
          r = nsbox_error_oom (err);
          goto out;
        }
    }
  if (rt_sha256_buffer (m->body, m->len, m->digest) < 0)
    {
      r = nsbox_error_set (err, EIO, "%s: sha256 failed", what);
      goto out;
    }
  /* Size first, then digest, over the bytes received. */
  if (expected && (int64_t)m->len != expected->size)
    r = nsbox_error_set (err, EBADMSG,
                         "%s: digest mismatch: received %zu bytes, the index says %lld", what,
                         m->len, (long long)expected->size);
  else if (by_digest && strcmp (m->digest, reference) != 0)
    r = nsbox_error_set (err, EBADMSG, "%s: digest mismatch: received content hashes to %s", what,
                         m->digest);
  else if (resp.docker_digest && strcmp (resp.docker_digest, m->digest) != 0)
    r = nsbox_error_set (err, EBADMSG,
                         "%s: digest mismatch: Docker-Content-Digest says %s, content hashes to %s",
                         what, resp.docker_digest, m->digest);
  if (r < 0)
    goto out;
  if (!resp.content_type)
    {
      r = nsbox_error_set (err, EBADMSG, "%s: the registry sent no Content-Type", what);
      goto out;
    }
  r = manifest_parse (reg, m, resp.content_type, what, err);
  if (r >= 0 && expected && expected->media_type
      && strcmp (expected->media_type, m->media_type) != 0)
    r = nsbox_error_set (err, EBADMSG, "%s: type '%s' differs from the index's '%s'", what,
                         m->media_type, expected->media_type);
  if (r >= 0)
    r = nsbox_store_put_blob (reg->store, m->digest, m->body, m->len, NULL, err);
out:
  registry_response_clear (&resp);
  if (r < 0 && err && *err)
    nsbox_error_prefix (err, "pull '%s'", reg->ref_string);
  return r;
}

/* ---- blobs ---- */

/* A layer streamed into the store's ingest, resuming cut transfers with a
 * Range request on the registry URL (redirect targets may expire). */
static int
blob_download (struct registry *reg, const struct descriptor *d, const char *what, bool counted,
               struct nsbox_error **err)
{
  struct nsbox_ingest *ingest = NULL;
  bool already = false;
  uint64_t resume = 0;
  char step[160];
  snprintf (step, sizeof step, "%s %s", what, d->digest);
  int r
      = nsbox_store_ingest_begin (reg->store, d->digest, d->size, &ingest, &already, &resume, err);
  if (r < 0)
    return nsbox_error_prefix (err, "%s", step);
  if (already)
    {
      if (counted)
        reg->progress_done += (uint64_t)d->size;
      return 0;
    }
  cleanup_free char *url = NULL;
  if (!(url = xasprintf ("%s/v2/%s/blobs/%s", reg->base_url, reg->ref->path, d->digest)))
    {
      nsbox_ingest_abort (ingest, true);
      return nsbox_error_oom (err);
    }
  struct registry_blob_sink sink = { .ingest = ingest, .size = d->size, .counted = counted };
  struct registry_response resp = { .body_max = REGISTRY_MAX_SMALL_BYTES, .content_length = -1 };
  unsigned reconnects = 0;
  for (;;)
    {
      if (nsbox_ingest_offset (ingest) == (uint64_t)d->size && d->size > 0)
        break;
      reg->blob_requests++;
      r = registry_request (reg, REGISTRY_GET, url, NULL, 0, &sink, &resp, step, err);
      if (r == -EPIPE
          || (r == 0 && (resp.status == 200 || resp.status == 206)
              && nsbox_ingest_offset (ingest) < (uint64_t)d->size))
        {
          /* Cut mid-way: ask for the rest. */
          if (++reconnects > MAX_BLOB_RECONNECTS)
            {
              r = nsbox_error_set (err, ENETUNREACH,
                                   "%s: network failure: transfer cut %u times, giving up at "
                                   "byte %llu of %lld",
                                   step, MAX_BLOB_RECONNECTS,
                                   (unsigned long long)nsbox_ingest_offset (ingest),
                                   (long long)d->size);
              break;
            }
          continue;
        }
      if (r == 0 && resp.status != 200 && resp.status != 206)
        r = registry_status_error (reg, &resp, step, err);
      break;
    }
  free (sink.error_text);
  registry_response_clear (&resp);
  if (r < 0)
    {
      /* A verification failure discards the bytes; a network one keeps
       * them for the next run. */
      nsbox_ingest_abort (ingest, r == -ENETUNREACH || r == -EAGAIN || r == -EIO);
      return r;
    }
  r = nsbox_ingest_commit (ingest, err);
  if (r < 0)
    return nsbox_error_prefix (err, "%s", step);
  if (counted)
    reg->progress_done += (uint64_t)d->size;
  reg->progress_current = 0;
  return 0;
}

/* A small blob (the config): downloaded like a layer (once, under the
 * blob's lock, verified on commit), then read back from the store. */
static int
blob_fetch_small (struct registry *reg, const struct descriptor *d, const char *what, char **data,
                  size_t *len, struct nsbox_error **err)
{
  if (d->size > (int64_t)REGISTRY_MAX_JSON_BYTES)
    return nsbox_error_set (err, EFBIG, "%s %s: %lld bytes is more than the %u allowed", what,
                            d->digest, (long long)d->size, REGISTRY_MAX_JSON_BYTES);
  int r = blob_download (reg, d, what, false, err);
  if (r < 0)
    return r;
  r = nsbox_store_read_blob (reg->store, d->digest, REGISTRY_MAX_JSON_BYTES, data, len, err);
  if (r < 0)
    return nsbox_error_prefix (err, "%s %s", what, d->digest);
  if ((int64_t)*len != d->size)
    {
      free (*data);
      return nsbox_error_set (err, EBADMSG, "%s %s: stored size %zu, manifest says %lld", what,
                              d->digest, *len, (long long)d->size);
    }
  return 0;
}

/* ---- the image ---- */

static void
platform_from_config (json_t *config, struct nsbox_platform *p)
{
  const char *os = json_string_value (json_object_get (config, "os"));
  const char *arch = json_string_value (json_object_get (config, "architecture"));
  const char *variant = json_string_value (json_object_get (config, "variant"));
  memset (p, 0, sizeof *p);
  snprintf (p->os, sizeof p->os, "%s", os ? os : "");
  snprintf (p->architecture, sizeof p->architecture, "%s", arch ? arch : "");
  snprintf (p->variant, sizeof p->variant, "%s", variant ? variant : "");
  nsbox_platform_normalize (p);
}

static int
config_check (struct registry *reg, const char *data, size_t len, size_t n_layers,
              const struct nsbox_platform *want, struct nsbox_platform *got,
              struct nsbox_error **err)
{
  json_error_t jerr;
  json_auto_t *config = json_loadb (data, len, 0, &jerr);
  if (!json_is_object (config))
    return nsbox_error_set (err, EBADMSG, "image config of '%s': %d:%d: %s", reg->ref_string,
                            jerr.line, jerr.column, jerr.text);
  json_t *rootfs = json_object_get (config, "rootfs");
  const char *type = json_string_value (json_object_get (rootfs, "type"));
  json_t *diff_ids = json_object_get (rootfs, "diff_ids");
  if (!type || strcmp (type, "layers") != 0 || !json_is_array (diff_ids))
    return nsbox_error_set (err, EBADMSG, "image config of '%s': rootfs.type is not 'layers'",
                            reg->ref_string);
  if (json_array_size (diff_ids) != n_layers)
    return nsbox_error_set (err, EBADMSG, "image config of '%s': %zu diff_ids for %zu layers",
                            reg->ref_string, json_array_size (diff_ids), n_layers);
  platform_from_config (config, got);
  if (!nsbox_platform_equal (got, want))
    {
      char a[96], b[96];
      nsbox_platform_format (got, a, sizeof a);
      nsbox_platform_format (want, b, sizeof b);
      return nsbox_error_set (err, ENOEXEC, "image '%s' is for platform '%s', not '%s'",
                              reg->ref_string, a, b);
    }
  return 0;
}

static int
pull_image_manifest (struct registry *reg, struct manifest *m, const struct nsbox_platform *want,
                     struct nsbox_platform *got, struct nsbox_error **err)
{
  struct descriptor config;
  int r = descriptor_read (json_object_get (m->json, "config"), "config", &config, err);
  json_t *layers = json_object_get (m->json, "layers");
  if (r >= 0 && !in_list (config.media_type, config_media_types, ARRAY_SIZE (config_media_types)))
    r = nsbox_error_set (err, EPROTONOSUPPORT, "unsupported config type '%s'",
                         config.media_type ? config.media_type : "(none)");
  if (r >= 0 && !json_is_array (layers))
    r = nsbox_error_set (err, EBADMSG, "manifest %s has no layers array", m->digest);
  /* Before downloading any: their count is a limit of the unpack. */
  if (r >= 0)
    r = rt_check_layer_count (reg->store, layers, m->digest, err);
  if (r < 0)
    return nsbox_error_prefix (err, "pull '%s'", reg->ref_string);

  size_t n = json_array_size (layers);
  struct descriptor *ds = calloc (n ? n : 1, sizeof *ds);
  if (!ds)
    return nsbox_error_oom (err);
  for (size_t i = 0; i < n && r >= 0; i++)
    {
      r = descriptor_read (json_array_get (layers, i), "layer", &ds[i], err);
      if (r >= 0 && !rt_layer_media_type_ok (ds[i].media_type))
        r = nsbox_error_set (err, EPROTONOSUPPORT,
                             "layer %s: unsupported type '%s' (foreign layers are not pulled)",
                             ds[i].digest, ds[i].media_type ? ds[i].media_type : "(none)");
      if (r >= 0 && ds[i].size > MAX_LAYER_BYTES)
        r = nsbox_error_set (err, EFBIG, "layer %s: %lld bytes is over the limit", ds[i].digest,
                             (long long)ds[i].size);
      /* Layers already in the store count as done. */
      if (r >= 0)
        reg->progress_total += (uint64_t)ds[i].size;
    }
  cleanup_free char *config_data = NULL;
  size_t config_len = 0;
  if (r >= 0)
    r = blob_fetch_small (reg, &config, "config", &config_data, &config_len, err);
  if (r >= 0)
    r = config_check (reg, config_data, config_len, n, want, got, err);
  for (size_t i = 0; i < n && r >= 0; i++)
    r = blob_download (reg, &ds[i], "layer", true, err);
  free (ds);
  registry_progress_report (reg, true);
  if (r < 0)
    return nsbox_error_prefix (err, "pull '%s'", reg->ref_string);
  return 0;
}

/* Follows indexes (at most MAX_INDEX_DEPTH) down to the image manifest. */
static int
resolve_platform (struct registry *reg, struct manifest *m, const struct nsbox_platform *want,
                  struct nsbox_error **err)
{
  for (int depth = 0; is_index_type (m->media_type); depth++)
    {
      if (depth >= MAX_INDEX_DEPTH)
        return nsbox_error_set (err, ELOOP, "pull '%s': indexes nested more than %d deep",
                                reg->ref_string, MAX_INDEX_DEPTH);
      json_t *entry = NULL;
      int r = nsbox_platform_select (m->json, want, reg->ref_string, &entry, err);
      struct descriptor d;
      if (r >= 0)
        r = descriptor_read (entry, "index entry", &d, err);
      if (r >= 0 && !is_index_type (d.media_type) && !is_manifest_type (d.media_type))
        r = nsbox_error_set (err, EPROTONOSUPPORT, "index entry %s: unsupported type '%s'",
                             d.digest, d.media_type ? d.media_type : "(none)");
      if (r < 0)
        return nsbox_error_prefix (err, "pull '%s'", reg->ref_string);
      struct manifest child = { 0 };
      char digest[72];
      snprintf (digest, sizeof digest, "%s", d.digest);
      r = manifest_fetch (reg, digest, &d, false, &child, err);
      if (r < 0)
        {
          manifest_clear (&child);
          return r;
        }
      manifest_clear (m);
      *m = child;
    }
  return 0;
}

int
nsbox_image_pull (struct nsbox_store *store, const char *ref,
                  const struct nsbox_pull_options *options, char **manifest_digest,
                  struct nsbox_error **err)
{
  struct registry reg = { 0 };
  struct manifest m = { 0 };
  struct nsbox_platform want, got;
  int r = registry_init (&reg, store, ref, options, err);
  if (r < 0)
    goto out;
  if (options && options->platform)
    r = nsbox_platform_parse (options->platform, &want, err);
  else
    nsbox_platform_host (&want);
  if (r < 0)
    goto out;

  const char *reference = reg.ref->digest ? reg.ref->digest : reg.ref->tag;
  /* HEAD first when this tag was pulled before: an unchanged image then
   * costs one request (HEAD does not count as a pull on Docker Hub). */
  bool use_head = false;
  if (!reg.ref->digest)
    {
      char *known = NULL;
      struct nsbox_error *e = NULL;
      use_head = nsbox_store_resolve (store, reg.ref_string, &known, &e) >= 0;
      free (known);
      nsbox_error_free (e);
    }
  r = manifest_fetch (&reg, reference, NULL, use_head, &m, err);
  if (r >= 0)
    r = resolve_platform (&reg, &m, &want, err);
  if (r >= 0)
    r = pull_image_manifest (&reg, &m, &want, &got, err);
  if (r < 0)
    goto out;
  char platform[96];
  nsbox_platform_format (&got, platform, sizeof platform);
  r = nsbox_store_tag (store, reg.ref_string, m.digest, platform, err);
  if (r < 0)
    {
      nsbox_error_prefix (err, "pull '%s': record the image", reg.ref_string);
      goto out;
    }
  if (manifest_digest)
    {
      *manifest_digest = strdup (m.digest);
      if (!*manifest_digest)
        r = nsbox_error_oom (err);
    }
out:
  manifest_clear (&m);
  registry_free (&reg);
  return r;
}

/* ---- entry points for tests/fuzz (fuzz-entry.h) ---- */

int
registry_fuzz_manifest_parse (const char *body, size_t len, const char *content_type, json_t **json,
                              char **media_type, struct nsbox_error **err)
{
  struct registry reg = { .ref_string = (char *)"fuzz" };
  struct manifest m = { .body = malloc (len ? len : 1), .len = len };
  if (!m.body)
    return nsbox_error_oom (err);
  if (len)
    memcpy (m.body, body, len);
  int r = manifest_parse (&reg, &m, content_type, "fuzz", err);
  if (r >= 0)
    {
      *json = TAKE_PTR (m.json);
      *media_type = TAKE_PTR (m.media_type);
    }
  manifest_clear (&m);
  return r;
}

int
registry_fuzz_descriptor_read (json_t *obj, struct nsbox_error **err)
{
  struct descriptor d;
  return descriptor_read (obj, "fuzz", &d, err);
}

int
registry_fuzz_config_check (const char *data, size_t len, size_t n_layers,
                            const struct nsbox_platform *want, struct nsbox_error **err)
{
  struct registry reg = { .ref_string = (char *)"fuzz" };
  struct nsbox_platform got;
  return config_check (&reg, data, len, n_layers, want, &got, err);
}
