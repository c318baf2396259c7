/* Streamed runs (serve_api.h): a request with Accept: application/x-ndjson
 * gets 200 and a chunked stream of JSON lines,
 *   {"stream":"stdout","data":"..."}   as the program writes (each piece
 *   {"stream":"stderr","data":"..."}   the launcher reads, at once)
 *   {"result":{...}}                   last: the result JSON, as unstreamed
 * or, last, {"error":"..."} when the run could not happen once the stream
 * had begun. The run goes on a thread of its own, so that the connection's
 * thread can send each line while it runs (libmicrohttpd's reader
 * callback, which waits for the next). What is streamed is within
 * max-output-bytes of each stream, as the result's output is. The run's
 * cancel fd is a duplicate of the connection's: a client that hangs up
 * kills it (and a live sandbox's run loses its sandbox, as unstreamed). */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mhd.h"
#include "nsbox.h"
#include "pool.h"
#include "result.h"
#include "serve_api.h"
#include "util.h"

struct stream
{
  struct nsbox_serve_stream_job job;
  pthread_mutex_t lock;
  pthread_cond_t more;
  char *buf; /* lines not sent yet, from off */
  size_t off, len, alloc;
  bool done;   /* the last line is in buf */
  bool failed; /* out of memory: the stream ends short */
  /* The end of each stream's last piece when it split a UTF-8 character:
   * sent with the next piece. */
  char carry[2][4];
  size_t carry_len[2];
  pthread_t worker;
};

/* Locked. */
static void
append (struct stream *st, const char *line, size_t n)
{
  if (st->failed)
    return;
  if (st->off > 0 && st->off == st->len)
    st->off = st->len = 0;
  if (st->len + n + 1 > st->alloc)
    {
      size_t want = st->alloc ? st->alloc : 4096;
      while (want < st->len + n + 1)
        want *= 2;
      char *grown = malloc (want);
      if (!grown)
        {
          st->failed = true;
          return;
        }
      if (st->buf)
        {
          memcpy (grown, st->buf, st->len);
          explicit_bzero (st->buf, st->alloc);
        }
      free (st->buf);
      st->buf = grown;
      st->alloc = want;
    }
  memcpy (st->buf + st->len, line, n);
  st->buf[st->len + n] = '\n';
  st->len += n + 1;
}

static void
append_json (struct stream *st, json_t *line)
{
  char *text = line ? json_dumps (line, JSON_COMPACT) : NULL;
  json_decref (line);
  pthread_mutex_lock (&st->lock);
  if (text)
    append (st, text, strlen (text));
  else
    st->failed = true;
  pthread_cond_signal (&st->more);
  pthread_mutex_unlock (&st->lock);
  if (text)
    explicit_bzero (text, strlen (text));
  free (text);
}

/* How many bytes at the end of s begin a UTF-8 character they do not
 * finish. */
static size_t
unfinished (const char *s, size_t len)
{
  for (size_t k = 1; k <= 3 && k <= len; k++)
    {
      unsigned char b = (unsigned char)s[len - k];
      if (b < 0x80)
        return 0;
      if (b >= 0xc0)
        {
          size_t need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : 2;
          return need > k ? k : 0;
        }
    }
  return 0;
}

/* A piece of output as one line; with final, what is carried too. */
static void
piece (struct stream *st, int stream, const char *bytes, size_t len, bool final)
{
  int i = stream == 2;
  size_t n = st->carry_len[i] + len;
  char *joined = malloc (n ? n : 1);
  if (!joined)
    {
      pthread_mutex_lock (&st->lock);
      st->failed = true;
      pthread_mutex_unlock (&st->lock);
      return;
    }
  memcpy (joined, st->carry[i], st->carry_len[i]);
  if (len)
    memcpy (joined + st->carry_len[i], bytes, len);
  size_t keep = final ? 0 : unfinished (joined, n);
  memcpy (st->carry[i], joined + n - keep, keep);
  st->carry_len[i] = keep;
  char *text = NULL;
  size_t text_len = 0;
  if (n - keep > 0 && nsbox_utf8_sanitize (joined, n - keep, &text, &text_len) >= 0)
    append_json (
        st, json_pack ("{s:s,s:s%}", "stream", i ? "stderr" : "stdout", "data", text, text_len));
  else if (n - keep > 0)
    {
      pthread_mutex_lock (&st->lock);
      st->failed = true;
      pthread_mutex_unlock (&st->lock);
    }
  explicit_bzero (joined, n);
  free (joined);
  if (text)
    explicit_bzero (text, text_len);
  free (text);
}

static void
on_output (void *data, int stream, const char *bytes, size_t len)
{
  piece (data, stream, bytes, len, false);
}

static void *
work (void *arg)
{
  struct stream *st = arg;
  struct nsbox_serve_stream_job *j = &st->job;
  nsbox_run_options_set_output (j->options, on_output, st);
  nsbox_result *res = NULL;
  struct nsbox_error *err = NULL;
  bool warm = false;
  int r = j->sandbox ? nsbox_sandbox_run (j->sandbox, j->code, j->code_len, j->options, &res, &err)
                     : nsbox_pool_run_served (j->pool, j->code, j->code_len, j->options, &res,
                                              &warm, &err);
  nsbox_serve_release_slot (j->s);
  for (int stream = 1; stream <= 2; stream++)
    if (st->carry_len[stream - 1])
      piece (st, stream, NULL, 0, true);
  cleanup_free char *json = r >= 0 ? nsbox_result_to_json (res, &err) : NULL;
  enum nsbox_serve_outcome outcome = nsbox_serve_outcome_of (json ? res : NULL, err);
  nsbox_serve_record (j->s, j->profile, outcome, warm, nsbox_now_seconds () - j->start);
  nsbox_result_free (res);
  cleanup_free char *line = json ? xasprintf ("{\"result\":%s}", json) : NULL;
  if (json)
    explicit_bzero (json, strlen (json));
  if (line)
    {
      pthread_mutex_lock (&st->lock);
      append (st, line, strlen (line));
      pthread_mutex_unlock (&st->lock);
      explicit_bzero (line, strlen (line));
    }
  else
    append_json (st,
                 json_pack ("{s:s}", "error", err ? nsbox_error_message (err) : "out of memory"));
  nsbox_error_free (err);
  pthread_mutex_lock (&st->lock);
  st->done = true;
  pthread_cond_signal (&st->more);
  pthread_mutex_unlock (&st->lock);
  return NULL;
}

/* libmicrohttpd's reader: the next lines, waiting for them. */
static ssize_t
read_lines (void *cls, uint64_t pos, char *out, size_t max)
{
  (void)pos;
  struct stream *st = cls;
  pthread_mutex_lock (&st->lock);
  while (st->off == st->len && !st->done && !st->failed)
    pthread_cond_wait (&st->more, &st->lock);
  ssize_t n;
  if (st->off < st->len)
    {
      size_t take = st->len - st->off < max ? st->len - st->off : max;
      memcpy (out, st->buf + st->off, take);
      st->off += take;
      n = (ssize_t)take;
    }
  else
    n = st->failed ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
  pthread_mutex_unlock (&st->lock);
  return n;
}

static void
job_release (struct nsbox_serve_stream_job *j)
{
  if (j->held)
    nsbox_serve_sandbox_put (j->s->sandboxes, j->held);
  nsbox_run_options_free (j->options);
  if (j->code)
    explicit_bzero (j->code, j->code_len);
  free (j->code);
  if (j->cancel_fd >= 0)
    close (j->cancel_fd);
}

/* Once libmicrohttpd is done with the answer (sent, or the client gone):
 * the run is over by then or ends soon (its cancel fd sees the hang-up). */
static void
free_stream (void *cls)
{
  struct stream *st = cls;
  pthread_join (st->worker, NULL);
  job_release (&st->job);
  if (st->buf)
    explicit_bzero (st->buf, st->alloc);
  free (st->buf);
  pthread_cond_destroy (&st->more);
  pthread_mutex_destroy (&st->lock);
  free (st);
}

enum MHD_Result
nsbox_serve_stream (struct MHD_Connection *c, struct nsbox_serve_stream_job *job)
{
  struct stream *st = calloc (1, sizeof *st);
  if (!st)
    {
      nsbox_serve_release_slot (job->s);
      job_release (job);
      return nsbox_serve_respond_error (c, 500, "out of memory");
    }
  st->job = *job;
  pthread_mutex_init (&st->lock, NULL);
  pthread_cond_init (&st->more, NULL);
  nsbox_run_options_set_cancel_fd (st->job.options, st->job.cancel_fd, job->s->tcp);
  int r = pthread_create (&st->worker, NULL, work, st);
  if (r != 0)
    {
      nsbox_serve_release_slot (job->s);
      job_release (&st->job);
      pthread_cond_destroy (&st->more);
      pthread_mutex_destroy (&st->lock);
      free (st);
      return nsbox_serve_respond_error (c, 500, "start the run's thread: %s", strerror (r));
    }
  struct MHD_Response *resp = nsbox_mhd.create_response_from_callback (MHD_SIZE_UNKNOWN, 64 * 1024,
                                                                       read_lines, st, free_stream);
  if (!resp)
    {
      free_stream (st);
      return MHD_NO;
    }
  nsbox_mhd.add_response_header (resp, "Content-Type", "application/x-ndjson");
  nsbox_mhd.add_response_header (resp, "Cache-Control", "no-store");
  nsbox_serve_add_node_headers (resp, 200);
  enum MHD_Result ret = nsbox_mhd.queue_response (c, 200, resp);
  nsbox_mhd.destroy_response (resp);
  return ret;
}
