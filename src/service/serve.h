/* `nsbox serve`: a long-running server owning one warm pool per profile,
 * speaking HTTP/1.1 + JSON through libmicrohttpd (loaded when the server
 * starts, so `nsbox run` never pays for it). serve.c owns the process: the
 * listening socket, the daemon, signals and the drain; serve_api.h answers
 * the requests. */
#ifndef NSBOX_SERVE_H
#define NSBOX_SERVE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nsbox.h"
#include "serve_api.h"
#include "util.h"

/* What `nsbox serve` was asked for (cli.c fills it). */
struct nsbox_serve_options
{
  const char *listen; /* "unix:PATH" or "tcp:ADDR:PORT"; NULL: the default socket */
  const char *token_file;
  const char *node_name; /* a DNS label (nsbox_serve_node_valid) */
  uint64_t max_concurrent;
  uint64_t max_queue;
  uint64_t max_request_bytes;
  uint64_t max_sandboxes;            /* live sandboxes open at once (0: none) */
  uint64_t max_sandboxes_per_client; /* of them, one client's */
  uint64_t max_connections;
  uint64_t max_connections_per_peer; /* 0: the listener's default */
  uint64_t header_timeout_ms, body_timeout_ms, idle_timeout_ms;
  uint64_t drain_grace_ms; /* a drain lasts at least this (a balancer's time to see it) */
  nsbox_pool_options *pool_options;
};

/* Runs the server until SIGTERM or SIGINT, then drains: in-flight runs
 * finish, new requests get 503, the pools are destroyed and the socket
 * removed. The profiles' configs are taken over. Returns the process exit
 * status (0 after a clean drain). */
int nsbox_serve (struct nsbox_serve_profile *profiles, size_t n_profiles,
                 const struct nsbox_serve_options *options) NSBOX_INTERNAL;

#endif
