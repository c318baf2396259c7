/* `nsbox serve`'s live sandboxes (serve_api.h):
 *   POST   /v1/sandboxes          {"profile": ..., "sandbox-idle-timeout": ...,
 *                                  "sandbox-max-lifetime": ..., "sandbox-max-runs": ...,
 *                                  "session": ...} -> 201 {"id": ..., "expires_at": ...}
 *   GET    /v1/sandboxes/ID       -> its state (runs, age, idle, memory now)
 *   DELETE /v1/sandboxes/ID       -> 204, every process of it gone
 *   POST   /v1/sandboxes/ID/runs  (serve_api.c, through nsbox_serve_sandbox_hold)
 * A sandbox is its opener's: the peer's uid on the unix socket, the bearer
 * token on TCP (nsbox_serve_owner). Another client gets the 404 of an id
 * that never was, in the same words. One that ended by itself (idle,
 * lifetime, runs, lost) answers 410 with why to its owner for
 * TOMBSTONE_MS, then 404. The registry holds at most max-sandboxes open,
 * at most max-sandboxes-per-client of one client; a client may only
 * shorten its profile's sandbox-* keys. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mhd.h"
#include "nsbox.h"
#include "pool.h"
#include "result.h"
#include "sandbox-private.h"
#include "serve_api.h"
#include "util.h"

/* How long an ended sandbox's owner is told why (410), at most. */
#define TOMBSTONE_MS (10u * 60u * 1000u)

_Static_assert(NSBOX_SERVE_ID_SIZE == NSBOX_SANDBOX_ID_SIZE, "a served id is a sandbox's id");

static const char *const end_names[NSBOX_SANDBOX_END_COUNT_]
    = { "deleted", "idle", "lifetime", "max_runs", "lost", "abandoned" };

struct entry
{
  struct entry *next;
  char id[NSBOX_SERVE_ID_SIZE]; /* NODE.HEX */
  char owner[48];
  size_t profile;
  nsbox_sandbox *sandbox; /* NULL: ended, kept to tell its owner why (or opening) */
  bool opening;           /* being opened: counted, not found */
  unsigned refs;          /* runs holding it */
  bool deleted;           /* a DELETE waits for its runs: nobody may take it */
  uint64_t ended_ms;
  char why[160];
};

struct closing
{
  struct closing *next;
  nsbox_sandbox *sandbox;
};

struct nsbox_serve_sandboxes
{
  pthread_mutex_t lock;
  pthread_cond_t released; /* an entry's refs went down */
  struct entry *head;
  size_t open; /* entries with a sandbox, and opens under way */
  size_t max, max_per_client;
  /* Sandboxes a sweep took out, closed once the lock is let go: closing
   * one waits for its teardown. */
  struct closing *to_close;
  uint64_t opened;
  uint64_t ended[NSBOX_SANDBOX_END_COUNT_];
};

struct nsbox_serve_sandboxes *
nsbox_serve_sandboxes_new (size_t max, size_t max_per_client)
{
  struct nsbox_serve_sandboxes *r = calloc (1, sizeof *r);
  if (!r)
    return NULL;
  pthread_mutex_init (&r->lock, NULL);
  pthread_cond_init (&r->released, NULL);
  r->max = max;
  r->max_per_client = max_per_client;
  return r;
}

/* Lets the lock go, then closes what the sweep took out. */
static void
unlock (struct nsbox_serve_sandboxes *r)
{
  struct closing *list = TAKE_PTR (r->to_close);
  pthread_mutex_unlock (&r->lock);
  while (list)
    {
      struct closing *next = list->next;
      nsbox_sandbox_close (list->sandbox);
      free (list);
      list = next;
    }
}

static enum nsbox_sandbox_end
end_of (const char *why)
{
  if (strstr (why, "sandbox-idle-timeout"))
    return NSBOX_SANDBOX_END_IDLE;
  if (strstr (why, "sandbox-max-lifetime"))
    return NSBOX_SANDBOX_END_LIFETIME;
  if (strstr (why, "sandbox-max-runs"))
    return NSBOX_SANDBOX_END_MAX_RUNS;
  return NSBOX_SANDBOX_END_LOST;
}

/* Locked. A sandbox nobody holds that ended by itself is closed (its host
 * resources are gone already; this frees the rest) and kept as a
 * tombstone; tombstones go after TOMBSTONE_MS, or beyond max of them. */
static void
sweep (struct nsbox_serve_sandboxes *r)
{
  uint64_t now = nsbox_now_ms ();
  size_t tombstones = 0;
  for (struct entry **p = &r->head; *p;)
    {
      struct entry *e = *p;
      if (e->sandbox && !e->refs && !e->deleted)
        {
          struct nsbox_sandbox_state st;
          nsbox_sandbox_get_state (e->sandbox, &st, false);
          if (st.gone)
            {
              snprintf (e->why, sizeof e->why, "%s", st.why);
              struct closing *c = malloc (sizeof *c);
              if (c)
                {
                  c->sandbox = TAKE_PTR (e->sandbox);
                  c->next = r->to_close;
                  r->to_close = c;
                }
              else
                nsbox_sandbox_close (TAKE_PTR (e->sandbox));
              e->ended_ms = now;
              r->open--;
              r->ended[end_of (e->why)]++;
            }
        }
      if (!e->sandbox && !e->refs && !e->deleted && !e->opening
          && (now - e->ended_ms >= TOMBSTONE_MS || ++tombstones > r->max))
        {
          *p = e->next;
          free (e);
          continue;
        }
      p = &e->next;
    }
}

/* Locked. */
static void
unlink_entry (struct nsbox_serve_sandboxes *r, struct entry *e)
{
  for (struct entry **p = &r->head; *p; p = &(*p)->next)
    if (*p == e)
      {
        *p = e->next;
        return;
      }
}

/* Locked: the owner's entry of that id, or NULL. */
static struct entry *
find (struct nsbox_serve_sandboxes *r, const char *id, const char *owner)
{
  for (struct entry *e = r->head; e; e = e->next)
    if (!e->opening && strcmp (e->id, id) == 0 && strcmp (e->owner, owner) == 0 && !e->deleted)
      return e;
  return NULL;
}

static unsigned
not_found (const char *id, char *why, size_t size)
{
  snprintf (why, size, "no sandbox %s: it was never opened by this client, or it was deleted", id);
  return 404;
}

static unsigned
ended (const struct entry *e, char *why, size_t size)
{
  snprintf (why, size, "sandbox %s is gone (%s): open a new one", e->id, e->why);
  return 410;
}

unsigned
nsbox_serve_sandbox_hold (struct nsbox_serve_sandboxes *r, const char *id, const char *owner,
                          struct nsbox_serve_sandbox **held, char *why, size_t size)
{
  pthread_mutex_lock (&r->lock);
  sweep (r);
  struct entry *e = find (r, id, owner);
  unsigned status = 0;
  if (!e)
    status = not_found (id, why, size);
  else if (!e->sandbox)
    status = ended (e, why, size);
  else
    {
      e->refs++;
      *held = (struct nsbox_serve_sandbox *)e;
    }
  unlock (r);
  return status;
}

nsbox_sandbox *
nsbox_serve_sandbox_of (struct nsbox_serve_sandbox *held, size_t *profile)
{
  struct entry *e = (struct entry *)held;
  *profile = e->profile;
  return e->sandbox;
}

void
nsbox_serve_sandbox_put (struct nsbox_serve_sandboxes *r, struct nsbox_serve_sandbox *held)
{
  struct entry *e = (struct entry *)held;
  pthread_mutex_lock (&r->lock);
  e->refs--;
  pthread_cond_broadcast (&r->released);
  sweep (r);
  unlock (r);
}

/* ---- POST /v1/sandboxes ---- */

/* A monotonic deadline `in_ms` from now as a UTC timestamp, or JSON null. */
static json_t *
wall_time (uint64_t in_ms)
{
  if (in_ms == UINT64_MAX)
    return json_null ();
  struct timespec now;
  clock_gettime (CLOCK_REALTIME, &now);
  time_t at = now.tv_sec + (time_t)((in_ms + 999) / 1000);
  struct tm tm;
  char text[32];
  if (!gmtime_r (&at, &tm) || !strftime (text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm))
    return json_null ();
  return json_string (text);
}

/* The body's keys into options and *profile, and the X-Nsbox-Session
 * header as its session when the body names none (one that differs from
 * the body's is refused: nsbox_serve_session_header); 0, or 400 with why. */
static unsigned
parse_open (struct nsbox_server *s, struct MHD_Connection *c, const char *body, size_t len,
            nsbox_sandbox_options *options, size_t *profile, char *why, size_t size)
{
  json_error_t jerr;
  json_t *root = len ? json_loadb (body, len, JSON_REJECT_DUPLICATES, &jerr) : json_object ();
  unsigned status = 400;
  if (!root)
    snprintf (why, size, "malformed JSON at line %d, column %d: %s", jerr.line, jerr.column,
              jerr.text);
  else if (!json_is_object (root))
    snprintf (why, size, "the request must be a JSON object");
  else
    status = 0;
  const char *header_session = NULL;
  if (!status)
    status = nsbox_serve_session_header (c, root, &header_session, why, size);
  const char *key;
  json_t *value;
  if (!status)
    json_object_foreach (root, key, value)
    {
      char text[64];
      const char *v = json_string_value (value);
      if (v && strlen (v) != json_string_length (value))
        v = NULL;
      if (!v && json_is_integer (value))
        {
          snprintf (text, sizeof text, "%" JSON_INTEGER_FORMAT, json_integer_value (value));
          v = text;
        }
      if (!v)
        {
          snprintf (why, size, "key '%.64s': expected a string or an integer", key);
          status = 400;
          break;
        }
      if (strcmp (key, "profile") == 0)
        {
          size_t i = 0;
          while (i < s->n_profiles && strcmp (s->profiles[i].name, v) != 0)
            i++;
          if (i == s->n_profiles)
            {
              snprintf (why, size, "unknown profile '%.64s'", v);
              status = 400;
              break;
            }
          *profile = i;
          continue;
        }
      struct nsbox_error *err = NULL;
      if (nsbox_sandbox_options_set (options, key, v, &err) < 0)
        {
          snprintf (why, size, "%s", nsbox_error_message (err));
          nsbox_error_free (err);
          status = 400;
          break;
        }
    }
  json_decref (root);
  struct nsbox_error *err = NULL;
  if (!status && header_session
      && nsbox_sandbox_options_set (options, "session", header_session, &err) < 0)
    {
      snprintf (why, size, "header X-Nsbox-Session: %s", nsbox_error_message (err));
      nsbox_error_free (err);
      err = NULL;
      status = 400;
    }
  if (!status && nsbox_sandbox_options_within (options, s->profiles[*profile].config, &err) < 0)
    {
      snprintf (why, size, "%s", nsbox_error_message (err));
      nsbox_error_free (err);
      status = 400;
    }
  return status;
}

/* The client hung up while its sandbox was opening (a client-side timeout,
 * say): as for a run, on TCP a half-close counts as leaving. */
static bool
client_left (struct nsbox_server *s, struct MHD_Connection *c)
{
  const union MHD_ConnectionInfo *info
      = nsbox_mhd.get_connection_info (c, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (!info)
    return false;
  struct pollfd p = { info->connect_fd, s->tcp ? POLLRDHUP : 0, 0 };
  if (poll (&p, 1, 0) <= 0)
    return false;
  return (p.revents & (POLLHUP | POLLERR | POLLRDHUP)) != 0;
}

enum MHD_Result
nsbox_serve_sandbox_open (struct nsbox_server *s, struct MHD_Connection *c, const char *body,
                          size_t len)
{
  struct nsbox_serve_sandboxes *r = s->sandboxes;
  char owner[48], why[512];
  if (nsbox_serve_owner (s, c, owner, sizeof owner) < 0)
    return nsbox_serve_respond_error (c, 500, "the client's identity cannot be told");
  struct nsbox_error *err = NULL;
  nsbox_sandbox_options *options = nsbox_sandbox_options_new (&err);
  if (!options)
    {
      nsbox_error_free (err);
      return nsbox_serve_respond_error (c, 500, "out of memory");
    }
  nsbox_sandbox_options_set_node (options, nsbox_serve_node ());
  size_t profile = 0;
  unsigned status = parse_open (s, c, body, len, options, &profile, why, sizeof why);
  if (status)
    {
      nsbox_sandbox_options_free (options);
      nsbox_serve_count (s, &s->bad_requests);
      return nsbox_serve_respond_message (c, status, why, NULL);
    }
  /* The entry is made first, opening: it counts against both limits
   * while the sandbox starts, and nobody finds it before it is whole. */
  struct entry *e = calloc (1, sizeof *e);
  if (!e)
    {
      nsbox_sandbox_options_free (options);
      return nsbox_serve_respond_error (c, 500, "out of memory");
    }
  snprintf (e->owner, sizeof e->owner, "%s", owner);
  e->profile = profile;
  e->opening = true;
  pthread_mutex_lock (&r->lock);
  sweep (r);
  size_t mine = 0;
  for (struct entry *o = r->head; o; o = o->next)
    mine += (o->sandbox || o->opening) && strcmp (o->owner, owner) == 0;
  bool room = r->open < r->max && mine < r->max_per_client;
  if (room)
    {
      r->open++;
      e->next = r->head;
      r->head = e;
    }
  unlock (r);
  if (!room)
    {
      free (e);
      nsbox_sandbox_options_free (options);
      nsbox_serve_count (s, &s->rejected_sandboxes);
      if (mine >= r->max_per_client)
        return nsbox_serve_respond_error (c, 503,
                                          "this client holds %zu live sandboxes, the server's "
                                          "--max-sandboxes-per-client: delete one first",
                                          mine);
      return nsbox_serve_respond_error (c, 503,
                                        "the server holds %zu live sandboxes, its "
                                        "--max-sandboxes: delete one or retry later",
                                        r->max);
    }
  nsbox_sandbox *sandbox = NULL;
  int ret = nsbox_sandbox_open (s->profiles[profile].pool, options, &sandbox, &err);
  nsbox_sandbox_options_free (options);
  bool abandoned = ret == 0 && client_left (s, c);
  json_t *o = NULL;
  pthread_mutex_lock (&r->lock);
  if (ret < 0 || abandoned)
    {
      unlink_entry (r, e);
      r->open--;
      if (abandoned)
        {
          r->opened++;
          r->ended[NSBOX_SANDBOX_END_ABANDONED]++;
        }
    }
  else
    {
      snprintf (e->id, sizeof e->id, "%s", nsbox_sandbox_id (sandbox));
      e->sandbox = sandbox;
      e->opening = false;
      r->opened++;
      /* Under the lock: once it is let go, a sweep may end the entry. */
      struct nsbox_sandbox_state st;
      nsbox_sandbox_get_state (sandbox, &st, false);
      o = json_pack ("{s:s,s:s,s:o,s:o}", "id", e->id, "profile", s->profiles[profile].name,
                     "expires_at", wall_time (st.expires_in_ms), "lifetime_ends_at",
                     wall_time (st.lifetime_left_ms));
    }
  unlock (r);
  if (abandoned)
    {
      /* Nobody could learn its id: it would only wait for its idle timeout. */
      nsbox_sandbox_close (sandbox);
      free (e);
      return MHD_NO;
    }
  if (ret < 0)
    {
      free (e);
      /* 501: this server's runtime has no live sandboxes (runsc). */
      unsigned code = nsbox_error_errno (err) == ENOTSUP ? 501 : 500;
      enum MHD_Result failed = nsbox_serve_respond_error (c, code, "could not open a sandbox: %s",
                                                          nsbox_error_message (err));
      nsbox_error_free (err);
      return failed;
    }
  cleanup_free char *text = o ? json_dumps (o, JSON_COMPACT) : NULL;
  json_decref (o);
  /* Unanswered, it is still the client's: the idle timeout ends it. */
  if (!text)
    return MHD_NO;
  return nsbox_serve_respond (c, 201, "application/json", text, strlen (text), 0);
}

/* ---- GET and DELETE /v1/sandboxes/ID ---- */

static enum MHD_Result
describe (struct nsbox_server *s, struct MHD_Connection *c, struct entry *e)
{
  struct nsbox_sandbox_state st;
  nsbox_sandbox_get_state (e->sandbox, &st, true);
  json_t *o = json_pack ("{s:s,s:s,s:I,s:I,s:I,s:b,s:b,s:I,s:o,s:o}", "id", e->id, "profile",
                         s->profiles[e->profile].name, "runs", (json_int_t)st.runs, "age_ms",
                         (json_int_t)st.age_ms, "idle_ms", (json_int_t)st.idle_ms, "busy", st.busy,
                         "warm", st.warm, "memory_bytes", (json_int_t)st.memory_bytes, "expires_at",
                         wall_time (st.expires_in_ms), "lifetime_ends_at",
                         wall_time (st.lifetime_left_ms));
  cleanup_free char *text = o ? json_dumps (o, JSON_COMPACT) : NULL;
  json_decref (o);
  if (!text)
    return MHD_NO;
  return nsbox_serve_respond (c, 200, "application/json", text, strlen (text), 0);
}

enum MHD_Result
nsbox_serve_sandbox_request (struct nsbox_server *s, struct MHD_Connection *c, const char *id,
                             bool delete)
{
  struct nsbox_serve_sandboxes *r = s->sandboxes;
  char owner[48], why[256];
  if (nsbox_serve_owner (s, c, owner, sizeof owner) < 0)
    return nsbox_serve_respond_error (c, 500, "the client's identity cannot be told");
  if (!delete)
    {
      struct nsbox_serve_sandbox *held = NULL;
      unsigned status = nsbox_serve_sandbox_hold (r, id, owner, &held, why, sizeof why);
      if (status)
        return nsbox_serve_respond_message (c, status, why, NULL);
      enum MHD_Result ret = describe (s, c, (struct entry *)held);
      nsbox_serve_sandbox_put (r, held);
      return ret;
    }
  /* DELETE: nobody takes it from now on; its runs in progress end (each
   * within its timeout and grace) before it is destroyed. */
  pthread_mutex_lock (&r->lock);
  struct entry *e = find (r, id, owner);
  if (!e)
    {
      unlock (r);
      return nsbox_serve_respond_message (c, not_found (id, why, sizeof why), why, NULL);
    }
  e->deleted = true;
  while (e->refs)
    pthread_cond_wait (&r->released, &r->lock);
  unlink_entry (r, e);
  if (e->sandbox)
    {
      r->open--;
      r->ended[NSBOX_SANDBOX_END_DELETED]++;
    }
  unlock (r);
  nsbox_sandbox_close (e->sandbox);
  free (e);
  return nsbox_serve_respond (c, 204, "application/json", "", 0, 0);
}

/* ---- /metrics, and the end ---- */

void
nsbox_serve_sandboxes_stats (struct nsbox_serve_sandboxes *r, struct nsbox_serve_sandbox_stats *st)
{
  memset (st, 0, sizeof *st);
  st->next_expiry_ms = UINT64_MAX;
  pthread_mutex_lock (&r->lock);
  sweep (r);
  st->open = r->open;
  st->max = r->max;
  st->opened = r->opened;
  memcpy (st->ended, r->ended, sizeof st->ended);
  for (struct entry *e = r->head; e; e = e->next)
    if (e->sandbox)
      {
        struct nsbox_sandbox_state ss;
        nsbox_sandbox_get_state (e->sandbox, &ss, false);
        if (ss.expires_in_ms < st->next_expiry_ms)
          st->next_expiry_ms = ss.expires_in_ms;
      }
  unlock (r);
}

const char *
nsbox_serve_sandbox_end_name (enum nsbox_sandbox_end end)
{
  return end_names[end];
}

void
nsbox_serve_sandboxes_free (struct nsbox_serve_sandboxes *r)
{
  if (!r)
    return;
  pthread_mutex_lock (&r->lock);
  unlock (r);
  for (struct entry *e = r->head, *next; e; e = next)
    {
      next = e->next;
      nsbox_sandbox_close (e->sandbox);
      free (e);
    }
  pthread_cond_destroy (&r->released);
  pthread_mutex_destroy (&r->lock);
  free (r);
}
