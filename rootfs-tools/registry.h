/* The registry client behind nsbox_image_pull: one libcurl handle per
 * pull, authentication (auth.h), retries, and registry error documents.
 * registry_http.c holds the HTTP exchange, registry.c the pull. */
#ifndef NSBOX_REGISTRY_H
#define NSBOX_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "auth.h"
#include "error.h"
#include "reference.h"
#include "pull.h"
#include "store.h"

#define REGISTRY_MAX_CHALLENGES 8
#define REGISTRY_MAX_JSON_BYTES (4u << 20)  /* manifests, configs */
#define REGISTRY_MAX_SMALL_BYTES (1u << 20) /* error documents, tokens */
/* A transfer that moves fewer than REGISTRY_STALL_MIN_RATE bytes a second
 * for the stall window (NSBOX_IMAGE_STALL_SECONDS, default 60) stalled. */
#define REGISTRY_STALL_MIN_RATE 1024
#define REGISTRY_STALL_SECONDS_DEFAULT 60u
#define REGISTRY_STALL_SECONDS_MAX 86400u

struct registry_response
{
  long status;
  char *content_type; /* without parameters */
  char *docker_digest;
  char *www_authenticate[REGISTRY_MAX_CHALLENGES];
  size_t n_www_authenticate;
  char *retry_after;
  char *ratelimit_limit;
  char *ratelimit_remaining;
  char *ratelimit_source;
  char *content_range;
  char *warning;          /* text of the first "Warning: 299 - "..."" header */
  int64_t content_length; /* -1 when absent */
  bool stalled;           /* aborted: slower than REGISTRY_STALL_MIN_RATE for the stall window */
  /* The body when not streamed into a blob sink, at most body_max bytes. */
  char *body;
  size_t body_len;
  size_t body_max;
  bool body_too_large;
};

/* Where a blob body goes: the store's ingest, checked against the
 * descriptor size and the Range asked for. */
struct registry_blob_sink
{
  struct nsbox_ingest *ingest;
  int64_t size;
  bool counted;     /* a layer: its bytes count in the pull's progress */
  bool started;     /* the first byte of this response arrived */
  uint64_t written; /* bytes written by this response */
  int error;        /* -errno that made us abort the transfer */
  char *error_text;
};

struct registry
{
  struct nsbox_store *store;
  struct nsbox_reference *ref;
  char *ref_string;    /* normalised reference for messages and the index */
  char *host;          /* host[:port] */
  char *base_url;      /* scheme://host */
  char *default_scope; /* repository:<path>:pull */
  bool plain_http;     /* loopback or --insecure-registry */
  const char *const *insecure;
  unsigned stall_seconds; /* the stall window */
  CURL *curl;
  char *authorization; /* the header line we currently send, or NULL */
  char *token_scope;   /* scope of the Bearer token in authorization */
  bool credentials_loaded;
  struct nsbox_credentials credentials;
  bool have_credentials;
  char *last_warning; /* Warning: 299 texts are logged once */
  /* progress, reported through the caller's function */
  nsbox_pull_progress_fn progress;
  void *progress_data;
  uint64_t progress_done;    /* bytes of finished blobs */
  uint64_t progress_total;   /* bytes of the layers */
  uint64_t progress_current; /* of the layer downloading */
  /* counters (also for tests) */
  unsigned manifest_requests;
  unsigned blob_requests;
  unsigned token_requests;
};

enum registry_method
{
  REGISTRY_GET = 0,
  REGISTRY_HEAD,
};

/* Whether plain HTTP may be used for host[:port]: loopback, or listed. */
NSBOX_INTERNAL bool registry_host_insecure_ok (const char *host, const char *const *insecure);

/* One logical request to the registry: authenticates on 401 (Bearer token
 * or Basic), retries 429 (Retry-After, backoff) and 5xx or network failures
 * before any body byte arrived, and a stalled transfer once (a blob from
 * where it stopped, with a Range). The body goes to `sink` when non-NULL
 * (on 200/206), else into resp->body (at most resp->body_max bytes, set by
 * the caller). Returns 0 with any final HTTP status in resp (the caller
 * checks it), -EPIPE when a blob transfer was cut after data arrived
 * (resume with a Range), or another -errno with *err filled: -ENETUNREACH
 * with "stalled" in the message when the retry stalled too. `what` names
 * the step. */
NSBOX_INTERNAL int registry_request (struct registry *reg, enum registry_method method,
                                     const char *url, const char *accept, uint64_t range_from,
                                     struct registry_blob_sink *sink,
                                     struct registry_response *resp, const char *what,
                                     struct nsbox_error **err);
NSBOX_INTERNAL void registry_response_clear (struct registry_response *resp);

/* An error for a non-success HTTP status: EACCES (401/403), ENOENT (404),
 * EAGAIN (429), EIO (other), quoting the registry's error document. */
NSBOX_INTERNAL int registry_status_error (struct registry *reg,
                                          const struct registry_response *resp, const char *what,
                                          struct nsbox_error **err);

NSBOX_INTERNAL void registry_progress_report (struct registry *reg, bool final);

#endif
