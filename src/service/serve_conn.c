/* The connections of `nsbox serve` (serve_conn.h).
 *
 * libmicrohttpd 0.9.75 (Debian 12's) closes a connection it will not take
 * (past its connection limits) without reading it, and closes a connection
 * right after an answer it sent before the request's body was read: a
 * client still sending gets a broken pipe or a reset instead of the answer,
 * and cannot tell "busy" from "gone". It also bounds only inactivity, so a
 * client trickling its headers holds a connection for ever. So one thread
 * here accepts every connection itself and:
 *  - answers one past max-connections, or past max-connections-per-peer,
 *    with a fixed 503 and Retry-After, written at once (nothing of the
 *    request is needed to refuse it), then lingers as below; as many as
 *    max-connections refused ones linger at once, and past them new
 *    connections wait in the listening socket's backlog until some end;
 *  - bounds each phase of a connection in time: a request's headers
 *    (header-timeout, from the connection's opening or from its request
 *    line), its body (body-timeout, from its headers), the wait for the next
 *    request (idle-timeout); past them the connection is shut down, which
 *    libmicrohttpd takes for the client leaving;
 *  - ends every connection with a lingering close: its sending side shut,
 *    whatever the client still sends is read and dropped until it closes,
 *    for at most LINGER_MS, so that it reads the answer instead of losing it
 *    to a reset.
 * A connection keeps a duplicate of its socket from accept to the end of
 * its linger: the socket outlives libmicrohttpd's close of its own fd, and a
 * shutdown from here can never hit an fd number reused meanwhile. */
#include "serve_conn.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "mhd.h"
#include "serve_api.h"
/* A closed connection's client may go on sending for this long in all, */
#define LINGER_MS 5000
/* with no pause longer than this. */
#define LINGER_QUIET_MS 2000
/* How often the phases' deadlines are checked while connections are open. */
#define TICK_MS 200
/* A connection shut here that libmicrohttpd never started (it dropped it
 * without a word: out of memory) is forgotten after this long. */
#define ABANDONED_MS 5000
/* At the server's end, lingering connections get this long to end. */
#define FINAL_LINGER_MS 1000
/* Reads per readiness of a lingering connection before the others' turn. */
#define DRAIN_READS 16

enum phase
{
  PHASE_HEADERS, /* a request's headers are awaited: header-timeout */
  PHASE_IDLE,    /* between requests: idle-timeout */
  PHASE_BODY,    /* a request's body is awaited: body-timeout */
  PHASE_BUSY,    /* a run or an answer: bounded elsewhere */
  PHASE_LINGER,  /* closed by libmicrohttpd: draining */
  PHASE_REFUSED, /* answered 503 here: draining */
};

struct peer
{
  int family;
  unsigned char addr[16]; /* AF_INET: 4 bytes, AF_INET6: 16 */
  uid_t uid;              /* AF_UNIX */
};

struct conn
{
  struct conn *prev, *next;
  int fd;        /* ours: a duplicate of libmicrohttpd's socket, or the socket */
  int mhd_fd;    /* the number libmicrohttpd was given */
  bool started;  /* libmicrohttpd took it (NOTIFY_STARTED) */
  bool cut;      /* shut down here: too slow */
  bool in_epoll; /* lingering: only the thread ends it */
  bool answered; /* a fixed answer was written here: libmicrohttpd must not */
  enum phase phase;
  int64_t deadline_ms; /* of its phase (monotonic), 0: none */
  int64_t quiet_ms;    /* lingering: the next byte must come by then */
  struct peer peer;
};

struct nsbox_conns
{
  pthread_mutex_t lock;
  pthread_cond_t changed; /* the thread stopped listening */
  struct conn *head;
  uint64_t open, refusing;
  struct nsbox_conns_options o;
  struct nsbox_conns_stats stats;
  struct MHD_Daemon *daemon;
  int listen_fd, epoll_fd, wake_fd;
  bool listening;      /* listen_fd is in the epoll set */
  int64_t relisten_ms; /* after a failed accept: not listening again before */
  bool quiesce, stopping;
  pthread_t thread;
  bool thread_started;
};

/* ---- the list, under cs->lock ---- */

static void
insert (struct nsbox_conns *cs, struct conn *c)
{
  c->prev = NULL;
  c->next = cs->head;
  if (cs->head)
    cs->head->prev = c;
  cs->head = c;
}

/* Takes c out of the list (under the lock). */
static void
unlink_conn (struct nsbox_conns *cs, struct conn *c)
{
  if (c->prev)
    c->prev->next = c->next;
  else
    cs->head = c->next;
  if (c->next)
    c->next->prev = c->prev;
}

/* Closes and forgets a connection. */
static void
finish (struct nsbox_conns *cs, struct conn *c)
{
  unlink_conn (cs, c);
  if (c->phase == PHASE_REFUSED)
    cs->refusing--;
  else
    cs->open--;
  if (c->phase == PHASE_LINGER)
    cs->stats.lingering--;
  if (c->in_epoll)
    epoll_ctl (cs->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
  close (c->fd);
  free (c);
}

/* Lingers: the sending side is shut, the rest of what the client sends
 * is read by the thread until it closes or the time is up. */
static void
linger (struct nsbox_conns *cs, struct conn *c, enum phase phase)
{
  int64_t now = (int64_t)nsbox_now_ms ();
  shutdown (c->fd, SHUT_WR);
  if (c->phase != PHASE_REFUSED && phase == PHASE_LINGER)
    cs->stats.lingering++;
  c->phase = phase;
  c->deadline_ms = now + LINGER_MS;
  c->quiet_ms = now + LINGER_QUIET_MS;
  struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = c };
  if (epoll_ctl (cs->epoll_fd, EPOLL_CTL_ADD, c->fd, &ev) == 0)
    c->in_epoll = true;
  else
    finish (cs, c);
}

static struct conn *
conn_of (struct MHD_Connection *mc)
{
  const union MHD_ConnectionInfo *info
      = nsbox_mhd.get_connection_info (mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return info ? info->socket_context : NULL;
}

static void
set_phase (struct nsbox_conns *cs, struct MHD_Connection *mc, enum phase phase, uint64_t after_ms)
{
  pthread_mutex_lock (&cs->lock);
  struct conn *c = conn_of (mc);
  if (c && !c->cut)
    {
      c->phase = phase;
      c->deadline_ms = after_ms ? (int64_t)nsbox_now_ms () + (int64_t)after_ms : 0;
    }
  pthread_mutex_unlock (&cs->lock);
}

/* A fixed answer written on the socket itself: a connection refused
 * before any of it was read, or a request libmicrohttpd has no room left to
 * answer. why is JSON-safe. */
static void
send_fixed (int fd, const char *status, bool retry, const char *why)
{
  char body[256], answer[512];
  int body_len = snprintf (body, sizeof body, "{\"error\":\"%s\"}", why);
  int len = snprintf (answer, sizeof answer,
                      "HTTP/1.1 %s\r\n"
                      "Content-Type: application/json\r\n"
                      "X-Nsbox-Node: %s\r\n"
                      "%s"
                      "Connection: close\r\n"
                      "Content-Length: %d\r\n\r\n%s",
                      status, nsbox_serve_node (),
                      retry ? "Retry-After: 1\r\nX-Nsbox-Retryable: true\r\n" : "", body_len, body);
  /* A socket that has sent nothing yet takes it whole. */
  if (len > 0 && (size_t)len < sizeof answer)
    (void)!send (fd, answer, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* ---- libmicrohttpd's side ---- */

void
nsbox_conns_notify (void *cls, struct MHD_Connection *mc, void **socket_context,
                    enum MHD_ConnectionNotificationCode code)
{
  struct nsbox_conns *cs = cls;
  pthread_mutex_lock (&cs->lock);
  if (code == MHD_CONNECTION_NOTIFY_STARTED)
    {
      const union MHD_ConnectionInfo *info
          = nsbox_mhd.get_connection_info (mc, MHD_CONNECTION_INFO_CONNECTION_FD);
      /* The newest first: an abandoned connection of the same number is
       * older. */
      struct conn *c = cs->head;
      while (
          c && !(info && !c->started && c->phase == PHASE_HEADERS && c->mhd_fd == info->connect_fd))
        c = c->next;
      if (c)
        c->started = true;
      *socket_context = c;
    }
  else
    {
      struct conn *c = *socket_context;
      *socket_context = NULL;
      char byte;
      if (c && c->cut)
        finish (cs, c); /* too slow: no courtesy */
      else if (c && recv (c->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0)
        finish (cs, c); /* the client has closed already */
      else if (c)
        linger (cs, c, PHASE_LINGER);
    }
  pthread_mutex_unlock (&cs->lock);
}

/* The parameters of uri's query. */
static size_t
query_parameters (const char *uri)
{
  const char *q = strchr (uri, '?');
  if (!q)
    return 0;
  size_t n = 1;
  for (q++; *q; q++)
    n += *q == '&' || *q == ';';
  return n;
}

void *
nsbox_conns_request_line (void *cls, const char *uri, struct MHD_Connection *mc)
{
  struct nsbox_conns *cs = cls;
  pthread_mutex_lock (&cs->lock);
  struct conn *c = conn_of (mc);
  /* libmicrohttpd stores each query parameter in the connection's memory;
   * a few hundred of them leave it no room to answer, and it would close
   * unanswered. No endpoint takes any: past a few, the answer is written
   * here (the access handler then ends the connection). */
  if (c && !c->cut && !c->answered && query_parameters (uri) > NSBOX_SERVE_QUERY_PARAMETERS)
    {
      char why[96];
      snprintf (why, sizeof why, "the query has more than %u parameters",
                NSBOX_SERVE_QUERY_PARAMETERS);
      send_fixed (c->fd, "414 URI Too Long", false, why);
      c->answered = true;
      cs->stats.answered++;
    }
  /* A new connection's headers count from its opening; a kept one's from
   * its request line. */
  if (c && !c->cut && c->phase == PHASE_IDLE)
    {
      c->phase = PHASE_HEADERS;
      c->deadline_ms = (int64_t)nsbox_now_ms () + (int64_t)cs->o.header_timeout_ms;
    }
  pthread_mutex_unlock (&cs->lock);
  return NULL; /* the access handler makes its own request state */
}

void
nsbox_conns_headers_in (struct nsbox_conns *cs, struct MHD_Connection *mc)
{
  set_phase (cs, mc, PHASE_BODY, cs->o.body_timeout_ms);
}

void
nsbox_conns_body_in (struct nsbox_conns *cs, struct MHD_Connection *mc)
{
  set_phase (cs, mc, PHASE_BUSY, 0);
}

void
nsbox_conns_request_done (struct nsbox_conns *cs, struct MHD_Connection *mc)
{
  set_phase (cs, mc, PHASE_IDLE, cs->o.idle_timeout_ms);
}

/* ---- accepting ---- */

static void
peer_of (const struct nsbox_conns *cs, int fd, const struct sockaddr_storage *ss, struct peer *p)
{
  memset (p, 0, sizeof *p);
  p->family = ss->ss_family;
  if (!cs->o.tcp)
    {
      struct ucred cred = { .uid = (uid_t)-1 };
      socklen_t len = sizeof cred;
      getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &cred, &len);
      p->family = AF_UNIX;
      p->uid = cred.uid;
      return;
    }
  if (ss->ss_family == AF_INET)
    memcpy (p->addr, &((const struct sockaddr_in *)ss)->sin_addr, 4);
  else if (ss->ss_family == AF_INET6)
    {
      const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
      if (IN6_IS_ADDR_V4MAPPED (a))
        {
          p->family = AF_INET;
          memcpy (p->addr, a->s6_addr + 12, 4);
        }
      else
        memcpy (p->addr, a->s6_addr, 16);
    }
}

static bool
same_peer (const struct peer *a, const struct peer *b)
{
  return a->family == b->family && a->uid == b->uid && memcmp (a->addr, b->addr, 16) == 0;
}

void
nsbox_conns_answer (struct nsbox_conns *cs, struct MHD_Connection *mc, const char *status,
                    const char *why)
{
  pthread_mutex_lock (&cs->lock);
  struct conn *c = conn_of (mc);
  if (c && !c->cut && !c->answered)
    {
      send_fixed (c->fd, status, false, why);
      c->answered = true;
      cs->stats.answered++;
    }
  pthread_mutex_unlock (&cs->lock);
}

bool
nsbox_conns_answered (struct nsbox_conns *cs, struct MHD_Connection *mc)
{
  pthread_mutex_lock (&cs->lock);
  struct conn *c = conn_of (mc);
  bool answered = c && c->answered;
  pthread_mutex_unlock (&cs->lock);
  return answered;
}

/* Refuses c (not yet in the list), under cs->lock. */
static void
refuse (struct nsbox_conns *cs, struct conn *c, const char *why)
{
  c->phase = PHASE_REFUSED;
  cs->refusing++;
  insert (cs, c);
  send_fixed (c->fd, "503 Service Unavailable", true, why);
  linger (cs, c, PHASE_REFUSED);
}

static void
take (struct nsbox_conns *cs, int fd, const struct sockaddr_storage *ss, socklen_t ss_len)
{
  struct conn *c = calloc (1, sizeof *c);
  if (!c)
    {
      close (fd); /* out of memory: nothing better is possible */
      return;
    }
  c->fd = c->mhd_fd = fd;
  peer_of (cs, fd, ss, &c->peer);
  pthread_mutex_lock (&cs->lock);
  uint64_t from_peer = 0;
  for (struct conn *o = cs->head; cs->o.max_per_peer && o; o = o->next)
    from_peer += o->phase != PHASE_REFUSED && same_peer (&o->peer, &c->peer);
  char why[160];
  why[0] = '\0';
  if (cs->open >= cs->o.max_connections)
    {
      snprintf (why, sizeof why,
                "the server has %llu connections open, its limit (--max-connections)",
                (unsigned long long)cs->open);
      cs->stats.refused_total++;
    }
  else if (cs->o.max_per_peer && from_peer >= cs->o.max_per_peer)
    {
      snprintf (why, sizeof why,
                "%llu connections are open from this %s, the limit of one "
                "(--max-connections-per-peer)",
                (unsigned long long)from_peer, cs->o.tcp ? "address" : "user");
      cs->stats.refused_peer++;
    }
  int dup = why[0] ? -1 : fcntl (fd, F_DUPFD_CLOEXEC, 3);
  if (why[0] || dup < 0)
    {
      if (!why[0])
        snprintf (why, sizeof why, "the server cannot take a connection now: %s", strerror (errno));
      refuse (cs, c, why);
      pthread_mutex_unlock (&cs->lock);
      return;
    }
  c->fd = dup;
  c->phase = PHASE_HEADERS;
  c->deadline_ms = (int64_t)nsbox_now_ms () + (int64_t)cs->o.header_timeout_ms;
  cs->open++;
  insert (cs, c);
  pthread_mutex_unlock (&cs->lock);
  if (nsbox_mhd.add_connection (cs->daemon, fd, (const struct sockaddr *)ss, ss_len) == MHD_YES)
    return;
  /* libmicrohttpd closed its fd: the answer comes from here. */
  pthread_mutex_lock (&cs->lock);
  unlink_conn (cs, c);
  cs->open--;
  refuse (cs, c, "the server cannot take a connection now");
  pthread_mutex_unlock (&cs->lock);
}

/* Under cs->lock, in the thread (or before it starts). */
static void
set_listening (struct nsbox_conns *cs, bool on)
{
  if (cs->listening == on)
    return;
  struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &cs->listen_fd };
  if (epoll_ctl (cs->epoll_fd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, cs->listen_fd, &ev) == 0)
    cs->listening = on;
}

static void
accept_all (struct nsbox_conns *cs)
{
  for (;;)
    {
      pthread_mutex_lock (&cs->lock);
      bool full = cs->refusing >= cs->o.max_connections;
      if (full)
        set_listening (cs, false); /* again when a refused one ends */
      pthread_mutex_unlock (&cs->lock);
      if (full)
        return;
      struct sockaddr_storage ss;
      socklen_t len = sizeof ss;
      int fd = accept4 (cs->listen_fd, (struct sockaddr *)&ss, &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0)
        {
          if (errno == EINTR || errno == ECONNABORTED)
            continue;
          /* Out of fds or memory: they wait in the backlog; a tick later
           * accepting tries again (at once, the pending connection would
           * wake the thread for ever). */
          if (errno != EAGAIN && errno != EWOULDBLOCK)
            {
              pthread_mutex_lock (&cs->lock);
              set_listening (cs, false);
              cs->relisten_ms = (int64_t)nsbox_now_ms () + TICK_MS;
              pthread_mutex_unlock (&cs->lock);
            }
          return;
        }
      take (cs, fd, &ss, len);
    }
}

/* ---- the thread ---- */

/* Reads and drops what a lingering client sends; ends it at EOF. */
static void
drain (struct nsbox_conns *cs, struct conn *c)
{
  static char sink[65536]; /* the thread's alone */
  for (int i = 0; i < DRAIN_READS; i++)
    {
      ssize_t n = recv (c->fd, sink, sizeof sink, MSG_DONTWAIT);
      if (n > 0)
        {
          pthread_mutex_lock (&cs->lock);
          c->quiet_ms = (int64_t)nsbox_now_ms () + LINGER_QUIET_MS;
          pthread_mutex_unlock (&cs->lock);
          continue;
        }
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return;
      pthread_mutex_lock (&cs->lock);
      finish (cs, c);
      pthread_mutex_unlock (&cs->lock);
      return;
    }
}

/* Shuts what is too slow, ends lingers whose time is up. */
static void
sweep (struct nsbox_conns *cs)
{
  int64_t now = (int64_t)nsbox_now_ms ();
  pthread_mutex_lock (&cs->lock);
  for (struct conn *c = cs->head, *next; c; c = next)
    {
      next = c->next;
      switch (c->phase)
        {
        case PHASE_LINGER:
        case PHASE_REFUSED:
          if (now >= c->deadline_ms || now >= c->quiet_ms)
            finish (cs, c);
          break;
        case PHASE_HEADERS:
        case PHASE_IDLE:
        case PHASE_BODY:
          if (c->cut)
            {
              if (!c->started && now >= c->deadline_ms)
                finish (cs, c);
              break;
            }
          if (!c->deadline_ms || now < c->deadline_ms)
            break;
          shutdown (c->fd, SHUT_RDWR);
          c->cut = true;
          c->deadline_ms = now + ABANDONED_MS;
          if (c->phase == PHASE_BODY)
            cs->stats.cut_body++;
          else if (c->phase == PHASE_IDLE)
            cs->stats.cut_idle++;
          else
            cs->stats.cut_headers++;
          break;
        case PHASE_BUSY:
          break;
        }
    }
  if (!cs->listening && !cs->quiesce && !cs->stopping && cs->refusing < cs->o.max_connections
      && now >= cs->relisten_ms)
    set_listening (cs, true);
  pthread_mutex_unlock (&cs->lock);
}

static void *
front (void *arg)
{
  struct nsbox_conns *cs = arg;
  int64_t final_until = 0;
  for (;;)
    {
      pthread_mutex_lock (&cs->lock);
      if (cs->quiesce && cs->listening)
        {
          epoll_ctl (cs->epoll_fd, EPOLL_CTL_DEL, cs->listen_fd, NULL);
          cs->listening = false;
        }
      if (cs->quiesce)
        pthread_cond_broadcast (&cs->changed);
      bool stopping = cs->stopping, any = cs->head != NULL;
      /* Not listening after a failed accept: the tick listens again. */
      bool deaf = !cs->listening && !cs->quiesce;
      pthread_mutex_unlock (&cs->lock);
      if (stopping)
        {
          int64_t now = (int64_t)nsbox_now_ms ();
          if (!final_until)
            final_until = now + FINAL_LINGER_MS;
          if (!any || now >= final_until)
            break;
        }
      struct epoll_event ev[64];
      int n = epoll_wait (cs->epoll_fd, ev, 64, any || stopping || deaf ? TICK_MS : -1);
      for (int i = 0; i < n; i++)
        {
          if (ev[i].data.ptr == &cs->listen_fd)
            accept_all (cs);
          else if (ev[i].data.ptr == &cs->wake_fd)
            {
              uint64_t v;
              (void)!read (cs->wake_fd, &v, sizeof v);
            }
          else
            drain (cs, ev[i].data.ptr);
        }
      sweep (cs);
    }
  return NULL;
}

static void
wake (struct nsbox_conns *cs)
{
  uint64_t one = 1;
  (void)!write (cs->wake_fd, &one, sizeof one);
}

/* ---- the interface ---- */

struct nsbox_conns *
nsbox_conns_new (const struct nsbox_conns_options *o)
{
  struct nsbox_conns *cs = calloc (1, sizeof *cs);
  if (!cs)
    return NULL;
  cs->o = *o;
  cs->listen_fd = -1;
  cs->epoll_fd = epoll_create1 (EPOLL_CLOEXEC);
  cs->wake_fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
  struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &cs->wake_fd };
  if (cs->epoll_fd < 0 || cs->wake_fd < 0
      || epoll_ctl (cs->epoll_fd, EPOLL_CTL_ADD, cs->wake_fd, &ev) < 0)
    {
      if (cs->epoll_fd >= 0)
        close (cs->epoll_fd);
      if (cs->wake_fd >= 0)
        close (cs->wake_fd);
      free (cs);
      return NULL;
    }
  pthread_mutex_init (&cs->lock, NULL);
  pthread_cond_init (&cs->changed, NULL);
  return cs;
}

int
nsbox_conns_start (struct nsbox_conns *cs, struct MHD_Daemon *daemon, int listen_fd)
{
  cs->daemon = daemon;
  cs->listen_fd = listen_fd;
  int flags = fcntl (listen_fd, F_GETFL);
  if (flags < 0 || fcntl (listen_fd, F_SETFL, flags | O_NONBLOCK) < 0)
    return -errno;
  pthread_mutex_lock (&cs->lock);
  set_listening (cs, true);
  bool listening = cs->listening;
  pthread_mutex_unlock (&cs->lock);
  if (!listening)
    return -errno;
  int r = pthread_create (&cs->thread, NULL, front, cs);
  if (r != 0)
    return -r;
  cs->thread_started = true;
  return 0;
}

void
nsbox_conns_quiesce (struct nsbox_conns *cs)
{
  pthread_mutex_lock (&cs->lock);
  cs->quiesce = true;
  wake (cs);
  while (cs->thread_started && cs->listening)
    pthread_cond_wait (&cs->changed, &cs->lock);
  pthread_mutex_unlock (&cs->lock);
}

void
nsbox_conns_free (struct nsbox_conns *cs)
{
  if (!cs)
    return;
  pthread_mutex_lock (&cs->lock);
  cs->stopping = cs->quiesce = true;
  pthread_mutex_unlock (&cs->lock);
  wake (cs);
  if (cs->thread_started)
    pthread_join (cs->thread, NULL);
  while (cs->head)
    finish (cs, cs->head);
  close (cs->epoll_fd);
  close (cs->wake_fd);
  pthread_cond_destroy (&cs->changed);
  pthread_mutex_destroy (&cs->lock);
  free (cs);
}

void
nsbox_conns_get_stats (struct nsbox_conns *cs, struct nsbox_conns_stats *st)
{
  pthread_mutex_lock (&cs->lock);
  *st = cs->stats;
  st->open = cs->open;
  pthread_mutex_unlock (&cs->lock);
}
