/* The image store as the sandbox side (src/) sees it, its one interface:
 * an image reference held as an unpacked rootfs, the image config's Env and
 * the store's shared lock, so that `nsbox-image gc` cannot remove the tree
 * while a sandbox runs it.
 *
 * Two implementations, chosen at link time: image.c resolves in process
 * (libnsbox); src/image_tool.c asks `nsbox-image resolve --pass-lock` (the
 * nsbox CLI, which so loads neither libcurl nor libarchive on every run). */
#ifndef NSBOX_IMAGE_H
#define NSBOX_IMAGE_H

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "util.h"

enum nsbox_pull_policy
{
  NSBOX_PULL_MISSING = 0,
  NSBOX_PULL_ALWAYS,
  NSBOX_PULL_NEVER,
};

static const char *const nsbox_pull_policy_names[] = { "missing", "always", "never" };

static inline const char *
nsbox_pull_policy_name (enum nsbox_pull_policy policy)
{
  return (size_t)policy < ARRAY_SIZE (nsbox_pull_policy_names) ? nsbox_pull_policy_names[policy]
                                                               : "?";
}

/* 0, or -EINVAL when name is none of "missing", "always", "never". */
static inline int
nsbox_pull_policy_parse (const char *name, enum nsbox_pull_policy *policy)
{
  for (size_t i = 0; i < ARRAY_SIZE (nsbox_pull_policy_names); i++)
    if (strcmp (name, nsbox_pull_policy_names[i]) == 0)
      {
        *policy = (enum nsbox_pull_policy)i;
        return 0;
      }
  return -EINVAL;
}

struct nsbox_image
{
  char *rootfs; /* the unpacked tree; nobody changes it while the lock is held */
  char **env;   /* the image config's Env, NULL-terminated */
  char *digest; /* the manifest digest, "sha256:<64 hex>" */
  int lock_fd;  /* the store's shared lock, taken before REF was resolved */
};

/* Resolves ref in the image store (NULL: $NSBOX_STORE, else the default),
 * pulling per policy, and holds it in *image until nsbox_image_release. On
 * failure *image holds nothing. The interface the sandbox layers call; a
 * build chooses its implementation (src/runtime/image_source.c): the store
 * itself in libnsbox (nsbox_image_store_hold, image.c), or the nsbox-image
 * tool in the nsbox CLI (nsbox_image_tool_hold, src/runtime/image_tool.c). */
int nsbox_image_hold (const char *store, const char *ref, enum nsbox_pull_policy policy,
                      struct nsbox_image *image, struct nsbox_error **err) NSBOX_INTERNAL;

/* nsbox_image_hold done here, in this process (libcurl, libarchive). */
int nsbox_image_store_hold (const char *store, const char *ref, enum nsbox_pull_policy policy,
                            struct nsbox_image *image, struct nsbox_error **err) NSBOX_INTERNAL;

static inline void
nsbox_image_release (struct nsbox_image *image)
{
  free (TAKE_PTR (image->rootfs));
  nsbox_strv_free (TAKE_PTR (image->env));
  free (TAKE_PTR (image->digest));
  closep (&image->lock_fd);
  image->lock_fd = -1;
}

#endif
