/* Pulling images from a registry (registry.c) and resolving a reference for
 * `nsbox run --image` (image.c). */
#ifndef NSBOX_IMAGE_H
#define NSBOX_IMAGE_H

#include <stdbool.h>

#include "store.h"

enum nsbox_pull_policy
{
  NSBOX_PULL_MISSING = 0,
  NSBOX_PULL_ALWAYS,
  NSBOX_PULL_NEVER,
};

struct nsbox_pull_options
{
  const char *platform;                   /* "linux/amd64", "linux/arm64/v8"; NULL: the host's */
  const char *const *insecure_registries; /* plain HTTP allowed (loopback always is) */
  bool progress;                          /* a progress bar on stderr when it is a TTY */
};

/* Pulls REF into the store and tags it; verifies everything. Returns the
 * image manifest digest (caller frees) in *manifest_digest when non-NULL. */
int nsbox_image_pull (struct nsbox_store *store, const char *ref,
                      const struct nsbox_pull_options *options, char **manifest_digest,
                      struct nsbox_error **err);

/* REF -> unpacked rootfs path and image Env, pulling according to policy. */
int nsbox_image_resolve (struct nsbox_store *store, const char *ref, enum nsbox_pull_policy policy,
                         const struct nsbox_pull_options *options, char **rootfs, char ***env,
                         struct nsbox_error **err);

#endif
