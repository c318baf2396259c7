/* nsbox_image_resolve: REF -> unpacked rootfs and image Env, pulling per
 * policy (pull.h); nsbox_image_hold, the in-process side of image.h. */
#include "pull.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>

#include "error.h"
#include "store-private.h"

int
nsbox_image_resolve (struct nsbox_store *store, const char *ref, enum nsbox_pull_policy policy,
                     const struct nsbox_pull_options *options, char **rootfs, char ***env,
                     char **manifest_digest, struct nsbox_error **err)
{
  if (!ref || !*ref)
    return nsbox_error_set (err, EINVAL, "empty image reference");
  cleanup_free char *digest = NULL;
  int ret = -ENOENT;
  if (policy != NSBOX_PULL_ALWAYS)
    {
      cleanup_error struct nsbox_error *lookup_err = NULL;
      ret = nsbox_store_lookup (store, ref, &digest, &lookup_err);
      if (ret < 0 && ret != -ENOENT)
        {
          if (err && !*err)
            *err = TAKE_PTR (lookup_err);
          return ret;
        }
      if (ret == -ENOENT && policy == NSBOX_PULL_NEVER)
        return nsbox_error_set (err, ENOENT,
                                "image '%s' is not in the store '%s' and pulling is off "
                                "(nsbox-image pull %s)",
                                ref, nsbox_store_root (store), ref);
    }
  if (ret < 0)
    {
      free (TAKE_PTR (digest));
      ret = nsbox_image_pull (store, ref, options, &digest, err);
      if (ret < 0)
        return ret;
    }
  char *path = NULL;
  char **strv = NULL;
  ret = nsbox_store_unpack (store, digest, &path, env ? &strv : NULL, err);
  if (ret < 0)
    return nsbox_error_prefix (err, "image '%s'", ref);
  *rootfs = path;
  if (env)
    *env = strv;
  if (manifest_digest)
    *manifest_digest = TAKE_PTR (digest);
  return 0;
}

int
nsbox_image_store_hold (const char *store_root, const char *ref, enum nsbox_pull_policy policy,
                        struct nsbox_image *image, struct nsbox_error **err)
{
  *image = (struct nsbox_image){ .lock_fd = -1 };
  struct nsbox_store *store = NULL;
  int ret = nsbox_store_open (store_root, &store, err);
  if (ret < 0)
    return ret;
  struct nsbox_pull_options options = { 0 };
  ret = nsbox_image_resolve (store, ref, policy, &options, &image->rootfs, &image->env,
                             &image->digest, err);
  /* The store took its shared lock when it opened: a duplicate of that fd
   * shares the lock and outlives the store. */
  if (ret == 0 && (image->lock_fd = fcntl (nsbox_store_lock_fd (store), F_DUPFD_CLOEXEC, 3)) < 0)
    ret = nsbox_error_sys (err, errno, "hold the lock of image store '%s'",
                           nsbox_store_root (store));
  nsbox_store_close (store);
  if (ret < 0)
    nsbox_image_release (image);
  return ret;
}
