/* Fuzz target: the image document checks of rootfs-tools on one arbitrary
 * JSON document, as a pull and an unpack apply them: manifest_parse (with
 * no Content-Type and with each type a registry may send), then for an
 * index the platform choice and the chosen descriptor, for a manifest its
 * config and layer descriptors and unpack's check_manifest, and the same
 * bytes read as an image config (config_check, ChainID, Env).
 *
 * Checked: no crash, leak or undefined behaviour; every failure fills the
 * error with the errno it returns; a parsed document's type is one we
 * know. */
#include <string.h>

#include <jansson.h>

#include "fuzz-entry.h"
#include "fuzz.h"
#include "platform.h"
#include "store-private.h"
#include "store.h"

static const char *const content_types[] = {
  NULL,
  "application/vnd.oci.image.index.v1+json",
  "application/vnd.oci.image.manifest.v1+json",
  "application/vnd.docker.distribution.manifest.list.v2+json",
  "application/vnd.docker.distribution.manifest.v2+json",
};

static void
check_failure (int r, struct nsbox_error **err, const char *what)
{
  if (r >= 0)
    FUZZ_CHECK (!*err, "%s succeeded and filled the error", what);
  else
    FUZZ_CHECK (*err && nsbox_error_errno (*err) == -r && *nsbox_error_message (*err),
                "%s failed with %d but the error is missing or disagrees", what, r);
  nsbox_error_free (*err);
  *err = NULL;
}

static bool
is_known_type (const char *type)
{
  for (size_t i = 1; i < sizeof content_types / sizeof content_types[0]; i++)
    if (strcmp (type, content_types[i]) == 0)
      return true;
  return false;
}

static bool
is_index_type (const char *type)
{
  return strcmp (type, content_types[1]) == 0 || strcmp (type, content_types[3]) == 0;
}

static void
check_index (json_t *index)
{
  static const char *const platforms[] = { "linux/amd64", "linux/arm64/v8", "linux/arm/v7" };
  for (size_t i = 0; i < sizeof platforms / sizeof platforms[0]; i++)
    {
      struct nsbox_platform want;
      struct nsbox_error *err = NULL;
      FUZZ_CHECK (nsbox_platform_parse (platforms[i], &want, &err) == 0, "platform '%s'",
                  platforms[i]);
      json_t *chosen = NULL;
      int r = nsbox_platform_select (index, &want, "fuzz", &chosen, &err);
      check_failure (r, &err, "nsbox_platform_select");
      if (r < 0)
        continue;
      FUZZ_CHECK (chosen, "nsbox_platform_select succeeded without an entry");
      check_failure (registry_fuzz_descriptor_read (chosen, &err), &err, "descriptor_read");
    }
}

static void
check_manifest_document (json_t *manifest)
{
  struct nsbox_error *err = NULL;
  check_failure (registry_fuzz_descriptor_read (json_object_get (manifest, "config"), &err), &err,
                 "descriptor_read");
  size_t i;
  json_t *layer;
  json_array_foreach (json_object_get (manifest, "layers"), i, layer)
  {
    check_failure (registry_fuzz_descriptor_read (layer, &err), &err, "descriptor_read");
  }
  check_failure (rt_fuzz_check_manifest (manifest, &err), &err, "check_manifest");
}

/* The document read as an image config. */
static void
check_config (const uint8_t *data, size_t size, json_t *config)
{
  struct nsbox_platform host;
  nsbox_platform_host (&host);
  struct nsbox_error *err = NULL;
  json_t *diff_ids = json_object_get (json_object_get (config, "rootfs"), "diff_ids");
  size_t n_layers = json_array_size (diff_ids);
  check_failure (registry_fuzz_config_check ((const char *)data, size, n_layers, &host, &err), &err,
                 "config_check");
  check_failure (registry_fuzz_config_check ((const char *)data, size, n_layers + 1, &host, &err),
                 &err, "config_check");
  char chain[RT_DIGEST_LEN + 1];
  int r = rt_chain_id (diff_ids, chain, &err);
  check_failure (r, &err, "rt_chain_id");
  if (r >= 0)
    FUZZ_CHECK (strlen (chain) == RT_DIGEST_LEN && nsbox_digest_valid (chain), "ChainID '%s'",
                chain);
  char **env = NULL;
  r = rt_fuzz_env_from_config (config, &env, &err);
  check_failure (r, &err, "env_from_config");
  for (size_t i = 0; env && env[i]; i++)
    FUZZ_CHECK (strchr (env[i], '='), "Env entry '%s' without '='", env[i]);
  nsbox_strv_free (env);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  for (size_t i = 0; i < sizeof content_types / sizeof content_types[0]; i++)
    {
      json_t *json = NULL;
      char *type = NULL;
      struct nsbox_error *err = NULL;
      int r = registry_fuzz_manifest_parse ((const char *)data, size, content_types[i], &json,
                                            &type, &err);
      check_failure (r, &err, "manifest_parse");
      if (r < 0)
        continue;
      FUZZ_CHECK (json_is_object (json) && type, "manifest_parse succeeded without a document");
      FUZZ_CHECK (is_known_type (type), "manifest_parse accepted the type '%s'", type);
      if (is_index_type (type))
        check_index (json);
      else
        check_manifest_document (json);
      json_decref (json);
      free (type);
    }
  json_t *config = json_loadb ((const char *)data, size, 0, NULL);
  check_config (data, size, config);
  json_decref (config);
  return 0;
}
