/* The error object; see error.h. */
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
  va_list ap;
  va_start (ap, fmt);
  char *message = vxasprintf (fmt, ap);
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
  va_list ap;
  va_start (ap, fmt);
  cleanup_free char *head = vxasprintf (fmt, ap);
  va_end (ap);
  return error_store (err, code, head ? xasprintf ("%s: %s", head, strerror (code)) : NULL);
}

/* Replaces e's message by "HEAD: MESSAGE" (or "MESSAGE; TAIL"); out of
 * memory, the message stays as it was. */
static int
error_rewrite (struct nsbox_error *e, const char *head, const char *tail)
{
  char *message = head   ? xasprintf ("%s: %s", head, e->message)
                  : tail ? xasprintf ("%s; %s", e->message, tail)
                         : NULL;
  if (message)
    {
      free (e->message);
      e->message = message;
    }
  return -e->code;
}

int
nsbox_error_prefix (struct nsbox_error **err, const char *fmt, ...)
{
  if (!err || !*err)
    return -EIO;
  if (*err == &oom_error)
    return -ENOMEM;
  va_list ap;
  va_start (ap, fmt);
  cleanup_free char *head = vxasprintf (fmt, ap);
  va_end (ap);
  return error_rewrite (*err, head, NULL);
}

int
nsbox_error_append (struct nsbox_error **err, const char *fmt, ...)
{
  if (!err || !*err || *err == &oom_error)
    return -ENOMEM;
  va_list ap;
  va_start (ap, fmt);
  cleanup_free char *tail = vxasprintf (fmt, ap);
  va_end (ap);
  return error_rewrite (*err, NULL, tail);
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

void
nsbox_error_pass (struct nsbox_error **err, struct nsbox_error *e)
{
  if (err && !*err)
    *err = e;
  else
    nsbox_error_free (e);
}
