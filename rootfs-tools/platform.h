/* Platforms (os/architecture/variant): the host's, parsed from --platform,
 * normalised like containerd's platforms package, and chosen from an OCI
 * image index or a Docker manifest list. */
#ifndef NSBOX_PLATFORM_H
#define NSBOX_PLATFORM_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "error.h"

struct nsbox_platform
{
  char os[32];
  char architecture[32];
  char variant[16]; /* "" when none */
};

/* Normalises in place: x86_64 -> amd64 (v1 dropped), aarch64 -> arm64 (v8
 * dropped), armhf -> arm/v7, armel -> arm/v6, arm -> arm/v7, i386 -> 386;
 * lowercase. */
void nsbox_platform_normalize (struct nsbox_platform *platform);

/* "os/arch[/variant]", normalised. EINVAL on anything else. */
int nsbox_platform_parse (const char *text, struct nsbox_platform *out, struct nsbox_error **err);

/* The platform this process runs on (linux/<uname -m>), normalised. */
void nsbox_platform_host (struct nsbox_platform *out);

/* "linux/arm64/v8" style; truncated to size. */
void nsbox_platform_format (const struct nsbox_platform *platform, char *buf, size_t size);

/* Whether the (normalised) platforms are the same. */
bool nsbox_platform_equal (const struct nsbox_platform *a, const struct nsbox_platform *b);

/* Picks the first entry of index["manifests"] for `want`, skipping entries
 * without a platform, with os "unknown" or annotated as attestation
 * manifests. Sets *chosen to the entry (borrowed). ENOEXEC when none
 * matches: the message lists the platforms available. EBADMSG when the
 * index has no manifests array. `what` names the image in messages. */
int nsbox_platform_select (json_t *index, const struct nsbox_platform *want, const char *what,
                           json_t **chosen, struct nsbox_error **err);

#endif
