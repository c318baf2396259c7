/* The egress proxy towards the outside: the address checks of the decision,
 * resolution once per connection with the pins, connecting. */
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
#include "supervise.h"

#define CONNECT_TIMEOUT_MS 10000

/* ---- the decision ---- */

bool
nsbox_egress_port_allowed (const struct nsbox_egress *e, uint16_t port)
{
  for (size_t i = 0; i < e->n_ports; i++)
    if (e->ports[i] == port)
      return true;
  return false;
}

bool
nsbox_egress_host_allowed (char *const *allow, size_t n, const char *host)
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
int
nsbox_egress_resolve (struct conn *c, struct sockaddr_storage *out, size_t *n_out, size_t max)
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
      nsbox_egress_refuse (c, "cannot resolve %s: %s", c->host,
                           r == EAI_SYSTEM ? strerror (errno) : gai_strerror (r));
      return 502;
    }
  struct ifaddrs *own = NULL;
  if (getifaddrs (&own) < 0)
    {
      nsbox_egress_refuse (c, "cannot list this machine's own addresses to check %s: %s", c->host,
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
           * the whole name is refused. The address goes to the nsbox_egress_record,
           * not to the program (internal names stay unmapped). */
          nsbox_egress_address_text (a->ai_addr, c->address, sizeof c->address);
          nsbox_egress_refuse (
              c, "%s resolves to %s%s address (only an egress-resolve pin allows that)", c->host,
              strncmp (why, "this ", 5) == 0 ? "" : "a ", why);
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
      nsbox_egress_refuse (c, "cannot resolve %s: no IPv4 or IPv6 address", c->host);
      return 502;
    }
  return 0;
}

/* Closes a connection's fd under the lock (see fork in egress.c). */
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
  r = nsbox_egress_wait_fd (fd, POLLOUT, CONNECT_TIMEOUT_MS);
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
int
nsbox_egress_connect_upstream (struct conn *c, const struct sockaddr_storage *addrs, size_t n)
{
  int err = 0;
  for (size_t i = 0; i < n; i++)
    {
      pthread_mutex_lock (&c->e->lock);
      bool stopping = c->e->stopping;
      pthread_mutex_unlock (&c->e->lock);
      if (stopping)
        {
          nsbox_egress_refuse (c, "the run ended");
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
              nsbox_egress_refuse (c, "the run ended");
              return 502;
            }
          return 0;
        }
      err = -r;
    }
  nsbox_egress_refuse (c, "cannot connect to %s port %u: %s", c->host, (unsigned)c->port,
                       strerror (err));
  return err == ETIMEDOUT ? 504 : 502;
}
