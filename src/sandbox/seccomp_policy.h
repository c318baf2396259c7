/* The seccomp policy's front end: YAML policy text -> libseccomp filter
 * context with non-overlapping rules (POLICY.md says how). */
#ifndef NSBOX_SECCOMP_POLICY_H
#define NSBOX_SECCOMP_POLICY_H

#include <seccomp.h>
#include <stddef.h>

#include "seccomp.h"
#include "util.h"

/* Parses and checks the policy (`name` is used in messages, e.g. the file
 * path) and builds its rules for the native architecture into a new
 * context (*out; the caller releases it). Unknown syscall names are skipped
 * and reported through `warn` (may be NULL). Malformed policies fail with
 * -EBADMSG and a "name:line:col: ..." message. */
int nsbox_seccomp_policy_build (const char *text, size_t len, const char *name,
                                nsbox_warning_fn warn, void *warn_data, scmp_filter_ctx *out,
                                struct nsbox_error **err) NSBOX_INTERNAL;

#endif
