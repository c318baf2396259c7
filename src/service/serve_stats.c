/* `nsbox serve`'s own account: the outcome and latency of every run,
 * GET /v1/health and GET /metrics. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mhd.h"
#include "nsbox.h"
#include "pool.h"
#include "serve_api.h"
#include "serve_conn.h"
#include "util.h"

/* Upper bounds of the latency histogram's buckets, in seconds. */
static const double bucket_bounds[NSBOX_SERVE_BUCKETS]
    = { 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10 };

static const char *const outcome_names[NSBOX_OUTCOME_COUNT_]
    = { "ok", "nonzero", "timeout", "oom", "error", "cancelled", "refused" };

void
nsbox_serve_record (struct nsbox_server *s, size_t profile, enum nsbox_serve_outcome outcome,
                    bool warm, double seconds)
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

enum nsbox_serve_outcome
nsbox_serve_outcome_of (const nsbox_result *res, const struct nsbox_error *err)
{
  if (!res)
    return nsbox_error_errno (err) == ECANCELED ? NSBOX_OUTCOME_CANCELLED : NSBOX_OUTCOME_ERROR;
  if (nsbox_result_quota_refusal (res))
    return NSBOX_OUTCOME_REFUSED;
  if (nsbox_result_timed_out (res))
    return NSBOX_OUTCOME_TIMEOUT;
  if (nsbox_result_oom_killed (res))
    return NSBOX_OUTCOME_OOM;
  return nsbox_result_exit_code (res) == 0 ? NSBOX_OUTCOME_OK : NSBOX_OUTCOME_NONZERO;
}

/* ---- GET /v1/health, GET /metrics ---- */

enum MHD_Result
nsbox_serve_health (struct nsbox_server *s, struct MHD_Connection *c, bool brief)
{
  json_t *profiles = json_object ();
  char failing[384] = "";
  for (size_t i = 0; profiles && i < s->n_profiles; i++)
    {
      struct nsbox_pool_stats st;
      nsbox_pool_get_stats (s->profiles[i].pool, &st);
      if (st.failing && !failing[0])
        snprintf (failing, sizeof failing, "the pool of profile '%s' cannot start sandboxes: %s",
                  s->profiles[i].name, st.failing_why);
      /* Its limits, for a client's own time bound on a run. */
      const nsbox_config *config = s->profiles[i].config;
      json_object_set_new (
          profiles, s->profiles[i].name,
          json_pack ("{s:I,s:I,s:I,s:I,s:I,s:I}", "ready", (json_int_t)st.ready, "starting",
                     (json_int_t)st.starting, "size", (json_int_t)st.size, "sandboxes_ready",
                     (json_int_t)st.sandboxes_ready, "timeout_ms", (json_int_t)config->timeout_ms,
                     "max_output_bytes", (json_int_t)config->max_output_bytes));
    }
  pthread_mutex_lock (&s->lock);
  bool draining = s->draining;
  json_int_t running = (json_int_t)s->running, queued = (json_int_t)s->queued;
  pthread_mutex_unlock (&s->lock);
  const char *status = draining ? "draining" : failing[0] ? "failing" : "ok";
  bool ready = !draining && !failing[0];
  json_t *o = json_pack ("{s:s,s:s,s:b}", "status", status, "node", nsbox_serve_node (), "draining",
                         draining);
  /* A probe without the token is not told what failed (paths, errors). */
  if (o && !ready)
    json_object_set_new (o, "reason",
                         json_string (draining ? "the node is draining (SIGTERM): it takes no "
                                                 "new work"
                                      : brief  ? "a pool cannot start sandboxes"
                                               : failing));
  if (o && !brief)
    {
      json_object_set_new (o, "running", json_integer (running));
      json_object_set_new (o, "queued", json_integer (queued));
      json_object_set_new (o, "profiles", profiles ? json_incref (profiles) : json_null ());
    }
  json_decref (profiles);
  cleanup_free char *text = o ? json_dumps (o, JSON_COMPACT) : NULL;
  json_decref (o);
  if (!text)
    return MHD_NO;
  return nsbox_serve_respond (c, ready ? 200 : 503, "application/json", text, strlen (text),
                              ready ? 0 : 1);
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

enum MHD_Result
nsbox_serve_metrics (struct nsbox_server *s, struct MHD_Connection *c)
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
       "nsbox_rejected_total{reason=\"peer_connections\"} %" PRIu64 "\n"
       "nsbox_rejected_total{reason=\"max_sandboxes\"} %" PRIu64 "\n"
       "nsbox_rejected_total{reason=\"other_node\"} %" PRIu64 "\n",
       s->rejected_busy, s->rejected_draining, s->bad_requests + cst.answered, s->unauthorized,
       cst.refused_total, cst.refused_peer, s->rejected_sandboxes, s->rejected_elsewhere);
  add (&t,
       "# HELP nsbox_node_info The node's name (--node-name).\n# TYPE nsbox_node_info gauge\n"
       "nsbox_node_info{node=\"%s\"} 1\n"
       "# HELP nsbox_draining 1 once SIGTERM began the drain: the node takes no new work.\n"
       "# TYPE nsbox_draining gauge\nnsbox_draining %d\n",
       nsbox_serve_node (), s->draining ? 1 : 0);
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
  add (&t, "# HELP nsbox_pool_sandboxes_ready Live sandboxes started and waiting to be "
           "opened.\n"
           "# TYPE nsbox_pool_sandboxes_ready gauge\n");
  for (size_t p = 0; p < s->n_profiles; p++)
    add (&t, "nsbox_pool_sandboxes_ready{profile=\"%s\"} %zu\n", s->profiles[p].name,
         st[p].sandboxes_ready);
  add (&t, "# HELP nsbox_pool_sandboxes_size Live sandboxes each pool keeps started.\n"
           "# TYPE nsbox_pool_sandboxes_size gauge\n");
  for (size_t p = 0; p < s->n_profiles; p++)
    add (&t, "nsbox_pool_sandboxes_size{profile=\"%s\"} %zu\n", s->profiles[p].name,
         st[p].sandboxes_size);
  add (&t, "# HELP nsbox_pool_discarded_total Pooled sandboxes destroyed without a run.\n"
           "# TYPE nsbox_pool_discarded_total counter\n");
  for (size_t p = 0; p < s->n_profiles; p++)
    add (&t, "nsbox_pool_discarded_total{profile=\"%s\"} %" PRIu64 "\n", s->profiles[p].name,
         st[p].discarded);
  struct nsbox_serve_sandbox_stats sb;
  nsbox_serve_sandboxes_stats (s->sandboxes, &sb);
  add (&t,
       "# HELP nsbox_sandboxes_open Live sandboxes open now.\n"
       "# TYPE nsbox_sandboxes_open gauge\nnsbox_sandboxes_open %zu\n"
       "# HELP nsbox_sandboxes_max Live sandboxes the server holds at most (--max-sandboxes).\n"
       "# TYPE nsbox_sandboxes_max gauge\nnsbox_sandboxes_max %zu\n"
       "# HELP nsbox_sandboxes_opened_total Live sandboxes opened.\n"
       "# TYPE nsbox_sandboxes_opened_total counter\nnsbox_sandboxes_opened_total %" PRIu64 "\n"
       "# HELP nsbox_sandboxes_ended_total Live sandboxes ended, by why.\n"
       "# TYPE nsbox_sandboxes_ended_total counter\n",
       sb.open, sb.max, sb.opened);
  for (int e = 0; e < NSBOX_SANDBOX_END_COUNT_; e++)
    add (&t, "nsbox_sandboxes_ended_total{reason=\"%s\"} %" PRIu64 "\n",
         nsbox_serve_sandbox_end_name ((enum nsbox_sandbox_end)e), sb.ended[e]);
  if (sb.next_expiry_ms != UINT64_MAX)
    add (&t,
         "# HELP nsbox_sandbox_next_expiry_seconds Until the soonest end of an open live "
         "sandbox, if no run comes first.\n"
         "# TYPE nsbox_sandbox_next_expiry_seconds gauge\nnsbox_sandbox_next_expiry_seconds "
         "%.3f\n",
         sb.next_expiry_ms / 1000.0);
  enum MHD_Result r = t.failed
                          ? MHD_NO
                          : nsbox_serve_respond (c, 200, "text/plain; version=0.0.4; charset=utf-8",
                                                 t.buf ? t.buf : "", t.len, 0);
  free (t.buf);
  return r;
}
