/* Pulling images from a registry (registry.c) and resolving a reference in
 * an open store (image.c): the image tool's side of image.h. */
#ifndef NSBOX_PULL_H
#define NSBOX_PULL_H

#include <stdbool.h>
#include <stdint.h>

#include "image.h"
#include "store.h"

/* Called as a pull of ref downloads: done of the total bytes of the blobs it
 * fetches, often; final once, at the end. The library never prints: the
 * image tool draws its progress bar from this. */
typedef void (*nsbox_pull_progress_fn) (void *data, const char *ref, uint64_t done, uint64_t total,
                                        bool final);

struct nsbox_pull_options
{
  const char *platform;                   /* "linux/amd64", "linux/arm64/v8"; NULL: the host's */
  const char *const *insecure_registries; /* plain HTTP allowed (loopback always is) */
  nsbox_pull_progress_fn progress;        /* NULL: none */
  void *progress_data;
};

/* Pulls REF into the store and tags it; verifies everything. Returns the
 * image manifest digest (caller frees) in *manifest_digest when non-NULL. */
int nsbox_image_pull (struct nsbox_store *store, const char *ref,
                      const struct nsbox_pull_options *options, char **manifest_digest,
                      struct nsbox_error **err);

/* REF -> unpacked rootfs path, image Env and (when manifest_digest is not
 * NULL) the manifest digest, pulling according to policy. */
int nsbox_image_resolve (struct nsbox_store *store, const char *ref, enum nsbox_pull_policy policy,
                         const struct nsbox_pull_options *options, char **rootfs, char ***env,
                         char **manifest_digest, struct nsbox_error **err);

#endif
