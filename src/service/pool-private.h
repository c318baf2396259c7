/* What the files of the warm pool share: the options of a pool and of a
 * run (pool_options.c parses them; pool.c reads them). */
#ifndef NSBOX_POOL_PRIVATE_H
#define NSBOX_POOL_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pool.h"

#define POOL_MAX_SIZE 1024
#define POOL_MAX_REFILL 64

struct nsbox_pool_options
{
  uint64_t size;
  uint64_t sandboxes; /* entries for live sandboxes (nsbox_sandbox_open) */
  uint64_t max_age_ms;
  uint64_t refill;
};

struct nsbox_run_options
{
  uint64_t timeout_ms;       /* 0: the pool's */
  uint64_t max_output_bytes; /* UINT64_MAX: the pool's */
  int cancel_fd;             /* nsbox_run_options_set_cancel_fd, or -1 */
  bool cancel_on_half_close;
  nsbox_output_fn output; /* nsbox_run_options_set_output, or NULL */
  void *output_data;
  char **inputs; /* "PATH:NAME": the run is served cold with them */
  size_t inputs_len;
  char *output_dir;  /* NULL: the pool's */
  char *session;     /* NULL: the pool's */
  char *client;      /* who asked (a server's client), for the audit log */
  char *quota_scope; /* whose sessions its quotas count in, or NULL */
};

#endif
