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
 * there is one), attaches v1 cgroups, writes the id maps and lets the child
 * proceed. `plan` fds are the parent's; the sync pipe write end is
 * `sync_write_fd`, closed here. On failure nothing is left running. */
int nsbox_spawn (const struct nsbox_plan *plan, struct nsbox_limits *limits, int sync_write_fd,
                 struct nsbox_child *child, struct nsbox_error **err)
    __attribute__ ((visibility ("hidden")));

#endif
