/* The audit log: one JSON Lines record per run (and per refusal), appended
 * in one write under an exclusive lock, each record chained to the one
 * before it by SHA-256. */
#ifndef NSBOX_AUDIT_H
#define NSBOX_AUDIT_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "error.h"
#include "util.h"

/* Length of the text every record ends with: ,"hash":"<64 hex>"} */
#define NSBOX_AUDIT_TAIL 75

struct nsbox_audit_run
{
  const char *session;    /* NULL: the config's */
  const char *client;     /* the caller's name (a server's client), or NULL */
  const char *sandbox_id; /* a live sandbox's run: its id, and the record says it */
  const char *code;
  size_t code_len;
  uint64_t started_ms; /* CLOCK_REALTIME, when the run was asked for */
};

/* Opens the configured log before a run, so that a log that cannot be
 * written stops the run before any sandbox starts (*fd -1: no log). */
int nsbox_audit_open (const nsbox_config *c, int *fd, struct nsbox_error **err) NSBOX_INTERNAL;

/* Appends the record of one run: its result, or the error that stopped it
 * (result NULL). Closes fd. */
int nsbox_audit_append (int fd, const nsbox_config *c, const struct nsbox_audit_run *run,
                        const nsbox_result *result, const struct nsbox_error *failure,
                        struct nsbox_error **err) NSBOX_INTERNAL;

/* After a run that returned `ret`: appends its record (fd -1: none) and
 * passes the outcome on. A record that cannot be written turns a run that
 * succeeded into a failure (*out freed): no run goes unaudited. */
int nsbox_audit_after (int fd, const nsbox_config *c, const struct nsbox_audit_run *run, int ret,
                       nsbox_result **out, struct nsbox_error **run_err) NSBOX_INTERNAL;

/* Checks a log's chain. Returns 0 when intact (*records counted), or
 * -EBADMSG with err naming the first broken record. */
int nsbox_audit_verify (const char *path, size_t *records, struct nsbox_error **err) NSBOX_INTERNAL;

#endif
