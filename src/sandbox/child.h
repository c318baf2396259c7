/* The child side of clone, shared by the native init (init.c) and the runsc
 * init (runsc.c): how it reports to the launcher, where its fds go, what
 * happens when the launcher dies, its signals, its first steps. Everything
 * here runs between clone and exec: async-signal-safe calls only. */
#ifndef NSBOX_CHILD_H
#define NSBOX_CHILD_H

#include <stdbool.h>
#include <sys/types.h>

#include "report.h"
#include "util.h"

/* The fds the child keeps, at fixed numbers (nsbox_child_place_fds). */
enum
{
  NSBOX_CHILD_REPORT_FD = 3,
  NSBOX_CHILD_SYNC_FD = 4,
  NSBOX_CHILD_FIRST_FREE_FD = 5,
  NSBOX_CHILD_EXTRA_MAX = 66, /* every input, and a live sandbox's two control pipes */
};

/* Reports a failed step to the parent (`detail`: a path, a name, or NULL)
 * and exits 127. */
void nsbox_child_fail (int step, int err, const char *detail)
    __attribute__ ((noreturn)) NSBOX_INTERNAL;

/* Where nsbox_child_fail reports before the fds are placed. */
void nsbox_child_set_report_fd (int fd) NSBOX_INTERNAL;

/* The first steps of every init: stdin, stdout, stderr, the report pipe and
 * the sync channel (in that order in `fds`, the parent's numbering) to 0-4
 * and every other fd closed; a parent-death signal; and the wait for the
 * launcher's one byte on the sync channel (sent once it has written the id
 * maps), made dumpable meanwhile when the launcher is not (its /proc files
 * would belong to root otherwise). The sync channel stays open at
 * NSBOX_CHILD_SYNC_FD. The n_extra fds of `extra` (at most
 * NSBOX_CHILD_EXTRA_MAX) are placed at NSBOX_CHILD_FIRST_FREE_FD and up,
 * close-on-exec. Exits when the launcher died. */
void nsbox_child_prologue (const int fds[5], const int *extra, int n_extra,
                           bool caller_undumpable) NSBOX_INTERNAL;

/* Sets the parent-death signal again after an id change (which cleared it)
 * and exits when the launcher died meanwhile. */
void nsbox_child_rearm_parent_death (void) NSBOX_INTERNAL;

/* Default dispositions for every signal and an empty signal mask. */
void nsbox_child_reset_signals (void) NSBOX_INTERNAL;

/* Sends `fd` to the launcher on the sync channel, in a message of the one
 * byte `tag`; fails `step` (with `detail`) when it cannot. */
void nsbox_child_send_fd (char tag, int fd, int step, const char *detail) NSBOX_INTERNAL;

/* fork without glibc's fork handlers. */
pid_t nsbox_child_fork (void) NSBOX_INTERNAL;

/* Reaps every child; when `program` ends, reports its wait status and
 * exits. */
void nsbox_child_reap (pid_t program) __attribute__ ((noreturn)) NSBOX_INTERNAL;

#endif
