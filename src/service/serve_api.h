/* `nsbox serve`'s requests: the server's state (struct nsbox_server),
 * admission, the endpoints and /metrics (serve_api.c), behind the access
 * handler the daemon of serve.c calls. */
#ifndef NSBOX_SERVE_API_H
#define NSBOX_SERVE_API_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

#include "nsbox.h"
#include "util.h"

#define NSBOX_SERVE_MAX_PROFILES 16
/* Bearer tokens of a token file: each a client of its own. */
#define NSBOX_SERVE_MAX_TOKENS 16
/* libmicrohttpd's memory for one connection (MHD_OPTION_CONNECTION_MEMORY_LIMIT):
 * it holds a request's line and headers, which get its own 431 (or 414)
 * past it. */
#define NSBOX_SERVE_CONNECTION_MEMORY (32u << 10)
/* A request's line and headers, in bytes, get nsbox's 431 past this: well
 * under the memory above, since headers that nearly fill it leave
 * libmicrohttpd no room to build any answer (it would close unanswered). */
#define NSBOX_SERVE_HEADER_BYTES (16u << 10)
/* A node's name (--node-name): a DNS label, at most this long. A live
 * sandbox's id is NODE.HEX (32 lowercase hex digits), so that a balancer
 * routes it to its node with no state of its own. */
#define NSBOX_SERVE_NODE_MAX 63
#define NSBOX_SERVE_ID_SIZE (NSBOX_SERVE_NODE_MAX + 1 + 32 + 1)
/* Request→result latency buckets of /metrics, in seconds. */
#define NSBOX_SERVE_BUCKETS 12

struct nsbox_serve_profile
{
  char name[64];
  nsbox_config *config;
  nsbox_pool *pool;
};

enum nsbox_serve_outcome
{
  NSBOX_OUTCOME_OK = 0,    /* exited 0 */
  NSBOX_OUTCOME_NONZERO,   /* exited non-zero or killed by a signal */
  NSBOX_OUTCOME_TIMEOUT,   /* the timeout killed it */
  NSBOX_OUTCOME_OOM,       /* the memory limit killed it */
  NSBOX_OUTCOME_ERROR,     /* nsbox could not run it */
  NSBOX_OUTCOME_CANCELLED, /* the client went away; the run was killed */
  NSBOX_OUTCOME_REFUSED,   /* a quota of its session refused it (429) */
  NSBOX_OUTCOME_COUNT_,
};

struct nsbox_conns;
struct nsbox_serve_sandboxes;

/* Why a live sandbox of the server ended, for /metrics. */
enum nsbox_sandbox_end
{
  NSBOX_SANDBOX_END_DELETED = 0,
  NSBOX_SANDBOX_END_IDLE,
  NSBOX_SANDBOX_END_LIFETIME,
  NSBOX_SANDBOX_END_MAX_RUNS,
  NSBOX_SANDBOX_END_LOST,
  NSBOX_SANDBOX_END_ABANDONED, /* opened for a client that had gone */
  NSBOX_SANDBOX_END_COUNT_,
};

struct nsbox_server
{
  struct nsbox_serve_profile profiles[NSBOX_SERVE_MAX_PROFILES];
  size_t n_profiles;
  char *token_page; /* TCP only: the bearer tokens' page, else NULL */
  const char *tokens[NSBOX_SERVE_MAX_TOKENS];
  size_t n_tokens;
  uint64_t max_concurrent, max_queue, max_request_bytes;
  pthread_mutex_t lock;
  pthread_cond_t slot_free; /* a run ended, or draining began */
  pthread_cond_t idle;      /* nothing runs or waits any more */
  uint64_t running, queued;
  uint64_t uploading; /* POST /v1/runs bodies being read (before admission) */
  uint64_t answering; /* answers of finished runs still being sent */
  bool draining;
  bool tcp;                  /* the listener is TCP: a client's half-close counts as gone */
  struct nsbox_conns *conns; /* serve_conn.h */
  struct nsbox_serve_sandboxes *sandboxes; /* serve_sandbox.c */
  /* Counters for /metrics, under lock. */
  uint64_t runs[NSBOX_SERVE_MAX_PROFILES][NSBOX_OUTCOME_COUNT_][2]; /* [..][cold, warm] */
  uint64_t rejected_busy, rejected_draining, bad_requests, unauthorized;
  uint64_t rejected_sandboxes;                       /* an open past --max-sandboxes */
  uint64_t rejected_elsewhere;                       /* for another node's sandbox */
  uint64_t latency_buckets[NSBOX_SERVE_BUCKETS + 1]; /* cumulative at render time */
  double latency_sum;
  uint64_t latency_count;
};

/* serve_common.c: answers (a JSON {"error": ...} for the message ones;
 * Retry-After when retry_after_s is not 0), counting under the lock, the
 * bearer token (*token: its place in the token file, SIZE_MAX when the
 * server has none), the owner of a live sandbox ("uid N", "token N" or
 * both; -1 when it cannot be told), admission (0: a run slot is the
 * caller's, to give back under the lock; -1: busy; -2: draining), and the
 * audit log's description of a client. */
enum MHD_Result nsbox_serve_respond (struct MHD_Connection *c, unsigned status, const char *type,
                                     const char *body, size_t len,
                                     uint64_t retry_after_s) NSBOX_INTERNAL;
enum MHD_Result nsbox_serve_respond_message (struct MHD_Connection *c, unsigned status,
                                             const char *msg, const char *allow) NSBOX_INTERNAL;
enum MHD_Result nsbox_serve_respond_error (struct MHD_Connection *c, unsigned status,
                                           const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4))) NSBOX_INTERNAL;
void nsbox_serve_count (struct nsbox_server *s, uint64_t *counter) NSBOX_INTERNAL;
bool nsbox_serve_authorized (struct nsbox_server *s, struct MHD_Connection *c,
                             size_t *token) NSBOX_INTERNAL;
int nsbox_serve_owner (struct nsbox_server *s, struct MHD_Connection *c, char *out,
                       size_t size) NSBOX_INTERNAL;
int nsbox_serve_admit (struct nsbox_server *s) NSBOX_INTERNAL;
void nsbox_serve_describe_client (const struct nsbox_server *s, int fd, char *out,
                                  size_t size) NSBOX_INTERNAL;

/* serve_common.c: the node's name, for every answer's X-Nsbox-Node (and
 * X-Nsbox-Retryable on a 503), set once before the server answers. */
bool nsbox_serve_node_valid (const char *name) NSBOX_INTERNAL;
void nsbox_serve_set_node (const char *name) NSBOX_INTERNAL;
const char *nsbox_serve_node (void) NSBOX_INTERNAL;
void nsbox_serve_add_node_headers (struct MHD_Response *r, unsigned status) NSBOX_INTERNAL;
void nsbox_serve_set_closing (void) NSBOX_INTERNAL;

/* serve_common.c: a run's or an open's X-Nsbox-Session header against the
 * body's "session" (a fleet's balancer routes on the header, so the body
 * may not name another): 0, with in *apply the header's session when the
 * body names none (else NULL); 400 with why when the two differ. */
struct json_t;
unsigned nsbox_serve_session_header (struct MHD_Connection *c, const struct json_t *root,
                                     const char **apply, char *why, size_t size) NSBOX_INTERNAL;

/* Gives back a run slot nsbox_serve_admit took (serve_common.c). */
void nsbox_serve_release_slot (struct nsbox_server *s) NSBOX_INTERNAL;

/* serve_stream.c: a run answered as a stream of JSON lines (Accept:
 * application/x-ndjson), with a run slot held. Takes over every field of
 * the job (each freed, the slot given back, the sandbox put) whatever it
 * returns. */
struct nsbox_serve_stream_job
{
  struct nsbox_server *s;
  nsbox_pool *pool;                 /* a single run's, or */
  nsbox_sandbox *sandbox;           /* the live sandbox's, */
  struct nsbox_serve_sandbox *held; /* held for the run */
  size_t profile;
  char *code; /* malloc'd, wiped when freed */
  size_t code_len;
  nsbox_run_options *options;
  int cancel_fd; /* a duplicate of the connection's fd, or -1 */
  double start;  /* when the request's headers came */
};
enum MHD_Result nsbox_serve_stream (struct MHD_Connection *c,
                                    struct nsbox_serve_stream_job *job) NSBOX_INTERNAL;

/* serve_stats.c: a run's outcome and latency for /metrics, and the
 * answers of GET /v1/health and GET /metrics. */
/* The outcome of a run: its result's, or (res NULL) err's. */
enum nsbox_serve_outcome nsbox_serve_outcome_of (const nsbox_result *res,
                                                 const struct nsbox_error *err) NSBOX_INTERNAL;
void nsbox_serve_record (struct nsbox_server *s, size_t profile, enum nsbox_serve_outcome outcome,
                         bool warm, double seconds) NSBOX_INTERNAL;
/* GET /v1/health: 200 while the node takes work, else 503 and why
 * (draining, or a pool that cannot start sandboxes); brief (a probe
 * without the token) says only that. */
enum MHD_Result nsbox_serve_health (struct nsbox_server *s, struct MHD_Connection *c,
                                    bool brief) NSBOX_INTERNAL;
enum MHD_Result nsbox_serve_metrics (struct nsbox_server *s,
                                     struct MHD_Connection *c) NSBOX_INTERNAL;

/* serve_sandbox.c: the live sandboxes of the server, each bound to the
 * client that opened it (nsbox_serve_owner). _open answers POST
 * /v1/sandboxes with a run slot held; _request GET or DELETE
 * /v1/sandboxes/ID. _hold takes the owner's sandbox for a run (0), or
 * fills why for 404 (never its, or deleted) or 410 (it ended by itself);
 * _put gives it back. _free, once no request is left, destroys every
 * sandbox. */
struct nsbox_serve_sandbox;
struct nsbox_serve_sandbox_stats
{
  size_t open, max;
  uint64_t opened;
  uint64_t ended[NSBOX_SANDBOX_END_COUNT_];
  uint64_t next_expiry_ms; /* the soonest end of an open one (UINT64_MAX: none) */
};
struct nsbox_serve_sandboxes *nsbox_serve_sandboxes_new (size_t max,
                                                         size_t max_per_client) NSBOX_INTERNAL;
void nsbox_serve_sandboxes_free (struct nsbox_serve_sandboxes *sandboxes) NSBOX_INTERNAL;
enum MHD_Result nsbox_serve_sandbox_open (struct nsbox_server *s, struct MHD_Connection *c,
                                          const char *body, size_t len) NSBOX_INTERNAL;
enum MHD_Result nsbox_serve_sandbox_request (struct nsbox_server *s, struct MHD_Connection *c,
                                             const char *id, bool delete) NSBOX_INTERNAL;
unsigned nsbox_serve_sandbox_hold (struct nsbox_serve_sandboxes *sandboxes, const char *id,
                                   const char *owner, struct nsbox_serve_sandbox **held, char *why,
                                   size_t size) NSBOX_INTERNAL;
nsbox_sandbox *nsbox_serve_sandbox_of (struct nsbox_serve_sandbox *held,
                                       size_t *profile) NSBOX_INTERNAL;
void nsbox_serve_sandbox_put (struct nsbox_serve_sandboxes *sandboxes,
                              struct nsbox_serve_sandbox *held) NSBOX_INTERNAL;
void nsbox_serve_sandboxes_stats (struct nsbox_serve_sandboxes *sandboxes,
                                  struct nsbox_serve_sandbox_stats *stats) NSBOX_INTERNAL;
const char *nsbox_serve_sandbox_end_name (enum nsbox_sandbox_end end) NSBOX_INTERNAL;

/* serve_api.c: the access handler (its cls is the struct nsbox_server) and
 * the completion callback that frees a request's state. */
enum MHD_Result nsbox_serve_handle (void *server, struct MHD_Connection *connection,
                                    const char *url, const char *method, const char *version,
                                    const char *upload_data, size_t *upload_data_size,
                                    void **request) NSBOX_INTERNAL;
void nsbox_serve_completed (void *server, struct MHD_Connection *connection, void **request,
                            enum MHD_RequestTerminationCode why) NSBOX_INTERNAL;

#endif
