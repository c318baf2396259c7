/* The egress proxy's records of its connections, its refusals and answers,
 * and the socket helpers every part uses. */
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

/* ---- records ---- */

void
nsbox_egress_record (struct conn *c)
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

void
nsbox_egress_refuse (struct conn *c, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  vsnprintf (c->reason, sizeof c->reason, fmt, ap);
  va_end (ap);
  c->allowed = false;
}

/* ---- sockets ---- */

int
nsbox_egress_wait_fd (int fd, short events, uint64_t timeout_ms)
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
int
nsbox_egress_send_all (int fd, const void *data, size_t len, uint64_t idle_ms)
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
      int r = nsbox_egress_wait_fd (fd, POLLOUT, idle_ms);
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
void
nsbox_egress_drain (int fd, int wait_ms)
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
void
nsbox_egress_answer (struct conn *c, int status)
{
  char text[1024];
  int body = (int)strlen (c->reason) + (int)sizeof "nsbox egress proxy: \n" - 1;
  /* The reason is the status line's phrase too: clients that show only
   * the status line of a failed CONNECT (pip, requests) show it. */
  int n = snprintf (text, sizeof text,
                    "HTTP/1.1 %d %s (nsbox egress proxy: %s)\r\nContent-Type: text/plain\r\n"
                    "Connection: close\r\nContent-Length: %d\r\n\r\nnsbox egress proxy: %s\n",
                    status, status_text (status), c->reason, body, c->reason);
  if (n > 0 && (size_t)n < sizeof text
      && nsbox_egress_send_all (c->client, text, (size_t)n, 1000) == 0)
    {
      shutdown (c->client, SHUT_WR);
      nsbox_egress_drain (c->client, 100);
    }
}
