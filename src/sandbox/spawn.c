/* Starting a sandbox's init, launcher side: see spawn.h. */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "userns.h"
#include "util.h"

static int
clone_error (int code, struct nsbox_error **err)
{
  if (code == EPERM || code == ENOSPC || code == EUSERS)
    return nsbox_error_sys (err, code,
                            "create sandbox namespaces (are unprivileged user namespaces enabled? "
                            "see sysctl user.max_user_namespaces and "
                            "kernel.apparmor_restrict_unprivileged_userns)");
  if (code == ENOSYS)
    return nsbox_error_sys (err, code, "clone3 (nsbox needs Linux 5.7 or later)");
  return nsbox_error_sys (err, code, "create sandbox namespaces");
}

void
nsbox_spawn_abort (struct nsbox_child *child)
{
  if (child->pidfd < 0)
    return;
  syscall (SYS_pidfd_send_signal, child->pidfd, SIGKILL, NULL, 0);
  siginfo_t info;
  while (waitid (P_PIDFD, (id_t)child->pidfd, &info, WEXITED | __WALL) < 0 && errno == EINTR)
    ;
  close (TAKE_FD (child->pidfd));
}

void
nsbox_pipes_init (struct nsbox_pipes *p)
{
  for (size_t i = 0; i < ARRAY_SIZE (p->fds); i++)
    p->fds[i] = -1;
}

int
nsbox_pipes_open (struct nsbox_pipes *p, struct nsbox_error **err)
{
  for (int i = 0; i < NSBOX_CHANNEL_COUNT_; i++)
    if (i == NSBOX_CHANNEL_SYNC
            ? socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, &p->fds[2 * i]) < 0
            : pipe2 (&p->fds[2 * i], O_CLOEXEC) < 0)
      return nsbox_error_sys (err, errno, "create pipe");
  /* Pipes carry data from fds[0] to fds[1]: stdin flows to the child. */
  for (int i = NSBOX_CHANNEL_STDOUT; i <= NSBOX_CHANNEL_REPORT; i++)
    {
      int read_end = p->fds[2 * i];
      p->fds[2 * i] = p->fds[2 * i + 1];
      p->fds[2 * i + 1] = read_end;
    }
  return 0;
}

void
nsbox_pipes_child_ends (const struct nsbox_pipes *p, int ends[5])
{
  for (int i = 0; i < NSBOX_CHANNEL_COUNT_; i++)
    ends[i] = p->fds[2 * i];
}

void
nsbox_pipes_close_child_ends (struct nsbox_pipes *p)
{
  for (int i = 0; i < NSBOX_CHANNEL_COUNT_; i++)
    if (p->fds[2 * i] >= 0)
      close (TAKE_FD (p->fds[2 * i]));
}

struct nsbox_streams
nsbox_pipes_take_streams (struct nsbox_pipes *p)
{
  return (struct nsbox_streams){
    .stdin_fd = TAKE_FD (p->fds[2 * NSBOX_CHANNEL_STDIN + 1]),
    .stdout_fd = TAKE_FD (p->fds[2 * NSBOX_CHANNEL_STDOUT + 1]),
    .stderr_fd = TAKE_FD (p->fds[2 * NSBOX_CHANNEL_STDERR + 1]),
    .report_fd = TAKE_FD (p->fds[2 * NSBOX_CHANNEL_REPORT + 1]),
  };
}

void
nsbox_pipes_close (struct nsbox_pipes *p)
{
  for (size_t i = 0; i < ARRAY_SIZE (p->fds); i++)
    if (p->fds[i] >= 0)
      close (TAKE_FD (p->fds[i]));
}

int
nsbox_spawn (const struct nsbox_spawn *spawn, struct nsbox_child *child, struct nsbox_error **err)
{
  int pidfd = -1;
  struct clone_args args;
  memset (&args, 0, sizeof args);
  args.flags = spawn->namespaces | CLONE_NEWUSER | CLONE_PIDFD;
  args.pidfd = (uint64_t)(uintptr_t)&pidfd;
  /* No exit signal: an embedding program's SIGCHLD handler or waitpid(-1)
   * never sees (or steals) our child; we wait on the pidfd with __WALL. */
  args.exit_signal = 0;
  if (spawn->cgroup_fd >= 0)
    {
      args.flags |= CLONE_INTO_CGROUP;
      args.cgroup = (uint64_t)spawn->cgroup_fd;
    }
  long pid = syscall (SYS_clone3, &args, sizeof args);
  if (pid < 0)
    return clone_error (errno, err);
  if (pid == 0)
    spawn->child_main (spawn->arg);

  child->pid = (pid_t)pid;
  child->pidfd = pidfd;
  int r
      = nsbox_userns_write_maps ((pid_t)pid, spawn->uid, spawn->gid, spawn->caller_undumpable, err);
  if (r >= 0 && spawn->mnt_ns_fd)
    {
      /* The child is not reaped: the pid is its. */
      char path[64];
      snprintf (path, sizeof path, "/proc/%ld/ns/mnt", pid);
      *spawn->mnt_ns_fd = open (path, O_RDONLY | O_CLOEXEC);
    }
  int sync_fd = spawn->pipes->fds[2 * NSBOX_CHANNEL_SYNC + 1];
  if (r >= 0 && send (sync_fd, "x", 1, MSG_NOSIGNAL) != 1)
    r = nsbox_error_sys (err, errno, "signal the sandbox");
  if (r < 0)
    {
      nsbox_spawn_abort (child);
      if (spawn->mnt_ns_fd && *spawn->mnt_ns_fd >= 0)
        close (TAKE_FD (*spawn->mnt_ns_fd));
    }
  return r;
}

int
nsbox_spawn_send_limits (int sync_fd, const struct nsbox_plan *plan, struct nsbox_error **err)
{
  struct nsbox_limits_msg lim;
  memset (&lim, 0, sizeof lim);
  lim.nrlimits = plan->nrlimits;
  lim.unshare_cgroupns = plan->unshare_cgroupns;
  lim.n_tasks_fds = plan->n_v1_tasks_fds;
  for (int i = 0; i < plan->nrlimits && i < NSBOX_MAX_RLIMITS; i++)
    {
      lim.rlimit_resources[i] = plan->rlimit_resources[i];
      lim.rlimits[i] = plan->rlimits[i];
    }
  union
  {
    char buf[CMSG_SPACE (sizeof (int) * NSBOX_MAX_V1_CGROUPS)];
    struct cmsghdr align;
  } control;
  memset (&control, 0, sizeof control);
  struct iovec iov = { &lim, sizeof lim };
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
  int nfds = plan->n_v1_tasks_fds;
  if (nfds > 0)
    {
      msg.msg_control = control.buf;
      msg.msg_controllen = CMSG_SPACE (sizeof (int) * (size_t)nfds);
      struct cmsghdr *cm = CMSG_FIRSTHDR (&msg);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN (sizeof (int) * (size_t)nfds);
      memcpy (CMSG_DATA (cm), plan->v1_tasks_fds, sizeof (int) * (size_t)nfds);
    }
  ssize_t n;
  do
    n = sendmsg (sync_fd, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
    return 0;
  if (n < 0)
    return nsbox_error_sys (err, errno, "send the limits to the sandbox");
  return 0;
}
