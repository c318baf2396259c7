/* Seccomp policy (YAML, see README.md) -> classic BPF program. */
#ifndef NSBOX_SECCOMP_H
#define NSBOX_SECCOMP_H

#include <linux/filter.h>
#include <stddef.h>

#include "nsbox.h"
#include "util.h"

struct nsbox_bpf
{
  struct sock_filter *insns; /* malloc'ed */
  unsigned short len;
};

/* Receives one warning, e.g. "policy.yaml:12:5: unknown syscall 'mseal' skipped". */
typedef void (*nsbox_warning_fn) (const char *message, void *data);

/* Compiles the policy text (YAML; `name` is used in messages, e.g. the file
 * path) for the native architecture. Unknown syscall names are skipped and
 * reported through `warn` (may be NULL). Malformed policies fail with
 * -EBADMSG and a "name:line:col: ..." message. */
int nsbox_seccomp_compile (const char *text, size_t len, const char *name, struct nsbox_bpf *out,
                           nsbox_warning_fn warn, void *warn_data,
                           struct nsbox_error **err) NSBOX_INTERNAL;

/* Reads and compiles a policy file. */
int nsbox_seccomp_compile_file (const char *path, struct nsbox_bpf *out, nsbox_warning_fn warn,
                                void *warn_data, struct nsbox_error **err) NSBOX_INTERNAL;

/* Compiles the built-in policy (policies/default.yaml embedded at build). */
int nsbox_seccomp_compile_default (struct nsbox_bpf *out, nsbox_warning_fn warn, void *warn_data,
                                   struct nsbox_error **err) NSBOX_INTERNAL;

void nsbox_bpf_release (struct nsbox_bpf *bpf) NSBOX_INTERNAL;

/* The default policy compiled at build time by bpfgen. */
extern const struct sock_filter nsbox_default_bpf_insns[] NSBOX_INTERNAL;
extern const unsigned short nsbox_default_bpf_len NSBOX_INTERNAL;

/* The embedded default policy text (NUL-terminated). */
extern const char nsbox_default_policy[] NSBOX_INTERNAL;

#endif
