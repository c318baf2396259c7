/* Entry points into the static document checks of registry.c and unpack.c,
 * for the fuzz targets in tests/fuzz/ only: nothing else calls them. */
#ifndef NSBOX_FUZZ_ENTRY_H
#define NSBOX_FUZZ_ENTRY_H

#include <stddef.h>

#include <jansson.h>

#include "error.h"
#include "platform.h"
#include "util.h"

/* manifest_parse on a copy of body; *json (caller decrefs) and *media_type
 * (caller frees) on success. */
NSBOX_INTERNAL int registry_fuzz_manifest_parse (const char *body, size_t len,
                                                 const char *content_type, json_t **json,
                                                 char **media_type, struct nsbox_error **err);
/* descriptor_read. */
NSBOX_INTERNAL int registry_fuzz_descriptor_read (json_t *obj, struct nsbox_error **err);
/* config_check. */
NSBOX_INTERNAL int registry_fuzz_config_check (const char *data, size_t len, size_t n_layers,
                                               const struct nsbox_platform *want,
                                               struct nsbox_error **err);
/* check_manifest of unpack.c. */
NSBOX_INTERNAL int rt_fuzz_check_manifest (json_t *manifest, struct nsbox_error **err);
/* env_from_config of unpack.c; *env is freed with nsbox_strv_free. */
NSBOX_INTERNAL int rt_fuzz_env_from_config (json_t *config, char ***env, struct nsbox_error **err);

#endif
