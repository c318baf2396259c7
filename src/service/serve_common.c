/* What every endpoint of `nsbox serve` shares (serve_api.h): the
 * answers, the bearer tokens and who a client is, and admission to a run
 * slot. */
#include <arpa/inet.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "mhd.h"
#include "serve_api.h"
#include "util.h"

/* ---- the node ---- */

/* Set once by nsbox_serve before any thread answers; read by every answer. */
static char node_name[NSBOX_SERVE_NODE_MAX + 1] = "nsbox";

bool
nsbox_serve_node_valid (const char *name)
{
  size_t n = name ? strlen (name) : 0;
  if (n == 0 || n > NSBOX_SERVE_NODE_MAX
      || strspn (name, "abcdefghijklmnopqrstuvwxyz0123456789-") != n)
    return false;
  return name[0] != '-' && name[n - 1] != '-';
}

void
nsbox_serve_set_node (const char *name)
{
  snprintf (node_name, sizeof node_name, "%s", name);
}

const char *
nsbox_serve_node (void)
{
  return node_name;
}

/* Set once the drain begins: every answer from then on closes its
 * connection, so that no client (a balancer) sends on it again. */
static atomic_bool closing;

void
nsbox_serve_set_closing (void)
{
  atomic_store (&closing, true);
}

void
nsbox_serve_add_node_headers (struct MHD_Response *r, unsigned status)
{
  nsbox_mhd.add_response_header (r, "X-Nsbox-Node", node_name);
  if (atomic_load (&closing))
    nsbox_mhd.add_response_header (r, "Connection", "close");
  /* Every 503 of nsbox is a refusal before anything of the request
   * started: another node may take it. */
  if (status == 503)
    nsbox_mhd.add_response_header (r, "X-Nsbox-Retryable", "true");
}

/* ---- the session header ---- */

unsigned
nsbox_serve_session_header (struct MHD_Connection *c, const struct json_t *root, const char **apply,
                            char *why, size_t size)
{
  const char *header = nsbox_mhd.lookup_connection_value (c, MHD_HEADER_KIND, "X-Nsbox-Session");
  const json_t *v = json_object_get (root, "session");
  *apply = v ? NULL : header;
  if (!header || !v)
    return 0;
  /* As the body's keys are read: a string, or an integer's digits. */
  char text[32];
  const char *in_body = json_string_value (v);
  if (in_body && strlen (in_body) != json_string_length (v))
    in_body = NULL;
  if (!in_body && json_is_integer (v))
    {
      snprintf (text, sizeof text, "%" JSON_INTEGER_FORMAT, json_integer_value (v));
      in_body = text;
    }
  if (in_body && strcmp (in_body, header) == 0)
    return 0;
  snprintf (why, size,
            "the body's \"session\" and the X-Nsbox-Session header differ: give one, "
            "or the same in both");
  return 400;
}

/* ---- responses ---- */

static enum MHD_Result
respond_allowing (struct MHD_Connection *c, unsigned status, const char *type, const char *body,
                  size_t len, uint64_t retry_after_s, const char *allow)
{
  struct MHD_Response *r
      = nsbox_mhd.create_response_from_buffer (len, (void *)body, MHD_RESPMEM_MUST_COPY);
  if (!r)
    return MHD_NO;
  nsbox_mhd.add_response_header (r, "Content-Type", type);
  char retry[24];
  snprintf (retry, sizeof retry, "%" PRIu64, retry_after_s);
  if (retry_after_s)
    nsbox_mhd.add_response_header (r, "Retry-After", retry);
  if (status == 401)
    nsbox_mhd.add_response_header (r, "WWW-Authenticate", "Bearer");
  if (allow)
    nsbox_mhd.add_response_header (r, "Allow", allow);
  nsbox_serve_add_node_headers (r, status);
  enum MHD_Result ret = nsbox_mhd.queue_response (c, status, r);
  nsbox_mhd.destroy_response (r);
  return ret;
}

enum MHD_Result
nsbox_serve_respond (struct MHD_Connection *c, unsigned status, const char *type, const char *body,
                     size_t len, uint64_t retry_after_s)
{
  return respond_allowing (c, status, type, body, len, retry_after_s, NULL);
}

enum MHD_Result
nsbox_serve_respond_message (struct MHD_Connection *c, unsigned status, const char *msg,
                             const char *allow)
{
  json_t *o = json_pack ("{s:s}", "error", msg ? msg : "out of memory");
  cleanup_free char *text = o ? json_dumps (o, JSON_COMPACT) : NULL;
  json_decref (o);
  if (!text)
    return MHD_NO;
  return respond_allowing (c, status, "application/json", text, strlen (text),
                           status == 503 ? 1 : 0, allow);
}

enum MHD_Result
nsbox_serve_respond_error (struct MHD_Connection *c, unsigned status, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  cleanup_free char *msg = vxasprintf (fmt, ap);
  va_end (ap);
  return nsbox_serve_respond_message (c, status, msg, NULL);
}

void
nsbox_serve_count (struct nsbox_server *s, uint64_t *counter)
{
  pthread_mutex_lock (&s->lock);
  (*counter)++;
  pthread_mutex_unlock (&s->lock);
}

/* ---- authorization ---- */

/* Compares every byte whatever the first difference: the time taken says
 * nothing about how much of a guess was right. */
static bool
same_secret (const char *a, const char *b, size_t n)
{
  volatile unsigned char diff = 0;
  for (size_t i = 0; i < n; i++)
    diff |= (unsigned char)a[i] ^ (unsigned char)b[i];
  return diff == 0;
}

bool
nsbox_serve_authorized (struct nsbox_server *s, struct MHD_Connection *c, size_t *token)
{
  *token = SIZE_MAX;
  if (!s->token_page)
    return true;
  const char *h = nsbox_mhd.lookup_connection_value (c, MHD_HEADER_KIND, "Authorization");
  if (!h || strncasecmp (h, "Bearer ", 7) != 0)
    return false;
  const char *given = h + 7;
  size_t len = strlen (given);
  /* Every token is compared, in constant time in its content (their
   * lengths are not secrets). */
  for (size_t i = 0; i < s->n_tokens; i++)
    if (strlen (s->tokens[i]) == len && same_secret (given, s->tokens[i], len))
      *token = i;
  return *token != SIZE_MAX;
}

/* The client, as a live sandbox is bound to it: the peer's uid on the unix
 * socket, and the bearer token it presented (by its place in the token
 * file). 0, or -1 when it cannot be told. */
int
nsbox_serve_owner (struct nsbox_server *s, struct MHD_Connection *c, char *out, size_t size)
{
  size_t token = SIZE_MAX;
  if (!nsbox_serve_authorized (s, c, &token))
    return -1;
  const union MHD_ConnectionInfo *info
      = nsbox_mhd.get_connection_info (c, MHD_CONNECTION_INFO_CONNECTION_FD);
  struct ucred cred;
  socklen_t len = sizeof cred;
  char uid[32] = "", tok[32] = "";
  if (!s->tcp)
    {
      if (!info || getsockopt (info->connect_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
        return -1;
      snprintf (uid, sizeof uid, "uid %u", (unsigned)cred.uid);
    }
  if (token != SIZE_MAX)
    snprintf (tok, sizeof tok, "token %zu", token);
  if (!uid[0] && !tok[0])
    return -1;
  snprintf (out, size, "%s%s%s", uid, uid[0] && tok[0] ? " " : "", tok);
  return 0;
}

/* 0: a slot is ours; -1: busy; -2: draining. */
int
nsbox_serve_admit (struct nsbox_server *s)
{
  pthread_mutex_lock (&s->lock);
  int r = 0;
  if (s->draining)
    r = -2;
  else if (s->running < s->max_concurrent)
    s->running++;
  else if (s->queued < s->max_queue)
    {
      s->queued++;
      while (s->running >= s->max_concurrent && !s->draining)
        pthread_cond_wait (&s->slot_free, &s->lock);
      s->queued--;
      if (s->draining)
        r = -2;
      else
        s->running++;
      if (r < 0 && s->running == 0 && s->queued == 0)
        pthread_cond_broadcast (&s->idle);
    }
  else
    r = -1;
  if (r == -1)
    s->rejected_busy++;
  else if (r == -2)
    s->rejected_draining++;
  pthread_mutex_unlock (&s->lock);
  return r;
}

/* Who sent a run, for the audit log: the peer's uid on the unix socket,
 * its address on TCP. */
void
nsbox_serve_release_slot (struct nsbox_server *s)
{
  pthread_mutex_lock (&s->lock);
  s->running--;
  pthread_cond_signal (&s->slot_free);
  if (s->running == 0 && s->queued == 0)
    pthread_cond_broadcast (&s->idle);
  pthread_mutex_unlock (&s->lock);
}

void
nsbox_serve_describe_client (const struct nsbox_server *s, int fd, char *out, size_t size)
{
  snprintf (out, size, "serve");
  if (fd < 0)
    return;
  if (!s->tcp)
    {
      struct ucred cred;
      socklen_t len = sizeof cred;
      if (getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
        snprintf (out, size, "serve unix uid %u pid %d", (unsigned)cred.uid, (int)cred.pid);
      return;
    }
  struct sockaddr_storage peer;
  socklen_t len = sizeof peer;
  char host[64] = "?";
  unsigned port = 0;
  if (getpeername (fd, (struct sockaddr *)&peer, &len) == 0)
    {
      if (peer.ss_family == AF_INET)
        {
          inet_ntop (AF_INET, &((struct sockaddr_in *)&peer)->sin_addr, host, sizeof host);
          port = ntohs (((struct sockaddr_in *)&peer)->sin_port);
        }
      else if (peer.ss_family == AF_INET6)
        {
          inet_ntop (AF_INET6, &((struct sockaddr_in6 *)&peer)->sin6_addr, host, sizeof host);
          port = ntohs (((struct sockaddr_in6 *)&peer)->sin6_port);
        }
    }
  snprintf (out, size, "serve tcp %s port %u", host, port);
}
