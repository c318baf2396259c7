/* clone3 of the sandbox init and the uid/gid map handshake. */
#ifndef NSBOX_SPAWN_H
#define NSBOX_SPAWN_H

#include <sys/types.h>

#include "resources.h"
#include "sandbox.h"

struct nsbox_child
{
  pid_t pid;
  int pidfd;
};

/* Writes `text` to /proc/PID/NAME (an id map, setgroups). With
 * wait_dumpable, waits (bounded) while EACCES says the child of a
 * non-dumpable launcher has not made itself dumpable yet. */
int nsbox_write_proc_file (pid_t pid, const char *name, const char *text, bool wait_dumpable,
                           struct nsbox_error **err) __attribute__ ((visibility ("hidden")));

/* Clones the sandbox init with every namespace (into the v2 run cgroup when
 * there is one), writes the id maps and lets the child proceed by sending
 * one byte on `sync_fd` (the parent's end of the sync socket; the caller
 * keeps and closes it). `plan` fds are the parent's. On failure nothing is
 * left running. */
int nsbox_spawn (const struct nsbox_plan *plan, struct nsbox_limits *limits, int sync_fd,
                 struct nsbox_child *child, struct nsbox_error **err)
    __attribute__ ((visibility ("hidden")));

/* Sends the plan's limits part (rlimits, cgroup namespace, v1 tasks files)
 * to the child waiting for it on the sync socket. A child that is already
 * gone is not an error here: its report says why. */
int nsbox_spawn_send_limits (int sync_fd, const struct nsbox_plan *plan, struct nsbox_error **err)
    __attribute__ ((visibility ("hidden")));

/* Kills the child (all of the sandbox: it is PID 1 of its namespace), reaps
 * it and closes its pidfd. */
void nsbox_spawn_abort (struct nsbox_child *child) __attribute__ ((visibility ("hidden")));

#endif
