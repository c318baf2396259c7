/* The error object of the library and helpers to fill it. */
#ifndef NSBOX_ERROR_H
#define NSBOX_ERROR_H

#include "nsbox.h"

struct nsbox_error
{
  int code; /* positive errno */
  char *message;
};

/* Fills *err (when err is non-NULL and *err is NULL) with a message made
 * from fmt; appends ": strerror(code)" when with_strerror. Returns -code. */
int nsbox_error_set (struct nsbox_error **err, int code, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4), visibility ("hidden")));

/* Like nsbox_error_set, followed by ": <strerror(code)>". */
int nsbox_error_sys (struct nsbox_error **err, int code, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4), visibility ("hidden")));

/* Prepends "prefix: " to an existing error message; returns -code. */
int nsbox_error_prefix (struct nsbox_error **err, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3), visibility ("hidden")));

#define cleanup_error __attribute__ ((cleanup (nsbox_error_freep)))
static inline void
nsbox_error_freep (struct nsbox_error **e)
{
  nsbox_error_free (*e);
}

#endif
