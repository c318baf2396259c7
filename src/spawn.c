/* Parent side of the sandbox start: clone3 with every namespace, then the
 * uid/gid map handshake. */
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
#include "util.h"

/* A child of a non-dumpable launcher makes itself dumpable first thing;
 * until it has, its /proc files belong to root: wait for that (bounded). */
static int
open_proc_file (const char *path, bool wait_dumpable)
{
  for (int tries = 0;; tries++)
    {
      int fd = open (path, O_WRONLY | O_CLOEXEC);
      if (fd >= 0 || errno != EACCES || !wait_dumpable || tries >= 2000)
        return fd;
      struct timespec ts = { 0, 100000 };
      nanosleep (&ts, NULL);
    }
}

int
nsbox_write_proc_file (pid_t pid, const char *name, const char *text, bool wait_dumpable,
                       struct nsbox_error **err)
{
  char path[64];
  snprintf (path, sizeof path, "/proc/%d/%s", (int)pid, name);
  cleanup_close int fd = open_proc_file (path, wait_dumpable);
  if (fd < 0)
    return nsbox_error_sys (err, errno, "open '%s'", path);
  size_t len = strlen (text);
  ssize_t n = write (fd, text, len);
  if (n < 0)
    return nsbox_error_sys (err, errno, "write '%s' to '%s'", text, path);
  if ((size_t)n != len)
    return nsbox_error_set (err, EIO, "short write to '%s'", path);
  return 0;
}

/* One mapped id each. Run by root, the sandbox user is the unprivileged host
 * uid/gid 65534, never host root; otherwise it is the caller itself. */
static int
write_id_maps (pid_t pid, const struct nsbox_plan *plan, struct nsbox_error **err)
{
  bool root = geteuid () == 0;
  unsigned host_uid = root ? 65534 : (unsigned)geteuid ();
  unsigned host_gid = root ? 65534 : (unsigned)getegid ();
  char map[64];
  if (!root && nsbox_write_proc_file (pid, "setgroups", "deny", plan->caller_undumpable, err) < 0)
    return nsbox_error_prefix (err, "write id maps");
  snprintf (map, sizeof map, "%u %u 1\n", (unsigned)plan->uid, host_uid);
  if (nsbox_write_proc_file (pid, "uid_map", map, plan->caller_undumpable, err) < 0)
    return nsbox_error_prefix (err, "write id maps");
  snprintf (map, sizeof map, "%u %u 1\n", (unsigned)plan->gid, host_gid);
  if (nsbox_write_proc_file (pid, "gid_map", map, plan->caller_undumpable, err) < 0)
    return nsbox_error_prefix (err, "write id maps");
  return 0;
}

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
  close (child->pidfd);
  child->pidfd = -1;
}

int
nsbox_spawn (const struct nsbox_plan *plan, struct nsbox_limits *limits, int sync_fd,
             struct nsbox_child *child, struct nsbox_error **err)
{
  int pidfd = -1;
  struct clone_args args;
  memset (&args, 0, sizeof args);
  args.flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC
               | CLONE_NEWUTS | CLONE_PIDFD;
  args.pidfd = (uint64_t)(uintptr_t)&pidfd;
  /* No exit signal: an embedding program's SIGCHLD handler or waitpid(-1)
   * never sees (or steals) our child; we wait on the pidfd with __WALL. */
  args.exit_signal = 0;
  if (limits->v2_fd >= 0)
    {
      args.flags |= CLONE_INTO_CGROUP | CLONE_NEWCGROUP;
      args.cgroup = (uint64_t)limits->v2_fd;
    }
  long pid = syscall (SYS_clone3, &args, sizeof args);
  if (pid < 0)
    return clone_error (errno, err);
  if (pid == 0)
    nsbox_child_main (plan);

  int r = write_id_maps ((pid_t)pid, plan, err);
  if (r >= 0 && send (sync_fd, "x", 1, MSG_NOSIGNAL) != 1)
    r = nsbox_error_sys (err, errno, "signal the sandbox");
  child->pid = (pid_t)pid;
  child->pidfd = pidfd;
  if (r < 0)
    nsbox_spawn_abort (child);
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
