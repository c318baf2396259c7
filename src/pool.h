/* The warm pool's internals shared with `nsbox serve` (its metrics and
 * health) and the tests. The API itself is in include/nsbox.h. */
#ifndef NSBOX_POOL_H
#define NSBOX_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "nsbox.h"
#include "util.h"

struct nsbox_pool_stats
{
  uint64_t warm, cold, errors;  /* runs served */
  uint64_t started;             /* entries that reached their stdin read */
  uint64_t discarded;           /* entries destroyed without a run */
  uint64_t start_failures;      /* entries that failed to start */
  size_t ready, starting, size; /* now */
};

void nsbox_pool_get_stats (nsbox_pool *pool, struct nsbox_pool_stats *stats) NSBOX_INTERNAL;

/* How many entries wait for a run now. */
size_t nsbox_pool_ready (nsbox_pool *pool) NSBOX_INTERNAL;

#endif
