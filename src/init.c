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

#include "sandbox.h"

/* Child-only state: the child is a copy of the parent, so this never
 * touches the parent's memory. */
static int child_report_fd = -1;

enum
{
  CHILD_REPORT_FD = 3,
  CHILD_SYNC_FD = 4,
  CHILD_FIRST_FREE_FD = 5,
};

static void
copy_detail (char *dst, size_t size, const char *src)
{
  size_t i = 0;
  for (; src && src[i] && i + 1 < size; i++)
    dst[i] = src[i];
  dst[i] = '\0';
}

static void
send_report (const struct nsbox_report *report)
{
  if (child_report_fd < 0)
    return;
  ssize_t n;
  do
    n = write (child_report_fd, report, sizeof *report);
  while (n < 0 && errno == EINTR);
}

void
nsbox_child_fail (int step, int err, const char *detail)
{
  struct nsbox_report report;
  memset (&report, 0, sizeof report);
  report.kind = NSBOX_REPORT_ERROR;
  report.step = step;
  report.err = err;
  copy_detail (report.detail, sizeof report.detail, detail);
  send_report (&report);
  _exit (127);
}

/* Puts stdin/stdout/stderr, the report pipe and the sync pipe (in that
 * order in `from`) at fixed numbers and closes every other inherited fd,
 * whatever its CLOEXEC flag. */
void
nsbox_child_place_fds (const int from[5])
{
  int high[5];
  for (int i = 0; i < 5; i++)
    {
      high[i] = fcntl (from[i], F_DUPFD_CLOEXEC, 16);
      if (high[i] < 0)
        nsbox_child_fail (NSBOX_STEP_FDS, errno, NULL);
    }
  for (int i = 0; i < 3; i++)
    if (dup2 (high[i], i) < 0)
      nsbox_child_fail (NSBOX_STEP_FDS, errno, NULL);
  if (dup3 (high[3], CHILD_REPORT_FD, O_CLOEXEC) < 0)
    nsbox_child_fail (NSBOX_STEP_FDS, errno, NULL);
  child_report_fd = CHILD_REPORT_FD;
  if (dup3 (high[4], CHILD_SYNC_FD, O_CLOEXEC) < 0)
    nsbox_child_fail (NSBOX_STEP_FDS, errno, NULL);
  if (syscall (SYS_close_range, CHILD_FIRST_FREE_FD, ~0U, 0) < 0)
    nsbox_child_fail (NSBOX_STEP_FDS, errno, NULL);
}

void
nsbox_child_set_report_fd (int fd)
{
  child_report_fd = fd;
}

/* Blocks until the parent has written the id maps; EOF means it died. */
static void
read_sync_byte (void)
{
  char byte;
  ssize_t n;
  do
    n = read (CHILD_SYNC_FD, &byte, 1);
  while (n < 0 && errno == EINTR);
  if (n != 1)
    _exit (127);
}

void
nsbox_child_wait_for_parent (void)
{
  read_sync_byte ();
  close (CHILD_SYNC_FD);
}

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
    n = recvmsg (CHILD_SYNC_FD, &msg, MSG_CMSG_CLOEXEC);
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
  nsbox_child_join_v1_cgroups (fds, nfds);
  for (int i = 0; i < nfds; i++)
    close (fds[i]);
  close (CHILD_SYNC_FD);
}

static void
loopback_up (void)
{
  int fd = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    nsbox_child_fail (NSBOX_STEP_LOOPBACK, errno, "lo");
  struct ifreq ifr;
  memset (&ifr, 0, sizeof ifr);
  ifr.ifr_name[0] = 'l';
  ifr.ifr_name[1] = 'o';
  if (ioctl (fd, SIOCGIFFLAGS, &ifr) < 0)
    nsbox_child_fail (NSBOX_STEP_LOOPBACK, errno, "lo");
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (ioctl (fd, SIOCSIFFLAGS, &ifr) < 0)
    nsbox_child_fail (NSBOX_STEP_LOOPBACK, errno, "lo");
  close (fd);
}

static void
apply_rlimits (const struct nsbox_limits_msg *lim)
{
  for (int i = 0; i < lim->nrlimits; i++)
    if (setrlimit (lim->rlimit_resources[i], &lim->rlimits[i]) < 0)
      nsbox_child_fail (NSBOX_STEP_RLIMIT, errno, NULL);
}

/* Ignored signals and the signal mask survive execve: the program starts
 * with neither, whatever the embedding program had. */
void
nsbox_child_reset_signals (void)
{
  struct sigaction dfl;
  memset (&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; sig++)
    if (sig != SIGKILL && sig != SIGSTOP)
      sigaction (sig, &dfl, NULL);
  sigset_t none;
  sigemptyset (&none);
  if (sigprocmask (SIG_SETMASK, &none, NULL) < 0)
    nsbox_child_fail (NSBOX_STEP_SIGNALS, errno, NULL);
}

/* Switches to the sandbox ids first: run by root, the child starts as host
 * uid 0, which is unmapped in the user namespace and so could not even
 * create a file in our own tmpfs. Host uid 0 is never mapped, so the kernel
 * does not treat this as leaving root: the capabilities of the namespace
 * stay until drop_capabilities. */
static void
become_sandbox_user (const struct nsbox_plan *plan)
{
  if (plan->may_setgroups && syscall (SYS_setgroups, 0, NULL) < 0)
    nsbox_child_fail (NSBOX_STEP_SETGROUPS, errno, NULL);
  if (syscall (SYS_setresgid, plan->gid, plan->gid, plan->gid) < 0)
    nsbox_child_fail (NSBOX_STEP_SETGID, errno, NULL);
  if (syscall (SYS_setresuid, plan->uid, plan->uid, plan->uid) < 0)
    nsbox_child_fail (NSBOX_STEP_SETUID, errno, NULL);
}

/* Changing the effective ids (run by root: host 0 -> 65534) cleared the
 * parent-death signal, so a launcher killed from here on would leave the
 * sandbox running: set it again, and if the launcher died meanwhile (its
 * end of the report pipe is closed) stop here. */
void
nsbox_child_rearm_parent_death (void)
{
  if (prctl (PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
    nsbox_child_fail (NSBOX_STEP_PDEATHSIG, errno, NULL);
  struct pollfd launcher = { CHILD_REPORT_FD, 0, 0 };
  if (poll (&launcher, 1, 0) != 0)
    _exit (127);
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
      copy_detail (path + len, sizeof path - len, name);
      execve (path, plan->argv, plan->envp);
      if (errno != ENOENT && errno != ENOTDIR)
        saved = errno;
    }
  nsbox_child_fail (NSBOX_STEP_EXEC, saved, name);
}

/* A plain fork without glibc's fork handlers (their locks may have been
 * held by another thread of the launcher when it cloned us). clone, not
 * clone3: the filter is already installed and answers clone3 with ENOSYS.
 * With only flags set, the argument order of clone is the same on every
 * architecture. */
pid_t
nsbox_child_fork (void)
{
  return (pid_t)syscall (SYS_clone, (unsigned long)SIGCHLD, 0UL, 0UL, 0UL, 0UL);
}

static int
program_main (void *arg)
{
  if (setsid () < 0)
    nsbox_child_fail (NSBOX_STEP_SETSID, errno, NULL);
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

/* Reaps everything; when the program itself ends, reports its status and
 * exits, and the kernel kills whatever is left in the PID namespace. */
void
nsbox_child_reap (pid_t program)
{
  for (;;)
    {
      int status;
      pid_t pid = wait4 (-1, &status, 0, NULL);
      if (pid < 0 && errno == EINTR)
        continue;
      if (pid < 0)
        nsbox_child_fail (NSBOX_STEP_WAIT, errno, NULL);
      if (pid != program)
        continue;
      struct nsbox_report report;
      memset (&report, 0, sizeof report);
      report.kind = NSBOX_REPORT_STATUS;
      report.status = status;
      send_report (&report);
      _exit (0);
    }
}

/* Moves the caller into the run's v1 cgroups; every process it starts
 * afterwards is counted and limited by them. */
void
nsbox_child_join_v1_cgroups (const int *tasks_fds, int n)
{
  for (int i = 0; i < n; i++)
    if (write (tasks_fds[i], "0", 1) != 1)
      nsbox_child_fail (NSBOX_STEP_JOIN_CGROUP, errno, NULL);
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
  child_report_fd = plan->report_fd;
  wipe_launcher_strings (plan);
  const int fds[5]
      = { plan->stdin_fd, plan->stdout_fd, plan->stderr_fd, plan->report_fd, plan->sync_fd };
  nsbox_child_place_fds (fds);
  if (prctl (PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
    nsbox_child_fail (NSBOX_STEP_PDEATHSIG, errno, NULL);
  /* A non-dumpable process's /proc/PID files belong to root: an
   * unprivileged launcher could not write our id maps. Dumpable only until
   * the maps are written; this memory is a copy of the launcher's. */
  if (plan->caller_undumpable && prctl (PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
    nsbox_child_fail (NSBOX_STEP_DUMPABLE, errno, NULL);
  read_sync_byte ();
  if (plan->caller_undumpable && prctl (PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
    nsbox_child_fail (NSBOX_STEP_DUMPABLE, errno, NULL);
  nsbox_mounts_bind_root (plan);
  become_sandbox_user (plan);
  nsbox_child_rearm_parent_death ();
  nsbox_mounts_setup (plan);
  if (sethostname ("nsbox", 5) < 0)
    nsbox_child_fail (NSBOX_STEP_HOSTNAME, errno, "nsbox");
  loopback_up ();
  struct nsbox_limits_msg lim;
  receive_limits (&lim);
  /* After joining the v1 cgroups: they become the namespace's root. */
  if (lim.unshare_cgroupns && unshare (CLONE_NEWCGROUP) < 0)
    nsbox_child_fail (NSBOX_STEP_CGROUPNS, errno, NULL);
  char *program_stack = map_program_stack ();
  apply_rlimits (&lim);
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
  /* init keeps no copy of the program's stdio. */
  close (0);
  close (1);
  close (2);
  nsbox_child_reap (program);
  _exit (127);
}

static const char *const step_names[NSBOX_STEP_COUNT_] = {
  [NSBOX_STEP_NONE] = "unknown step",
  [NSBOX_STEP_SYNC] = "wait for the launcher",
  [NSBOX_STEP_FDS] = "set up file descriptors",
  [NSBOX_STEP_JOIN_CGROUP] = "join the run's cgroup v1",
  [NSBOX_STEP_PDEATHSIG] = "set parent-death signal",
  [NSBOX_STEP_DUMPABLE] = "set dumpable",
  [NSBOX_STEP_CGROUPNS] = "enter cgroup namespace",
  [NSBOX_STEP_MOUNT_PRIVATE] = "make mounts private on",
  [NSBOX_STEP_BIND_ROOTFS] = "bind rootfs",
  [NSBOX_STEP_REMOUNT_ROOTFS] = "remount rootfs read-only",
  [NSBOX_STEP_MOUNT_TMP] = "mount tmpfs on",
  [NSBOX_STEP_MOUNT_DEV] = "mount tmpfs on",
  [NSBOX_STEP_CREATE_DEV] = "create in /dev",
  [NSBOX_STEP_BIND_DEV] = "bind device",
  [NSBOX_STEP_MOUNT_SHM] = "mount tmpfs on",
  [NSBOX_STEP_REMOUNT_DEV] = "remount read-only",
  [NSBOX_STEP_MOUNT_PROC] = "mount proc on",
  [NSBOX_STEP_MASK_PROC] = "mask",
  [NSBOX_STEP_READONLY_PROC] = "make read-only",
  [NSBOX_STEP_USERNS_LIMIT] = "limit nested user namespaces through",
  [NSBOX_STEP_PIVOT_ROOT] = "pivot_root into",
  [NSBOX_STEP_DETACH_OLD_ROOT] = "detach old root",
  [NSBOX_STEP_HOSTNAME] = "set hostname",
  [NSBOX_STEP_LOOPBACK] = "bring up loopback",
  [NSBOX_STEP_RLIMIT] = "set resource limits",
  [NSBOX_STEP_SIGNALS] = "reset signal handling",
  [NSBOX_STEP_CAPBSET] = "drop capability bounding set",
  [NSBOX_STEP_SETGROUPS] = "clear supplementary groups",
  [NSBOX_STEP_SETGID] = "switch to sandbox gid",
  [NSBOX_STEP_SETUID] = "switch to sandbox uid",
  [NSBOX_STEP_CAPS] = "drop capabilities",
  [NSBOX_STEP_NO_NEW_PRIVS] = "set no_new_privs",
  [NSBOX_STEP_FORK] = "fork the program",
  [NSBOX_STEP_SETSID] = "start a new session",
  [NSBOX_STEP_SECCOMP] = "install seccomp filter",
  [NSBOX_STEP_EXEC] = "execute",
  [NSBOX_STEP_WAIT] = "wait for the program",
  [NSBOX_STEP_READ_FILTER] = "read seccomp filter",
};

const char *
nsbox_step_name (int step)
{
  if (step < 0 || step >= NSBOX_STEP_COUNT_ || !step_names[step])
    return step_names[NSBOX_STEP_NONE];
  return step_names[step];
}
