/* Controlled egress, the proxy: runs in the launcher for the length of one
 * run. A thread accepts on the sandbox's listener (net.h); each connection
 * gets a thread of its own that reads the request, decides it
 * (egress_policy.c), resolves the name once, connects to the address it
 * resolved and relays bytes within the run's limits. Every connection is
 * recorded for the result and the audit log. */
#include "egress.h"

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
#include "supervise.h"

/* At most this many connections are recorded one by one; the rest are
 * counted. */
#define RECORDS_MAX 256
/* Wake-ups in a row that move no byte before a connection is given up (a
 * safety net: every wake-up should move one). */
#define RELAY_IDLE_WAKES_MAX 1000
/* The request head and a ClientHello must arrive within this, whatever
 * the idle timeout. */
#define HEAD_DEADLINE_MS 10000
#define CONNECT_TIMEOUT_MS 10000
#define THREAD_STACK (256 * 1024)
/* How long the end of a run waits for connection threads (one may be in
 * getaddrinfo, which cannot be interrupted). */
#define STOP_WAIT_MS 2000
/* How long the FINs of a program that ended by itself may take to come. */
#define FIN_WAIT_MS 500

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
  struct conn *conns;                           /* the live ones, for the cut at the end */
  struct nsbox_egress *prev_proxy, *next_proxy; /* every proxy of the process, for fork */
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

static pthread_mutex_t proxies_lock = PTHREAD_MUTEX_INITIALIZER;
static struct nsbox_egress *proxies;
static pthread_once_t proxies_once = PTHREAD_ONCE_INIT;

static void
proxies_prepare (void)
{
  pthread_mutex_lock (&proxies_lock);
  for (struct nsbox_egress *e = proxies; e; e = e->next_proxy)
    pthread_mutex_lock (&e->lock);
}

static void
proxies_parent (void)
{
  for (struct nsbox_egress *e = proxies; e; e = e->next_proxy)
    pthread_mutex_unlock (&e->lock);
  pthread_mutex_unlock (&proxies_lock);
}

static void
proxies_child (void)
{
  for (struct nsbox_egress *e = proxies, *next; e; e = next)
    {
      next = e->next_proxy;
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
      e->prev_proxy = e->next_proxy = NULL;
      pthread_mutex_unlock (&e->lock);
    }
  proxies = NULL;
  pthread_mutex_unlock (&proxies_lock);
}

static void
proxies_register_atfork (void)
{
  pthread_atfork (proxies_prepare, proxies_parent, proxies_child);
}

static void
proxy_register (struct nsbox_egress *e)
{
  pthread_once (&proxies_once, proxies_register_atfork);
  pthread_mutex_lock (&proxies_lock);
  e->next_proxy = proxies;
  if (proxies)
    proxies->prev_proxy = e;
  proxies = e;
  pthread_mutex_unlock (&proxies_lock);
}

static void
proxy_unregister (struct nsbox_egress *e)
{
  pthread_mutex_lock (&proxies_lock);
  if (e->prev_proxy)
    e->prev_proxy->next_proxy = e->next_proxy;
  else if (proxies == e)
    proxies = e->next_proxy;
  if (e->next_proxy)
    e->next_proxy->prev_proxy = e->prev_proxy;
  pthread_mutex_unlock (&proxies_lock);
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

/* The first limit reached is the one the result names. Under the lock. */
static void
hit_limit (struct nsbox_egress *e, const char *limit)
{
  if (!e->limit)
    e->limit = limit;
}

/* ---- records ---- */

static void
record (struct conn *c)
{
  struct nsbox_egress *e = c->e;
  uint64_t duration = nsbox_now_ms () - c->started_ms;
  pthread_mutex_lock (&e->lock);
  if (!c->allowed)
    e->refused++;
  if (json_array_size (e->log) >= RECORDS_MAX)
    {
      e->omitted++;
      pthread_mutex_unlock (&e->lock);
      return;
    }
  json_t *o = json_pack (
      "{s:s?, s:s?, s:o, s:s?, s:s, s:s?, s:I, s:I, s:I}", "method",
      c->method[0] ? c->method : NULL, "host", c->host[0] ? c->host : NULL, "port",
      c->port ? json_integer (c->port) : json_null (), "address", c->address[0] ? c->address : NULL,
      "decision", c->allowed ? "allowed" : "refused", "reason", c->allowed ? c->end : c->reason,
      "bytes_sent", (json_int_t)c->sent, "bytes_received", (json_int_t)c->received, "duration_ms",
      (json_int_t)duration);
  size_t at = json_array_size (e->log);
  while (at > 0 && e->log_seq[at - 1] > c->seq)
    at--;
  if (o && json_array_insert_new (e->log, at, o) == 0)
    {
      memmove (e->log_seq + at + 1, e->log_seq + at,
               (json_array_size (e->log) - 1 - at) * sizeof e->log_seq[0]);
      e->log_seq[at] = c->seq;
    }
  pthread_mutex_unlock (&e->lock);
}

static void refuse (struct conn *c, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

static void
refuse (struct conn *c, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  vsnprintf (c->reason, sizeof c->reason, fmt, ap);
  va_end (ap);
  c->allowed = false;
}

/* ---- sockets ---- */

static int
wait_fd (int fd, short events, uint64_t timeout_ms)
{
  struct pollfd p = { fd, events, 0 };
  int n;
  do
    n = poll (&p, 1, (int)(timeout_ms > INT32_MAX ? INT32_MAX : timeout_ms));
  while (n < 0 && errno == EINTR);
  if (n == 0)
    return -ETIMEDOUT;
  if (n < 0)
    return -errno;
  return (p.revents & (POLLERR | POLLNVAL)) && !(p.revents & events) ? -EPIPE : 0;
}

/* Writes all of data, waiting at most idle_ms for room each time. */
static int
send_all (int fd, const void *data, size_t len, uint64_t idle_ms)
{
  const char *p = data;
  while (len > 0)
    {
      ssize_t n = send (fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0)
        {
          p += n;
          len -= (size_t)n;
          continue;
        }
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno != EAGAIN)
        return -errno;
      int r = wait_fd (fd, POLLOUT, idle_ms);
      if (r < 0)
        return r;
    }
  return 0;
}

static const char *
status_text (int status)
{
  switch (status)
    {
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 411:
      return "Length Required";
    case 414:
      return "URI Too Long";
    case 431:
      return "Request Header Fields Too Large";
    case 502:
      return "Bad Gateway";
    case 504:
      return "Gateway Timeout";
    default:
      return "Internal Server Error";
    }
}

/* Reads and drops what the program sends until it closes or stays quiet
 * for wait_ms, so that the close after an answer is a FIN, not a reset
 * that could destroy the answer unread (a lingering close). */
static void
drain (int fd, int wait_ms)
{
  char sink[4096];
  struct pollfd p = { fd, POLLIN, 0 };
  uint64_t deadline = nsbox_now_ms () + (uint64_t)wait_ms;
  for (int rounds = 0; rounds < 64; rounds++)
    {
      uint64_t now = nsbox_now_ms ();
      int left = now < deadline ? (int)(deadline - now) : 0;
      if (poll (&p, 1, left) <= 0 || recv (fd, sink, sizeof sink, MSG_DONTWAIT) <= 0)
        break;
    }
}

/* The refusal the program sees: a status and one line, in one write. */
static void
answer (struct conn *c, int status)
{
  char text[1024];
  int body = (int)strlen (c->reason) + (int)sizeof "nsbox egress proxy: \n" - 1;
  /* The reason is the status line's phrase too: clients that show only
   * the status line of a failed CONNECT (pip, requests) show it. */
  int n = snprintf (text, sizeof text,
                    "HTTP/1.1 %d %s (nsbox egress proxy: %s)\r\nContent-Type: text/plain\r\n"
                    "Connection: close\r\nContent-Length: %d\r\n\r\nnsbox egress proxy: %s\n",
                    status, status_text (status), c->reason, body, c->reason);
  if (n > 0 && (size_t)n < sizeof text && send_all (c->client, text, (size_t)n, 1000) == 0)
    {
      shutdown (c->client, SHUT_WR);
      drain (c->client, 100);
    }
}

/* ---- the decision ---- */

static bool
port_allowed (const struct nsbox_egress *e, uint16_t port)
{
  for (size_t i = 0; i < e->n_ports; i++)
    if (e->ports[i] == port)
      return true;
  return false;
}

static bool
host_allowed (char *const *allow, size_t n, const char *host)
{
  for (size_t i = 0; i < n; i++)
    if (nsbox_egress_pattern_match (allow[i], host))
      return true;
  return false;
}

static bool
same_address (const struct sockaddr *a, const struct sockaddr *b)
{
  struct sockaddr_storage x, y;
  nsbox_egress_plain_address (a, &x);
  nsbox_egress_plain_address (b, &y);
  if (x.ss_family != y.ss_family)
    return false;
  if (x.ss_family == AF_INET)
    return ((const struct sockaddr_in *)&x)->sin_addr.s_addr
           == ((const struct sockaddr_in *)&y)->sin_addr.s_addr;
  return x.ss_family == AF_INET6
         && memcmp (&((const struct sockaddr_in6 *)&x)->sin6_addr,
                    &((const struct sockaddr_in6 *)&y)->sin6_addr, sizeof (struct in6_addr))
                == 0;
}

/* Why an address the resolver gave is refused, or NULL. `own`: this
 * machine's addresses, listed at this resolution (every one of them, as
 * they are now): the launcher connects from the host's network namespace,
 * where they reach the host's services. */
static const char *
address_refused (const struct ifaddrs *own, const struct sockaddr *sa)
{
  const char *why = nsbox_egress_address_refused (sa);
  for (const struct ifaddrs *i = own; !why && i; i = i->ifa_next)
    if (i->ifa_addr && same_address (sa, i->ifa_addr))
      why = "this machine's own";
  return why;
}

static void
set_port (struct sockaddr_storage *sa, uint16_t port)
{
  if (sa->ss_family == AF_INET)
    ((struct sockaddr_in *)sa)->sin_port = htons (port);
  else
    ((struct sockaddr_in6 *)sa)->sin6_port = htons (port);
}

/* The addresses to try, in order: the pin, or what the host's resolver
 * says, every one of them public. 0, or the HTTP status of a refusal. */
static int
resolve (struct conn *c, struct sockaddr_storage *out, size_t *n_out, size_t max)
{
  struct nsbox_egress *e = c->e;
  *n_out = 0;
  for (size_t i = 0; i < e->n_pins; i++)
    if (strcmp (e->pins[i].name, c->host) == 0)
      {
        out[0] = e->pins[i].address;
        set_port (&out[0], c->port);
        *n_out = 1;
        return 0;
      }
  struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
  struct addrinfo *list = NULL;
  /* The name as given: the resolver's search domains never apply (this
   * thread's resolver state; /etc/hosts still does). */
  if (res_init () == 0)
    _res.options &= ~(unsigned long)(RES_DNSRCH | RES_DEFNAMES);
  int r = getaddrinfo (c->host, NULL, &hints, &list);
  if (r != 0)
    {
      refuse (c, "cannot resolve %s: %s", c->host,
              r == EAI_SYSTEM ? strerror (errno) : gai_strerror (r));
      return 502;
    }
  struct ifaddrs *own = NULL;
  if (getifaddrs (&own) < 0)
    {
      refuse (c, "cannot list this machine's own addresses to check %s: %s", c->host,
              strerror (errno));
      freeaddrinfo (list);
      return 502;
    }
  int status = 0;
  for (struct addrinfo *a = list; a; a = a->ai_next)
    {
      if (a->ai_family != AF_INET && a->ai_family != AF_INET6)
        continue;
      const char *why = address_refused (own, a->ai_addr);
      if (why)
        {
          /* One private address among public ones is a rebinding set-up:
           * the whole name is refused. The address goes to the record,
           * not to the program (internal names stay unmapped). */
          nsbox_egress_address_text (a->ai_addr, c->address, sizeof c->address);
          refuse (c, "%s resolves to %s%s address (only an egress-resolve pin allows that)",
                  c->host, strncmp (why, "this ", 5) == 0 ? "" : "a ", why);
          status = 403;
          break;
        }
      if (*n_out < max)
        {
          memcpy (&out[*n_out], a->ai_addr, a->ai_addrlen);
          set_port (&out[*n_out], c->port);
          (*n_out)++;
        }
    }
  freeifaddrs (own);
  freeaddrinfo (list);
  if (status)
    {
      *n_out = 0;
      return status;
    }
  if (*n_out == 0)
    {
      refuse (c, "cannot resolve %s: no IPv4 or IPv6 address", c->host);
      return 502;
    }
  return 0;
}

/* Closes a connection's fd under the lock (see fork above). */
static void
conn_close_slot (struct conn *c, int *slot)
{
  pthread_mutex_lock (&c->e->lock);
  nsbox_close_slot (slot);
  pthread_mutex_unlock (&c->e->lock);
}

/* Connects c->upstream to `sa`; the socket is in its slot from the start,
 * so the end of the run can cut a connect in progress. 0 or -errno, the
 * slot empty. */
static int
connect_one (struct conn *c, const struct sockaddr_storage *sa)
{
  pthread_mutex_lock (&c->e->lock);
  int fd = c->upstream = socket (sa->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int r = fd < 0 ? -errno : 0;
  pthread_mutex_unlock (&c->e->lock);
  if (fd < 0)
    return r;
  socklen_t len
      = sa->ss_family == AF_INET ? sizeof (struct sockaddr_in) : sizeof (struct sockaddr_in6);
  if (connect (fd, (const struct sockaddr *)sa, len) < 0 && errno != EINPROGRESS)
    {
      r = -errno;
      conn_close_slot (c, &c->upstream);
      return r;
    }
  r = wait_fd (fd, POLLOUT, CONNECT_TIMEOUT_MS);
  int so_error = 0;
  socklen_t sl = sizeof so_error;
  if (r == 0 && getsockopt (fd, SOL_SOCKET, SO_ERROR, &so_error, &sl) < 0)
    r = -errno;
  else if (r == 0 && so_error)
    r = -so_error;
  if (r < 0)
    conn_close_slot (c, &c->upstream);
  return r;
}

/* Connects to the first address that answers. 0 or 502/504. */
static int
connect_upstream (struct conn *c, const struct sockaddr_storage *addrs, size_t n)
{
  int err = 0;
  for (size_t i = 0; i < n; i++)
    {
      pthread_mutex_lock (&c->e->lock);
      bool stopping = c->e->stopping;
      pthread_mutex_unlock (&c->e->lock);
      if (stopping)
        {
          refuse (c, "the run ended");
          return 502;
        }
      nsbox_egress_address_text ((const struct sockaddr *)&addrs[i], c->address, sizeof c->address);
      int r = connect_one (c, &addrs[i]);
      if (r == 0)
        {
          pthread_mutex_lock (&c->e->lock);
          bool ended = c->e->stopping;
          if (ended)
            nsbox_close_slot (&c->upstream);
          pthread_mutex_unlock (&c->e->lock);
          if (ended)
            {
              refuse (c, "the run ended");
              return 502;
            }
          return 0;
        }
      err = -r;
    }
  refuse (c, "cannot connect to %s port %u: %s", c->host, (unsigned)c->port, strerror (err));
  return err == ETIMEDOUT ? 504 : 502;
}

/* ---- the byte budget ---- */

/* How many of `want` bytes this direction may still carry. */
static size_t
budget (struct nsbox_egress *e, bool to_upstream, size_t want)
{
  pthread_mutex_lock (&e->lock);
  uint64_t *used = to_upstream ? &e->sent : &e->received;
  uint64_t left = e->max_bytes > *used ? e->max_bytes - *used : 0;
  size_t n = want < left ? want : (size_t)left;
  *used += n;
  pthread_mutex_unlock (&e->lock);
  return n;
}

/* A connection was cut at the byte budget. */
static void
cut_at_budget (struct conn *c)
{
  c->end = "cut at the byte limit (egress-bytes)";
  pthread_mutex_lock (&c->e->lock);
  hit_limit (c->e, "egress-bytes");
  pthread_mutex_unlock (&c->e->lock);
}

/* ---- relaying ---- */

/* Bytes that the budget reserved and a splice did not move go back. */
static void
refund (struct nsbox_egress *e, bool to_upstream, size_t n)
{
  pthread_mutex_lock (&e->lock);
  uint64_t *used = to_upstream ? &e->sent : &e->received;
  *used -= n;
  pthread_mutex_unlock (&e->lock);
}

/* One direction: the bytes in flight sit in a pipe, moved by splice from
 * socket to pipe and pipe to socket, never copied through the launcher's
 * memory. At most a pipe's size is held per direction. */
struct flow
{
  int pipe[2];
  size_t size; /* the pipe's capacity */
  size_t held; /* bytes in the pipe */
  bool full;   /* a splice in found no room: wait for a splice out */
  bool eof;    /* the reading side ended */
  bool shut;   /* and the writing side was shut down after the last byte */
};

static void
flow_close (struct flow *f)
{
  for (int i = 0; i < 2; i++)
    nsbox_close_slot (&f->pipe[i]);
}

/* A bigger pipe moves more per system call: 1 MiB moves a large download
 * at about 1.1 times the rate of 256 KiB here (make bench). A pipe starts
 * at 256 KiB; a download's pipe grows to 1 MiB once it fills, for at most
 * FLOW_GROWN_MAX connections of a run, so that a run counts at most 1.5
 * MiB more against the user's pipe pages (fs.pipe-user-pages-soft, past
 * which every new pipe of the user is small). Best effort: what the kernel
 * refuses stays as it was. */
#define FLOW_PIPE_START (256 * 1024)
#define FLOW_PIPE_MAX (1024 * 1024)
#define FLOW_GROWN_MAX 2

/* Whether one more of the run's download pipes may grow. */
static bool
may_grow (struct nsbox_egress *e)
{
  pthread_mutex_lock (&e->lock);
  bool yes = e->grown < FLOW_GROWN_MAX;
  if (yes)
    e->grown++;
  pthread_mutex_unlock (&e->lock);
  return yes;
}

static int
flow_set_size (struct flow *f, int size)
{
  int got = fcntl (f->pipe[1], F_SETPIPE_SZ, size);
  if (got < 0)
    got = fcntl (f->pipe[1], F_GETPIPE_SZ);
  if (got <= 0)
    return got < 0 ? -errno : -EPIPE;
  f->size = (size_t)got;
  return 0;
}

static int
flow_open (struct flow *f)
{
  *f = (struct flow){ { -1, -1 }, 0, 0, false, false, false };
  if (pipe2 (f->pipe, O_CLOEXEC | O_NONBLOCK) < 0)
    return -errno;
  int r = flow_set_size (f, FLOW_PIPE_START);
  if (r < 0)
    flow_close (f);
  return r;
}

/* Bytes in a socket's send queue not yet taken by the other end (-1 if
 * unknown). */
static int
send_queue (int fd)
{
  int n;
  return ioctl (fd, SIOCOUTQ, &n) < 0 ? -1 : n;
}

/* Copies both ways until both sides end, the idle timeout passes, the byte
 * budget runs out or the run ends. `up_limit`: plain HTTP sends only the
 * rest of the request body upstream (UINT64_MAX: a tunnel). */
static void
relay (struct conn *c, uint64_t up_limit)
{
  struct nsbox_egress *e = c->e;
  struct flow up, down;
  pthread_mutex_lock (&e->lock);
  bool opened = flow_open (&up) == 0 && flow_open (&down) == 0;
  if (opened)
    memcpy (c->pipes, (int[4]){ up.pipe[0], up.pipe[1], down.pipe[0], down.pipe[1] },
            sizeof c->pipes);
  else if (up.pipe[0] >= 0)
    flow_close (&up);
  pthread_mutex_unlock (&e->lock);
  if (!opened)
    {
      c->end = "out of pipes";
      return;
    }
  if (up_limit == 0)
    up.eof = true;
  uint64_t up_left = up_limit;
  uint64_t last = nsbox_now_ms ();
  unsigned idle_wakes = 0;
  int queued[2] = { send_queue (c->client), send_queue (c->upstream) };
  bool eager = false;
  c->end = "closed";
  for (;;)
    {
      if (up.eof && up.held == 0 && !up.shut)
        {
          if (up_limit == UINT64_MAX)
            shutdown (c->upstream, SHUT_WR);
          up.shut = true;
        }
      if (down.eof && down.held == 0 && !down.shut)
        {
          shutdown (c->client, SHUT_WR);
          down.shut = true;
        }
      if (down.shut && (up.shut || up_limit != UINT64_MAX))
        break;
      struct pollfd p[2] = { { c->client, 0, 0 }, { c->upstream, 0, 0 } };
      if (!up.eof && up.held < up.size && !up.full)
        p[0].events |= POLLIN;
      if (down.held > 0)
        p[0].events |= POLLOUT;
      if (!down.eof && down.held < down.size && !down.full)
        p[1].events |= POLLIN;
      if (up.held > 0)
        p[1].events |= POLLOUT;
      /* poll reports a hang-up even on an fd that asks for nothing: a side
       * with nothing to do is left out, or the loop would spin on it. */
      for (int i = 0; i < 2; i++)
        if (!p[i].events)
          p[i].fd = -1;
      if (p[0].fd < 0 && p[1].fd < 0)
        break;
      if (++idle_wakes > RELAY_IDLE_WAKES_MAX)
        {
          c->end = "no progress";
          break;
        }
      uint64_t now = nsbox_now_ms ();
      if (now - last >= e->idle_ms)
        {
          c->end = "idle (egress-idle-timeout)";
          break;
        }
      /* After a round that moved bytes, the next one tries the splices
       * before any poll: in a download more has usually arrived, and a
       * splice that finds nothing answers EAGAIN at once. One poll (and
       * often a sleep) per chunk less: about 5% less CPU per GiB for the
       * launcher and the sandbox together (make bench, egress). */
      int n;
      bool polled = !eager;
      if (eager)
        {
          for (int i = 0; i < 2; i++)
            p[i].revents = p[i].fd >= 0 ? p[i].events : 0;
          n = 1;
        }
      else
        {
          /* At least every quarter of the idle timeout: see below. */
          uint64_t wait = e->idle_ms - (now - last), step = e->idle_ms / 4 ? e->idle_ms / 4 : 1;
          n = poll (p, 2, (int)(wait < step ? wait : step));
        }
      eager = false;
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          c->end = "poll failed";
          break;
        }
      if (n == 0)
        {
          /* The relay moved nothing, but a slow reader may still be
           * draining what the kernel holds in a socket's send queue
           * (megabytes): while the queues change, bytes are moving and the
           * connection is not idle. */
          int q[2] = { send_queue (c->client), send_queue (c->upstream) };
          if (q[0] != queued[0] || q[1] != queued[1])
            {
              memcpy (queued, q, sizeof queued);
              last = nsbox_now_ms ();
              idle_wakes = 0;
            }
          continue;
        }
      pthread_mutex_lock (&e->lock);
      bool stopping = e->stopping, closed = c->closed_by_program;
      pthread_mutex_unlock (&e->lock);
      if (stopping)
        {
          c->end = closed ? "closed" : "the run ended";
          break;
        }
      bool progress = false, failed = false;
      for (int side = 0; side < 2 && !failed; side++)
        {
          /* side 0 reads the client into up, side 1 the upstream into down */
          struct flow *f = side == 0 ? &up : &down;
          int from = side == 0 ? c->client : c->upstream;
          int to = side == 0 ? c->upstream : c->client;
          uint64_t *count = side == 0 ? &c->sent : &c->received;
          bool just_read = false;
          if ((p[side].revents & (POLLIN | POLLHUP | POLLERR)) && !f->eof && f->held < f->size
              && !f->full)
            {
              size_t want = f->size - f->held;
              if (side == 0 && up_left < want)
                want = (size_t)up_left;
              size_t allowed = budget (e, side == 0, want);
              ssize_t r;
              bool over = false;
              if (allowed > 0)
                r = splice (from, NULL, f->pipe[1], NULL, allowed,
                            SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
              else
                {
                  /* The budget is spent. Only a byte that is really
                   * waiting cuts the connection: a side that has nothing
                   * to send (an eager round asks every side) or that
                   * ended is not over the limit. */
                  char byte;
                  r = recv (from, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
                  over = r > 0;
                }
              int error = r < 0 ? errno : 0;
              size_t moved = r > 0 && !over ? (size_t)r : 0;
              refund (e, side == 0, allowed - moved);
              if (error == EAGAIN && f->held > 0 && polled && (p[side].revents & POLLIN))
                /* A pipe counts pages, not bytes: small segments fill it
                 * before `size`. Reading waits for room, or poll would
                 * report the waiting bytes at once, round after round. (In
                 * an eager round EAGAIN says only that nothing came yet.) */
                f->full = true;
              if (over)
                {
                  /* What is in the pipes still goes, then the connection
                   * ends. */
                  cut_at_budget (c);
                  up.eof = down.eof = true;
                  progress = true;
                }
              else if (r > 0)
                {
                  f->held += moved;
                  progress = true;
                  just_read = true;
                  if (side == 1 && f->held == f->size && f->size < FLOW_PIPE_MAX && may_grow (e))
                    flow_set_size (f, FLOW_PIPE_MAX);
                  if (side == 0 && up_left != UINT64_MAX && (up_left -= moved) == 0)
                    f->eof = true;
                }
              else if (r == 0)
                {
                  f->eof = true;
                  progress = true;
                  /* Plain HTTP: a body cut short leaves the server
                   * waiting for the rest; nothing more will come. */
                  if (side == 0 && up_limit != UINT64_MAX && up_left > 0)
                    {
                      c->end = "the program ended the request before its body";
                      failed = true;
                    }
                }
              else if (error != EAGAIN && error != EINTR)
                {
                  f->eof = true;
                  c->end = side == 0 ? "the program's side failed" : "the server's side failed";
                  failed = true;
                }
            }
          /* Bytes just read go on at once (a full socket answers EAGAIN):
           * a poll round per chunk less. */
          int wside = side == 0 ? 1 : 0;
          if (f->held > 0 && (just_read || (p[wside].revents & (POLLOUT | POLLERR | POLLHUP))))
            {
              ssize_t w
                  = splice (f->pipe[0], NULL, to, NULL, f->held, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
              if (w > 0)
                {
                  f->held -= (size_t)w;
                  f->full = false;
                  *count += (uint64_t)w;
                  progress = true;
                }
              else if (w < 0 && errno != EAGAIN && errno != EINTR)
                {
                  c->end = side == 0 ? "the server's side failed" : "the program's side failed";
                  failed = true;
                }
            }
        }
      if (failed)
        break;
      if (progress)
        {
          last = nsbox_now_ms ();
          idle_wakes = 0;
          eager = true;
        }
    }
  pthread_mutex_lock (&e->lock);
  memcpy (c->pipes, (int[4]){ -1, -1, -1, -1 }, sizeof c->pipes);
  flow_close (&up);
  flow_close (&down);
  pthread_mutex_unlock (&e->lock);
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
  int r = wait_fd (c->client, POLLIN, wait);
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
  if (send_all (c->client, established, sizeof established - 1, c->e->idle_ms) < 0)
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
      refuse (c, "out of memory");
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
          refuse (c, "no TLS ClientHello arrived (%s)", strerror (-r));
          free (hello);
          return;
        }
    }
  if (state == NSBOX_EGRESS_BAD)
    {
      refuse (c, "%s (CONNECT carries TLS to %s only)", why, c->host);
      free (hello);
      return;
    }
  if (strcmp (sni, c->host) != 0)
    {
      refuse (c, "the TLS server name '%s' is not the CONNECT host '%s'", sni, c->host);
      free (hello);
      return;
    }
  size_t allowed = budget (c->e, true, have);
  int r = send_all (c->upstream, hello, allowed, c->e->idle_ms);
  free (hello);
  c->allowed = true;
  if (r < 0 || allowed < have)
    {
      c->sent = r < 0 ? 0 : allowed;
      if (r < 0)
        c->end = "the server's side failed";
      else
        cut_at_budget (c);
      return;
    }
  c->sent = allowed;
  relay (c, UINT64_MAX);
}

/* Plain HTTP: the rewritten head, the body as sized, then the answer. */
static void
serve_plain (struct conn *c, const struct nsbox_egress_request *req, const char *buf, size_t len)
{
  c->allowed = true;
  size_t head = req->upstream_head_len;
  size_t allowed = budget (c->e, true, head);
  if (allowed < head)
    {
      refund (c->e, true, allowed); /* nothing was sent */
      cut_at_budget (c);
      return;
    }
  if (send_all (c->upstream, req->upstream_head, head, c->e->idle_ms) < 0)
    {
      c->end = "the server's side failed";
      return;
    }
  c->sent = head;
  size_t body = len - req->head_len;
  if (body > req->content_length)
    body = (size_t)req->content_length; /* a second request behind it is dropped */
  allowed = budget (c->e, true, body);
  if (allowed < body)
    {
      refund (c->e, true, allowed);
      cut_at_budget (c);
      return;
    }
  if (send_all (c->upstream, buf + req->head_len, allowed, c->e->idle_ms) < 0)
    {
      c->end = "the server's side failed";
      return;
    }
  c->sent += allowed;
  relay (c, req->content_length - body);
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
      refuse (c, "out of memory");
      goto done;
    }
  enum nsbox_egress_parse state;
  while ((state = nsbox_egress_parse_request (buf, len, &req)) == NSBOX_EGRESS_MORE)
    {
      int r = read_until (c, buf, NSBOX_EGRESS_HEAD_MAX, &len, c->started_ms + HEAD_DEADLINE_MS);
      if (r < 0)
        {
          refuse (c, r == -ETIMEDOUT ? "no request arrived (egress-idle-timeout)"
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
      refuse (c, "%s", req.reason);
      status = req.status;
      goto done;
    }
  if (!host_allowed (e->allow, e->n_allow, req.host))
    {
      refuse (c, "%s is not on the egress allowlist", req.host);
      status = 403;
      goto done;
    }
  if (!port_allowed (e, req.port))
    {
      refuse (c, "port %u is not allowed (egress-ports)", (unsigned)req.port);
      status = 403;
      goto done;
    }
  struct sockaddr_storage addrs[8];
  size_t n = 0;
  if ((status = resolve (c, addrs, &n, ARRAY_SIZE (addrs))) != 0
      || (status = connect_upstream (c, addrs, n)) != 0)
    goto done;
  if (req.connect)
    serve_connect (c, buf, len, req.head_len);
  else
    serve_plain (c, &req, buf, len);
done:
  if (!c->allowed && status)
    answer (c, status);
  nsbox_egress_request_clear (&req);
  free (buf);
  record (c);
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
  /* Its request, when it comes at once, is read first (see drain). */
  drain (fd, 0);
  refuse (&c, "%s reached (%s %" PRIu64 ")",
          strcmp (limit, "egress-concurrent") == 0 ? "too many connections at once"
                                                   : "the run's connection limit is",
          limit, value);
  answer (&c, 403);
  record (&c);
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
        hit_limit (e, limit);
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
          refuse (c, "cannot start a thread");
          record (c);
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
          && !host_allowed (config->egress_allow, config->egress_allow_len, name))
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
