/* Controlled egress, the proxy: runs in the launcher for the length of one
 * run. A thread accepts on the sandbox's listener (net.h); each connection
 * gets a thread of its own that reads the request, decides it
 * (egress_policy.c), resolves the name once, connects to the address it
 * resolved and relays bytes within the run's limits. Every connection is
 * recorded for the result and the audit log. */
#include "egress-private.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <jansson.h>
#include <linux/sockios.h>
#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "error.h"
#include "forksafe.h"
#include "supervise.h"

/* The request head and a ClientHello must arrive within this, whatever
 * the idle timeout. */
#define HEAD_DEADLINE_MS 10000
#define THREAD_STACK (256 * 1024)
/* How long the end of a run waits for connection threads (one may be in
 * getaddrinfo, which cannot be interrupted). */
#define STOP_WAIT_MS 2000
/* How long the FINs of a program that ended by itself may take to come. */
#define FIN_WAIT_MS 500

/* ---- fork ----
 *
 * A process that forks while a proxied run is in flight copies the proxy's
 * fds: the sandbox's listener (which keeps the sandbox's network namespace
 * alive), the program's and the servers' connections (a server would see
 * no end of its connection) and the relay's pipes. The child closes them at
 * once, as it closes every launch's fds (run.c); its copy of the run is
 * foreign and never stops the proxy. Every fd is made and put in its slot
 * under the proxy's lock, and its slot emptied and the fd closed under it,
 * so a fork finds each fd in its slot: the child never misses one, nor
 * closes a number another thread reused. */

static void
proxy_lock (struct nsbox_fork_node *node)
{
  pthread_mutex_lock (&container_of (node, struct nsbox_egress, fork_node)->lock);
}

static void
proxy_unlock (struct nsbox_fork_node *node)
{
  pthread_mutex_unlock (&container_of (node, struct nsbox_egress, fork_node)->lock);
}

static void
proxy_forked (struct nsbox_fork_node *node)
{
  struct nsbox_egress *e = container_of (node, struct nsbox_egress, fork_node);
  nsbox_close_slot (&e->listen_fd);
  nsbox_close_slot (&e->wake[0]);
  nsbox_close_slot (&e->wake[1]);
  nsbox_close_slot (&e->accepted);
  for (struct conn *c = e->conns; c; c = c->next)
    {
      nsbox_close_slot (&c->client);
      nsbox_close_slot (&c->upstream);
      for (size_t i = 0; i < ARRAY_SIZE (c->pipes); i++)
        nsbox_close_slot (&c->pipes[i]);
    }
  pthread_mutex_unlock (&e->lock);
}

static struct nsbox_fork_registry proxies
    = NSBOX_FORK_REGISTRY (proxy_lock, proxy_unlock, proxy_forked);

static void
proxy_register (struct nsbox_egress *e)
{
  nsbox_fork_add (&proxies, &e->fork_node);
}

static void
proxy_unregister (struct nsbox_egress *e)
{
  nsbox_fork_remove (&proxies, &e->fork_node);
}

static void
egress_unref (struct nsbox_egress *e)
{
  pthread_mutex_lock (&e->lock);
  bool last = --e->refs == 0;
  pthread_mutex_unlock (&e->lock);
  if (!last)
    return;
  proxy_unregister (e);
  if (e->listen_fd >= 0)
    close (e->listen_fd);
  for (int i = 0; i < 2; i++)
    if (e->wake[i] >= 0)
      close (e->wake[i]);
  nsbox_strv_free (e->allow);
  free (e->pins);
  json_decref (e->log);
  pthread_cond_destroy (&e->changed);
  pthread_mutex_destroy (&e->lock);
  free (e);
}

/* ---- one connection ---- */

static void
conn_close (struct conn *c)
{
  struct nsbox_egress *e = c->e;
  pthread_mutex_lock (&e->lock);
  if (c->prev)
    c->prev->next = c->next;
  else if (e->conns == c)
    e->conns = c->next;
  if (c->next)
    c->next->prev = c->prev;
  nsbox_close_slot (&c->client);
  nsbox_close_slot (&c->upstream);
  e->active--;
  pthread_cond_broadcast (&e->changed);
  pthread_mutex_unlock (&e->lock);
  free (c);
  egress_unref (e);
}

/* Reads until `parse` decides; the bytes stay in buf. */
static int
read_until (struct conn *c, char *buf, size_t size, size_t *len, uint64_t deadline)
{
  ssize_t n;
  if (*len >= size)
    return -ENOBUFS;
  uint64_t now = nsbox_now_ms ();
  if (now >= deadline)
    return -ETIMEDOUT;
  uint64_t wait = deadline - now < c->e->idle_ms ? deadline - now : c->e->idle_ms;
  int r = nsbox_egress_wait_fd (c->client, POLLIN, wait);
  if (r < 0)
    return r;
  do
    n = recv (c->client, buf + *len, size - *len, MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n == 0)
    return -ECONNRESET;
  if (n < 0)
    return errno == EAGAIN ? 0 : -errno;
  *len += (size_t)n;
  return 0;
}

/* CONNECT: the tunnel is opened, then the ClientHello must name the host. */
static void
serve_connect (struct conn *c, char *buf, size_t len, size_t head_len)
{
  static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";
  if (nsbox_egress_send_all (c->client, established, sizeof established - 1, c->e->idle_ms) < 0)
    {
      c->allowed = true;
      c->end = "the program went away";
      return;
    }
  size_t have = len - head_len;
  size_t hello_size = NSBOX_EGRESS_HELLO_WIRE_MAX;
  uint8_t *hello = malloc (hello_size);
  if (!hello)
    {
      nsbox_egress_refuse (c, "out of memory");
      return;
    }
  memcpy (hello, buf + head_len, have);
  uint64_t deadline = nsbox_now_ms () + HEAD_DEADLINE_MS;
  char sni[NSBOX_EGRESS_HOST_MAX + 1];
  const char *why = NULL;
  enum nsbox_egress_parse state;
  while ((state = nsbox_egress_client_hello (hello, have, sni, &why)) == NSBOX_EGRESS_MORE)
    {
      int r = read_until (c, (char *)hello, hello_size, &have, deadline);
      if (r < 0)
        {
          nsbox_egress_refuse (c, "no TLS ClientHello arrived (%s)", strerror (-r));
          free (hello);
          return;
        }
    }
  if (state == NSBOX_EGRESS_BAD)
    {
      nsbox_egress_refuse (c, "%s (CONNECT carries TLS to %s only)", why, c->host);
      free (hello);
      return;
    }
  if (strcmp (sni, c->host) != 0)
    {
      nsbox_egress_refuse (c, "the TLS server name '%s' is not the CONNECT host '%s'", sni,
                           c->host);
      free (hello);
      return;
    }
  size_t allowed = nsbox_egress_budget (c->e, true, have);
  int r = nsbox_egress_send_all (c->upstream, hello, allowed, c->e->idle_ms);
  free (hello);
  c->allowed = true;
  if (r < 0 || allowed < have)
    {
      c->sent = r < 0 ? 0 : allowed;
      if (r < 0)
        c->end = "the server's side failed";
      else
        nsbox_egress_cut_at_budget (c);
      return;
    }
  c->sent = allowed;
  nsbox_egress_relay (c, UINT64_MAX);
}

/* Plain HTTP: the rewritten head, the body as sized, then the answer. */
static void
serve_plain (struct conn *c, const struct nsbox_egress_request *req, const char *buf, size_t len)
{
  c->allowed = true;
  size_t head = req->upstream_head_len;
  size_t allowed = nsbox_egress_budget (c->e, true, head);
  if (allowed < head)
    {
      nsbox_egress_refund (c->e, true, allowed); /* nothing was sent */
      nsbox_egress_cut_at_budget (c);
      return;
    }
  if (nsbox_egress_send_all (c->upstream, req->upstream_head, head, c->e->idle_ms) < 0)
    {
      c->end = "the server's side failed";
      return;
    }
  c->sent = head;
  size_t body = len - req->head_len;
  if (body > req->content_length)
    body = (size_t)req->content_length; /* a second request behind it is dropped */
  allowed = nsbox_egress_budget (c->e, true, body);
  if (allowed < body)
    {
      nsbox_egress_refund (c->e, true, allowed);
      nsbox_egress_cut_at_budget (c);
      return;
    }
  if (nsbox_egress_send_all (c->upstream, buf + req->head_len, allowed, c->e->idle_ms) < 0)
    {
      c->end = "the server's side failed";
      return;
    }
  c->sent += allowed;
  nsbox_egress_relay (c, req->content_length - body);
}

static void *
conn_main (void *arg)
{
  struct conn *c = arg;
  struct nsbox_egress *e = c->e;
  char *buf = malloc (NSBOX_EGRESS_HEAD_MAX);
  struct nsbox_egress_request req = { 0 };
  size_t len = 0;
  int status = 0;
  if (!buf)
    {
      nsbox_egress_refuse (c, "out of memory");
      goto done;
    }
  enum nsbox_egress_parse state;
  while ((state = nsbox_egress_parse_request (buf, len, &req)) == NSBOX_EGRESS_MORE)
    {
      int r = read_until (c, buf, NSBOX_EGRESS_HEAD_MAX, &len, c->started_ms + HEAD_DEADLINE_MS);
      if (r < 0)
        {
          nsbox_egress_refuse (c, r == -ETIMEDOUT
                                      ? "no request arrived (egress-idle-timeout)"
                                      : "the program closed the connection before a request");
          status = r == -ETIMEDOUT ? 400 : 0;
          goto done;
        }
    }
  if (state == NSBOX_EGRESS_DONE)
    {
      const char *sp = memchr (buf, ' ', len);
      size_t m = sp ? (size_t)(sp - buf) : 0;
      if (m > 0 && m < sizeof c->method)
        memcpy (c->method, buf, m);
    }
  snprintf (c->host, sizeof c->host, "%s", req.host);
  c->port = req.port;
  if (state == NSBOX_EGRESS_BAD)
    {
      nsbox_egress_refuse (c, "%s", req.reason);
      status = req.status;
      goto done;
    }
  if (!nsbox_egress_host_allowed (e->allow, e->n_allow, req.host))
    {
      nsbox_egress_refuse (c, "%s is not on the egress allowlist", req.host);
      status = 403;
      goto done;
    }
  if (!nsbox_egress_port_allowed (e, req.port))
    {
      nsbox_egress_refuse (c, "port %u is not allowed (egress-ports)", (unsigned)req.port);
      status = 403;
      goto done;
    }
  struct sockaddr_storage addrs[8];
  size_t n = 0;
  if ((status = nsbox_egress_resolve (c, addrs, &n, ARRAY_SIZE (addrs))) != 0
      || (status = nsbox_egress_connect_upstream (c, addrs, n)) != 0)
    goto done;
  if (req.connect)
    serve_connect (c, buf, len, req.head_len);
  else
    serve_plain (c, &req, buf, len);
done:
  if (!c->allowed && status)
    nsbox_egress_answer (c, status);
  nsbox_egress_request_clear (&req);
  free (buf);
  nsbox_egress_record (c);
  conn_close (c);
  return NULL;
}

/* ---- accepting ---- */

static bool
start_thread (pthread_t *thread, void *(*fn) (void *), void *arg, bool detached)
{
  pthread_attr_t attr;
  if (pthread_attr_init (&attr) != 0)
    return false;
  pthread_attr_setstacksize (&attr, THREAD_STACK);
  if (detached)
    pthread_attr_setdetachstate (&attr, PTHREAD_CREATE_DETACHED);
  /* Signals stay with the launcher's own threads. */
  sigset_t all, old;
  sigfillset (&all);
  pthread_sigmask (SIG_BLOCK, &all, &old);
  bool ok = pthread_create (thread, &attr, fn, arg) == 0;
  pthread_sigmask (SIG_SETMASK, &old, NULL);
  pthread_attr_destroy (&attr);
  return ok;
}

/* A connection over a limit is answered at once and never read. */
static void
refuse_at_accept (struct nsbox_egress *e, int fd, uint64_t seq, const char *limit, uint64_t value)
{
  struct conn c
      = { .e = e, .client = fd, .upstream = -1, .started_ms = nsbox_now_ms (), .seq = seq };
  /* Its request, when it comes at once, is read first (see nsbox_egress_drain). */
  nsbox_egress_drain (fd, 0);
  nsbox_egress_refuse (&c, "%s reached (%s %" PRIu64 ")",
                       strcmp (limit, "egress-concurrent") == 0 ? "too many connections at once"
                                                                : "the run's connection limit is",
                       limit, value);
  nsbox_egress_answer (&c, 403);
  nsbox_egress_record (&c);
}

static void *
accept_main (void *arg)
{
  struct nsbox_egress *e = arg;
  for (;;)
    {
      struct pollfd p[2] = { { e->listen_fd, POLLIN, 0 }, { e->wake[0], POLLIN, 0 } };
      if (poll (p, 2, -1) < 0 && errno != EINTR)
        break;
      if (p[1].revents)
        break;
      if (!(p[0].revents & POLLIN))
        continue;
      /* The listener is non-blocking: accept never waits under the lock. */
      pthread_mutex_lock (&e->lock);
      int fd = e->accepted = accept4 (e->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
      int accept_errno = errno;
      if (fd < 0)
        {
          pthread_mutex_unlock (&e->lock);
          if (accept_errno == EMFILE || accept_errno == ENFILE || accept_errno == ENOBUFS
              || accept_errno == ENOMEM)
            poll (NULL, 0, 50);
          continue;
        }
      const char *limit = NULL;
      uint64_t value = 0;
      if (e->stopping)
        limit = "";
      else if (e->connections >= e->max_connections)
        {
          limit = "egress-connections";
          value = e->max_connections;
        }
      else if (e->active >= e->max_concurrent)
        {
          limit = "egress-concurrent";
          value = e->max_concurrent;
        }
      if (limit && *limit)
        nsbox_egress_hit_limit (e, limit);
      uint64_t seq = e->connections++;
      pthread_mutex_unlock (&e->lock);
      if (limit)
        {
          if (*limit)
            refuse_at_accept (e, fd, seq, limit, value);
          pthread_mutex_lock (&e->lock);
          nsbox_close_slot (&e->accepted);
          pthread_mutex_unlock (&e->lock);
          continue;
        }
      struct conn *c = calloc (1, sizeof *c);
      pthread_mutex_lock (&e->lock);
      if (!c)
        {
          nsbox_close_slot (&e->accepted);
          pthread_mutex_unlock (&e->lock);
          continue;
        }
      *c = (struct conn){ .e = e,
                          .client = TAKE_FD (e->accepted),
                          .upstream = -1,
                          .pipes = { -1, -1, -1, -1 },
                          .started_ms = nsbox_now_ms (),
                          .seq = seq };
      e->refs++;
      e->active++;
      c->next = e->conns;
      if (e->conns)
        e->conns->prev = c;
      e->conns = c;
      pthread_mutex_unlock (&e->lock);
      pthread_t thread;
      if (!start_thread (&thread, conn_main, c, true))
        {
          nsbox_egress_refuse (c, "cannot start a thread");
          nsbox_egress_record (c);
          conn_close (c);
        }
    }
  egress_unref (e);
  return NULL;
}

/* ---- the run's side ---- */

bool
nsbox_egress_wanted (const nsbox_config *config)
{
  return config->network && strcmp (config->network, "proxy") == 0;
}

int
nsbox_egress_check (const nsbox_config *config, bool runsc, struct nsbox_error **err)
{
  if (!nsbox_egress_wanted (config))
    {
      if (config->egress_allow_len || config->egress_resolve_len)
        return nsbox_error_set (err, EINVAL,
                                "egress-allow and egress-resolve need network: proxy (the "
                                "network is none)");
      return 0;
    }
  if (config->egress_allow_len == 0)
    return nsbox_error_set (err, EINVAL,
                            "network: proxy needs egress-allow: the host names the sandbox may "
                            "reach (such as pypi.org or *.example.com)");
  for (size_t i = 0; i < config->egress_resolve_len; i++)
    {
      char name[NSBOX_EGRESS_HOST_MAX + 1];
      struct sockaddr_storage sa;
      if (nsbox_egress_pin_parse (config->egress_resolve[i], name, &sa) == NULL
          && !nsbox_egress_host_allowed (config->egress_allow, config->egress_allow_len, name))
        return nsbox_error_set (err, EINVAL,
                                "egress-resolve pins '%s', which egress-allow does not list", name);
    }
  if (runsc)
    return nsbox_error_set (err, EINVAL,
                            "network: proxy is not available with runtime runsc (gVisor's own "
                            "network stack keeps the sandbox's loopback out of the launcher's "
                            "reach); use runtime native");
  return 0;
}

static const char *const proxy_env[] = {
  "HTTP_PROXY=" NSBOX_EGRESS_PROXY_URL,
  "HTTPS_PROXY=" NSBOX_EGRESS_PROXY_URL,
  "http_proxy=" NSBOX_EGRESS_PROXY_URL,
  "https_proxy=" NSBOX_EGRESS_PROXY_URL,
  "ALL_PROXY=" NSBOX_EGRESS_PROXY_URL,
  "all_proxy=" NSBOX_EGRESS_PROXY_URL,
  "NO_PROXY=",
  "no_proxy=",
};

const char *const *
nsbox_egress_env (size_t *n)
{
  *n = ARRAY_SIZE (proxy_env);
  return proxy_env;
}

int
nsbox_egress_new (const nsbox_config *config, struct nsbox_egress **out, struct nsbox_error **err)
{
  struct nsbox_egress *e = calloc (1, sizeof *e);
  if (!e)
    return nsbox_error_oom (err);
  pthread_mutex_init (&e->lock, NULL);
  pthread_cond_init (&e->changed, NULL);
  e->refs = 1;
  e->listen_fd = -1;
  e->wake[0] = e->wake[1] = -1;
  e->accepted = -1;
  e->max_connections = config->egress_connections;
  e->max_concurrent = config->egress_concurrent;
  e->max_bytes = config->egress_bytes;
  e->idle_ms = config->egress_idle_ms;
  static const uint16_t default_ports[] = NSBOX_EGRESS_DEFAULT_PORTS;
  e->n_ports = config->egress_ports_len ? config->egress_ports_len : ARRAY_SIZE (default_ports);
  memcpy (e->ports, config->egress_ports_len ? config->egress_ports : default_ports,
          e->n_ports * sizeof *e->ports);
  e->log = json_array ();
  e->allow = nsbox_strv_dup ((const char *const *)config->egress_allow, config->egress_allow_len);
  e->n_allow = config->egress_allow_len;
  e->pins = calloc (config->egress_resolve_len + 1, sizeof *e->pins);
  if (!e->log || !e->allow || !e->pins || pipe2 (e->wake, O_CLOEXEC) < 0)
    {
      egress_unref (e);
      return nsbox_error_oom (err);
    }
  for (size_t i = 0; i < config->egress_resolve_len; i++)
    if (!nsbox_egress_pin_parse (config->egress_resolve[i], e->pins[e->n_pins].name,
                                 &e->pins[e->n_pins].address))
      e->n_pins++;
  proxy_register (e);
  *out = e;
  return 0;
}

int
nsbox_egress_start (struct nsbox_egress *e, int listen_fd, struct nsbox_error **err)
{
  int flags = fcntl (listen_fd, F_GETFL);
  if (flags < 0 || fcntl (listen_fd, F_SETFL, flags | O_NONBLOCK) < 0)
    return nsbox_error_set (err, errno, "egress proxy: cannot make its listener non-blocking");
  e->listen_fd = listen_fd;
  e->refs++;
  if (!start_thread (&e->acceptor, accept_main, e, false))
    {
      e->refs--;
      return nsbox_error_set (err, EAGAIN, "egress proxy: cannot start its thread");
    }
  e->acceptor_started = true;
  return 0;
}

/* Whether the program has shut its side of c's client socket (its FIN,
 * or its reset, has come), waiting for it until until_ms at most. Under
 * the proxy's lock, held throughout: no relay can end and free its
 * connection meanwhile, and what a relay has read of the FIN stays seen
 * (RDHUP is the socket's state, not an event). */
static bool
shut_by_program (const struct conn *c, uint64_t until_ms)
{
  if (c->client < 0)
    return false;
  for (;;)
    {
      uint64_t now = nsbox_now_ms ();
      struct pollfd p = { c->client, POLLRDHUP, 0 };
      int n = poll (&p, 1, now < until_ms ? (int)(until_ms - now) : 0);
      if (n == 1)
        return (p.revents & (POLLRDHUP | POLLHUP)) != 0;
      if (n == 0 || errno != EINTR)
        return false;
    }
}

json_t *
nsbox_egress_stop (struct nsbox_egress *e, bool ended)
{
  if (!e)
    return NULL;
  pthread_mutex_lock (&e->lock);
  e->stopping = true;
  pthread_mutex_unlock (&e->lock);
  if (e->acceptor_started)
    {
      /* The pipe is empty and ours: the byte always fits. */
      ssize_t n = write (e->wake[1], "x", 1);
      (void)n;
      pthread_join (e->acceptor, NULL);
    }
  /* No connection is accepted any more: the sandbox's listener goes now,
   * whatever threads linger (one may be in getaddrinfo). */
  pthread_mutex_lock (&e->lock);
  if (e->listen_fd >= 0)
    close (TAKE_FD (e->listen_fd));
  pthread_mutex_unlock (&e->lock);
  pthread_mutex_lock (&e->lock);
  /* Before our own shutdown, which would look the same: a program that
   * closed its end just before it ended closed the connection, even if its
   * relay had not seen it yet. A program that ended by itself has closed
   * every socket, but on a loaded machine the FIN crosses the sandbox's
   * loopback later (its softirq deferred): it gets FIN_WAIT_MS in all. */
  uint64_t until = ended ? nsbox_now_ms () + FIN_WAIT_MS : 0;
  for (struct conn *c = e->conns; c; c = c->next)
    c->closed_by_program = shut_by_program (c, until);
  for (struct conn *c = e->conns; c; c = c->next)
    {
      shutdown (c->client, SHUT_RDWR);
      if (c->upstream >= 0)
        shutdown (c->upstream, SHUT_RDWR);
    }
  /* The threads' time counts from the shutdown, after the FINs' wait. */
  struct timespec deadline;
  clock_gettime (CLOCK_REALTIME, &deadline);
  deadline.tv_sec += STOP_WAIT_MS / 1000;
  while (e->active > 0)
    if (pthread_cond_timedwait (&e->changed, &e->lock, &deadline) == ETIMEDOUT)
      break;
  json_t *report = json_pack ("{s:I, s:I, s:I, s:I, s:s?, s:I, s:o}", "connections",
                              (json_int_t)e->connections, "refused", (json_int_t)e->refused,
                              "bytes_sent", (json_int_t)e->sent, "bytes_received",
                              (json_int_t)e->received, "limit", e->limit, "records_omitted",
                              (json_int_t)e->omitted, "log", json_deep_copy (e->log));
  pthread_mutex_unlock (&e->lock);
  egress_unref (e);
  return report;
}
