/* `nsbox mcp` (mcp.h): the Model Context Protocol over stdio.
 *
 * One message per line on stdin and on stdout (JSON-RPC 2.0). The main
 * thread reads and answers everything but tools/call, which it checks and
 * queues; max-concurrent worker threads run the calls on the warm pool, a
 * progress thread sends notifications/progress for long calls, and a
 * cancelled call's sandbox is killed through its cancel fd. stdout carries
 * protocol messages only: the real stdout is moved to a private fd at start
 * and fd 1 points at stderr, so a stray printf cannot corrupt the stream. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "mcp.h"
#include "config.h"
#include "mcp-private.h"
#include "mcp_files.h"
#include "files.h"
#include "pool.h"
#include "units.h"
#include "util.h"

/* One message (one line) at most; a longer one is dropped with an error. */
#define MAX_MESSAGE_BYTES (96u << 20)
/* The requests of the calls queued and running, in bytes at most: past
 * it a call is answered busy (a queue of calls each near the message
 * limit would otherwise hold gigabytes). */
#define MAX_IN_FLIGHT_BYTES (256u << 20)
/* notifications/progress every this many seconds of a call that asked. */
#define PROGRESS_SECONDS 5

/* JSON-RPC error codes. */
#define RPC_PARSE_ERROR -32700
#define RPC_INVALID_REQUEST -32600
#define RPC_METHOD_NOT_FOUND -32601
#define RPC_INVALID_PARAMS -32602
#define RPC_INTERNAL_ERROR -32603
#define RPC_BUSY -32000

/* From this version on: outputSchema and structuredContent. */
#define STRUCTURED_SINCE "2025-06-18"
/* From this version on: a tool's input errors are tool results (isError),
 * not protocol errors, so that the model sees them. */
#define INPUT_ERRORS_AS_RESULTS_SINCE "2025-11-25"

/* Oldest first; the last is the one answered to a version we lack. */
static const char *const protocol_versions[]
    = { "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25" };

/* ---- output ---- */

/* Sends one message (taking its reference) as one line. A client that went
 * away is noticed on stdin; here a failed write is only logged. */
static void
send_message (struct mcp *s, json_t *msg)
{
  char *text = msg ? json_dumps (msg, JSON_COMPACT) : NULL;
  json_decref (msg);
  size_t len = text ? strlen (text) : 0;
  char *line = text ? realloc (text, len + 2) : NULL;
  if (!line)
    {
      free (text);
      nsbox_mcp_log ("out of memory: a message was not sent");
      return;
    }
  line[len] = '\n';
  line[len + 1] = '\0';
  pthread_mutex_lock (&s->write_lock);
  int r = nsbox_write_all (s->out_fd, line, len + 1);
  pthread_mutex_unlock (&s->write_lock);
  if (r < 0)
    nsbox_mcp_log ("write to stdout: %s", strerror (-r));
  free (line);
}

static void __attribute__ ((format (printf, 4, 5)))
send_error (struct mcp *s, json_t *id, int code, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  cleanup_free char *text = vxasprintf (fmt, ap);
  va_end (ap);
  send_message (s,
                json_pack ("{s:s,s:O,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null (),
                           "error", "code", code, "message", text ? text : "out of memory"));
}

static void
send_result (struct mcp *s, json_t *id, json_t *result)
{
  if (!result)
    {
      send_error (s, id, RPC_INTERNAL_ERROR, "out of memory");
      return;
    }
  send_message (s, json_pack ("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id, "result", result));
}

/* ---- running a call ---- */

/* Adds a line before the call's text. */
static void
add_note (struct job *job, const char *line)
{
  char *note = job->note ? xasprintf ("%s\n%s", line, job->note) : strdup (line);
  if (!note)
    return;
  free (job->note);
  job->note = note;
}

/* Locked session_lock: the session's sandbox, opened when there is none
 * (a note says so when an earlier one ended). */
static int
session_sandbox (struct mcp *s, struct job *job, struct nsbox_error **err)
{
  if (s->sandbox)
    return 0;
  int r = nsbox_sandbox_open (s->pool, NULL, &s->sandbox, err);
  if (r < 0)
    return r;
  if (s->sandboxes_opened++ > 0)
    {
      cleanup_free char *line
          = xasprintf ("note: this call ran in a fresh sandbox (%s): variables, imports and files "
                       "of earlier calls are gone",
                       s->sandbox_gone[0] ? s->sandbox_gone : "the last one was reset");
      if (line)
        add_note (job, line);
    }
  s->sandbox_gone[0] = '\0';
  return 0;
}

/* A call's error when its sandbox refused its files (the program's own
 * doing): its first clause, which names only the sandbox's /tmp and the
 * files (what follows "; ", such as a failed audit record, is the
 * host's); NULL for any other error. Caller frees. */
static char *
inputs_refused (const struct nsbox_error *err)
{
  const char *m = nsbox_error_message (err);
  if (!m || strncmp (m, NSBOX_INPUTS_REFUSED, strlen (NSBOX_INPUTS_REFUSED)) != 0)
    return NULL;
  return strndup (m, strcspn (m, ";"));
}

/* mcp-state: per-session: the call in the session's sandbox. One that
 * ended between calls (its idle timeout, its lifetime) is replaced once;
 * one the call lost is closed, the next call gets a fresh one. */
static int
session_run (struct mcp *s, struct job *job, nsbox_result **res, struct nsbox_error **err)
{
  pthread_mutex_lock (&s->session_lock);
  int r = 0;
  for (int attempt = 0; attempt < 2; attempt++)
    {
      if ((r = session_sandbox (s, job, err)) < 0)
        break;
      r = nsbox_sandbox_run (s->sandbox, job->code, job->code_len, job->options, res, err);
      if (r >= 0 || nsbox_error_errno (*err) != ESRCH || attempt > 0)
        break;
      snprintf (s->sandbox_gone, sizeof s->sandbox_gone, "%s", nsbox_error_message (*err));
      nsbox_error_free (TAKE_PTR (*err));
      nsbox_sandbox_close (TAKE_PTR (s->sandbox));
    }
  if (r >= 0 && nsbox_result_sandbox_lost (*res))
    {
      snprintf (s->sandbox_gone, sizeof s->sandbox_gone,
                "the previous call's run lost its sandbox");
      nsbox_sandbox_close (TAKE_PTR (s->sandbox));
    }
  else if (r < 0 && s->sandbox && nsbox_error_errno (*err) == ECANCELED)
    {
      snprintf (s->sandbox_gone, sizeof s->sandbox_gone, "a cancelled call ended the last one");
      nsbox_sandbox_close (TAKE_PTR (s->sandbox));
    }
  pthread_mutex_unlock (&s->session_lock);
  return r;
}

static void
reset_session (struct mcp *s, struct job *job)
{
  pthread_mutex_lock (&s->session_lock);
  bool had = s->sandbox != NULL;
  nsbox_sandbox_close (TAKE_PTR (s->sandbox));
  snprintf (s->sandbox_gone, sizeof s->sandbox_gone, "the session was reset");
  pthread_mutex_unlock (&s->session_lock);
  pthread_mutex_lock (&s->lock);
  for (struct job **p = &s->running; *p; p = &(*p)->next)
    if (*p == job)
      {
        *p = job->next;
        break;
      }
  bool cancelled = job->cancelled;
  s->in_flight_bytes -= job->bytes;
  pthread_mutex_unlock (&s->lock);
  if (!cancelled)
    send_result (s, job->id,
                 json_pack ("{s:[{s:s,s:s}],s:b}", "content", "type", "text", "text",
                            had ? "reset: the sandbox and everything in it are gone; the next "
                                  "run_python call starts in a fresh one\n"
                                : "reset: there was no sandbox yet; the next run_python call "
                                  "starts in a fresh one\n",
                            "isError", false));
  nsbox_mcp_job_free (job);
}

static void
run_job (struct mcp *s, struct job *job)
{
  if (job->reset)
    {
      reset_session (s, job);
      return;
    }
  nsbox_result *res = NULL;
  struct nsbox_error *err = NULL;
  int r = s->per_session
              ? session_run (s, job, &res, &err)
              : nsbox_pool_run (s->pool, job->code, job->code_len, job->options, &res, &err);
  pthread_mutex_lock (&s->lock);
  for (struct job **p = &s->running; *p; p = &(*p)->next)
    if (*p == job)
      {
        *p = job->next;
        break;
      }
  bool cancelled = job->cancelled, stopped = job->stopped;
  s->in_flight_bytes -= job->bytes;
  const char *stop_why = s->stop_why;
  pthread_mutex_unlock (&s->lock);
  if (r < 0 && !((cancelled || stopped) && nsbox_error_errno (err) == ECANCELED))
    {
      cleanup_free char *id = json_dumps (job->id, JSON_ENCODE_ANY | JSON_COMPACT);
      nsbox_mcp_log ("%s (request %s): %s", TOOL_NAME, id ? id : "?", nsbox_error_message (err));
    }
  /* A cancelled request gets no answer (the specification); one the
   * server's stop ended gets an error saying so. */
  if (stopped && r < 0)
    send_error (s, job->id, RPC_BUSY,
                "the server stopped (%s) before the call ended: its sandbox was killed", stop_why);
  else if (!cancelled)
    {
      cleanup_free char *refusal = r < 0 ? inputs_refused (err) : NULL;
      send_result (s, job->id,
                   r >= 0 ? nsbox_mcp_tool_result (job, res)
                          : nsbox_mcp_tool_error (refusal ? refusal : INTERNAL_ERROR_TEXT));
    }
  nsbox_error_free (err);
  nsbox_result_free (res);
  nsbox_mcp_job_free (job);
}

static void *
worker (void *arg)
{
  struct mcp *s = arg;
  pthread_mutex_lock (&s->lock);
  for (;;)
    {
      s->idle_workers++;
      while (!s->queue && !s->stopping)
        pthread_cond_wait (&s->work, &s->lock);
      s->idle_workers--;
      struct job *job = s->queue;
      if (!job)
        break;
      s->queue = job->next;
      if (!s->queue)
        s->queue_tail = &s->queue;
      s->queued--;
      job->next = s->running;
      s->running = job;
      job->started = job->progressed = nsbox_now_seconds ();
      pthread_mutex_unlock (&s->lock);
      run_job (s, job);
      pthread_mutex_lock (&s->lock);
    }
  pthread_mutex_unlock (&s->lock);
  return NULL;
}

/* Sent under s->lock, so never after the call's answer: the worker takes
 * its job off the running list before it answers. */
static void *
progress_loop (void *arg)
{
  struct mcp *s = arg;
  pthread_mutex_lock (&s->lock);
  while (!s->stopping)
    {
      struct timespec until;
      clock_gettime (CLOCK_MONOTONIC, &until);
      until.tv_sec += 1;
      pthread_cond_timedwait (&s->tick, &s->lock, &until);
      double now = nsbox_now_seconds ();
      for (struct job *job = s->running; job && !s->stopping; job = job->next)
        {
          if (!job->progress_token || job->cancelled || now - job->progressed < PROGRESS_SECONDS)
            continue;
          job->progressed = now;
          json_int_t elapsed = (json_int_t)(now - job->started);
          char message[96];
          snprintf (message, sizeof message,
                    "running for %" JSON_INTEGER_FORMAT " s of at most %.3g s", elapsed,
                    (double)job->timeout_ms / 1000.0);
          send_message (s, json_pack ("{s:s,s:s,s:{s:O,s:I,s:f,s:s}}", "jsonrpc", "2.0", "method",
                                      "notifications/progress", "params", "progressToken",
                                      job->progress_token, "progress", elapsed, "total",
                                      (double)job->timeout_ms / 1000.0, "message", message));
        }
    }
  pthread_mutex_unlock (&s->lock);
  return NULL;
}

/* ---- requests ---- */

static bool
version_at_least (const char *version, const char *since)
{
  /* The versions are dates, YYYY-MM-DD: their order is the strings'. */
  return strcmp (version, since) >= 0;
}

static json_t *
handle_initialize (struct mcp *s, json_t *params, char *why, size_t size)
{
  const char *asked = json_string_value (json_object_get (params, "protocolVersion"));
  if (!asked)
    {
      snprintf (why, size, "params.protocolVersion must be a string");
      return NULL;
    }
  const char *chosen = protocol_versions[ARRAY_SIZE (protocol_versions) - 1];
  for (size_t i = 0; i < ARRAY_SIZE (protocol_versions); i++)
    if (strcmp (asked, protocol_versions[i]) == 0)
      chosen = protocol_versions[i];
  snprintf (s->protocol_version, sizeof s->protocol_version, "%s", chosen);
  /* The client's own name, as it gives it: kept printable and short. */
  const char *client
      = json_string_value (json_object_get (json_object_get (params, "clientInfo"), "name"));
  snprintf (s->client, sizeof s->client, "mcp %.64s", client ? client : "(unnamed)");
  for (char *p = s->client; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f)
      *p = '?';
  return json_pack (
      "{s:s,s:{s:{s:b}},s:{s:s,s:s,s:s},s:s}", "protocolVersion", chosen, "capabilities", "tools",
      "listChanged", false, "serverInfo", "name", "nsbox", "title", "nsbox Python sandbox",
      "version", s->server_version, "instructions",
      s->per_session
          ? "Use run_python to run Python code. The calls of this session share one sandbox: "
            "variables, imports and files in /tmp stay from one call to the next, and the value "
            "of the last expression comes back. Use reset to start over."
          : "Use run_python to run Python code. Each call runs in a fresh sandbox: define "
            "everything the code needs in the same call.");
}

static const char *
negotiated (const struct mcp *s)
{
  /* Before initialize (a lenient client): the oldest behaviour. */
  return s->protocol_version[0] ? s->protocol_version : protocol_versions[0];
}

static json_t *
handle_tools_list (struct mcp *s, json_t *params, char *why, size_t size)
{
  (void)params;
  (void)why;
  (void)size;
  json_t *tools
      = json_pack ("{s:[o]}", "tools",
                   nsbox_mcp_tool_description (version_at_least (negotiated (s), STRUCTURED_SINCE),
                                               s->per_session));
  if (tools && s->per_session)
    json_array_append_new (json_object_get (tools, "tools"), nsbox_mcp_reset_description ());
  return tools;
}

static json_t *
handle_ping (struct mcp *s, json_t *params, char *why, size_t size)
{
  (void)s;
  (void)params;
  (void)why;
  (void)size;
  return json_object ();
}

/* Queues the call; answers at once only when it is refused. */
static void
handle_tools_call (struct mcp *s, json_t *id, json_t *params, size_t bytes)
{
  json_t *name = json_object_get (params, "name");
  if (!json_is_string (name))
    {
      send_error (s, id, RPC_INVALID_PARAMS, "params.name must be a string");
      return;
    }
  bool reset = s->per_session && strcmp (json_string_value (name), RESET_TOOL_NAME) == 0;
  if (!reset && strcmp (json_string_value (name), TOOL_NAME) != 0)
    {
      send_error (s, id, RPC_INVALID_PARAMS, "unknown tool '%.64s' (this server has %s%s)",
                  json_string_value (name), TOOL_NAME,
                  s->per_session ? " and " RESET_TOOL_NAME : "");
      return;
    }
  json_t *args = json_object_get (params, "arguments");
  if (reset && args && (!json_is_object (args) || json_object_size (args) > 0))
    {
      send_error (s, id, RPC_INVALID_PARAMS, "%s takes no arguments", RESET_TOOL_NAME);
      return;
    }
  struct job *job = calloc (1, sizeof *job);
  struct nsbox_error *err = NULL;
  if (!job || !(job->options = nsbox_run_options_new (&err)))
    {
      nsbox_error_free (err);
      free (job);
      send_error (s, id, RPC_INTERNAL_ERROR, "out of memory");
      return;
    }
  job->cancel_fd = job->run_fd = -1;
  if (nsbox_run_options_set_client (job->options, s->client[0] ? s->client : "mcp") < 0)
    {
      nsbox_run_options_free (job->options);
      free (job);
      send_error (s, id, RPC_INTERNAL_ERROR, "out of memory");
      return;
    }
  job->id = json_incref (id);
  job->structured = version_at_least (negotiated (s), STRUCTURED_SINCE);
  job->reset = reset;
  char why[256];
  int r = -1;
  if (reset)
    r = 0;
  else if (args && !json_is_object (args))
    snprintf (why, sizeof why, "params.arguments must be an object");
  else
    {
      job->args = args ? json_incref (args) : json_object ();
      r = job->args ? nsbox_mcp_prepare_job (s, job, job->args, why, sizeof why) : -2;
    }
  if (r == -3)
    send_result (s, id, nsbox_mcp_tool_error (INTERNAL_ERROR_TEXT));
  else if (r == -1 && version_at_least (negotiated (s), INPUT_ERRORS_AS_RESULTS_SINCE))
    send_result (s, id, nsbox_mcp_tool_error (why));
  else if (r == -1)
    send_error (s, id, RPC_INVALID_PARAMS, "%s", why);
  if (r < 0)
    {
      if (r == -2)
        send_error (s, id, RPC_INTERNAL_ERROR, "out of memory");
      nsbox_mcp_job_free (job);
      return;
    }
  json_t *token = json_object_get (json_object_get (params, "_meta"), "progressToken");
  if (json_is_string (token) || json_is_integer (token))
    job->progress_token = json_incref (token);
  int pair[2];
  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0)
    {
      nsbox_mcp_log ("socketpair: %s", strerror (errno));
      send_result (s, id, nsbox_mcp_tool_error (INTERNAL_ERROR_TEXT));
      nsbox_mcp_job_free (job);
      return;
    }
  job->cancel_fd = pair[0];
  job->run_fd = pair[1];
  nsbox_run_options_set_cancel_fd (job->options, job->run_fd, false);
  job->bytes = bytes;
  pthread_mutex_lock (&s->lock);
  bool busy = s->queued >= s->idle_workers + s->max_queue;
  bool heavy = !busy && s->in_flight_bytes + bytes > MAX_IN_FLIGHT_BYTES;
  if (!busy && !heavy)
    {
      *s->queue_tail = job;
      s->queue_tail = &job->next;
      s->queued++;
      s->in_flight_bytes += bytes;
      pthread_cond_signal (&s->work);
    }
  pthread_mutex_unlock (&s->lock);
  if (busy)
    send_error (s, id, RPC_BUSY, "busy: %" PRIu64 " calls are waiting already; try again later",
                s->max_queue);
  else if (heavy)
    send_error (s, id, RPC_BUSY,
                "busy: the calls in flight hold %u MiB of requests already; try again later",
                MAX_IN_FLIGHT_BYTES >> 20);
  if (busy || heavy)
    nsbox_mcp_job_free (job);
}

/* notifications/cancelled: a queued call is dropped, a running one's
 * sandbox killed; neither is answered. */
static void
handle_cancelled (struct mcp *s, json_t *params)
{
  json_t *id = json_object_get (params, "requestId");
  if (!json_is_string (id) && !json_is_integer (id))
    return;
  struct job *dropped = NULL;
  pthread_mutex_lock (&s->lock);
  for (struct job **p = &s->queue; *p; p = &(*p)->next)
    if (json_equal ((*p)->id, id))
      {
        dropped = *p;
        *p = dropped->next;
        if (!*p)
          s->queue_tail = p;
        s->queued--;
        s->in_flight_bytes -= dropped->bytes;
        break;
      }
  for (struct job *job = s->running; !dropped && job; job = job->next)
    if (json_equal (job->id, id) && !job->cancelled)
      {
        job->cancelled = true;
        close (TAKE_FD (job->cancel_fd));
      }
  pthread_mutex_unlock (&s->lock);
  nsbox_mcp_job_free (dropped);
}

static const struct
{
  const char *method;
  json_t *(*handle) (struct mcp *s, json_t *params, char *why, size_t size);
} request_handlers[] = {
  { "initialize", handle_initialize },
  { "ping", handle_ping },
  { "tools/list", handle_tools_list },
};

/* Whether a queued or running call has this id (the client has not had
 * its answer, or cancelled it and a worker is still ending it). */
static bool
in_flight (struct mcp *s, json_t *id)
{
  bool found = false;
  pthread_mutex_lock (&s->lock);
  for (struct job *job = s->queue; !found && job; job = job->next)
    found = json_equal (job->id, id);
  for (struct job *job = s->running; !found && job; job = job->next)
    found = json_equal (job->id, id);
  pthread_mutex_unlock (&s->lock);
  return found;
}

static void
handle_message (struct mcp *s, const char *line, size_t len)
{
  json_error_t jerr;
  cleanup_json json_t *msg = json_loadb (line, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
  if (!msg)
    {
      send_error (s, NULL, RPC_PARSE_ERROR, "parse error at column %d: %s", jerr.column, jerr.text);
      return;
    }
  if (!json_is_object (msg))
    {
      send_error (s, NULL, RPC_INVALID_REQUEST, "invalid request: %s",
                  json_is_array (msg) ? "batches are not supported"
                                      : "a message must be a JSON object");
      return;
    }
  json_t *id = json_object_get (msg, "id");
  json_t *method = json_object_get (msg, "method");
  json_t *params = json_object_get (msg, "params");
  if (!method && (json_object_get (msg, "result") || json_object_get (msg, "error")))
    return; /* an answer: this server sends no request */
  if (id && !json_is_string (id) && !json_is_integer (id))
    {
      send_error (s, NULL, RPC_INVALID_REQUEST,
                  "invalid request: 'id' must be a string or an integer");
      return;
    }
  const char *version = json_string_value (json_object_get (msg, "jsonrpc"));
  if (!version || strcmp (version, "2.0") != 0 || !json_is_string (method))
    {
      if (id)
        send_error (s, id, RPC_INVALID_REQUEST, "invalid request: %s",
                    json_is_string (method) ? "'jsonrpc' must be \"2.0\""
                                            : "'method' must be a string");
      return;
    }
  const char *name = json_string_value (method);
  if (!id)
    {
      if (strcmp (name, "notifications/cancelled") == 0)
        handle_cancelled (s, params);
      return; /* other notifications need nothing */
    }
  if (params && !json_is_object (params))
    {
      send_error (s, id, RPC_INVALID_PARAMS, "'params' must be an object");
      return;
    }
  if (in_flight (s, id))
    {
      /* Its answer would be taken for the call's. */
      cleanup_free char *text = json_dumps (id, JSON_ENCODE_ANY | JSON_COMPACT);
      send_error (s, id, RPC_INVALID_REQUEST,
                  "invalid request: id %.64s is the id of a call still in flight",
                  text ? text : "?");
      return;
    }
  if (strcmp (name, "tools/call") == 0)
    {
      handle_tools_call (s, id, params, len);
      return;
    }
  for (size_t i = 0; i < ARRAY_SIZE (request_handlers); i++)
    if (strcmp (name, request_handlers[i].method) == 0)
      {
        char why[256] = "out of memory";
        json_t *result = request_handlers[i].handle (s, params, why, sizeof why);
        if (result)
          send_result (s, id, result);
        else
          send_error (s, id, RPC_INVALID_PARAMS, "%s", why);
        return;
      }
  send_error (s, id, RPC_METHOD_NOT_FOUND, "method not found: '%.100s'", name);
}

/* ---- input ---- */

struct reader
{
  char *buf;
  size_t len, alloc, scanned;
  bool dropping; /* inside a line past MAX_MESSAGE_BYTES */
};

static void
handle_lines (struct mcp *s, struct reader *r)
{
  size_t start = 0;
  for (;;)
    {
      char *nl = memchr (r->buf + r->scanned, '\n', r->len - r->scanned);
      if (!nl)
        break;
      size_t end = (size_t)(nl - r->buf);
      size_t line_len = end - start;
      if (line_len > 0 && r->buf[end - 1] == '\r')
        line_len--;
      if (r->dropping)
        r->dropping = false;
      else if (line_len > 0)
        handle_message (s, r->buf + start, line_len);
      start = r->scanned = end + 1;
    }
  if (start > 0)
    {
      explicit_bzero (r->buf, start);
      memmove (r->buf, r->buf + start, r->len - start);
      r->len -= start;
      r->scanned -= start;
    }
  r->scanned = r->len;
  if (r->len > MAX_MESSAGE_BYTES)
    {
      if (!r->dropping)
        send_error (s, NULL, RPC_INVALID_REQUEST,
                    "invalid request: a message exceeds %u MiB and was dropped",
                    MAX_MESSAGE_BYTES >> 20);
      r->dropping = true;
      explicit_bzero (r->buf, r->len);
      r->len = r->scanned = 0;
    }
}

/* Reads stdin until it closes or a stop signal arrives on sfd; says
 * which in *why (static text). */
static void
read_loop (struct mcp *s, int sfd, const char **why)
{
  *why = "its input closed";
  struct reader r = { 0 };
  for (;;)
    {
      if (r.alloc - r.len < 65536)
        {
          size_t want = r.alloc ? r.alloc * 2 : 1u << 20;
          char *grown = malloc (want);
          if (!grown)
            {
              nsbox_mcp_log ("out of memory reading stdin");
              break;
            }
          if (r.buf)
            memcpy (grown, r.buf, r.len);
          if (r.buf)
            explicit_bzero (r.buf, r.alloc);
          free (r.buf);
          r.buf = grown;
          r.alloc = want;
        }
      struct pollfd p[2] = { { STDIN_FILENO, POLLIN, 0 }, { sfd, POLLIN, 0 } };
      if (poll (p, 2, -1) < 0)
        {
          if (errno == EINTR)
            continue;
          nsbox_mcp_log ("poll: %s", strerror (errno));
          break;
        }
      if (p[1].revents)
        {
          struct signalfd_siginfo si;
          if (read (sfd, &si, sizeof si) == (ssize_t)sizeof si)
            {
              nsbox_mcp_log ("%s: stopping", strsignal ((int)si.ssi_signo));
              *why = si.ssi_signo == SIGTERM  ? "SIGTERM"
                     : si.ssi_signo == SIGINT ? "SIGINT"
                                              : "SIGHUP";
            }
          else
            *why = "a signal";
          break;
        }
      if (!p[0].revents)
        continue;
      ssize_t n = read (STDIN_FILENO, r.buf + r.len, r.alloc - r.len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          nsbox_mcp_log ("read stdin: %s", strerror (errno));
          *why = "its input failed";
        }
      if (n <= 0)
        break;
      r.len += (size_t)n;
      handle_lines (s, &r);
    }
  if (r.buf)
    explicit_bzero (r.buf, r.alloc);
  free (r.buf);
}

/* ---- the process ---- */

/* Every queued call answered with an error, every running sandbox killed
 * (its worker answers it with an error). */
static void
stop (struct mcp *s, const char *why)
{
  pthread_mutex_lock (&s->lock);
  s->stopping = true;
  s->stop_why = why;
  struct job *queued = s->queue;
  s->queue = NULL;
  s->queue_tail = &s->queue;
  s->queued = 0;
  for (struct job *job = s->running; job; job = job->next)
    if (!job->cancelled && !job->stopped)
      {
        job->stopped = true;
        close (TAKE_FD (job->cancel_fd));
      }
  pthread_cond_broadcast (&s->work);
  pthread_cond_broadcast (&s->tick);
  pthread_mutex_unlock (&s->lock);
  while (queued)
    {
      struct job *next = queued->next;
      send_error (s, queued->id, RPC_BUSY, "the server stopped (%s): the call was not run", why);
      nsbox_mcp_job_free (queued);
      queued = next;
    }
}

static int
ceiling_timeout (const nsbox_config *config, uint64_t *ms)
{
  struct nsbox_error *err = NULL;
  cleanup_free char *text = nsbox_config_get (config, "timeout", &err);
  if (!text || nsbox_parse_duration (text, ms) < 0 || *ms == 0)
    {
      nsbox_mcp_log ("the configured timeout: %s", err ? nsbox_error_message (err) : "unreadable");
      nsbox_error_free (err);
      return -1;
    }
  return 0;
}

int
nsbox_mcp (nsbox_config *config, const struct nsbox_mcp_options *o)
{
  struct mcp s = {
    .out_fd = -1, .max_queue = o->max_queue, .server_version = o->version, .queue_tail = &s.queue
  };
  /* The protocol's stream gets a private fd; fd 1 (stdout, printf, a
   * library's stray write) goes to stderr from here on. */
  s.out_fd = fcntl (STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  if (s.out_fd < 0 || dup2 (STDERR_FILENO, STDOUT_FILENO) < 0)
    {
      nsbox_mcp_log ("cannot set up stdout: %s", strerror (errno));
      nsbox_config_free (config);
      return 125;
    }
  /* The code of a call is the client's: wiped before it is freed. */
  json_set_alloc_funcs (malloc, nsbox_zeroing_free);
  pthread_mutex_init (&s.write_lock, NULL);
  pthread_mutex_init (&s.lock, NULL);
  pthread_mutex_init (&s.session_lock, NULL);
  pthread_cond_init (&s.work, NULL);
  nsbox_cond_init_monotonic (&s.tick);

  /* Signals: taken through a signalfd by the reading loop; every thread
   * started from here on inherits the block. */
  sigset_t stop_signals;
  sigemptyset (&stop_signals);
  sigaddset (&stop_signals, SIGTERM);
  sigaddset (&stop_signals, SIGINT);
  sigaddset (&stop_signals, SIGHUP);
  pthread_sigmask (SIG_BLOCK, &stop_signals, NULL);
  int sfd = signalfd (-1, &stop_signals, SFD_CLOEXEC);

  int status = 125;
  const char *why = "it could not start";
  size_t n_workers = 0;
  pthread_t *workers = calloc (o->max_concurrent, sizeof *workers);
  pthread_t progress;
  bool progress_started = false;
  struct nsbox_error *err = NULL;
  cleanup_free char *runtime = NULL;
  if (sfd < 0 || !workers)
    {
      nsbox_mcp_log ("cannot start: %s", sfd < 0 ? strerror (errno) : "out of memory");
      goto out;
    }
  if (ceiling_timeout (config, &s.timeout_ms) < 0)
    goto out;
  runtime = nsbox_config_get (config, "runtime", NULL);
  s.runsc = runtime && strcmp (runtime, "runsc") == 0;
  s.per_session = config->mcp_per_session;
  if (s.per_session && s.runsc)
    {
      nsbox_mcp_log ("mcp-state: per-session needs live sandboxes, which runtime runsc does not "
                     "have yet: use runtime native, or mcp-state: per-call");
      goto out;
    }
  if (nsbox_pool_new (config, o->pool_options, &s.pool, &err) < 0)
    {
      nsbox_mcp_log ("%s", nsbox_error_message (err));
      nsbox_error_free (err);
      goto out;
    }
  for (; n_workers < o->max_concurrent; n_workers++)
    if (pthread_create (&workers[n_workers], NULL, worker, &s) != 0)
      {
        nsbox_mcp_log ("cannot start a worker thread");
        goto out;
      }
  if (pthread_create (&progress, NULL, progress_loop, &s) != 0)
    {
      nsbox_mcp_log ("cannot start the progress thread");
      goto out;
    }
  progress_started = true;
  nsbox_mcp_log ("serving on stdin/stdout (pid %d, %" PRIu64 " concurrent calls)", (int)getpid (),
                 o->max_concurrent);
  read_loop (&s, sfd, &why);
  status = 0;
out:
  stop (&s, why);
  for (size_t i = 0; i < n_workers; i++)
    pthread_join (workers[i], NULL);
  if (progress_started)
    pthread_join (progress, NULL);
  free (workers);
  /* The client is gone: so is its session's sandbox, before the pool. */
  nsbox_sandbox_close (TAKE_PTR (s.sandbox));
  nsbox_pool_free (s.pool);
  nsbox_config_free (config);
  if (sfd >= 0)
    close (sfd);
  if (s.out_fd >= 0)
    close (s.out_fd);
  pthread_cond_destroy (&s.tick);
  pthread_cond_destroy (&s.work);
  pthread_mutex_destroy (&s.lock);
  pthread_mutex_destroy (&s.session_lock);
  pthread_mutex_destroy (&s.write_lock);
  if (status == 0)
    nsbox_mcp_log ("stopped");
  return status;
}
