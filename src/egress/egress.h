/* Controlled egress (`network: proxy`): the sandbox keeps its own network
 * namespace with loopback only; its init listens on 127.0.0.1:3128 and hands
 * the listening socket to the launcher, whose proxy (egress.c) accepts each
 * connection and decides it (egress_request.c, egress_hello.c, and the
 * names of egress_names.h): HTTP CONNECT or
 * absolute-form HTTP, a host name on the allowlist (never an address in any
 * disguise), resolved once by the launcher and pinned, never to a private,
 * loopback, link-local or otherwise special address unless egress-resolve
 * names it, and for CONNECT a TLS ClientHello whose SNI is that host. */
#ifndef NSBOX_EGRESS_H
#define NSBOX_EGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "egress_names.h"
#include "util.h"

/* A request head (request line and headers) is at most this long. */
#define NSBOX_EGRESS_HEAD_MAX 16384
/* A ClientHello is read up to this many bytes (several TLS records). */
#define NSBOX_EGRESS_HELLO_MAX 65536
/* ... in at most this many records. */
#define NSBOX_EGRESS_HELLO_RECORDS_MAX 64
/* The most bytes a ClientHello can take on the wire: its handshake header
 * and body, and a record header per record. */
#define NSBOX_EGRESS_HELLO_WIRE_MAX                                                                \
  (4 + NSBOX_EGRESS_HELLO_MAX + 5 * NSBOX_EGRESS_HELLO_RECORDS_MAX)

/* ---- the request (egress_request.c, pure) ---- */

enum nsbox_egress_parse
{
  NSBOX_EGRESS_MORE = 0, /* the head is not complete yet */
  NSBOX_EGRESS_DONE,     /* parsed: see the request */
  NSBOX_EGRESS_BAD,      /* refused: status and reason say why */
};

struct nsbox_egress_request
{
  bool connect; /* CONNECT host:port, else absolute-form http:// */
  char host[NSBOX_EGRESS_HOST_MAX + 1];
  uint16_t port;
  size_t head_len;         /* bytes of the head in the buffer, with its final CRLF CRLF */
  uint64_t content_length; /* plain HTTP: the body's bytes that follow the head */
  /* Plain HTTP: the head to send upstream (origin-form request line, the
   * client's headers without Proxy-* and Connection ones, then
   * "Connection: close"); malloc'd, NUL-terminated. */
  char *upstream_head;
  size_t upstream_head_len;
  int status;         /* BAD: 400, 403, 411, 414, 431, 500 */
  const char *reason; /* BAD: one line the model can read */
};

/* Parses the request head at the start of `buf` (`len` bytes so far). The
 * host is checked as a name (nsbox_egress_host_normalize); the allowlist
 * and the ports are the caller's. A plain request whose Host header is
 * not its host, with a body not sized by Content-Length, or in any other
 * way not plainly one request is BAD. Frees nothing on MORE; the caller
 * frees upstream_head (nsbox_egress_request_clear). */
enum nsbox_egress_parse
nsbox_egress_parse_request (const char *buf, size_t len,
                            struct nsbox_egress_request *req) NSBOX_INTERNAL;
void nsbox_egress_request_clear (struct nsbox_egress_request *req) NSBOX_INTERNAL;

/* Reads the TLS ClientHello at the start of `data` (`len` bytes so far,
 * possibly over several records): MORE, DONE with its server name in `sni`
 * (lower case, at most NSBOX_EGRESS_HOST_MAX bytes), or BAD with `*reason`:
 * not TLS, malformed, no server name, several, an encrypted ClientHello
 * (ECH hides the real name), or more than NSBOX_EGRESS_HELLO_RECORDS_MAX
 * records. */
enum nsbox_egress_parse nsbox_egress_client_hello (const uint8_t *data, size_t len,
                                                   char sni[NSBOX_EGRESS_HOST_MAX + 1],
                                                   const char **reason) NSBOX_INTERNAL;

/* ---- the proxy of one run (egress.c) ---- */

struct nsbox_egress;
struct nsbox_config;
struct json_t;
struct nsbox_error;

/* Whether `config` asks for network: proxy. */
bool nsbox_egress_wanted (const struct nsbox_config *config) NSBOX_INTERNAL;

/* The configuration's egress keys make sense together, for this runtime
 * (runsc refuses network: proxy). 0 or -EINVAL. */
int nsbox_egress_check (const struct nsbox_config *config, bool runsc,
                        struct nsbox_error **err) NSBOX_INTERNAL;

/* The environment that points the program's HTTP clients at the proxy. */
const char *const *nsbox_egress_env (size_t *n) NSBOX_INTERNAL;

/* The proxy of one sandbox of `config`, made when the sandbox starts. */
int nsbox_egress_new (const struct nsbox_config *config, struct nsbox_egress **egress,
                      struct nsbox_error **err) NSBOX_INTERNAL;

/* Serves the sandbox's listener (taken over: closed with the proxy) until
 * nsbox_egress_stop. */
int nsbox_egress_start (struct nsbox_egress *egress, int listen_fd,
                        struct nsbox_error **err) NSBOX_INTERNAL;

/* Frees the proxy (started or not): stops accepting, cuts every connection, waits a moment for
 * their threads and returns the run's egress report (a new JSON object: counts, the limit reached,
 * one record per connection), or NULL when out of memory or for a NULL `egress`. `ended`: the
 * program ended by itself (not killed by a limit), so every socket it had is closed and each
 * connection's FIN is on its way: a connection is recorded as closed once that FIN is in (waited
 * for a moment), not as cut by the run's end. */
struct json_t *nsbox_egress_stop (struct nsbox_egress *egress, bool ended) NSBOX_INTERNAL;

#endif
