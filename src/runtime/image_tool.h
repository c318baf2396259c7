/* nsbox_image_hold (image.h) through the nsbox-image tool, for the nsbox
 * CLI (image_tool.c). */
#ifndef NSBOX_IMAGE_TOOL_H
#define NSBOX_IMAGE_TOOL_H

#include "image.h"
#include "util.h"

int nsbox_image_tool_hold (const char *store, const char *ref, enum nsbox_pull_policy policy,
                           struct nsbox_image *image, struct nsbox_error **err) NSBOX_INTERNAL;

#endif
