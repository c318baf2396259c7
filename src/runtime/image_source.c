/* Which implementation of the image interface (image.h) a build holds
 * images with. libnsbox resolves and pulls in the process, through the
 * store of rootfs-tools/; the nsbox CLI is built with NSBOX_IMAGE_TOOL and
 * asks the nsbox-image tool instead, so that a run never loads libcurl or
 * libarchive (the GNUmakefile compiles this file once for each). */
#include "image.h"
#include "image_tool.h"

int
nsbox_image_hold (const char *store, const char *ref, enum nsbox_pull_policy policy,
                  struct nsbox_image *image, struct nsbox_error **err)
{
#ifdef NSBOX_IMAGE_TOOL
  return nsbox_image_tool_hold (store, ref, policy, image, err);
#else
  return nsbox_image_store_hold (store, ref, policy, image, err);
#endif
}
