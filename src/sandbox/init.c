/* The sandbox's PID 1: runs in the child of clone3, sets the sandbox up,
 * starts the program and reports its status. Between clone and exec only
 * async-signal-safe calls: no malloc, no stdio, raw syscalls for
 * credentials (glibc's wrappers would try to reach threads that do not
 * exist in this copy of the process). */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "limit.h"
#include "net.h"
#include "sandbox.h"
#include "userns.h"

/* The limits the launcher settled while we built the mounts: joins the v1
 * cgroups it sends (init joins before it forks the program, so every
 * process of the program is in them) and returns the rest. */
static void
receive_limits (struct nsbox_limits_msg *lim)
{
  union
  {
    char buf[CMSG_SPACE (sizeof (int) * NSBOX_MAX_V1_CGROUPS)];
    struct cmsghdr align;
  } control;
  struct iovec iov = { lim, sizeof *lim };
  struct msghdr msg;
  memset (&msg, 0, sizeof msg);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.buf;
  msg.msg_controllen = sizeof control.buf;
  ssize_t n;
  do
    n = recvmsg (NSBOX_CHILD_SYNC_FD, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n == 0)
    _exit (127); /* the launcher is gone */
  if (n != (ssize_t)sizeof *lim || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || lim->nrlimits < 0
      || lim->nrlimits > NSBOX_MAX_RLIMITS || lim->n_tasks_fds < 0
      || lim->n_tasks_fds > NSBOX_MAX_V1_CGROUPS)
    nsbox_child_fail (NSBOX_STEP_SYNC, n < 0 ? errno : EPROTO, NULL);
  struct cmsghdr *cm = CMSG_FIRSTHDR (&msg);
  int fds[NSBOX_MAX_V1_CGROUPS] = { 0 }, nfds = 0;
  if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
    {
      size_t count = (cm->cmsg_len - CMSG_LEN (0)) / sizeof (int);
      nfds = count < NSBOX_MAX_V1_CGROUPS ? (int)count : NSBOX_MAX_V1_CGROUPS;
      memcpy (fds, CMSG_DATA (cm), sizeof (int) * (size_t)nfds);
    }
  /* Every cgroup the launcher reports as enforcing a limit, or none. */
  if (nfds != lim->n_tasks_fds)
    nsbox_child_fail (NSBOX_STEP_JOIN_CGROUP, EPROTO, NULL);
  nsbox_cgroup1_join (fds, nfds);
  for (int i = 0; i < nfds; i++)
    close (fds[i]);
  close (NSBOX_CHILD_SYNC_FD);
}

/* No capabilities in any set and no way to gain any. */
static void
drop_capabilities (const struct nsbox_plan *plan)
{
  nsbox_caps_drop_bounding ();
  nsbox_caps_drop_all (plan);
  if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    nsbox_child_fail (NSBOX_STEP_NO_NEW_PRIVS, errno, NULL);
}

static void
install_filter (const struct nsbox_plan *plan)
{
  struct sock_fprog prog = { .len = plan->bpf.len, .filter = plan->bpf.insns };
  if (prctl (PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0)
    nsbox_child_fail (NSBOX_STEP_SECCOMP, errno, NULL);
}

/* Looks argv[0] up in the sandbox's PATH (not the host's). */
static void
exec_program (const struct nsbox_plan *plan)
{
  const char *name = plan->argv[0];
  if (strchr (name, '/'))
    {
      execve (name, plan->argv, plan->envp);
      nsbox_child_fail (NSBOX_STEP_EXEC, errno, name);
    }
  int saved = ENOENT;
  const char *p = plan->path_search ? plan->path_search : "/usr/local/bin:/usr/bin:/bin";
  while (*p)
    {
      char path[4096];
      size_t len = 0;
      for (; *p && *p != ':'; p++)
        if (len + 1 < sizeof path)
          path[len++] = *p;
      if (*p == ':')
        p++;
      if (len == 0 || len + strlen (name) + 2 > sizeof path)
        continue;
      path[len++] = '/';
      for (const char *c = name; *c && len + 1 < sizeof path; c++)
        path[len++] = *c;
      path[len] = '\0';
      execve (path, plan->argv, plan->envp);
      if (errno != ENOENT && errno != ENOTDIR)
        saved = errno;
    }
  nsbox_child_fail (NSBOX_STEP_EXEC, saved, name);
}

static int
program_main (void *arg)
{
  const struct nsbox_plan *plan = arg;
  if (setsid () < 0)
    nsbox_child_fail (NSBOX_STEP_SETSID, errno, NULL);
  /* Only in the program's own fd table (no CLONE_FILES). */
  for (int i = 0; plan->control && i < 2; i++)
    if (fcntl (NSBOX_CHILD_FIRST_FREE_FD + plan->inputs.n + i, F_SETFD, 0) < 0)
      nsbox_child_fail (NSBOX_STEP_FDS, errno, NULL);
  exec_program (arg);
  return 127;
}

#define PROGRAM_STACK_SIZE (64 * 1024)

/* AddressSanitizer cannot follow a process onto a stack it did not
 * allocate (and under RLIMIT_AS cannot map its own): sanitizer builds start
 * the program with a plain fork. */
#if defined(__SANITIZE_ADDRESS__)
#define PROGRAM_VFORK 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PROGRAM_VFORK 0
#endif
#endif
#ifndef PROGRAM_VFORK
#define PROGRAM_VFORK 1
#endif

/* Mapped before the rlimits are set: init is a copy of the launcher, whose
 * address space alone may exceed an RLIMIT_AS fallback. */
static char *
map_program_stack (void)
{
  if (!PROGRAM_VFORK)
    return NULL;
  char *stack = mmap (NULL, PROGRAM_STACK_SIZE, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED)
    nsbox_child_fail (NSBOX_STEP_FORK, errno, NULL);
  return stack;
}

/* The program's process shares init's memory until its execve (vfork
 * semantics, on a stack of its own): no page tables to copy, a fork's cost
 * off the start-up path. It only calls setsid and execve, or reports and
 * exits; init waits meanwhile. */
static pid_t
spawn_program (const struct nsbox_plan *plan, char *stack)
{
  if (!stack)
    {
      pid_t pid = nsbox_child_fork ();
      if (pid < 0)
        nsbox_child_fail (NSBOX_STEP_FORK, errno, NULL);
      if (pid == 0)
        _exit (program_main ((void *)plan));
      return pid;
    }
  pid_t pid = clone (program_main, stack + PROGRAM_STACK_SIZE, CLONE_VM | CLONE_VFORK | SIGCHLD,
                     (void *)plan);
  if (pid < 0)
    nsbox_child_fail (NSBOX_STEP_FORK, errno, NULL);
  munmap (stack, PROGRAM_STACK_SIZE);
  return pid;
}

/* /proc/1/cmdline is readable by anyone in the sandbox and would show the
 * launcher's command line (paths, flags, --env values). */
static void
wipe_launcher_strings (const struct nsbox_plan *plan)
{
  if (plan->arg_end > plan->arg_start)
    memset ((void *)plan->arg_start, 0, plan->arg_end - plan->arg_start);
  if (plan->env_end > plan->env_start)
    memset ((void *)plan->env_start, 0, plan->env_end - plan->env_start);
}

void
nsbox_child_main (const struct nsbox_plan *plan)
{
  wipe_launcher_strings (plan);
  const int fds[5]
      = { plan->stdin_fd, plan->stdout_fd, plan->stderr_fd, plan->report_fd, plan->sync_fd };
  /* The inputs, then the control pipes of a live sandbox. */
  int extra[NSBOX_INPUTS_MAX + 2];
  int n_extra = plan->inputs.n;
  memcpy (extra, plan->inputs.fds, sizeof (int) * (size_t)n_extra);
  if (plan->control)
    {
      extra[n_extra++] = plan->control_fds[0];
      extra[n_extra++] = plan->control_fds[1];
    }
  nsbox_child_prologue (fds, extra, n_extra, plan->caller_undumpable);
  nsbox_mounts_bind_root (plan);
  nsbox_userns_become (plan->uid, plan->gid, plan->may_setgroups);
  nsbox_child_rearm_parent_death ();
  nsbox_mounts_setup (plan);
  if (sethostname ("nsbox", 5) < 0)
    nsbox_child_fail (NSBOX_STEP_HOSTNAME, errno, "nsbox");
  nsbox_net_loopback_up ();
  if (plan->egress)
    nsbox_net_egress_listen ();
  struct nsbox_limits_msg lim;
  receive_limits (&lim);
  /* After joining the v1 cgroups: they become the namespace's root. */
  if (lim.unshare_cgroupns && unshare (CLONE_NEWCGROUP) < 0)
    nsbox_child_fail (NSBOX_STEP_CGROUPNS, errno, NULL);
  char *program_stack = map_program_stack ();
  nsbox_rlimits_apply (&lim);
  nsbox_child_reset_signals ();
  drop_capabilities (plan);
  umask (022);
  /* One filter for init and the program: it is inherited across fork and
   * execve, and everything init still does (fork, setsid, execve, wait4,
   * write, exit) is allowed by it. */
  install_filter (plan);
  /* Nothing in the sandbox may read init's memory (a copy of the
   * launcher's): not dumpable before the program exists. execve gives the
   * program memory and a dumpable flag of its own. */
  if (prctl (PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
    nsbox_child_fail (NSBOX_STEP_DUMPABLE, errno, NULL);
  pid_t program = spawn_program (plan, program_stack);
  /* init keeps no copy of the program's stdio, nor of its control
   * pipes: the launcher sees the driver's end as the pipes' end. */
  close (0);
  close (1);
  close (2);
  if (plan->control)
    {
      close (NSBOX_CHILD_FIRST_FREE_FD + plan->inputs.n);
      close (NSBOX_CHILD_FIRST_FREE_FD + plan->inputs.n + 1);
    }
  nsbox_child_reap (program);
}
