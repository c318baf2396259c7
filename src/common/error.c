#include "error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Static fallback so an out-of-memory condition is still reported. */
static struct nsbox_error oom_error = { ENOMEM, (char *)"out of memory" };

static int
error_store (struct nsbox_error **err, int code, char *message)
{
  if (code <= 0)
    code = EIO;
  if (!err || *err)
    {
      free (message);
      return -code;
    }
  if (!message)
    {
      *err = &oom_error;
      return -code;
    }
  struct nsbox_error *e = malloc (sizeof *e);
  if (!e)
    {
      free (message);
      *err = &oom_error;
      return -code;
    }
  e->code = code;
  e->message = message;
  *err = e;
  return -code;
}

int
nsbox_error_set (struct nsbox_error **err, int code, const char *fmt, ...)
{
  char *message = NULL;
  va_list ap;
  va_start (ap, fmt);
  if (vasprintf (&message, fmt, ap) < 0)
    message = NULL;
  va_end (ap);
  return error_store (err, code, message);
}

int
nsbox_error_oom (struct nsbox_error **err)
{
  return error_store (err, ENOMEM, strdup ("out of memory"));
}

int
nsbox_error_sys (struct nsbox_error **err, int code, const char *fmt, ...)
{
  cleanup_free char *head = NULL;
  char *message = NULL;
  va_list ap;
  va_start (ap, fmt);
  if (vasprintf (&head, fmt, ap) < 0)
    head = NULL;
  va_end (ap);
  if (head && asprintf (&message, "%s: %s", head, strerror (code)) < 0)
    message = NULL;
  return error_store (err, code, message);
}

int
nsbox_error_prefix (struct nsbox_error **err, const char *fmt, ...)
{
  if (!err || !*err)
    return -EIO;
  struct nsbox_error *e = *err;
  if (e == &oom_error)
    return -ENOMEM;
  cleanup_free char *head = NULL;
  va_list ap;
  va_start (ap, fmt);
  if (vasprintf (&head, fmt, ap) < 0)
    head = NULL;
  va_end (ap);
  char *message = NULL;
  if (head && asprintf (&message, "%s: %s", head, e->message) >= 0)
    {
      free (e->message);
      e->message = message;
    }
  return -e->code;
}

int
nsbox_error_append (struct nsbox_error **err, const char *fmt, ...)
{
  if (!err || !*err || *err == &oom_error)
    return -ENOMEM;
  struct nsbox_error *e = *err;
  cleanup_free char *tail = NULL;
  va_list ap;
  va_start (ap, fmt);
  if (vasprintf (&tail, fmt, ap) < 0)
    tail = NULL;
  va_end (ap);
  char *message = tail ? xasprintf ("%s; %s", e->message, tail) : NULL;
  if (message)
    {
      free (e->message);
      e->message = message;
    }
  return -e->code;
}

const char *
nsbox_error_message (const struct nsbox_error *error)
{
  return error ? error->message : "";
}

int
nsbox_error_errno (const struct nsbox_error *error)
{
  return error ? error->code : 0;
}

void
nsbox_error_free (struct nsbox_error *error)
{
  if (!error || error == &oom_error)
    return;
  free (error->message);
  free (error);
}
