/* The names a seccomp policy may use where it takes a number, an action or
 * an errno (POLICY.md). Each lookup is by exact name: true and *value, or
 * false. */
#ifndef NSBOX_SECCOMP_NAMES_H
#define NSBOX_SECCOMP_NAMES_H

#include <stdbool.h>
#include <stdint.h>

#include "util.h"

/* AF_INET, S_IFREG, PER_LINUX and the rest of what a policy for a
 * sandboxed interpreter plausibly needs. */
bool nsbox_policy_constant (const char *name, uint64_t *value) NSBOX_INTERNAL;
/* allow, log, trap, kill_thread, kill_process: the SCMP_ACT_* value. */
bool nsbox_policy_action (const char *name, uint64_t *value) NSBOX_INTERNAL;
/* EWOULDBLOCK, ENOTSUP, EDEADLOCK. */
bool nsbox_policy_errno_alias (const char *name, uint64_t *value) NSBOX_INTERNAL;

#endif
