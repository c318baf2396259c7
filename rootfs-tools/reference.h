/* Image references: parsing and normalisation with the grammar and the
 * defaults of distribution/reference (docker.io, library/, latest). */
#ifndef NSBOX_REFERENCE_H
#define NSBOX_REFERENCE_H

#include <stdbool.h>

#include "error.h"
#include "util.h"

struct nsbox_reference
{
  char *domain; /* "docker.io", "127.0.0.1:5000" */
  char *path;   /* "library/python" */
  char *tag;    /* NULL when the reference is by digest */
  char *digest; /* "sha256:<hex>", or NULL */
};

/* Parses and normalises `text` ("python:3.12-slim",
 * "127.0.0.1:5000/a/b:t@sha256:..."): a digest wins over a tag, which is
 * then dropped; no tag and no digest means "latest". EINVAL names the
 * offending part. */
NSBOX_INTERNAL int nsbox_reference_parse (const char *text, struct nsbox_reference **out,
                                          struct nsbox_error **err);
NSBOX_INTERNAL void nsbox_reference_free (struct nsbox_reference *ref);

/* "docker.io/library/python:3.12-slim" or "DOMAIN/PATH@sha256:...";
 * caller frees; NULL on out-of-memory. */
NSBOX_INTERNAL char *nsbox_reference_string (const struct nsbox_reference *ref);

/* The host[:port] serving the domain: registry-1.docker.io for docker.io. */
NSBOX_INTERNAL const char *nsbox_reference_registry_host (const struct nsbox_reference *ref);

/* "sha256:" followed by 64 lowercase hex digits. */
NSBOX_INTERNAL bool nsbox_reference_digest_valid (const char *digest);

#endif
