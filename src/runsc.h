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

/* The configuration nsbox_limits_prepare sees for a runsc run: the pids
 * limit becomes a host-side backstop for gVisor's own threads and stub
 * processes (about five host tasks per sandboxed process); the configured
 * number is enforced inside gVisor as RLIMIT_NPROC. */
void nsbox_runsc_host_limits (struct nsbox_config *limits_view) NSBOX_INTERNAL;

/* Runs the planned job under runsc. `plan` and `limits` come from the native
 * preparation (rootfs, environment, rlimits, run cgroups); the result's
 * limits are adjusted to what enforced them under gVisor. An unusable runsc
 * is an error (never a fallback). */
int nsbox_runsc_execute (const struct nsbox_plan *plan, struct nsbox_limits *limits,
                         const struct nsbox_config *config, const char *code, size_t code_len,
                         struct nsbox_result *res, struct nsbox_error **err) NSBOX_INTERNAL;

/* NSBOX_RUNSC, else `runsc` in the launcher's PATH, else the usual
 * directories: its absolute path in *path. */
int nsbox_runsc_find (char **path, struct nsbox_error **err) NSBOX_INTERNAL;

/* For runtime auto (runsc_check.c): whether runsc works here. The answer of a self-check
 * (a trivial job in the configured rootfs) is cached per user, keyed by the
 * runsc binary and the kernel. */
bool nsbox_runsc_usable (const struct nsbox_config *config) NSBOX_INTERNAL;

#endif
