/* The warm pool's internals shared with `nsbox serve` (its metrics and
 * health) and the tests. The API itself is in include/nsbox.h. */
#ifndef NSBOX_POOL_H
#define NSBOX_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nsbox.h"
#include "supervise.h"
#include "util.h"

struct nsbox_pool_stats
{
  uint64_t warm, cold, errors;            /* runs served */
  uint64_t started;                       /* entries that reached their stdin read */
  uint64_t discarded;                     /* entries destroyed without a run */
  uint64_t start_failures;                /* entries that failed to start */
  uint64_t sandboxes_warm;                /* live sandboxes taken from the pool */
  size_t ready, starting, size;           /* now: entries for single runs */
  size_t sandboxes_ready, sandboxes_size; /* now: entries for live sandboxes */
  bool failing;                           /* a shelf's last start failed, failing_why says why */
  char failing_why[224];                  /* a shelf's reason, after what the shelf is */
};

void nsbox_pool_get_stats (nsbox_pool *pool, struct nsbox_pool_stats *stats) NSBOX_INTERNAL;

/* A connected socket whose hang-up kills the run (nsbox serve: the
 * client's connection); the run then fails with ECANCELED. half_close_is_gone:
 * a shutdown of the peer's sending side counts as a hang-up too (TCP, where
 * a closed peer shows only that until a write fails). */
/* Who asked for the run (a server's client), for the audit log. */
int nsbox_run_options_set_client (nsbox_run_options *options, const char *client) NSBOX_INTERNAL;

/* Whose sessions the run's quotas count in (nsbox serve: the peer's uid on
 * its unix socket), so that callers who name the same session do not share
 * or spend each other's quotas; NULL: the session alone. */
int nsbox_run_options_set_quota_scope (nsbox_run_options *options,
                                       const char *scope) NSBOX_INTERNAL;

void nsbox_run_options_set_cancel_fd (nsbox_run_options *options, int fd,
                                      bool half_close_is_gone) NSBOX_INTERNAL;

/* nsbox_pool_run, telling in *warm whether a pooled sandbox took the run,
 * also when it failed (the result is not there to say it). */
int nsbox_pool_run_served (nsbox_pool *pool, const char *code, size_t code_len,
                           const nsbox_run_options *options, nsbox_result **result, bool *warm,
                           struct nsbox_error **err) NSBOX_INTERNAL;

/* Whether the run options fit the pool (they may only lower its limits):
 * 0, or -EINVAL with the reason. */
int nsbox_pool_check_options (nsbox_pool *pool, const nsbox_run_options *options,
                              struct nsbox_error **err) NSBOX_INTERNAL;

/* How many entries wait for a run now. */
size_t nsbox_pool_ready (nsbox_pool *pool) NSBOX_INTERNAL;

/* A live sandbox's launch, started and checked like a single run's entry
 * (its driver waiting for code, nothing done since), to be owned by the
 * caller; NULL when none is ready (or in a forked copy of the process).
 * The first call starts the filling of the pool's live entries. It
 * dies with the pool's refill thread that started it: the caller
 * destroys it before nsbox_pool_free. */
struct nsbox_launch;
struct nsbox_launch *nsbox_pool_take_sandbox (nsbox_pool *pool) NSBOX_INTERNAL;

/* The pool's own configuration (its image resolved to a rootfs). */
const nsbox_config *nsbox_pool_config (nsbox_pool *pool) NSBOX_INTERNAL;

/* What bounds a run of `code` with `options` in a sandbox of the pool's
 * configuration (no output directory: -1): its timeout and output cap,
 * which the options may only lower (-EINVAL saying which is too high). */
int nsbox_pool_dispatch (nsbox_pool *pool, const nsbox_run_options *options, const char *code,
                         size_t code_len, struct nsbox_dispatch *dispatch,
                         struct nsbox_error **err) NSBOX_INTERNAL;

#endif
