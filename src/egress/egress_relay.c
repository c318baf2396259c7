/* The egress proxy's relay: the run's byte budget, and the bytes of one
 * connection moved both ways by splice. */
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

/* Wake-ups in a row that move no byte before a connection is given up (a
 * safety net: every wake-up should move one). */
#define RELAY_IDLE_WAKES_MAX 1000

/* ---- the byte budget ---- */

/* How many of `want` bytes this direction may still carry. */
size_t
nsbox_egress_budget (struct nsbox_egress *e, bool to_upstream, size_t want)
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
void
nsbox_egress_cut_at_budget (struct conn *c)
{
  c->end = "cut at the byte limit (egress-bytes)";
  pthread_mutex_lock (&c->e->lock);
  nsbox_egress_hit_limit (c->e, "egress-bytes");
  pthread_mutex_unlock (&c->e->lock);
}

/* ---- relaying ---- */

/* Bytes that the budget reserved and a splice did not move go back. */
void
nsbox_egress_refund (struct nsbox_egress *e, bool to_upstream, size_t n)
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
void
nsbox_egress_relay (struct conn *c, uint64_t up_limit)
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
              size_t allowed = nsbox_egress_budget (e, side == 0, want);
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
              nsbox_egress_refund (e, side == 0, allowed - moved);
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
                  nsbox_egress_cut_at_budget (c);
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
