/* Inside the egress proxy: its state, one connection, and what the files
 * of the proxy share. The calls run one way: egress.c (fork, a
 * connection's life, accepting, the run's side) uses egress_relay.c (the
 * byte budget, the relay), egress_upstream.c (the decision's address
 * checks, resolution and pinning, connecting) and egress_conn.c (records,
 * refusals, socket helpers), which use nothing above them. */
#ifndef NSBOX_EGRESS_PRIVATE_H
#define NSBOX_EGRESS_PRIVATE_H

#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "config.h"
#include "egress.h"
#include "forksafe.h"
#include "util.h"

/* At most this many connections are recorded one by one; the rest are
 * counted. */
#define RECORDS_MAX 256

struct pin
{
  char name[NSBOX_EGRESS_HOST_MAX + 1];
  struct sockaddr_storage address;
};

struct nsbox_egress
{
  pthread_mutex_t lock;
  pthread_cond_t changed;
  int refs;      /* the run, the acceptor and each connection thread */
  int listen_fd; /* the sandbox's listener */
  int wake[2];   /* the acceptor's stop pipe */
  int accepted;  /* a connection accepted and not yet one of conns, or -1 */
  bool stopping; /* the run is over: cut everything */
  bool acceptor_started;
  pthread_t acceptor;
  /* the configuration */
  char **allow;
  size_t n_allow;
  struct pin *pins;
  size_t n_pins;
  uint16_t ports[NSBOX_EGRESS_PORTS_MAX];
  size_t n_ports;
  uint64_t max_connections, max_concurrent, max_bytes, idle_ms;
  /* what happened */
  uint64_t connections, active, refused, sent, received, omitted;
  unsigned grown;    /* relay pipes grown to FLOW_PIPE_MAX */
  const char *limit; /* the first limit a connection ran into, or NULL */
  json_t *log;
  /* each record's connection, by the order they were accepted: the log
   * keeps that order though threads end in any (a client moves on to its
   * next request once answered, before the last one is recorded) */
  uint64_t log_seq[RECORDS_MAX];
  struct conn *conns;               /* the live ones, for the cut at the end */
  struct nsbox_fork_node fork_node; /* every proxy of the process, for fork */
};

struct conn
{
  struct nsbox_egress *e;
  struct conn *next, *prev;
  int client, upstream;
  int pipes[4]; /* the relay's pipes while it runs, for fork; -1 otherwise */
  /* Under the lock: the program had shut its side (its FIN had come) when
   * the run ended, so the connection was closed, not cut by the end. */
  bool closed_by_program;
  uint64_t started_ms;
  uint64_t seq; /* its place among the run's connections, from 0 */
  /* the record */
  char method[16];
  char host[NSBOX_EGRESS_HOST_MAX + 1];
  uint16_t port;
  char address[INET6_ADDRSTRLEN];
  bool allowed;
  char reason[320];
  const char *end; /* how an allowed connection ended */
  uint64_t sent, received;
};

/* The first limit reached is the one the result names. Under the lock. */
static inline void
nsbox_egress_hit_limit (struct nsbox_egress *e, const char *limit)
{
  if (!e->limit)
    e->limit = limit;
}

/* egress_conn.c */
void nsbox_egress_record (struct conn *c) NSBOX_INTERNAL;
void nsbox_egress_refuse (struct conn *c, const char *fmt, ...) NSBOX_INTERNAL
    __attribute__ ((format (printf, 2, 3)));
int nsbox_egress_wait_fd (int fd, short events, uint64_t timeout_ms) NSBOX_INTERNAL;
int nsbox_egress_send_all (int fd, const void *data, size_t len, uint64_t idle_ms) NSBOX_INTERNAL;
void nsbox_egress_drain (int fd, int wait_ms) NSBOX_INTERNAL;
void nsbox_egress_answer (struct conn *c, int status) NSBOX_INTERNAL;

/* egress_upstream.c */
bool nsbox_egress_port_allowed (const struct nsbox_egress *e, uint16_t port) NSBOX_INTERNAL;
bool nsbox_egress_host_allowed (char *const *allow, size_t n, const char *host) NSBOX_INTERNAL;
int nsbox_egress_resolve (struct conn *c, struct sockaddr_storage *out, size_t *n_out,
                          size_t max) NSBOX_INTERNAL;
int nsbox_egress_connect_upstream (struct conn *c, const struct sockaddr_storage *addrs,
                                   size_t n) NSBOX_INTERNAL;

/* egress_relay.c */
size_t nsbox_egress_budget (struct nsbox_egress *e, bool to_upstream, size_t want) NSBOX_INTERNAL;
void nsbox_egress_cut_at_budget (struct conn *c) NSBOX_INTERNAL;
void nsbox_egress_refund (struct nsbox_egress *e, bool to_upstream, size_t n) NSBOX_INTERNAL;
void nsbox_egress_relay (struct conn *c, uint64_t up_limit) NSBOX_INTERNAL;

#endif
