/* What nsbox serve asks of a live sandbox (sandbox.c) beyond the public
 * API: its state now, from the host's side. */
#ifndef NSBOX_SANDBOX_PRIVATE_H
#define NSBOX_SANDBOX_PRIVATE_H

#include <stdbool.h>
#include <stdint.h>

#include "nsbox.h"
#include "util.h"

struct nsbox_sandbox_state
{
  uint64_t runs;             /* runs asked for so far */
  uint64_t age_ms, idle_ms;  /* since it was opened; since its last run ended (0: busy) */
  uint64_t expires_in_ms;    /* until it ends unless a run comes (UINT64_MAX: never) */
  uint64_t lifetime_left_ms; /* until its sandbox-max-lifetime (UINT64_MAX: none) */
  uint64_t memory_bytes;     /* its processes' proportional set sizes; 0 once gone */
  bool busy;                 /* a run is in progress */
  bool warm;                 /* taken from the warm pool, not started when opened */
  bool gone;                 /* destroyed: why says why */
  char why[160];
};

/* Never blocks on a run in progress: a moment's lock only, and (with
 * memory, else memory_bytes is 0) a read of /proc per process. */
void nsbox_sandbox_get_state (nsbox_sandbox *sandbox, struct nsbox_sandbox_state *state,
                              bool memory) NSBOX_INTERNAL;

/* The sandbox's id becomes NODE.HEX: a server's node names the sandboxes
 * it opens, for a balancer's routing (node: a DNS label, checked by the
 * caller). */
void nsbox_sandbox_options_set_node (nsbox_sandbox_options *options,
                                     const char *node) NSBOX_INTERNAL;

/* 0, or -EINVAL when an option asks for more than the configuration's
 * key of the same name (a server's client may only shorten them). */
int nsbox_sandbox_options_within (const nsbox_sandbox_options *options, const nsbox_config *config,
                                  struct nsbox_error **err) NSBOX_INTERNAL;

#endif
