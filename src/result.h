/* Internal view of struct nsbox_result. */
#ifndef NSBOX_RESULT_H
#define NSBOX_RESULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"
#include "nsbox.h"

struct nsbox_result
{
  int exit_code; /* status, or 128+signal */
  int signal;    /* 0 when none */
  bool timed_out;
  bool oom_killed;
  char *stdout_buf;
  size_t stdout_len;
  char *stderr_buf;
  size_t stderr_len;
  bool stdout_truncated;
  bool stderr_truncated;
  uint64_t duration_ms;
  uint64_t cpu_ms;
  uint64_t memory_peak_bytes;
  enum nsbox_mechanism limits[NSBOX_LIMIT_COUNT_];
  const char *runtime; /* static string */
  bool warm;           /* served by a pooled sandbox started ahead of time */
};

/* Copies `len` bytes as valid UTF-8 into a new NUL-terminated buffer:
 * invalid sequences become U+FFFD, NUL bytes are kept (hence *out_len). */
int nsbox_utf8_sanitize (const char *in, size_t len, char **out, size_t *out_len) NSBOX_INTERNAL;

#endif
