/* Starting a sandbox's init: the pipes between the launcher and its child,
 * clone3 with the namespaces a runtime asks for, the id maps, and the
 * launcher's go-ahead. The native runtime (run.c) and runsc (runsc.c) are
 * both callers: they differ in the flags and the child function. */
#ifndef NSBOX_SPAWN_H
#define NSBOX_SPAWN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox.h"
#include "util.h"

struct nsbox_child
{
  pid_t pid;
  int pidfd;
};

/* The channels between the launcher and its child. */
enum nsbox_channel
{
  NSBOX_CHANNEL_STDIN = 0,
  NSBOX_CHANNEL_STDOUT,
  NSBOX_CHANNEL_STDERR,
  NSBOX_CHANNEL_REPORT, /* the child's records (report.h) */
  NSBOX_CHANNEL_SYNC,   /* the launcher's go-ahead, then (native) its limits */
  NSBOX_CHANNEL_COUNT_,
};

/* fds[2i] is the child's end of channel i, fds[2i+1] the launcher's; -1
 * once closed or taken. The sync channel is a SOCK_SEQPACKET socket pair
 * (it carries fds), the others are pipes; all close-on-exec. */
struct nsbox_pipes
{
  int fds[2 * NSBOX_CHANNEL_COUNT_];
};

/* What the launcher keeps for supervision. */
struct nsbox_streams
{
  int stdin_fd;  /* write end, or -1 */
  int stdout_fd; /* read ends */
  int stderr_fd;
  int report_fd;
};

void nsbox_pipes_init (struct nsbox_pipes *pipes) NSBOX_INTERNAL;
int nsbox_pipes_open (struct nsbox_pipes *pipes, struct nsbox_error **err) NSBOX_INTERNAL;
/* The child's ends, in the order nsbox_child_prologue wants them. */
void nsbox_pipes_child_ends (const struct nsbox_pipes *pipes, int ends[5]) NSBOX_INTERNAL;
/* After clone: the child has its copies. */
void nsbox_pipes_close_child_ends (struct nsbox_pipes *pipes) NSBOX_INTERNAL;
/* The launcher's ends of stdin, stdout, stderr and report, taken out. */
struct nsbox_streams nsbox_pipes_take_streams (struct nsbox_pipes *pipes) NSBOX_INTERNAL;
/* Closes whatever is left. */
void nsbox_pipes_close (struct nsbox_pipes *pipes) NSBOX_INTERNAL;

struct nsbox_spawn
{
  uint64_t namespaces; /* CLONE_NEW* flags; CLONE_NEWUSER always */
  int cgroup_fd;       /* start the child in this cgroup v2 (CLONE_INTO_CGROUP), or -1 */
  void (*child_main) (void *arg) __attribute__ ((noreturn));
  void *arg;
  uid_t uid, gid; /* the ids mapped inside the user namespace */
  bool caller_undumpable;
  struct nsbox_pipes *pipes;
  /* If not NULL: set to an fd of the child's mount namespace (O_CLOEXEC),
   * or -1 if it could not be opened. */
  int *mnt_ns_fd;
};

/* Clones the child (exit signal 0: an embedding program's SIGCHLD handler
 * or waitpid(-1) never sees our child; we wait on its pidfd), writes its id
 * maps, opens its mount namespace if asked (before the go-ahead: from then
 * on the child may make itself non-dumpable, and its /proc/PID/ns closed
 * to the launcher) and sends the go-ahead byte on the sync channel (whose
 * launcher end stays open). On failure nothing is left running. */
int nsbox_spawn (const struct nsbox_spawn *spawn, struct nsbox_child *child,
                 struct nsbox_error **err) NSBOX_INTERNAL;

/* Native runtime: sends the plan's limits part (rlimits, cgroup namespace,
 * v1 tasks files) to the child waiting for it on the sync channel. A child
 * that is already gone is not an error here: its report says why. */
int nsbox_spawn_send_limits (int sync_fd, const struct nsbox_plan *plan,
                             struct nsbox_error **err) NSBOX_INTERNAL;

/* Kills the child (all of the sandbox: it is PID 1 of its namespace), reaps
 * it and closes its pidfd. */
void nsbox_spawn_abort (struct nsbox_child *child) NSBOX_INTERNAL;

#endif
