/* Supervision of one native run from the launcher's side. Parent memory stays
 * bounded: past max-output-bytes output is read and only its head and tail
 * kept (capture.c), so the sandbox never blocks on a full pipe and never
 * grows our heap. */
#include "supervise.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "util.h"

/* After a kill, how long to wait for the namespace to empty and the pipes to
 * close before reaping regardless. */
#define KILL_GRACE_MS 5000

struct loop
{
  struct nsbox_child *child;
  struct nsbox_streams *s;
  struct nsbox_limits *limits;
  const char *code;
  size_t code_len, code_off;
  struct nsbox_capture out, errs;
  struct nsbox_report error_report, status_report;
  size_t report_fill;
  char report_buf[sizeof (struct nsbox_report)];
  int cancel_fd;
  short cancel_events; /* POLLRDHUP, or 0 for POLLHUP/POLLERR only */
  bool exited, timed_out, killed, cancelled;
  uint64_t deadline, kill_deadline;
  bool sample_cpu;        /* no cgroup counts its CPU: read the tree from /proc */
  uint64_t cpu_seen_usec; /* the most the tree was seen to have used */
  uint64_t next_sample_ms;
};

int
nsbox_supervise_drain (int *fd, struct nsbox_capture *c)
{
  char chunk[65536];
  for (int i = 0; i < 16; i++)
    {
      ssize_t n = read (*fd, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN)
        return 1;
      if (n <= 0)
        {
          nsbox_close_slot (fd);
          return 0;
        }
      if (nsbox_capture_add (c, chunk, (size_t)n) < 0)
        return -ENOMEM;
    }
  return 1;
}

static void
feed_stdin (struct loop *l)
{
  while (l->code_off < l->code_len)
    {
      size_t n = l->code_len - l->code_off;
      ssize_t w = write (l->s->stdin_fd, l->code + l->code_off, n > 65536 ? 65536 : n);
      if (w < 0 && errno == EINTR)
        continue;
      if (w < 0 && errno == EAGAIN)
        return;
      if (w < 0)
        break; /* EPIPE: the program closed its stdin; the rest is dropped */
      l->code_off += (size_t)w;
    }
  nsbox_close_slot (&l->s->stdin_fd);
}

static void
read_reports (struct loop *l)
{
  for (;;)
    {
      ssize_t n = read (l->s->report_fd, l->report_buf + l->report_fill,
                        sizeof l->report_buf - l->report_fill);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN)
        return;
      if (n <= 0)
        {
          nsbox_close_slot (&l->s->report_fd);
          return;
        }
      l->report_fill += (size_t)n;
      if (l->report_fill < sizeof l->report_buf)
        continue;
      struct nsbox_report r;
      memcpy (&r, l->report_buf, sizeof r);
      l->report_fill = 0;
      if (r.kind == NSBOX_REPORT_ERROR && l->error_report.kind == 0)
        l->error_report = r;
      else if (r.kind == NSBOX_REPORT_STATUS)
        l->status_report = r;
    }
}

/* utime and stime of one process, and with `reaped` its cutime and cstime
 * too, in microseconds (0 when it cannot be read). */
static uint64_t
process_cpu_usec (pid_t pid, bool reaped)
{
  char path[64];
  uint64_t t[4] = { 0 };
  long hz = sysconf (_SC_CLK_TCK);
  snprintf (path, sizeof path, "/proc/%d/stat", (int)pid);
  if (hz <= 0 || !nsbox_proc_stat_fields (path, 14, reaped ? 4 : 2, t))
    return 0;
  return (t[0] + t[1] + t[2] + t[3]) * (1000000 / (uint64_t)hz);
}

/* At most this many processes of a tree are counted. */
#define TREE_MAX 4096

/* Pushes the pids of a /proc/PID/task/TID/children file (numbers separated
 * by spaces) onto stack[n..max); returns the new n. */
static size_t
read_children (const char *path, pid_t *stack, size_t n, size_t max)
{
  /* PID_MAX_LIMIT: a number above it is no pid (and stops growing). */
  const uint64_t pid_max = 4194304;
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return n;
  char buf[1024];
  uint64_t value = 0; /* the number being read, 0 between numbers */
  ssize_t got;
  while ((got = read (fd, buf, sizeof buf)) > 0)
    for (ssize_t i = 0; i < got; i++)
      if (buf[i] >= '0' && buf[i] <= '9')
        value = value > pid_max ? value : value * 10 + (uint64_t)(buf[i] - '0');
      else
        {
          if (value > 0 && value <= pid_max && n < max)
            stack[n++] = (pid_t)value;
          value = 0;
        }
  if (value > 0 && value <= pid_max && n < max)
    stack[n++] = (pid_t)value;
  return n;
}

/* The sum of each(p) over the process tree under pid, from /proc
 * (UINT64_MAX when it cannot be read): the children of every thread,
 * walked with a stack on the heap (the tree is the sandbox's, as deep as it
 * likes), at most TREE_MAX processes. A process each() says is not of the
 * tree (false) counts nothing, and its children are not looked at. */
static uint64_t
tree_sum (pid_t pid, bool (*each) (pid_t pid, uint64_t ns, uint64_t *value), uint64_t ns)
{
  if (pid <= 0)
    return UINT64_MAX;
  cleanup_free pid_t *stack = malloc (TREE_MAX * sizeof *stack);
  if (!stack)
    return UINT64_MAX;
  size_t n = 0, seen = 0;
  uint64_t sum = 0;
  stack[n++] = pid;
  while (n > 0 && seen++ < TREE_MAX)
    {
      pid_t p = stack[--n];
      uint64_t value = 0;
      /* pid itself is the caller's to vouch for (unprivileged, init's
       * own files are not readable), its descendants are checked. */
      if (!each (p, ns, &value) && p != pid)
        continue;
      sum += value;
      char path[64];
      snprintf (path, sizeof path, "/proc/%d/task", (int)p);
      cleanup_close int dir = open (path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (dir < 0)
        continue;
      /* getdents64 and read into buffers on the stack: this runs every
       * 100 ms over every thread of the sandbox, and allocates nothing. */
      union
      {
        char buf[4096];
        struct dirent64 align;
      } ents;
      long got;
      while ((got = syscall (SYS_getdents64, dir, ents.buf, sizeof ents.buf)) > 0)
        for (long off = 0; off < got;)
          {
            struct dirent64 *e = (struct dirent64 *)(ents.buf + off);
            off += e->d_reclen;
            if (e->d_name[0] == '.')
              continue;
            char cpath[sizeof path + sizeof e->d_name + 16];
            snprintf (cpath, sizeof cpath, "%s/%s/children", path, e->d_name);
            n = read_children (cpath, stack, n, TREE_MAX);
          }
    }
  return sum;
}

static bool
reaped_cpu_usec (pid_t pid, uint64_t ns, uint64_t *usec)
{
  (void)ns;
  *usec = process_cpu_usec (pid, true);
  return true;
}

uint64_t
nsbox_tree_cpu_usec (pid_t pid)
{
  return sysconf (_SC_CLK_TCK) > 0 ? tree_sum (pid, reaped_cpu_usec, 0) : UINT64_MAX;
}

uint64_t
nsbox_child_pid_namespace (pid_t pid)
{
  char path[64];
  pid_t child = 0;
  snprintf (path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
  if (read_children (path, &child, 0, 1) != 1)
    return 0;
  struct stat st;
  snprintf (path, sizeof path, "/proc/%d/ns/pid", (int)child);
  return stat (path, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* A process's proportional set size: its private pages and its share of
 * the pages it shares (with the launcher whose clone init is, too). Read
 * through a directory fd of /proc/PID, which stays the process's own
 * (reads fail once it is gone, whoever takes its pid next), and only when
 * it is in the PID namespace `ns`: a pid that a process of the sandbox
 * left and another took counts nothing. */
static bool
process_pss_bytes (pid_t pid, uint64_t ns, uint64_t *bytes)
{
  char path[64], buf[2048];
  snprintf (path, sizeof path, "/proc/%d", (int)pid);
  cleanup_close int dir = open (path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct stat st;
  if (dir < 0 || fstatat (dir, "ns/pid", &st, 0) < 0 || (uint64_t)st.st_ino != ns)
    return false;
  cleanup_close int fd = openat (dir, "smaps_rollup", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd < 0 ? -1 : read (fd, buf, sizeof buf - 1);
  if (n <= 0)
    return false;
  buf[n] = '\0';
  const char *pss = strstr (buf, "\nPss:");
  *bytes = pss ? strtoull (pss + 5, NULL, 10) * 1024 : 0;
  return true;
}

uint64_t
nsbox_tree_pss_bytes (pid_t pid, uint64_t ns)
{
  return ns ? tree_sum (pid, process_pss_bytes, ns) : UINT64_MAX;
}

/* Without a cgroup to count it, the CPU time of processes reaped with the
 * namespace (killed, or left running when the program exited) reaches no
 * rusage: the tree is read from /proc every SAMPLE_MS, when the program's
 * status arrives and before a kill, and the most seen counts. */
#define SAMPLE_MS 100

static void
sample_cpu (struct loop *l)
{
  if (!l->sample_cpu || l->exited)
    return;
  uint64_t usec = nsbox_tree_cpu_usec (l->child->pid);
  if (usec != UINT64_MAX && usec > l->cpu_seen_usec)
    l->cpu_seen_usec = usec;
  l->next_sample_ms = nsbox_now_ms () + SAMPLE_MS;
}

static void
kill_sandbox (struct loop *l)
{
  if (!l->killed)
    sample_cpu (l);
  if (!nsbox_limits_kill (l->limits))
    syscall (SYS_pidfd_send_signal, l->child->pidfd, SIGKILL, NULL, 0);
}

/* Whether init reported the program's status with nothing else of the
 * sandbox left running, so the run is over before init's own exit (the
 * teardown of its namespaces and of its copy of our memory). */
static bool
ended_alone (const struct loop *l)
{
  return l->status_report.kind == NSBOX_REPORT_STATUS && l->status_report.alone
         && l->error_report.kind == 0 && !l->killed;
}

static bool
finished (const struct loop *l)
{
  if (l->s->stdout_fd >= 0 || l->s->stderr_fd >= 0)
    return false;
  return (l->exited && l->s->report_fd < 0) || ended_alone (l);
}

static int
poll_once (struct loop *l)
{
  struct pollfd p[6];
  int n = 0, i_in = -1, i_out = -1, i_err = -1, i_rep = -1, i_pid = -1, i_cancel = -1;
  if (l->s->stdin_fd >= 0)
    p[i_in = n++] = (struct pollfd){ l->s->stdin_fd, POLLOUT, 0 };
  if (l->s->stdout_fd >= 0)
    p[i_out = n++] = (struct pollfd){ l->s->stdout_fd, POLLIN, 0 };
  if (l->s->stderr_fd >= 0)
    p[i_err = n++] = (struct pollfd){ l->s->stderr_fd, POLLIN, 0 };
  if (l->s->report_fd >= 0)
    p[i_rep = n++] = (struct pollfd){ l->s->report_fd, POLLIN, 0 };
  if (!l->exited)
    p[i_pid = n++] = (struct pollfd){ l->child->pidfd, POLLIN, 0 };
  if (l->cancel_fd >= 0 && !l->killed)
    p[i_cancel = n++] = (struct pollfd){ l->cancel_fd, l->cancel_events, 0 };
  uint64_t now = nsbox_now_ms ();
  uint64_t until = l->killed ? l->kill_deadline : l->deadline;
  if (l->sample_cpu && !l->killed && !l->exited && l->next_sample_ms < until)
    until = l->next_sample_ms;
  int wait = until > now ? (int)(until - now > 60000 ? 60000 : until - now) : 0;
  if (poll (p, (nfds_t)n, wait) < 0 && errno != EINTR)
    return -errno;
  if (i_in >= 0 && p[i_in].revents)
    feed_stdin (l);
  if (i_out >= 0 && p[i_out].revents && nsbox_supervise_drain (&l->s->stdout_fd, &l->out) < 0)
    return -ENOMEM;
  if (i_err >= 0 && p[i_err].revents && nsbox_supervise_drain (&l->s->stderr_fd, &l->errs) < 0)
    return -ENOMEM;
  if (i_rep >= 0 && p[i_rep].revents)
    {
      read_reports (l);
      sample_cpu (l);
    }
  if (i_pid >= 0 && p[i_pid].revents)
    l->exited = true;
  if (i_cancel >= 0 && p[i_cancel].revents)
    {
      kill_sandbox (l);
      l->killed = l->cancelled = true;
      l->kill_deadline = nsbox_now_ms () + KILL_GRACE_MS;
    }
  return 0;
}

static int
run_loop (struct loop *l)
{
  while (!finished (l))
    {
      uint64_t now = nsbox_now_ms ();
      if (l->sample_cpu && !l->killed && now >= l->next_sample_ms)
        sample_cpu (l);
      if (!l->killed && now >= l->deadline)
        {
          l->timed_out = !l->exited;
          kill_sandbox (l);
          l->killed = true;
          l->kill_deadline = now + KILL_GRACE_MS;
        }
      else if (l->killed && now >= l->kill_deadline)
        break;
      int r = poll_once (l);
      if (r < 0)
        {
          kill_sandbox (l);
          return r;
        }
    }
  return 0;
}

static void
set_exit (struct nsbox_result *res, int status)
{
  if (WIFSIGNALED (status))
    {
      res->signal = WTERMSIG (status);
      res->exit_code = 128 + res->signal;
    }
  else
    res->exit_code = WEXITSTATUS (status);
}

/* Turns what the child reported and how init ended into the result. */
static int
conclude (struct loop *l, const siginfo_t *info, struct nsbox_result *res, struct nsbox_error **err)
{
  if (l->error_report.kind == NSBOX_REPORT_ERROR)
    return nsbox_report_to_error (&l->error_report, err);
  if (l->status_report.kind == NSBOX_REPORT_STATUS)
    set_exit (res, l->status_report.status);
  else if (info->si_code == CLD_KILLED || info->si_code == CLD_DUMPED || l->timed_out)
    {
      res->signal = info->si_code == CLD_EXITED ? SIGKILL : info->si_status;
      res->exit_code = 128 + res->signal;
    }
  else
    return nsbox_error_set (err, EPROTO,
                            "sandbox init exited with status %d before the program "
                            "ended",
                            info->si_status);
  res->timed_out = l->timed_out && l->status_report.kind != NSBOX_REPORT_STATUS;
  return 0;
}

void
nsbox_supervise_store_output (struct nsbox_capture *stdout_c, struct nsbox_capture *stderr_c,
                              struct nsbox_result *res)
{
  struct nsbox_captured out, errs;
  nsbox_capture_finish (stdout_c, &out);
  nsbox_capture_finish (stderr_c, &errs);
  res->stdout_buf = out.buf;
  res->stdout_len = out.len;
  res->stdout_truncated = out.truncated;
  res->stdout_omitted = out.omitted;
  res->stderr_buf = errs.buf;
  res->stderr_len = errs.len;
  res->stderr_truncated = errs.truncated;
  res->stderr_omitted = errs.omitted;
}

void
nsbox_sigpipe_block (struct nsbox_sigpipe_guard *g)
{
  sigset_t pipe_set, pending;
  sigemptyset (&pipe_set);
  sigaddset (&pipe_set, SIGPIPE);
  pthread_sigmask (SIG_BLOCK, &pipe_set, &g->old);
  sigpending (&pending);
  g->was_pending = sigismember (&pending, SIGPIPE);
}

void
nsbox_sigpipe_restore (const struct nsbox_sigpipe_guard *g)
{
  sigset_t pipe_set, pending;
  sigemptyset (&pipe_set);
  sigaddset (&pipe_set, SIGPIPE);
  sigpending (&pending);
  if (!g->was_pending && sigismember (&pending, SIGPIPE))
    {
      struct timespec zero = { 0, 0 };
      sigtimedwait (&pipe_set, NULL, &zero);
    }
  pthread_sigmask (SIG_SETMASK, &g->old, NULL);
}

int
nsbox_supervise (struct nsbox_child *child, struct nsbox_streams *s, struct nsbox_limits *limits,
                 const struct nsbox_dispatch *d, struct nsbox_result *res, struct nsbox_error **err)
{
  struct loop l = { .child = child,
                    .s = s,
                    .limits = limits,
                    .code = d->code,
                    .code_len = d->code_len,
                    .cancel_fd = d->cancel_fd,
                    .cancel_events = d->cancel_on_half_close ? POLLRDHUP : 0 };
  size_t code_len = d->code_len;
  nsbox_capture_init (&l.out, d->capture, d->max_output_bytes);
  nsbox_capture_init (&l.errs, d->capture, d->max_output_bytes);
  nsbox_capture_observe (&l.out, d->output, d->output_data, 1);
  nsbox_capture_observe (&l.errs, d->output, d->output_data, 2);
  uint64_t start = nsbox_now_ms ();
  l.deadline = start + d->timeout_ms;
  uint64_t cgroup_usec;
  l.sample_cpu = !nsbox_limits_cpu_usec (limits, &cgroup_usec);
  l.next_sample_ms = start + SAMPLE_MS;
  nsbox_set_nonblocking (s->stdin_fd);
  nsbox_set_nonblocking (s->stdout_fd);
  nsbox_set_nonblocking (s->stderr_fd);
  nsbox_set_nonblocking (s->report_fd);
  if (code_len == 0)
    nsbox_close_slot (&s->stdin_fd);

  struct nsbox_sigpipe_guard pipe_guard;
  nsbox_sigpipe_block (&pipe_guard);
  int r = run_loop (&l);
  nsbox_sigpipe_restore (&pipe_guard);
  nsbox_close_slot (&s->stdin_fd);
  nsbox_close_slot (&s->stdout_fd);
  nsbox_close_slot (&s->stderr_fd);
  nsbox_close_slot (&s->report_fd);

  siginfo_t info;
  memset (&info, 0, sizeof info);
  uint64_t cpu_usec, maxrss_kb;
  if (r >= 0 && !l.exited && ended_alone (&l))
    {
      /* init is left to exit on its own and is reaped with the launch
       * (nsbox_spawn_abort): what it reaped counts, and its own time where
       * no cgroup counts the CPU (nsbox_limits_collect sets it then). */
      cpu_usec = l.status_report.reaped_cpu_usec
                 + (l.sample_cpu ? process_cpu_usec (child->pid, false) : 0);
      maxrss_kb = l.status_report.reaped_maxrss_kb;
    }
  else
    {
      struct rusage ru;
      memset (&ru, 0, sizeof ru);
      while (syscall (SYS_waitid, P_PIDFD, child->pidfd, &info, WEXITED | __WALL, &ru) < 0
             && errno == EINTR)
        ;
      nsbox_close_slot (&child->pidfd);
      cpu_usec = nsbox_rusage_cpu_usec (&ru);
      maxrss_kb = (uint64_t)ru.ru_maxrss;
    }
  res->duration_ms = nsbox_now_ms () - start;
  res->cpu_ms = cpu_usec / 1000;
  if (l.cpu_seen_usec / 1000 > res->cpu_ms)
    res->cpu_ms = l.cpu_seen_usec / 1000;
  res->memory_peak_bytes = maxrss_kb * 1024;
  nsbox_supervise_store_output (&l.out, &l.errs, res);
  res->timeout_ms = d->timeout_ms;
  res->memory_limit_bytes = d->memory_bytes;
  if (r < 0)
    return nsbox_error_sys (err, -r, "supervise the sandbox");
  if (l.cancelled)
    return nsbox_error_set (err, ECANCELED, "the client went away: the run was killed");
  return conclude (&l, &info, res, err);
}
