/* Registry authentication: WWW-Authenticate challenges, credentials from the
 * Docker client configuration, and the per-(registry, scope) token cache:
 * the Docker registry token flow (distribution's token authentication). */
#ifndef NSBOX_AUTH_H
#define NSBOX_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

struct nsbox_challenge
{
  char *scheme; /* "bearer", "basic" (lowercased) */
  char *realm;
  char *service;
  char *scope;
  char *error; /* "insufficient_scope", "invalid_token", ... */
};

/* Parses every challenge of the given header values (RFC 7235: several per
 * header, quoted strings with backslash escapes). Returns the number found
 * (>= 0) with the array in *out (free with nsbox_challenges_free). */
int nsbox_challenges_parse (const char *const *headers, size_t n_headers,
                            struct nsbox_challenge **out, struct nsbox_error **err);
void nsbox_challenges_free (struct nsbox_challenge *challenges, size_t n);

struct nsbox_credentials
{
  char *username;
  char *secret;
  char *identity_token; /* refresh token for the OAuth2 grant, or NULL */
};

/* "index.docker.io" for every spelling of Docker Hub; otherwise the host
 * part of a config.json key (scheme and path dropped). Caller frees. */
char *nsbox_credentials_key (const char *registry);

/* Looks up credentials for `registry` (a reference domain such as
 * "docker.io" or "127.0.0.1:5000") in $DOCKER_CONFIG/config.json, else
 * ~/.docker/config.json: credHelpers[registry], else credsStore (running
 * docker-credential-NAME get), else auths[registry].auth. Returns 1 with
 * *out filled, 0 when there are none, -errno on a broken configuration or
 * helper. */
int nsbox_credentials_lookup (const char *registry, struct nsbox_credentials *out,
                              struct nsbox_error **err);
void nsbox_credentials_clear (struct nsbox_credentials *creds);

/* The token cache, process-wide and thread-safe. get returns a copy of an
 * unexpired token (caller frees) or NULL. */
char *nsbox_token_cache_get (const char *registry, const char *scope);
void nsbox_token_cache_put (const char *registry, const char *scope, const char *token,
                            long expires_in_seconds);
void nsbox_token_cache_drop (const char *registry, const char *scope);

/* Standard base64 without line breaks. Caller frees; NULL on OOM or (decode)
 * malformed input. */
char *nsbox_base64_encode (const void *data, size_t len);
char *nsbox_base64_decode (const char *text, size_t *len);

#endif
