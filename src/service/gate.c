/* The admission and audit gate of every run; see gate.h. */
#include "gate.h"

#include <pthread.h>
#include <stdlib.h>

#include "audit.h"
#include "error.h"
#include "launch.h"
#include "quota.h"

int
nsbox_gate_run (const struct nsbox_gate *g, nsbox_gate_fn run, void *ctx, nsbox_result **out,
                bool *refused, struct nsbox_error **err)
{
  int old;
  pthread_setcancelstate (PTHREAD_CANCEL_DISABLE, &old);
  if (refused)
    *refused = false;
  struct nsbox_audit_run audit = {
    .session = g->session,
    .client = g->client,
    .sandbox_id = g->sandbox_id,
    .code = g->code,
    .code_len = g->code_len,
    .started_ms = nsbox_realtime_ms (),
  };
  int audit_fd = -1;
  int r = g->config ? nsbox_audit_open (g->config, &audit_fd, err) : 0;
  if (r >= 0)
    {
      struct nsbox_error *run_err = NULL;
      struct nsbox_quota_ticket ticket = { 0 };
      const char *session = g->session ? g->session : g->config ? g->config->session : NULL;
      cleanup_free char *scoped
          = g->quota_scope ? xasprintf ("%s|%s", g->quota_scope, session ? session : "") : NULL;
      r = g->config && out ? nsbox_quota_admit (g->config, scoped ? scoped : session, g->timeout_ms,
                                                &ticket, out, &run_err)
                           : 0;
      if (r == 0)
        {
          r = run (ctx, out, &run_err);
          nsbox_quota_leave (&ticket, r >= 0 ? *out : NULL);
        }
      else if (r == 1)
        {
          if (refused)
            *refused = true;
          r = 0;
        }
      r = nsbox_audit_after (audit_fd, g->config, &audit, r, out, &run_err);
      nsbox_error_pass (err, run_err);
    }
  pthread_setcancelstate (old, NULL);
  return r;
}

struct cold_run
{
  const nsbox_config *config;
  const char *code;
  size_t code_len;
};

static int
cold_run (void *ctx, nsbox_result **out, struct nsbox_error **err)
{
  const struct cold_run *c = ctx;
  return nsbox_launch_run (c->config, c->code, c->code_len, out, err);
}

int
nsbox_run (const nsbox_config *c, const char *code, size_t code_len, nsbox_result **out,
           struct nsbox_error **err)
{
  struct cold_run run = { .config = c, .code = code, .code_len = code_len };
  struct nsbox_gate gate = {
    .config = c,
    .code = code,
    .code_len = code_len,
    .timeout_ms = c ? c->timeout_ms : 0,
  };
  return nsbox_gate_run (&gate, cold_run, &run, out, NULL, err);
}
