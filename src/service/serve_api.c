/* `nsbox serve`'s requests (serve.h):
 *   POST /v1/runs   {"code": "...", "profile": "default", "timeout": "2s",
 *                    "max-output-bytes": "4k"} -> 200 and the result JSON
 *   GET  /v1/health -> {"status":"ok", "draining":false, "profiles":{...}}
 *   GET  /metrics   -> Prometheus text
 * Errors are JSON ({"error": "..."}) with 400 (bad JSON, unknown or
 * refused keys, ambiguous framing), 401 (token), 404, 405, 413 (body over
 * max-request-bytes), 500 (nsbox could not run the code), 503 with
 * Retry-After (busy or draining), 429 with Retry-After and the result JSON
 * (a quota of the run's session refused it: no sandbox started).
 * Admission: at most max-concurrent runs, at most max-queue waiting for a
 * slot, the rest 503 at once. A client that hangs up during its run gets
 * its sandbox killed (the connection is the run's cancel fd).
 *
 * Every refusal is readable: what can be refused from the headers is
 * decided there, and the body (at most DRAIN_BYTES, never kept) is read and
 * dropped before the answer, so the connection stays usable; a body too
 * large to drain, of unknown length, or one the client waits to send
 * (Expect: 100-continue) gets the answer at once, and the connection's
 * lingering close (serve_conn.c) takes what the client still sends. */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "nsbox.h"
#include "pool.h"
#include "mhd.h"
#include "serve_api.h"
#include "serve_conn.h"
#include "util.h"

/* Upper bounds of the latency histogram's buckets, in seconds. */
static const double bucket_bounds[NSBOX_SERVE_BUCKETS]
    = { 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10 };

static const char *const outcome_names[NSBOX_OUTCOME_COUNT_]
    = { "ok", "nonzero", "timeout", "oom", "error", "cancelled", "refused" };

struct request
{
  char *body;
  size_t len, alloc;
  bool keep_body; /* a POST /v1/runs: its body is kept, any other is dropped */
  bool too_large;
  bool uploading;    /* a POST /v1/runs counted in s->uploading */
  bool answering;    /* its answer is being sent: counted in s->answering */
  double start;      /* when its headers arrived */
  uint64_t received; /* body bytes so far, kept or not */
  /* A refusal decided from the headers, answered when the body is in. */
  unsigned refusal; /* its status, 0: none */
  const char *allow;
  char refusal_message[256];
};

/* A refused request's body up to this size is read and dropped before the
 * answer (keeping the connection); a larger one gets the answer first. */
#define DRAIN_BYTES (1u << 20)

/* The code in a request body is the client's: wiped before it is freed,
 * as pooled sandboxes are cloned from this process (see also
 * nsbox_zeroing_free for what jansson allocates). */
static void
wipe_body (struct request *req)
{
  if (req->body)
    explicit_bzero (req->body, req->len);
  free (TAKE_PTR (req->body));
  req->len = req->alloc = 0;
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
  enum MHD_Result ret = nsbox_mhd.queue_response (c, status, r);
  nsbox_mhd.destroy_response (r);
  return ret;
}

static enum MHD_Result
respond (struct MHD_Connection *c, unsigned status, const char *type, const char *body, size_t len,
         uint64_t retry_after_s)
{
  return respond_allowing (c, status, type, body, len, retry_after_s, NULL);
}

static enum MHD_Result
respond_message (struct MHD_Connection *c, unsigned status, const char *msg, const char *allow)
{
  json_t *o = json_pack ("{s:s}", "error", msg ? msg : "out of memory");
  cleanup_free char *text = o ? json_dumps (o, JSON_COMPACT) : NULL;
  json_decref (o);
  if (!text)
    return MHD_NO;
  return respond_allowing (c, status, "application/json", text, strlen (text),
                           status == 503 ? 1 : 0, allow);
}

static enum MHD_Result __attribute__ ((format (printf, 3, 4)))
respond_error (struct MHD_Connection *c, unsigned status, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  cleanup_free char *msg = vxasprintf (fmt, ap);
  va_end (ap);
  return respond_message (c, status, msg, NULL);
}

static void
count (struct nsbox_server *s, uint64_t *counter)
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

static bool
authorized (struct nsbox_server *s, struct MHD_Connection *c)
{
  if (!s->token)
    return true;
  const char *h = nsbox_mhd.lookup_connection_value (c, MHD_HEADER_KIND, "Authorization");
  if (!h || strncasecmp (h, "Bearer ", 7) != 0)
    return false;
  const char *given = h + 7;
  size_t n = strlen (s->token);
  /* Constant time in the token's content; the length is not a secret. */
  return strlen (given) == n && same_secret (given, s->token, n);
}

/* ---- admission ---- */

/* 0: a slot is ours; -1: busy; -2: draining. */
static int
admit (struct nsbox_server *s)
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

/* The run slot is given back when the run is over, before its answer is
 * sent: a client that reads slowly holds no slot. The answer is counted in
 * `answering` until sent (nsbox_serve_completed), for the drain. */
static void
release (struct nsbox_server *s, struct request *req)
{
  pthread_mutex_lock (&s->lock);
  s->running--;
  s->answering++;
  req->answering = true;
  pthread_cond_signal (&s->slot_free);
  if (s->running == 0 && s->queued == 0)
    pthread_cond_broadcast (&s->idle);
  pthread_mutex_unlock (&s->lock);
}

/* A POST /v1/runs counts from its first byte: bodies are buffered before
 * admission, so they are bounded by the same max-concurrent + max-queue. */
static bool
start_upload (struct nsbox_server *s, struct request *req)
{
  pthread_mutex_lock (&s->lock);
  bool ok
      = s->uploading + s->running + s->queued < s->max_concurrent + s->max_queue && !s->draining;
  if (ok)
    {
      s->uploading++;
      req->uploading = true;
    }
  else if (s->draining)
    s->rejected_draining++;
  else
    s->rejected_busy++;
  pthread_mutex_unlock (&s->lock);
  return ok;
}

static void
end_upload (struct nsbox_server *s, struct request *req)
{
  if (!req->uploading)
    return;
  pthread_mutex_lock (&s->lock);
  s->uploading--;
  req->uploading = false;
  pthread_mutex_unlock (&s->lock);
}

static void
record (struct nsbox_server *s, size_t profile, enum nsbox_serve_outcome outcome, bool warm,
        double seconds)
{
  pthread_mutex_lock (&s->lock);
  s->runs[profile][outcome][warm ? 1 : 0]++;
  for (int i = 0; i < NSBOX_SERVE_BUCKETS; i++)
    if (seconds <= bucket_bounds[i])
      {
        s->latency_buckets[i]++;
        break;
      }
  if (seconds > bucket_bounds[NSBOX_SERVE_BUCKETS - 1])
    s->latency_buckets[NSBOX_SERVE_BUCKETS]++;
  s->latency_sum += seconds;
  s->latency_count++;
  pthread_mutex_unlock (&s->lock);
}

/* ---- POST /v1/runs ---- */

struct run_request
{
  const char *code;
  size_t code_len;
  size_t profile;
  nsbox_run_options *options;
};

/* Parses and checks the body; on error fills msg (400). */
static int
parse_run (struct nsbox_server *s, const struct request *req, struct run_request *rr, char *msg,
           size_t size, json_t **root)
{
  json_error_t jerr;
  *root = json_loadb (req->body ? req->body : "", req->len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL,
                      &jerr);
  if (!*root)
    {
      snprintf (msg, size, "malformed JSON at line %d, column %d: %s", jerr.line, jerr.column,
                jerr.text);
      return -1;
    }
  if (!json_is_object (*root))
    {
      snprintf (msg, size, "the request must be a JSON object");
      return -1;
    }
  struct nsbox_error *err = NULL;
  rr->options = nsbox_run_options_new (&err);
  if (!rr->options)
    {
      snprintf (msg, size, "out of memory");
      nsbox_error_free (err);
      return -1;
    }
  const char *key;
  json_t *value;
  bool have_code = false;
  json_object_foreach (*root, key, value)
  {
    if (strcmp (key, "code") == 0)
      {
        if (!json_is_string (value))
          {
            snprintf (msg, size, "'code' must be a string");
            return -1;
          }
        rr->code = json_string_value (value);
        rr->code_len = json_string_length (value);
        have_code = true;
        continue;
      }
    if (strcmp (key, "profile") == 0)
      {
        const char *name = json_string_value (value);
        if (name && strlen (name) != json_string_length (value))
          name = NULL; /* a NUL inside: no profile has that name */
        size_t i = 0;
        while (name && i < s->n_profiles && strcmp (s->profiles[i].name, name) != 0)
          i++;
        if (!name || i == s->n_profiles)
          {
            snprintf (msg, size, "unknown profile %s%s%s", name ? "'" : "(not a string)",
                      name ? name : "", name ? "'" : "");
            return -1;
          }
        rr->profile = i;
        continue;
      }
    /* Paths on the server's host are not a client's to name. */
    if (strcmp (key, "inputs") == 0 || strcmp (key, "output-dir") == 0)
      {
        snprintf (msg, size,
                  "key '%s' cannot be sent to the server: it names files on the server's host",
                  key);
        return -1;
      }
    char text[64];
    const char *v = json_string_value (value);
    if (!v && json_is_integer (value))
      {
        snprintf (text, sizeof text, "%" JSON_INTEGER_FORMAT, json_integer_value (value));
        v = text;
      }
    if (!v)
      {
        snprintf (msg, size, "key '%s': expected a string or an integer", key);
        return -1;
      }
    if (nsbox_run_options_set (rr->options, key, v, &err) < 0)
      {
        snprintf (msg, size, "%s", nsbox_error_message (err));
        nsbox_error_free (err);
        return -1;
      }
  }
  if (!have_code)
    {
      snprintf (msg, size, "missing key 'code'");
      return -1;
    }
  if (nsbox_pool_check_options (s->profiles[rr->profile].pool, rr->options, &err) < 0)
    {
      snprintf (msg, size, "%s", nsbox_error_message (err));
      nsbox_error_free (err);
      return -1;
    }
  return 0;
}

static enum nsbox_serve_outcome
outcome_of (const nsbox_result *res)
{
  if (nsbox_result_quota_refusal (res))
    return NSBOX_OUTCOME_REFUSED;
  if (nsbox_result_timed_out (res))
    return NSBOX_OUTCOME_TIMEOUT;
  if (nsbox_result_oom_killed (res))
    return NSBOX_OUTCOME_OOM;
  return nsbox_result_exit_code (res) == 0 ? NSBOX_OUTCOME_OK : NSBOX_OUTCOME_NONZERO;
}

/* Who sent a run, for the audit log: the peer's uid on the unix socket,
 * its address on TCP. */
static void
describe_client (const struct nsbox_server *s, int fd, char *out, size_t size)
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

static enum MHD_Result
handle_run (struct nsbox_server *s, struct MHD_Connection *c, struct request *req)
{
  end_upload (s, req);
  if (req->too_large)
    {
      count (s, &s->bad_requests);
      return respond_error (c, 413, "the request body exceeds %" PRIu64 " bytes",
                            s->max_request_bytes);
    }
  struct run_request rr = { 0 };
  char msg[512];
  json_t *root = NULL;
  if (parse_run (s, req, &rr, msg, sizeof msg, &root) < 0)
    {
      json_decref (root);
      nsbox_run_options_free (rr.options);
      count (s, &s->bad_requests);
      return respond_error (c, 400, "%s", msg);
    }
  /* The session: the body's "session", else the X-Nsbox-Session header. */
  const char *session = nsbox_mhd.lookup_connection_value (c, MHD_HEADER_KIND, "X-Nsbox-Session");
  struct nsbox_error *session_err = NULL;
  if (session && !json_object_get (root, "session")
      && nsbox_run_options_set (rr.options, "session", session, &session_err) < 0)
    {
      json_decref (root);
      nsbox_run_options_free (rr.options);
      count (s, &s->bad_requests);
      enum MHD_Result bad
          = respond_error (c, 400, "header X-Nsbox-Session: %s", nsbox_error_message (session_err));
      nsbox_error_free (session_err);
      return bad;
    }
  int a = admit (s);
  if (a < 0)
    {
      json_decref (root);
      nsbox_run_options_free (rr.options);
      return respond_error (c, 503, a == -2 ? "the server is draining" : "the server is busy");
    }
  const union MHD_ConnectionInfo *info
      = nsbox_mhd.get_connection_info (c, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (info)
    nsbox_run_options_set_cancel_fd (rr.options, info->connect_fd, s->tcp);
  char client[96], scope[32] = "";
  describe_client (s, info ? info->connect_fd : -1, client, sizeof client);
  /* On the unix socket each uid's sessions are its own. */
  struct ucred cred;
  socklen_t cred_len = sizeof cred;
  if (!s->tcp && info
      && getsockopt (info->connect_fd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) == 0)
    snprintf (scope, sizeof scope, "uid %u", (unsigned)cred.uid);
  struct nsbox_error *err = NULL;
  if (nsbox_run_options_set_client (rr.options, client) < 0
      || nsbox_run_options_set_quota_scope (rr.options, scope[0] ? scope : NULL) < 0)
    {
      json_decref (root);
      nsbox_run_options_free (rr.options);
      release (s, req);
      return respond_error (c, 500, "out of memory");
    }
  nsbox_result *res = NULL;
  bool warm = false;
  int r = nsbox_pool_run_served (s->profiles[rr.profile].pool, rr.code, rr.code_len, rr.options,
                                 &res, &warm, &err);
  release (s, req);
  double seconds = nsbox_now_seconds () - req->start;
  json_decref (root);
  nsbox_run_options_free (rr.options);
  cleanup_free char *json = r >= 0 ? nsbox_result_to_json (res, &err) : NULL;
  enum nsbox_serve_outcome outcome = NSBOX_OUTCOME_ERROR;
  if (json)
    outcome = outcome_of (res);
  else if (nsbox_error_errno (err) == ECANCELED)
    outcome = NSBOX_OUTCOME_CANCELLED;
  record (s, rr.profile, outcome, warm, seconds);
  /* A refusal: 429, the result JSON as its body, Retry-After in whole
   * seconds rounded up. */
  uint64_t retry_s = (nsbox_result_retry_after_ms (res) + 999) / 1000;
  nsbox_result_free (res);
  enum MHD_Result ret;
  if (json && outcome == NSBOX_OUTCOME_REFUSED)
    ret = respond (c, 429, "application/json", json, strlen (json), retry_s ? retry_s : 1);
  else if (json)
    ret = respond (c, 200, "application/json", json, strlen (json), 0);
  else if (outcome == NSBOX_OUTCOME_CANCELLED)
    ret = MHD_NO; /* nobody to answer */
  else
    ret = respond_error (c, 500, "%s", err ? nsbox_error_message (err) : "unknown error");
  nsbox_error_free (err);
  return ret;
}

/* ---- GET /v1/health, GET /metrics ---- */

static enum MHD_Result
handle_health (struct nsbox_server *s, struct MHD_Connection *c)
{
  json_t *profiles = json_object ();
  for (size_t i = 0; profiles && i < s->n_profiles; i++)
    {
      struct nsbox_pool_stats st;
      nsbox_pool_get_stats (s->profiles[i].pool, &st);
      json_object_set_new (profiles, s->profiles[i].name,
                           json_pack ("{s:I,s:I,s:I}", "ready", (json_int_t)st.ready, "starting",
                                      (json_int_t)st.starting, "size", (json_int_t)st.size));
    }
  pthread_mutex_lock (&s->lock);
  bool draining = s->draining;
  json_int_t running = (json_int_t)s->running, queued = (json_int_t)s->queued;
  pthread_mutex_unlock (&s->lock);
  json_t *o = json_pack ("{s:s,s:b,s:I,s:I,s:o}", "status", draining ? "draining" : "ok",
                         "draining", draining, "running", running, "queued", queued, "profiles",
                         profiles ? profiles : json_null ());
  cleanup_free char *text = o ? json_dumps (o, JSON_COMPACT) : NULL;
  json_decref (o);
  if (!text)
    return MHD_NO;
  return respond (c, draining ? 503 : 200, "application/json", text, strlen (text),
                  draining ? 1 : 0);
}

struct text
{
  char *buf;
  size_t len;
  bool failed;
};

static void __attribute__ ((format (printf, 2, 3))) add (struct text *t, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  char *line = vxasprintf (fmt, ap);
  va_end (ap);
  size_t n = line ? strlen (line) : 0;
  char *grown = line ? realloc (t->buf, t->len + n + 1) : NULL;
  if (!grown)
    {
      t->failed = true;
      free (line);
      return;
    }
  memcpy (grown + t->len, line, n + 1);
  t->buf = grown;
  t->len += n;
  free (line);
}

static enum MHD_Result
handle_metrics (struct nsbox_server *s, struct MHD_Connection *c)
{
  struct text t = { 0 };
  struct nsbox_pool_stats st[NSBOX_SERVE_MAX_PROFILES];
  for (size_t i = 0; i < s->n_profiles; i++)
    nsbox_pool_get_stats (s->profiles[i].pool, &st[i]);
  struct nsbox_conns_stats cst;
  nsbox_conns_get_stats (s->conns, &cst);
  pthread_mutex_lock (&s->lock);
  add (&t, "# HELP nsbox_runs_total Runs answered, by profile, outcome and how they were "
           "served.\n# TYPE nsbox_runs_total counter\n");
  for (size_t p = 0; p < s->n_profiles; p++)
    for (int o = 0; o < NSBOX_OUTCOME_COUNT_; o++)
      for (int w = 0; w < 2; w++)
        add (&t, "nsbox_runs_total{profile=\"%s\",outcome=\"%s\",served=\"%s\"} %" PRIu64 "\n",
             s->profiles[p].name, outcome_names[o], w ? "warm" : "cold", s->runs[p][o][w]);
  add (&t,
       "# HELP nsbox_rejected_total Requests refused, by reason.\n"
       "# TYPE nsbox_rejected_total counter\n"
       "nsbox_rejected_total{reason=\"busy\"} %" PRIu64 "\n"
       "nsbox_rejected_total{reason=\"draining\"} %" PRIu64 "\n"
       "nsbox_rejected_total{reason=\"bad_request\"} %" PRIu64 "\n"
       "nsbox_rejected_total{reason=\"unauthorized\"} %" PRIu64 "\n"
       "nsbox_rejected_total{reason=\"connections\"} %" PRIu64 "\n"
       "nsbox_rejected_total{reason=\"peer_connections\"} %" PRIu64 "\n",
       s->rejected_busy, s->rejected_draining, s->bad_requests + cst.answered, s->unauthorized,
       cst.refused_total, cst.refused_peer);
  add (&t,
       "# HELP nsbox_connections_open Connections held, lingering ones too.\n"
       "# TYPE nsbox_connections_open gauge\nnsbox_connections_open %" PRIu64 "\n"
       "# HELP nsbox_slow_clients_total Connections shut for a phase past its timeout.\n"
       "# TYPE nsbox_slow_clients_total counter\n"
       "nsbox_slow_clients_total{phase=\"headers\"} %" PRIu64 "\n"
       "nsbox_slow_clients_total{phase=\"body\"} %" PRIu64 "\n"
       "nsbox_slow_clients_total{phase=\"idle\"} %" PRIu64 "\n",
       cst.open, cst.cut_headers, cst.cut_body, cst.cut_idle);
  add (&t,
       "# HELP nsbox_runs_in_flight Runs in progress.\n# TYPE nsbox_runs_in_flight gauge\n"
       "nsbox_runs_in_flight %" PRIu64 "\n"
       "# HELP nsbox_queue_length Requests waiting for a run slot.\n"
       "# TYPE nsbox_queue_length gauge\nnsbox_queue_length %" PRIu64 "\n",
       s->running, s->queued);
  add (&t, "# HELP nsbox_run_duration_seconds Request to result, for runs that were "
           "admitted, from the request's headers to its result.\n"
           "# TYPE nsbox_run_duration_seconds histogram\n");
  uint64_t cumulative = 0;
  for (int i = 0; i < NSBOX_SERVE_BUCKETS; i++)
    {
      cumulative += s->latency_buckets[i];
      add (&t, "nsbox_run_duration_seconds_bucket{le=\"%g\"} %" PRIu64 "\n", bucket_bounds[i],
           cumulative);
    }
  cumulative += s->latency_buckets[NSBOX_SERVE_BUCKETS];
  add (&t,
       "nsbox_run_duration_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n"
       "nsbox_run_duration_seconds_sum %.6f\nnsbox_run_duration_seconds_count %" PRIu64 "\n",
       cumulative, s->latency_sum, s->latency_count);
  pthread_mutex_unlock (&s->lock);
  add (&t, "# HELP nsbox_pool_ready Sandboxes started and waiting for a run.\n"
           "# TYPE nsbox_pool_ready gauge\n");
  for (size_t p = 0; p < s->n_profiles; p++)
    add (&t, "nsbox_pool_ready{profile=\"%s\"} %zu\n", s->profiles[p].name, st[p].ready);
  add (&t, "# HELP nsbox_pool_size Sandboxes each pool keeps started.\n"
           "# TYPE nsbox_pool_size gauge\n");
  for (size_t p = 0; p < s->n_profiles; p++)
    add (&t, "nsbox_pool_size{profile=\"%s\"} %zu\n", s->profiles[p].name, st[p].size);
  add (&t, "# HELP nsbox_pool_discarded_total Pooled sandboxes destroyed without a run.\n"
           "# TYPE nsbox_pool_discarded_total counter\n");
  for (size_t p = 0; p < s->n_profiles; p++)
    add (&t, "nsbox_pool_discarded_total{profile=\"%s\"} %" PRIu64 "\n", s->profiles[p].name,
         st[p].discarded);
  enum MHD_Result r = t.failed ? MHD_NO
                               : respond (c, 200, "text/plain; version=0.0.4; charset=utf-8",
                                          t.buf ? t.buf : "", t.len, 0);
  free (t.buf);
  return r;
}

/* ---- the access handler ---- */

enum route
{
  ROUTE_RUNS,
  ROUTE_HEALTH,
  ROUTE_METRICS,
};

/* One walk over a request's headers and query: what its framing and its
 * size need. */
struct header_scan
{
  unsigned content_length, transfer_encoding;
  size_t bytes; /* the request line's and headers' size, as sent (near enough) */
};

static enum MHD_Result
scan_header (void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
  struct header_scan *n = cls;
  /* "key: value\r\n", or "key=value&" of the query */
  n->bytes += (key ? strlen (key) : 0) + (value ? strlen (value) : 0) + 4;
  if (kind == MHD_HEADER_KIND && key && strcasecmp (key, "Content-Length") == 0)
    n->content_length++;
  if (kind == MHD_HEADER_KIND && key && strcasecmp (key, "Transfer-Encoding") == 0)
    n->transfer_encoding++;
  return MHD_YES;
}

static struct header_scan
scan_headers (struct MHD_Connection *c, const char *url, const char *method)
{
  struct header_scan n = { 0, 0, strlen (method) + strlen (url) + sizeof " HTTP/1.1\r\n" };
  nsbox_mhd.get_connection_values (c, MHD_HEADER_KIND | MHD_GET_ARGUMENT_KIND, scan_header, &n);
  return n;
}

/* How the body is framed, as RFC 9112 lets a server take it: one
 * Content-Length, or one Transfer-Encoding that is chunked, never both (a
 * request a proxy in front may read otherwise is not served). 0, or 400
 * with why. */
static unsigned
check_framing (const struct header_scan *n, const char *te, char *why, size_t size)
{
  if (n->content_length && n->transfer_encoding)
    snprintf (why, size, "a request may not have both Content-Length and Transfer-Encoding");
  else if (n->content_length > 1 || n->transfer_encoding > 1)
    snprintf (why, size, "a request may have only one %s header",
              n->content_length > 1 ? "Content-Length" : "Transfer-Encoding");
  else if (te && strcasecmp (te, "chunked") != 0)
    snprintf (why, size, "Transfer-Encoding '%.64s' is not supported (only chunked)", te);
  else
    return 0;
  return 400;
}

/* The endpoint: 0 and *route, or 404/405 with why (and *allow). */
static unsigned
route_of (const char *url, const char *method, enum route *route, const char **allow, char *why,
          size_t size)
{
  bool get = strcmp (method, "GET") == 0 || strcmp (method, "HEAD") == 0;
  if (strcmp (url, "/v1/runs") == 0)
    {
      *route = ROUTE_RUNS;
      *allow = "POST";
      if (strcmp (method, "POST") == 0)
        return 0;
      snprintf (why, size, "%.32s /v1/runs: only POST is allowed", method);
      return 405;
    }
  if (strcmp (url, "/v1/health") == 0 || strcmp (url, "/metrics") == 0)
    {
      *route = url[1] == 'v' ? ROUTE_HEALTH : ROUTE_METRICS;
      *allow = "GET, HEAD";
      if (get)
        return 0;
      snprintf (why, size, "%.32s %s: only GET is allowed", method, url);
      return 405;
    }
  *allow = NULL;
  snprintf (why, size, "no such endpoint: %.160s (POST /v1/runs, GET /v1/health, GET /metrics)",
            url);
  return 404;
}

/* The headers are in: whatever can be refused now is. */
static enum MHD_Result
first_call (struct nsbox_server *s, struct MHD_Connection *c, const char *url, const char *method,
            struct request *req)
{
  req->start = nsbox_now_seconds ();
  nsbox_conns_headers_in (s->conns, c);
  /* Counted as bad requests by serve_conn.c. */
  if (nsbox_conns_answered (s->conns, c))
    return MHD_NO;
  struct header_scan scan = scan_headers (c, url, method);
  if (scan.bytes > NSBOX_SERVE_HEADER_BYTES)
    {
      /* Written on the socket: libmicrohttpd may have no room for it. */
      char why[96];
      snprintf (why, sizeof why, "the request line and headers exceed %u bytes",
                NSBOX_SERVE_HEADER_BYTES);
      nsbox_conns_answer (s->conns, c, "431 Request Header Fields Too Large", why);
      return MHD_NO;
    }
  const char *cl = nsbox_mhd.lookup_connection_value (c, MHD_HEADER_KIND, "Content-Length");
  const char *te = nsbox_mhd.lookup_connection_value (c, MHD_HEADER_KIND, "Transfer-Encoding");
  const char *expect = nsbox_mhd.lookup_connection_value (c, MHD_HEADER_KIND, "Expect");
  uint64_t length = cl ? strtoull (cl, NULL, 10) : 0;
  char *why = req->refusal_message;
  size_t size = sizeof req->refusal_message;
  enum route route = ROUTE_HEALTH;
  unsigned status = check_framing (&scan, te, why, size);
  /* Framing that cannot be trusted: the body's end is unknown. */
  bool at_once = status != 0;
  if (!status && !authorized (s, c))
    {
      status = 401;
      snprintf (why, size, "missing or wrong bearer token");
      count (s, &s->unauthorized);
    }
  else if (!status && length > s->max_request_bytes)
    {
      status = 413;
      snprintf (why, size, "the request body exceeds %" PRIu64 " bytes", s->max_request_bytes);
    }
  if (!status)
    status = route_of (url, method, &route, &req->allow, why, size);
  if (!status && route == ROUTE_RUNS)
    {
      if (start_upload (s, req))
        req->keep_body = true;
      else
        {
          status = 503;
          snprintf (why, size, "the server is %s", s->draining ? "draining" : "busy");
        }
    }
  if (!status)
    return MHD_YES;
  if (status != 401 && status != 503)
    count (s, &s->bad_requests);
  if (at_once || te || length > DRAIN_BYTES || (expect && strcasecmp (expect, "100-continue") == 0))
    return respond_message (c, status, why, req->allow);
  req->refusal = status;
  return MHD_YES;
}

/* Body bytes: kept for a run, else dropped. */
static enum MHD_Result
body_bytes (struct nsbox_server *s, struct request *req, const char *data, size_t n)
{
  req->received += n;
  if (!req->keep_body || req->refusal)
    return MHD_YES;
  if (req->too_large || req->len + n > s->max_request_bytes)
    {
      /* A chunked body that grew too large: the rest is read and dropped
       * (for at most body-timeout), answered 413 at its end. */
      req->too_large = true;
      wipe_body (req);
      return MHD_YES;
    }
  if (req->len + n > req->alloc)
    {
      size_t want = req->alloc ? req->alloc : 4096;
      while (want < req->len + n)
        want *= 2;
      char *grown = malloc (want);
      if (!grown)
        return MHD_NO;
      if (req->body)
        memcpy (grown, req->body, req->len);
      size_t len = req->len;
      wipe_body (req);
      req->body = grown;
      req->len = len;
      req->alloc = want;
    }
  memcpy (req->body + req->len, data, n);
  req->len += n;
  return MHD_YES;
}

enum MHD_Result
nsbox_serve_handle (void *cls, struct MHD_Connection *c, const char *url, const char *method,
                    const char *version, const char *upload_data, size_t *upload_data_size,
                    void **state)
{
  (void)version;
  struct nsbox_server *s = cls;
  struct request *req = *state;
  if (!req)
    {
      req = calloc (1, sizeof *req);
      if (!req)
        return MHD_NO;
      *state = req;
      return first_call (s, c, url, method, req);
    }
  if (*upload_data_size > 0)
    {
      size_t n = *upload_data_size;
      *upload_data_size = 0;
      return body_bytes (s, req, upload_data, n);
    }
  nsbox_conns_body_in (s->conns, c);
  if (req->refusal)
    return respond_message (c, req->refusal, req->refusal_message, req->allow);
  enum route route = ROUTE_HEALTH;
  const char *allow = NULL;
  char why[256];
  route_of (url, method, &route, &allow, why, sizeof why);
  switch (route)
    {
    case ROUTE_RUNS:
      return handle_run (s, c, req);
    case ROUTE_HEALTH:
      return handle_health (s, c);
    case ROUTE_METRICS:
      return handle_metrics (s, c);
    }
  return MHD_NO;
}

void
nsbox_serve_completed (void *cls, struct MHD_Connection *c, void **state,
                       enum MHD_RequestTerminationCode why)
{
  (void)why;
  struct nsbox_server *s = cls;
  struct request *req = *state;
  nsbox_conns_request_done (s->conns, c);
  if (req)
    end_upload (s, req);
  if (req && req->answering)
    {
      pthread_mutex_lock (&s->lock);
      if (--s->answering == 0)
        pthread_cond_broadcast (&s->idle);
      pthread_mutex_unlock (&s->lock);
    }
  if (req)
    wipe_body (req);
  free (req);
  *state = NULL;
}
