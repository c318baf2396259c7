/* SHA-256, from libcrypto loaded the first time a digest is taken (the
 * launcher of a run that needs none never loads it). Used for collected
 * files and the audit log. */
#ifndef NSBOX_DIGEST_H
#define NSBOX_DIGEST_H

#include <stddef.h>

#include "error.h"
#include "util.h"

#define NSBOX_SHA256_HEX 65 /* 64 lowercase hex digits and a NUL */

struct nsbox_sha256
{
  void *ctx; /* EVP_MD_CTX */
};

/* Starts a digest; fails (ENOENT, ENOSYS, ENOMEM) when libcrypto cannot be
 * loaded. nsbox_sha256_free releases a started digest, final or not. */
int nsbox_sha256_init (struct nsbox_sha256 *h, struct nsbox_error **err) NSBOX_INTERNAL;
int nsbox_sha256_update (struct nsbox_sha256 *h, const void *data, size_t len) NSBOX_INTERNAL;
int nsbox_sha256_final (struct nsbox_sha256 *h, char hex[NSBOX_SHA256_HEX]) NSBOX_INTERNAL;
void nsbox_sha256_free (struct nsbox_sha256 *h) NSBOX_INTERNAL;

/* The digest of one buffer. */
int nsbox_sha256_hex (const void *data, size_t len, char hex[NSBOX_SHA256_HEX],
                      struct nsbox_error **err) NSBOX_INTERNAL;

#endif
