/* The connections of `nsbox serve`: accepted here and handed to
 * libmicrohttpd, with the limits it lacks (a readable 503 past the
 * connection limits, a time bound on each phase of a request, a lingering
 * close). serve_conn.c says why. */
#ifndef NSBOX_SERVE_CONN_H
#define NSBOX_SERVE_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include <microhttpd.h>

#include "util.h"

/* A query of more parameters than this gets 414: libmicrohttpd keeps each
 * in the connection's memory (no endpoint takes any). */
#define NSBOX_SERVE_QUERY_PARAMETERS 64u

struct nsbox_conns_options
{
  uint64_t max_connections;
  uint64_t max_per_peer;      /* connections from one address (TCP) or uid (unix); 0: no limit */
  uint64_t header_timeout_ms; /* a request's headers, from the connection or its request line */
  uint64_t body_timeout_ms;   /* a request's body, from its headers */
  uint64_t idle_timeout_ms;   /* the wait for the next request on an open connection */
  bool tcp;
};

/* Counters for /metrics. */
struct nsbox_conns_stats
{
  uint64_t open;          /* connections held, lingering ones too */
  uint64_t lingering;     /* closed by the server, their client's last bytes read */
  uint64_t refused_total; /* answered 503 at once: past max-connections */
  uint64_t refused_peer;  /* answered 503 at once: past max-connections-per-peer */
  uint64_t answered;      /* bad requests answered here (nsbox_conns_answered) */
  uint64_t cut_headers;   /* shut for headers slower than header-timeout */
  uint64_t cut_body;      /* shut for a body slower than body-timeout */
  uint64_t cut_idle;      /* shut after idle-timeout between requests */
};

struct nsbox_conns;

/* The state, before the daemon starts (its callbacks take it as cls).
 * Returns NULL when out of memory. */
struct nsbox_conns *nsbox_conns_new (const struct nsbox_conns_options *o) NSBOX_INTERNAL;
/* Starts accepting on listen_fd (made non-blocking) into daemon, which must
 * have been started with MHD_USE_NO_LISTEN_SOCKET and the callbacks below.
 * Returns 0 or -errno. */
int nsbox_conns_start (struct nsbox_conns *cs, struct MHD_Daemon *daemon,
                       int listen_fd) NSBOX_INTERNAL;
/* Stops accepting; when it returns, listen_fd is the caller's again. */
void nsbox_conns_quiesce (struct nsbox_conns *cs) NSBOX_INTERNAL;
/* After the daemon stopped: the last lingering connections get a short
 * while to end, then everything is closed and freed. */
void nsbox_conns_free (struct nsbox_conns *cs) NSBOX_INTERNAL;
void nsbox_conns_get_stats (struct nsbox_conns *cs, struct nsbox_conns_stats *st) NSBOX_INTERNAL;

/* libmicrohttpd's MHD_OPTION_NOTIFY_CONNECTION and MHD_OPTION_URI_LOG_CALLBACK
 * (cls: the nsbox_conns). */
void nsbox_conns_notify (void *cls, struct MHD_Connection *c, void **socket_context,
                         enum MHD_ConnectionNotificationCode code) NSBOX_INTERNAL;
void *nsbox_conns_request_line (void *cls, const char *uri,
                                struct MHD_Connection *c) NSBOX_INTERNAL;
/* The access handler tells where a request is: its headers are in (its
 * body may come), its body is in (a run or an answer follows), it is over
 * (the connection waits for the next). */
void nsbox_conns_headers_in (struct nsbox_conns *cs, struct MHD_Connection *c) NSBOX_INTERNAL;
void nsbox_conns_body_in (struct nsbox_conns *cs, struct MHD_Connection *c) NSBOX_INTERNAL;
void nsbox_conns_request_done (struct nsbox_conns *cs, struct MHD_Connection *c) NSBOX_INTERNAL;
/* Writes a fixed JSON answer (status: "431 Request Header Fields Too
 * Large", why: JSON-safe) on c's socket itself, for a request libmicrohttpd
 * may have no memory left to answer; the access handler then returns MHD_NO
 * (libmicrohttpd closes, the connection lingers). */
void nsbox_conns_answer (struct nsbox_conns *cs, struct MHD_Connection *c, const char *status,
                         const char *why) NSBOX_INTERNAL;
/* A fixed answer was written for c's request (by nsbox_conns_answer, or
 * for a query of more than NSBOX_SERVE_QUERY_PARAMETERS parameters): the
 * access handler returns MHD_NO. */
bool nsbox_conns_answered (struct nsbox_conns *cs, struct MHD_Connection *c) NSBOX_INTERNAL;

#endif
