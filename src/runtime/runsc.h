/* runtime runsc: the same job under gVisor. An OCI bundle in a private
 * temporary directory, `runsc run` started by a small init of ours in a PID
 * namespace (and the run's cgroups), supervised by nsbox_supervise. */
#ifndef NSBOX_RUNSC_H
#define NSBOX_RUNSC_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "limit.h"
#include "result.h"
#include "sandbox.h"
#include "spawn.h"
#include "supervise.h"

/* The configuration nsbox_limits_prepare sees for a runsc run: the pids
 * limit becomes a host-side backstop for gVisor's own threads and stub
 * processes (with the ptrace platform a sandboxed process costs a stub
 * process and up to one stub thread per Sentry thread: a fork bomb at
 * pids-limit 32 was seen to need over 512 host tasks, and the Sentry
 * panics when it cannot make one: 256 + 32 per process); the configured
 * number is enforced inside gVisor as RLIMIT_NPROC. */
void nsbox_runsc_host_limits (struct nsbox_config *limits_view) NSBOX_INTERNAL;

/* One runsc job between its start and its end. */
struct nsbox_runsc_job;

/* Starts the planned job under runsc: the bundle, then `runsc run` in its
 * init, the program waiting for its stdin. `plan` and `limits` come from the
 * native preparation (rootfs, environment, rlimits, run cgroups); the
 * result's limits are adjusted to what enforced them under gVisor. An
 * unusable runsc is an error (never a fallback). */
int nsbox_runsc_start (const struct nsbox_plan *plan, struct nsbox_limits *limits,
                       const struct nsbox_config *config, struct nsbox_runsc_job **job,
                       struct nsbox_child *child, struct nsbox_streams *streams,
                       struct nsbox_error **err) NSBOX_INTERNAL;

/* Whether the helper inside gVisor has started the program (its report
 * file holds "started" and no failed step). */
bool nsbox_runsc_helper_started (const struct nsbox_runsc_job *job) NSBOX_INTERNAL;

/* Feeds the code, supervises (the timeout counted from now) and concludes;
 * frees the job and removes its work directory. */
int nsbox_runsc_finish (struct nsbox_runsc_job *job, struct nsbox_child *child,
                        struct nsbox_streams *streams, struct nsbox_limits *limits,
                        const struct nsbox_dispatch *dispatch, struct nsbox_result *res,
                        struct nsbox_error **err) NSBOX_INTERNAL;

/* After the child is killed and reaped: deletes what runsc left and frees
 * the job. */
void nsbox_runsc_discard (struct nsbox_runsc_job *job) NSBOX_INTERNAL;

/* NSBOX_RUNSC, else `runsc` in the launcher's PATH, else the usual
 * directories: its absolute path in *path. */
int nsbox_runsc_find (char **path, struct nsbox_error **err) NSBOX_INTERNAL;

/* For runtime auto (runsc_check.c): whether runsc works here. The answer of a self-check
 * (a trivial job in the configured rootfs) is cached per user, keyed by the
 * runsc binary and the kernel. */
bool nsbox_runsc_usable (const struct nsbox_config *config) NSBOX_INTERNAL;

#endif
