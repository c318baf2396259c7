/* The plan of one native sandbox: everything the child needs, prepared in the
 * parent before clone so the child runs only async-signal-safe code. */
#ifndef NSBOX_SANDBOX_H
#define NSBOX_SANDBOX_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/capability.h>

#include "files.h"
#include "report.h"
#include "seccomp.h"
#include "util.h"

/* Every resource limit (RLIM_NLIMITS on Linux). */
#define NSBOX_MAX_RLIMITS 16
#define NSBOX_MAX_V1_CGROUPS 4

/* The part of the plan the native launcher settles after clone, while its
 * child builds the mounts: sent as one message on the sync socket, the v1
 * tasks files (plan->v1_tasks_fds) riding along as SCM_RIGHTS. */
struct nsbox_limits_msg
{
  int32_t nrlimits;
  int32_t unshare_cgroupns;
  int32_t n_tasks_fds; /* how many fds come with it as SCM_RIGHTS */
  int32_t rlimit_resources[NSBOX_MAX_RLIMITS];
  struct rlimit rlimits[NSBOX_MAX_RLIMITS];
};

struct nsbox_plan
{
  const char *rootfs;   /* absolute, canonical */
  char tmp_options[64]; /* "size=...,nr_inodes=...,mode=1777" */
  char shm_options[64];
  uid_t uid, gid;         /* inside the sandbox */
  bool may_setgroups;     /* the launcher is root: clear supplementary groups */
  bool unshare_cgroupns;  /* no CLONE_INTO_CGROUP: enter a cgroup ns after attach */
  bool caller_undumpable; /* the launcher is not dumpable (PR_GET_DUMPABLE 0) */
  bool egress;            /* network: proxy: send the proxy's listener (net.h) */
  char *const *argv;
  char *const *envp;
  const char *path_search; /* PATH of the sandbox env, for argv[0] lookup */
  struct nsbox_bpf bpf;
  cap_t empty_caps;
  int nrlimits;
  int rlimit_resources[NSBOX_MAX_RLIMITS];
  struct rlimit rlimits[NSBOX_MAX_RLIMITS];
  /* The launcher's argv and environ strings: init, a copy of the launcher,
   * wipes them so /proc/1/cmdline and /proc/1/environ show nothing. */
  unsigned long arg_start, arg_end, env_start, env_end;
  /* cgroup v1 "tasks" files the child writes "0" to, moving itself. A
   * single thread moving itself skips the global threadgroup lock whose
   * write side costs an RCU grace period (about 12 ms) per run. */
  int v1_tasks_fds[NSBOX_MAX_V1_CGROUPS];
  int n_v1_tasks_fds;
  /* fds, in the parent's numbering */
  int stdin_fd, stdout_fd, stderr_fd;
  /* The child's end. The parent sends one byte when the id maps are set,
   * then (native runtime) a struct nsbox_limits_msg. A socket for the
   * native runtime, a pipe for runsc. */
  int sync_fd;
  int report_fd; /* write end, close-on-exec */
  /* Files copied to /mnt/in: their fds in the parent's numbering, placed
   * from NSBOX_CHILD_FIRST_FREE_FD on in the child. */
  struct nsbox_inputs inputs;
  /* A live sandbox (several runs): the child's ends of its two control
   * pipes (the code's read end, the answers' write end), placed after the
   * inputs (NSBOX_CHILD_FIRST_FREE_FD + inputs.n and the next) and left
   * open across the program's execve; init keeps no copy. Pipes, not a
   * socket: nothing can pass an fd to the launcher through them. */
  bool control;
  int control_fds[2];
};

/* Child side: runs the whole setup and never returns (init.c). */
void nsbox_child_main (const struct nsbox_plan *plan) __attribute__ ((noreturn)) NSBOX_INTERNAL;

/* Child side mount setup (mounts.c), async-signal-safe, failing through
 * nsbox_child_fail. bind_root: the read-only bind of the rootfs, made
 * while the child still has the launcher's host uid, then chdir into it;
 * setup: /tmp, /dev, /proc relative to it, then pivot_root. */
void nsbox_mounts_bind_root (const struct nsbox_plan *plan) NSBOX_INTERNAL;
void nsbox_mounts_setup (const struct nsbox_plan *plan) NSBOX_INTERNAL;

/* Child side: drop every capability from all five sets (caps.c). */
void nsbox_caps_drop_bounding (void) NSBOX_INTERNAL;
void nsbox_caps_drop_all (const struct nsbox_plan *plan) NSBOX_INTERNAL;

#endif
