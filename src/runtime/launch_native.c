/* The native runtime: init is our own code (child.c), started by clone3
 * into every namespace; it sends its /tmp (for output-dir) and, for
 * network: proxy, the proxy's listener over the sync channel, and the
 * launcher supervises the program directly. */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <jansson.h>

#include "child.h"
#include "egress.h"
#include "error.h"
#include "files.h"
#include "launch-private.h"

static void __attribute__ ((noreturn)) native_init (void *plan) { nsbox_child_main (plan); }

/* The cgroup v1 groups are made while the child builds its mounts (both
 * take a while; the child joins them before it forks the program). */
static int
native_start (struct nsbox_launch *r, const nsbox_config *c, const nsbox_config *limits_c,
              struct nsbox_error **err)
{
  (void)c;
  int ret = nsbox_pipes_open (&r->pipes, err);
  if (ret < 0)
    return ret;
  int ends[5];
  nsbox_pipes_child_ends (&r->pipes, ends);
  r->plan.stdin_fd = ends[NSBOX_CHANNEL_STDIN];
  r->plan.stdout_fd = ends[NSBOX_CHANNEL_STDOUT];
  r->plan.stderr_fd = ends[NSBOX_CHANNEL_STDERR];
  r->plan.report_fd = ends[NSBOX_CHANNEL_REPORT];
  r->plan.sync_fd = ends[NSBOX_CHANNEL_SYNC];
  struct nsbox_spawn spawn = {
    .namespaces = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
                  | (r->limits.v2_fd >= 0 ? CLONE_NEWCGROUP : 0),
    .cgroup_fd = r->limits.v2_fd,
    .child_main = native_init,
    .arg = &r->plan,
    .uid = r->plan.uid,
    .gid = r->plan.gid,
    .caller_undumpable = r->plan.caller_undumpable,
    .pipes = &r->pipes,
    .mnt_ns_fd = &r->native.mnt_ns_fd,
  };
  if ((ret = nsbox_spawn (&spawn, &r->child, err)) < 0)
    return ret;
  nsbox_pipes_close_child_ends (&r->pipes);
  /* The child has its copies of the inputs. */
  nsbox_inputs_close (&r->plan.inputs);
  r->native.sync_fd = TAKE_FD (r->pipes.fds[2 * NSBOX_CHANNEL_SYNC + 1]);
  if ((ret = nsbox_limits_attach (&r->limits, limits_c, &r->plan, err)) < 0
      || (ret = nsbox_spawn_send_limits (r->native.sync_fd, &r->plan, err)) < 0)
    {
      nsbox_spawn_abort (&r->child);
      return ret;
    }
  nsbox_limits_close_tasks (&r->limits, &r->plan);
  r->streams = nsbox_pipes_take_streams (&r->pipes);
  return 0;
}

/* An fd init sent on the sync channel, in a message of one tag byte; -1
 * when none is there yet (never blocks) or anything is wrong. */
static int
receive_fd (int sync_fd, char *tag_out)
{
  union
  {
    char buf[CMSG_SPACE (sizeof (int))];
    struct cmsghdr align;
  } control;
  char tag = 0;
  struct iovec iov = { &tag, 1 };
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
  msg.msg_control = control.buf;
  msg.msg_controllen = sizeof control.buf;
  *tag_out = 0;
  if (sync_fd < 0 || recvmsg (sync_fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) != 1)
    return -1;
  struct cmsghdr *cm = CMSG_FIRSTHDR (&msg);
  if (!cm || cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS
      || cm->cmsg_len < CMSG_LEN (sizeof (int)))
    return -1;
  int fd;
  memcpy (&fd, CMSG_DATA (cm), sizeof fd);
  /* One fd is all init sends; close any other that came along. */
  for (size_t i = 1; i < (cm->cmsg_len - CMSG_LEN (0)) / sizeof (int); i++)
    {
      int extra;
      memcpy (&extra, CMSG_DATA (cm) + i * sizeof (int), sizeof extra);
      close (extra);
    }
  if (cm->cmsg_len != CMSG_LEN (sizeof (int)))
    {
      close (fd);
      return -1;
    }
  if (msg.msg_flags & MSG_CTRUNC)
    {
      close (fd);
      return -1;
    }
  *tag_out = tag;
  return fd;
}

/* The fd of the sandbox's /tmp that init sent while it built its mounts,
 * or -1. */
static int
receive_tmp_fd (struct nsbox_launch *r)
{
  if (r->native.tmp_fd >= 0)
    return TAKE_FD (r->native.tmp_fd);
  char tag;
  int fd = receive_fd (r->native.sync_fd, &tag);
  if (fd >= 0 && tag != 't')
    {
      close (fd);
      return -1;
    }
  return fd;
}

int
nsbox_native_tmp_fd (struct nsbox_launch *r)
{
  if (r->native.tmp_fd < 0)
    r->native.tmp_fd = receive_tmp_fd (r);
  return r->native.tmp_fd;
}

/* network: proxy. init sends the listener after /tmp, before it starts the
 * program: wait for it while init lives, up to the run's timeout. 0 when
 * init ended or failed a step first (the supervision reports why). */
static int
receive_listener (struct nsbox_launch *r, uint64_t timeout_ms, struct nsbox_error **err)
{
  uint64_t deadline = nsbox_now_ms () + timeout_ms;
  bool last_look = false;
  for (;;)
    {
      char tag;
      int fd = receive_fd (r->native.sync_fd, &tag);
      if (fd >= 0 && tag == 'l')
        return fd;
      if (fd >= 0 && tag == 't' && r->native.tmp_fd < 0)
        {
          r->native.tmp_fd = fd;
          continue;
        }
      if (fd >= 0)
        {
          close (fd);
          return nsbox_error_set (err, EPROTO, "egress proxy: init sent an unexpected fd");
        }
      if (last_look)
        return 0;
      uint64_t now = nsbox_now_ms ();
      if (now >= deadline)
        return nsbox_error_set (err, ETIMEDOUT,
                                "egress proxy: the sandbox's listener did not arrive");
      struct pollfd p[2] = { { r->native.sync_fd, POLLIN, 0 }, { r->child.pidfd, POLLIN, 0 } };
      int n = poll (p, 2, (int)(deadline - now));
      if (n < 0 && errno != EINTR)
        return nsbox_error_sys (err, errno, "egress proxy: wait for the listener");
      /* init is gone, or its end of the channel: one more look at what it
       * sent before. */
      if (n > 0 && (p[1].revents || (p[0].revents & (POLLHUP | POLLERR))))
        last_look = true;
    }
}

/* After the run, when nothing of the sandbox is left running. */
static int
collect_outputs (struct nsbox_launch *r, const struct nsbox_dispatch *d, struct nsbox_result *res,
                 struct nsbox_error **err)
{
  cleanup_close int tmp_fd = receive_tmp_fd (r);
  if (tmp_fd < 0)
    return nsbox_error_set (err, EPROTO, "collect outputs: the sandbox's /tmp did not arrive");
  return nsbox_collect_outputs (tmp_fd, d->output_dir_fd, false, res, err);
}

static int
native_finish (struct nsbox_launch *r, const struct nsbox_dispatch *d, struct nsbox_result *res,
               struct nsbox_error **err)
{
  int ret;
  if (r->proxy)
    {
      ret = receive_listener (r, d->timeout_ms + 10000, err);
      if (ret > 0)
        ret = nsbox_egress_start (r->proxy, ret, err);
      if (ret < 0)
        {
          nsbox_launch_kill (r);
          return ret;
        }
    }
  ret = nsbox_supervise (&r->child, &r->streams, &r->limits, d, res, err);
  if (r->proxy)
    res->egress
        = nsbox_egress_stop (TAKE_PTR (r->proxy), ret >= 0 && !res->timed_out && !res->oom_killed);
  nsbox_limits_collect (&r->limits, res);
  if (ret >= 0 && d->output_dir_fd >= 0)
    ret = collect_outputs (r, d, res, err);
  return ret;
}

/* Native: the one child of init is the program. */
static pid_t
find_program (pid_t init)
{
  char path[64], buf[64];
  snprintf (path, sizeof path, "/proc/%d/task/%d/children", (int)init, (int)init);
  if (nsbox_read_small (path, buf, sizeof buf) < 0)
    return -1;
  char *end;
  long pid = strtol (buf, &end, 10);
  if (end == buf || pid <= 0 || (*end != ' ' && *end != '\0') || strchr (end + 1, ' '))
    return -1;
  return (pid_t)pid;
}

/* Whether the program sits in read(fd, ...): /proc/PID/syscall is
 * "NR ARG0 ..." while it blocks in a system call. */
static bool
program_reads (pid_t pid, int fd)
{
  char path[64], buf[256], arg[24];
  snprintf (path, sizeof path, "/proc/%d/syscall", (int)pid);
  if (nsbox_read_small (path, buf, sizeof buf) < 0)
    return false;
  char *end;
  long nr = strtol (buf, &end, 10);
  int n = snprintf (arg, sizeof arg, " 0x%x ", (unsigned)fd);
  return end != buf && nr == SYS_read && strncmp (end, arg, (size_t)n) == 0;
}

/* The one child of init is the program: waiting once it sits in a read
 * of its code (stdin; a live sandbox's driver, its code pipe). */
static enum nsbox_launch_state
native_probe (struct nsbox_launch *r)
{
  if (r->native.program <= 0)
    r->native.program = find_program (r->child.pid);
  return r->native.program > 0 && program_reads (r->native.program, r->code_child_fd)
             ? NSBOX_LAUNCH_WAITING
             : NSBOX_LAUNCH_STARTING;
}

pid_t
nsbox_native_program (struct nsbox_launch *r)
{
  if (r->native.program <= 0)
    r->native.program = find_program (r->child.pid);
  return r->native.program > 0 ? r->native.program : -1;
}

static void
native_release (struct nsbox_launch *r)
{
  nsbox_close_slot (&r->native.mnt_ns_fd);
  nsbox_close_slot (&r->native.tmp_fd);
  nsbox_close_slot (&r->native.sync_fd);
}

static void
native_forked (struct nsbox_launch *r)
{
  int *fds[] = { &r->native.sync_fd, &r->native.tmp_fd, &r->native.mnt_ns_fd };
  for (size_t i = 0; i < ARRAY_SIZE (fds); i++)
    if (*fds[i] >= 0)
      close (TAKE_FD (*fds[i]));
}

const struct nsbox_runtime_ops nsbox_native_ops = {
  .name = "native",
  .start = native_start,
  .finish = native_finish,
  .probe = native_probe,
  .release = native_release,
  .forked = native_forked,
};
