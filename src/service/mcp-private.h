/* What the files of `nsbox mcp` share: one server's state and one call
 * (a job). mcp.c (the protocol, the queue, the threads) uses mcp_tool.c
 * (the run_python tool: its schemas, a call's arguments, its result),
 * which uses nothing of mcp.c. */
#ifndef NSBOX_MCP_PRIVATE_H
#define NSBOX_MCP_PRIVATE_H

#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mcp_files.h"
#include "pool.h"
#include "result.h"
#include "util.h"

#define TOOL_NAME "run_python"
#define RESET_TOOL_NAME "reset"
#define INTERNAL_ERROR_TEXT                                                                        \
  "nsbox could not run the code: internal error; details are in the server's log"

struct job
{
  struct job *next; /* in the queue, then in the running list */
  json_t *id;
  json_t *progress_token; /* or NULL */
  json_t *args;           /* holds the code */
  const char *code;
  size_t code_len;
  nsbox_run_options *options;
  uint64_t timeout_ms; /* in force */
  char *note;          /* a line put before the result's text, or NULL */
  bool structured;     /* answer with structuredContent */
  bool reset;          /* the reset tool (mcp-state: per-session) */
  int cancel_fd;       /* ours: closing it kills the run */
  int run_fd;          /* the run's end of the socketpair */
  bool cancelled;      /* by the client (notifications/cancelled): not answered */
  bool stopped;        /* by the server's stop: answered with an error */
  size_t bytes;        /* its request's size, in in_flight_bytes */
  double started, progressed;
  struct nsbox_mcp_files files;
};

struct mcp
{
  int out_fd;
  pthread_mutex_t write_lock; /* whole messages on out_fd */
  pthread_mutex_t lock;       /* everything below */
  pthread_cond_t work;        /* a job queued, or stopping */
  pthread_cond_t tick;        /* the progress thread's clock, or stopping */
  struct job *queue, **queue_tail, *running;
  uint64_t queued, idle_workers, max_queue;
  uint64_t in_flight_bytes; /* the jobs' bytes, queued and running */
  bool stopping;
  const char *stop_why; /* why, for the calls the stop ends */
  /* Set before the threads start, read-only after. */
  nsbox_pool *pool;
  uint64_t timeout_ms; /* the configured timeout: the ceiling of a call's */
  bool runsc;          /* runtime runsc: no files in or out */
  bool per_session;    /* mcp-state: per-session */
  /* per-session: the session's live sandbox (NULL until the first call,
   * after a reset and once it is lost), under session_lock, which a call
   * holds for its whole run: calls of one session run one at a time. */
  pthread_mutex_t session_lock;
  nsbox_sandbox *sandbox;
  uint64_t sandboxes_opened;
  char sandbox_gone[192]; /* why the last one ended, for the next call's note */
  const char *server_version;
  /* The main thread's alone. */
  char protocol_version[16]; /* negotiated; "" before initialize */
  char client[96];           /* "mcp NAME" from initialize's clientInfo, for the audit log */
};

static inline void __attribute__ ((format (printf, 1, 2))) nsbox_mcp_log (const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  nsbox_vprint_message ("nsbox mcp", fmt, ap);
  va_end (ap);
}

json_t *nsbox_mcp_tool_error (const char *text) NSBOX_INTERNAL;
json_t *nsbox_mcp_tool_description (bool structured, bool per_session) NSBOX_INTERNAL;
json_t *nsbox_mcp_reset_description (void) NSBOX_INTERNAL;
/* Checks a call's arguments into the job: 0; -1 with a reason naming the
 * argument; -2 out of memory; -3 the host failed (logged). */
int nsbox_mcp_prepare_job (struct mcp *s, struct job *job, json_t *args, char *why,
                           size_t size) NSBOX_INTERNAL;
void nsbox_mcp_job_free (struct job *job) NSBOX_INTERNAL;
json_t *nsbox_mcp_tool_result (const struct job *job, const nsbox_result *res) NSBOX_INTERNAL;

#endif
