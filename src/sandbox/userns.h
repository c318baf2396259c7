/* The user namespace: one mapped id, and becoming the sandbox's user. Run
 * by root, the sandbox's processes are host uid/gid 65534, never host root;
 * otherwise they are the caller itself. Both sides of clone are here. */
#ifndef NSBOX_USERNS_H
#define NSBOX_USERNS_H

#include <stdbool.h>
#include <sys/types.h>

#include "util.h"

/* The host id the sandbox's single mapped uid and gid stand for. */
#define NSBOX_ROOT_HOST_ID 65534

/* Parent: writes `text` to /proc/PID/NAME (an id map, setgroups). With
 * wait_dumpable, waits (bounded) while EACCES says the child of a
 * non-dumpable launcher has not made itself dumpable yet. */
int nsbox_write_proc_file (pid_t pid, const char *name, const char *text, bool wait_dumpable,
                           struct nsbox_error **err) NSBOX_INTERNAL;

/* Parent: maps uid `uid` and gid `gid` inside the child's user namespace to
 * the host id (NSBOX_ROOT_HOST_ID for root, the caller otherwise; an
 * unprivileged caller first denies setgroups, as the kernel requires). */
int nsbox_userns_write_maps (pid_t pid, uid_t uid, gid_t gid, bool caller_undumpable,
                             struct nsbox_error **err) NSBOX_INTERNAL;

/* Child: becomes uid/gid (all three ids each) with no supplementary groups
 * when it may set them (the launcher is root). Raw system calls: glibc's
 * wrappers would try to reach threads that do not exist in this copy of
 * the process. Fails through nsbox_child_fail. */
void nsbox_userns_become (uid_t uid, gid_t gid, bool clear_groups) NSBOX_INTERNAL;

#endif
