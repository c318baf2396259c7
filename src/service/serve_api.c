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
#include <fcntl.h>
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

struct request
{
  char *body;
  size_t len, alloc;
  bool keep_body; /* a POST of a run or an open: its body is kept, any other is dropped */
  char sandbox_id[NSBOX_SERVE_ID_SIZE]; /* of a /v1/sandboxes/ID request */
  bool too_large;
  bool uploading;    /* a POST /v1/runs counted in s->uploading */
  bool answering;    /* its answer is being sent: counted in s->answering */
  bool brief;        /* GET /v1/health without the token: a probe's answer */
  double start;      /* when its headers arrived */
  uint64_t received; /* body bytes so far, kept or not */
  /* A refusal decided from the headers, answered when the body is in. */
  unsigned refusal; /* its status, 0: none */
  const char *allow;
  char refusal_message[512];
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

/* ---- admission ---- */

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

/* Whether the client asked for a stream (Accept names
 * application/x-ndjson). */
static bool
wants_stream (struct MHD_Connection *c)
{
  const char *accept = nsbox_mhd.lookup_connection_value (c, MHD_HEADER_KIND, "Accept");
  return accept && strcasestr (accept, "application/x-ndjson");
}

/* The run as a stream (serve_stream.c): the code copied, the options and
 * the sandbox held handed over; the answer counted as being sent from now
 * on, as it is sent while the run goes on. */
static enum MHD_Result
stream_run (struct nsbox_server *s, struct MHD_Connection *c, struct request *req,
            const struct run_request *rr, nsbox_sandbox *sandbox, struct nsbox_serve_sandbox **held,
            int fd)
{
  struct nsbox_serve_stream_job job = {
    .s = s,
    .pool = s->profiles[rr->profile].pool,
    .sandbox = sandbox,
    .held = TAKE_PTR (*held),
    .profile = rr->profile,
    .code = malloc (rr->code_len ? rr->code_len : 1),
    .code_len = rr->code_len,
    .options = rr->options,
    .cancel_fd = fd >= 0 ? fcntl (fd, F_DUPFD_CLOEXEC, 3) : -1,
    .start = req->start,
  };
  if (job.code)
    memcpy (job.code, rr->code, rr->code_len);
  pthread_mutex_lock (&s->lock);
  s->answering++;
  req->answering = true;
  pthread_mutex_unlock (&s->lock);
  if (!job.code || (fd >= 0 && job.cancel_fd < 0))
    {
      nsbox_serve_release_slot (s);
      if (job.held)
        nsbox_serve_sandbox_put (s->sandboxes, job.held);
      free (job.code);
      if (job.cancel_fd >= 0)
        close (job.cancel_fd);
      nsbox_run_options_free (job.options);
      return nsbox_serve_respond_error (c, 500, "%s",
                                        job.code ? strerror (errno) : "out of memory");
    }
  return nsbox_serve_stream (c, &job);
}

/* A single run (*held NULL) or a run in the live sandbox held; a stream
 * takes *held over. */
static enum MHD_Result
serve_run (struct nsbox_server *s, struct MHD_Connection *c, struct request *req,
           struct nsbox_serve_sandbox **held)
{
  end_upload (s, req);
  if (req->too_large)
    {
      nsbox_serve_count (s, &s->bad_requests);
      return nsbox_serve_respond_error (c, 413, "the request body exceeds %" PRIu64 " bytes",
                                        s->max_request_bytes);
    }
  struct run_request rr = { 0 };
  char msg[512];
  json_t *root = NULL;
  size_t profile = 0;
  nsbox_sandbox *sandbox = *held ? nsbox_serve_sandbox_of (*held, &profile) : NULL;
  rr.profile = profile;
  int parsed = parse_run (s, req, &rr, msg, sizeof msg, &root);
  if (parsed == 0 && sandbox && rr.profile != profile)
    {
      snprintf (msg, sizeof msg, "the sandbox's profile is '%s', chosen when it was opened",
                s->profiles[profile].name);
      parsed = -1;
    }
  if (parsed < 0)
    {
      json_decref (root);
      nsbox_run_options_free (rr.options);
      nsbox_serve_count (s, &s->bad_requests);
      return nsbox_serve_respond_error (c, 400, "%s", msg);
    }
  /* The session: the body's "session", else the X-Nsbox-Session header. */
  const char *session = NULL;
  struct nsbox_error *session_err = NULL;
  if (nsbox_serve_session_header (c, root, &session, msg, sizeof msg) != 0)
    {
      json_decref (root);
      nsbox_run_options_free (rr.options);
      nsbox_serve_count (s, &s->bad_requests);
      return nsbox_serve_respond_error (c, 400, "%s", msg);
    }
  if (session && nsbox_run_options_set (rr.options, "session", session, &session_err) < 0)
    {
      json_decref (root);
      nsbox_run_options_free (rr.options);
      nsbox_serve_count (s, &s->bad_requests);
      enum MHD_Result bad = nsbox_serve_respond_error (c, 400, "header X-Nsbox-Session: %s",
                                                       nsbox_error_message (session_err));
      nsbox_error_free (session_err);
      return bad;
    }
  int a = nsbox_serve_admit (s);
  if (a < 0)
    {
      json_decref (root);
      nsbox_run_options_free (rr.options);
      return nsbox_serve_respond_error (c, 503,
                                        a == -2 ? "the server is draining" : "the server is busy");
    }
  const union MHD_ConnectionInfo *info
      = nsbox_mhd.get_connection_info (c, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (info)
    nsbox_run_options_set_cancel_fd (rr.options, info->connect_fd, s->tcp);
  char client[96], scope[48] = "";
  nsbox_serve_describe_client (s, info ? info->connect_fd : -1, client, sizeof client);
  /* Each client's sessions are its own: the peer's uid on the unix
   * socket, the token it presented (nsbox_serve_owner). */
  if (nsbox_serve_owner (s, c, scope, sizeof scope) < 0)
    scope[0] = '\0';
  struct nsbox_error *err = NULL;
  if (nsbox_run_options_set_client (rr.options, client) < 0
      || nsbox_run_options_set_quota_scope (rr.options, scope[0] ? scope : NULL) < 0)
    {
      json_decref (root);
      nsbox_run_options_free (rr.options);
      release (s, req);
      return nsbox_serve_respond_error (c, 500, "out of memory");
    }
  if (wants_stream (c))
    {
      enum MHD_Result streamed
          = stream_run (s, c, req, &rr, sandbox, held, info ? info->connect_fd : -1);
      json_decref (root);
      return streamed;
    }
  nsbox_result *res = NULL;
  bool warm = false;
  int r = sandbox ? nsbox_sandbox_run (sandbox, rr.code, rr.code_len, rr.options, &res, &err)
                  : nsbox_pool_run_served (s->profiles[rr.profile].pool, rr.code, rr.code_len,
                                           rr.options, &res, &warm, &err);
  release (s, req);
  double seconds = nsbox_now_seconds () - req->start;
  json_decref (root);
  nsbox_run_options_free (rr.options);
  cleanup_free char *json = r >= 0 ? nsbox_result_to_json (res, &err) : NULL;
  enum nsbox_serve_outcome outcome = nsbox_serve_outcome_of (json ? res : NULL, err);
  nsbox_serve_record (s, rr.profile, outcome, warm, seconds);
  /* A refusal: 429, the result JSON as its body, Retry-After in whole
   * seconds rounded up. */
  uint64_t retry_s = (nsbox_result_retry_after_ms (res) + 999) / 1000;
  nsbox_result_free (res);
  enum MHD_Result ret;
  if (json && outcome == NSBOX_OUTCOME_REFUSED)
    ret = nsbox_serve_respond (c, 429, "application/json", json, strlen (json),
                               retry_s ? retry_s : 1);
  else if (json)
    ret = nsbox_serve_respond (c, 200, "application/json", json, strlen (json), 0);
  else if (outcome == NSBOX_OUTCOME_CANCELLED)
    ret = MHD_NO; /* nobody to answer */
  else if (sandbox && (nsbox_error_errno (err) == EBUSY || nsbox_error_errno (err) == ESRCH))
    ret = nsbox_serve_respond_error (c, nsbox_error_errno (err) == EBUSY ? 409 : 410, "%s",
                                     nsbox_error_message (err));
  else
    ret = nsbox_serve_respond_error (c, 500, "%s",
                                     err ? nsbox_error_message (err) : "unknown error");
  nsbox_error_free (err);
  return ret;
}

/* POST /v1/runs (sandbox_id NULL) and POST /v1/sandboxes/ID/runs. */
static enum MHD_Result
handle_run (struct nsbox_server *s, struct MHD_Connection *c, struct request *req,
            const char *sandbox_id)
{
  if (!sandbox_id)
    {
      struct nsbox_serve_sandbox *none = NULL;
      return serve_run (s, c, req, &none);
    }
  char owner[48], why[256];
  struct nsbox_serve_sandbox *held = NULL;
  unsigned status
      = nsbox_serve_owner (s, c, owner, sizeof owner) < 0
            ? 500
            : nsbox_serve_sandbox_hold (s->sandboxes, sandbox_id, owner, &held, why, sizeof why);
  if (status)
    {
      end_upload (s, req);
      return nsbox_serve_respond_message (
          c, status, status == 500 ? "the client's identity cannot be told" : why, NULL);
    }
  enum MHD_Result ret = serve_run (s, c, req, &held);
  if (held)
    nsbox_serve_sandbox_put (s->sandboxes, held);
  return ret;
}

/* POST /v1/sandboxes: opening one takes a run slot (it starts a sandbox). */
static enum MHD_Result
handle_open (struct nsbox_server *s, struct MHD_Connection *c, struct request *req)
{
  end_upload (s, req);
  if (req->too_large)
    {
      nsbox_serve_count (s, &s->bad_requests);
      return nsbox_serve_respond_error (c, 413, "the request body exceeds %" PRIu64 " bytes",
                                        s->max_request_bytes);
    }
  int a = nsbox_serve_admit (s);
  if (a < 0)
    return nsbox_serve_respond_error (c, 503,
                                      a == -2 ? "the server is draining" : "the server is busy");
  enum MHD_Result ret = nsbox_serve_sandbox_open (s, c, req->body, req->len);
  release (s, req);
  return ret;
}

/* ---- the access handler ---- */

enum route
{
  ROUTE_RUNS,
  ROUTE_HEALTH,
  ROUTE_METRICS,
  ROUTE_SANDBOXES,    /* POST /v1/sandboxes */
  ROUTE_SANDBOX,      /* GET, DELETE /v1/sandboxes/ID */
  ROUTE_SANDBOX_RUNS, /* POST /v1/sandboxes/ID/runs */
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

/* /v1/sandboxes/ID[/runs]: the ID (NODE.HEX: a node's name, a dot, 32
 * lowercase hex digits; else no sandbox's) into id; *runs for /runs. */
static bool
sandbox_url (const char *url, char id[NSBOX_SERVE_ID_SIZE], bool *runs)
{
  const char *p = url + strlen ("/v1/sandboxes/");
  const char *dot = strchr (p, '.');
  if (!dot || (size_t)(dot - p) > NSBOX_SERVE_NODE_MAX)
    return false;
  char node[NSBOX_SERVE_NODE_MAX + 1];
  memcpy (node, p, (size_t)(dot - p));
  node[dot - p] = '\0';
  size_t n = strspn (dot + 1, "0123456789abcdef");
  const char *end = dot + 1 + n;
  if (!nsbox_serve_node_valid (node) || n != 32 || (*end && strcmp (end, "/runs") != 0))
    return false;
  snprintf (id, NSBOX_SERVE_ID_SIZE, "%.*s", (int)(end - p), p);
  *runs = *end != '\0';
  return true;
}

/* A sandbox's node, from its id: another node's sandbox is never here. */
static bool
elsewhere (const char *id, char *why, size_t size)
{
  const char *node = nsbox_serve_node ();
  size_t n = strlen (node);
  if (strncmp (id, node, n) == 0 && id[n] == '.')
    return false;
  snprintf (why, size,
            "sandbox %s is on node %.*s, not on this one (%s): that node is gone or this "
            "request was routed past it; a sandbox ends with its node: open a new one",
            id, (int)(strchr (id, '.') - id), id, node);
  return true;
}

static unsigned
only (const char *method, const char *url, const char *methods, char *why, size_t size)
{
  snprintf (why, size, "%.32s %.160s: only %s is allowed", method, url, methods);
  return 405;
}

/* The endpoint: 0 and *route (and the sandbox's id), or 404/405 with why
 * (and *allow). */
static unsigned
route_of (const char *url, const char *method, enum route *route, const char **allow, char *why,
          size_t size, char id[NSBOX_SERVE_ID_SIZE])
{
  bool get = strcmp (method, "GET") == 0 || strcmp (method, "HEAD") == 0;
  bool post = strcmp (method, "POST") == 0, runs = false;
  if (strcmp (url, "/v1/sandboxes") == 0)
    {
      *route = ROUTE_SANDBOXES;
      *allow = "POST";
      return post ? 0 : only (method, url, "POST", why, size);
    }
  if (strncmp (url, "/v1/sandboxes/", strlen ("/v1/sandboxes/")) == 0
      && sandbox_url (url, id, &runs))
    {
      *route = runs ? ROUTE_SANDBOX_RUNS : ROUTE_SANDBOX;
      *allow = runs ? "POST" : "GET, HEAD, DELETE";
      if (!(runs ? post : get || strcmp (method, "DELETE") == 0))
        return only (method, url, runs ? "POST" : "GET or DELETE", why, size);
      return elsewhere (id, why, size) ? 410 : 0;
    }
  if (strncmp (url, "/v1/sandboxes/", strlen ("/v1/sandboxes/")) == 0)
    {
      *allow = NULL;
      snprintf (why, size,
                "no sandbox %.100s: an id is a node's name, a dot and 32 lowercase hex digits",
                url + strlen ("/v1/sandboxes/"));
      return 404;
    }
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
  snprintf (why, size,
            "no such endpoint: %.80s (POST /v1/runs, /v1/sandboxes, /v1/sandboxes/ID/runs; GET "
            "or DELETE /v1/sandboxes/ID; GET /v1/health, /metrics)",
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
  size_t token;
  unsigned status = check_framing (&scan, te, why, size);
  /* Framing that cannot be trusted: the body's end is unknown. */
  bool at_once = status != 0;
  if (!status && !nsbox_serve_authorized (s, c, &token))
    {
      /* A balancer's or a kubelet's probe holds no token (and sends
       * none; a wrong one is a 401): it is told whether the node takes
       * work, and nothing more. */
      if (strcmp (url, "/v1/health") == 0
          && (strcmp (method, "GET") == 0 || strcmp (method, "HEAD") == 0) && length == 0 && !te
          && !nsbox_mhd.lookup_connection_value (c, MHD_HEADER_KIND, "Authorization"))
        req->brief = true;
      else
        {
          status = 401;
          snprintf (why, size, "missing or wrong bearer token");
          nsbox_serve_count (s, &s->unauthorized);
        }
    }
  else if (!status && length > s->max_request_bytes)
    {
      status = 413;
      snprintf (why, size, "the request body exceeds %" PRIu64 " bytes", s->max_request_bytes);
    }
  if (!status)
    {
      status = route_of (url, method, &route, &req->allow, why, size, req->sandbox_id);
      if (status == 410) /* another node's sandbox */
        nsbox_serve_count (s, &s->rejected_elsewhere);
    }
  if (!status && (route == ROUTE_RUNS || route == ROUTE_SANDBOXES || route == ROUTE_SANDBOX_RUNS))
    {
      if (start_upload (s, req))
        req->keep_body = true;
      else if (route == ROUTE_SANDBOX_RUNS && s->draining)
        {
          /* A live sandbox cannot move: it ends with its node. */
          status = 410;
          snprintf (why, size,
                    "node %s is draining: its live sandboxes end with it; open a new one",
                    nsbox_serve_node ());
        }
      else
        {
          status = 503;
          snprintf (why, size, "the server is %s", s->draining ? "draining" : "busy");
        }
    }
  if (!status)
    return MHD_YES;
  /* 410s were counted where they were decided (another node's sandbox
   * above, a draining node's by start_upload). */
  if (status != 401 && status != 503 && status != 410)
    nsbox_serve_count (s, &s->bad_requests);
  if (at_once || te || length > DRAIN_BYTES || (expect && strcasecmp (expect, "100-continue") == 0))
    return nsbox_serve_respond_message (c, status, why, req->allow);
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
    return nsbox_serve_respond_message (c, req->refusal, req->refusal_message, req->allow);
  enum route route = ROUTE_HEALTH;
  const char *allow = NULL;
  char why[256];
  route_of (url, method, &route, &allow, why, sizeof why, req->sandbox_id);
  switch (route)
    {
    case ROUTE_RUNS:
      return handle_run (s, c, req, NULL);
    case ROUTE_SANDBOX_RUNS:
      return handle_run (s, c, req, req->sandbox_id);
    case ROUTE_SANDBOXES:
      return handle_open (s, c, req);
    case ROUTE_SANDBOX:
      return nsbox_serve_sandbox_request (s, c, req->sandbox_id, strcmp (method, "DELETE") == 0);
    case ROUTE_HEALTH:
      return nsbox_serve_health (s, c, req->brief);
    case ROUTE_METRICS:
      return nsbox_serve_metrics (s, c);
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
