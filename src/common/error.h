/* The error object of the library and helpers to fill it: functions
 * return -errno and fill an optional struct nsbox_error **. */
#ifndef NSBOX_ERROR_H
#define NSBOX_ERROR_H

#include "nsbox.h"
#include "util.h"

struct nsbox_error
{
  int code; /* positive errno */
  char *message;
};

/* Fills *err (when err is non-NULL and *err is NULL) with a message made
 * from fmt. Returns -code. */
int nsbox_error_set (struct nsbox_error **err, int code, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4))) NSBOX_INTERNAL;

/* Like nsbox_error_set, followed by ": <strerror(code)>". */
int nsbox_error_sys (struct nsbox_error **err, int code, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4))) NSBOX_INTERNAL;

/* Prepends "prefix: " to an existing error message; returns -code. */
int nsbox_error_prefix (struct nsbox_error **err, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3))) NSBOX_INTERNAL;

/* Appends "; more" to an existing error message; returns -code. */
int nsbox_error_append (struct nsbox_error **err, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3))) NSBOX_INTERNAL;

/* Hands `e` to the caller: into *err when it wants one and has none yet,
 * else frees it. */
void nsbox_error_pass (struct nsbox_error **err, struct nsbox_error *e) NSBOX_INTERNAL;

/* "out of memory" with ENOMEM; returns -ENOMEM. */
int nsbox_error_oom (struct nsbox_error **err) NSBOX_INTERNAL;

static inline void
nsbox_error_freep (struct nsbox_error **e)
{
  nsbox_error_free (*e);
}

#define cleanup_error __attribute__ ((cleanup (nsbox_error_freep)))

#endif
