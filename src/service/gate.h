/* The admission and audit gate: every run nsbox starts, from the CLI, the
 * library, the pool, the server and the MCP server, passes through
 * nsbox_gate_run. It opens the audit log first (no run goes unaudited),
 * asks the session's quotas (a refused run starts nothing and is still
 * audited), runs, settles the quotas with what the run used, and appends
 * the run's record. */
#ifndef NSBOX_GATE_H
#define NSBOX_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "result.h"
#include "util.h"

struct nsbox_gate
{
  const nsbox_config *config; /* the audit log and quota keys */
  const char *session;        /* the session named in the record; NULL: the config's */
  const char *client;         /* who asked (a server's client), or NULL */
  const char *quota_scope;    /* counts the session's quotas in "SCOPE|SESSION", or NULL */
  const char *sandbox_id;     /* a live sandbox's run: named in the record */
  const char *code;
  size_t code_len;
  uint64_t timeout_ms; /* what the run may take, reserved at admission */
};

/* The run behind the gate: fills *out (0) or fails (-errno with err). */
typedef int (*nsbox_gate_fn) (void *ctx, nsbox_result **out, struct nsbox_error **err);

/* Runs `run` behind the gate. 0 with *out set, *refused when a quota
 * refused it (then *out says which and `run` was not called); or -errno
 * with err. Not cancellable while it runs: a cancelled caller would leave
 * its sandbox with nobody to enforce its limits. */
int nsbox_gate_run (const struct nsbox_gate *gate, nsbox_gate_fn run, void *ctx, nsbox_result **out,
                    bool *refused, struct nsbox_error **err) NSBOX_INTERNAL;

#endif
