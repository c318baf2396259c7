/* The child side of clone shared by both inits: see child.h. */
#include "child.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Child-only state: the child is a copy of the parent, so this never
 * touches the parent's memory. */
static int child_report_fd = -1;

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

void
nsbox_child_set_report_fd (int fd)
{
  child_report_fd = fd;
}

/* Puts stdin/stdout/stderr, the report pipe and the sync channel (in that
 * order in `from`) at fixed numbers, the extra fds after them, and closes
 * every other inherited fd, whatever its CLOEXEC flag. Every fd is first
 * copied above any number placed, extras first, so no placement can close
 * an fd not yet placed. */
static void
place_fds (const int from[5], const int *extra, int n_extra)
{
  int high[5], high_extra[NSBOX_CHILD_EXTRA_MAX];
  if (n_extra < 0 || n_extra > NSBOX_CHILD_EXTRA_MAX)
    nsbox_child_fail (NSBOX_STEP_FDS, EINVAL, NULL);
  /* Above every number placed: a launcher's NOFILE limit of a few hundred
   * is enough. */
  int above = NSBOX_CHILD_FIRST_FREE_FD + n_extra > 16 ? NSBOX_CHILD_FIRST_FREE_FD + n_extra : 16;
  for (int i = 0; i < n_extra; i++)
    {
      high_extra[i] = fcntl (extra[i], F_DUPFD_CLOEXEC, above);
      if (high_extra[i] < 0)
        nsbox_child_fail (NSBOX_STEP_FDS, errno, NULL);
    }
  for (int i = 0; i < 5; i++)
    {
      high[i] = fcntl (from[i], F_DUPFD_CLOEXEC, above);
      if (high[i] < 0)
        nsbox_child_fail (NSBOX_STEP_FDS, errno, NULL);
    }
  for (int i = 0; i < 3; i++)
    if (dup2 (high[i], i) < 0)
      nsbox_child_fail (NSBOX_STEP_FDS, errno, NULL);
  if (dup3 (high[3], NSBOX_CHILD_REPORT_FD, O_CLOEXEC) < 0)
    nsbox_child_fail (NSBOX_STEP_FDS, errno, NULL);
  child_report_fd = NSBOX_CHILD_REPORT_FD;
  if (dup3 (high[4], NSBOX_CHILD_SYNC_FD, O_CLOEXEC) < 0)
    nsbox_child_fail (NSBOX_STEP_FDS, errno, NULL);
  for (int i = 0; i < n_extra; i++)
    if (dup3 (high_extra[i], NSBOX_CHILD_FIRST_FREE_FD + i, O_CLOEXEC) < 0)
      nsbox_child_fail (NSBOX_STEP_FDS, errno, NULL);
  if (syscall (SYS_close_range, NSBOX_CHILD_FIRST_FREE_FD + n_extra, ~0U, 0) < 0)
    nsbox_child_fail (NSBOX_STEP_FDS, errno, NULL);
}

/* Blocks until the parent has written the id maps; EOF means it died. */
static void
read_sync_byte (void)
{
  char byte;
  ssize_t n;
  do
    n = read (NSBOX_CHILD_SYNC_FD, &byte, 1);
  while (n < 0 && errno == EINTR);
  if (n != 1)
    _exit (127);
}

void
nsbox_child_prologue (const int fds[5], const int *extra, int n_extra, bool caller_undumpable)
{
  child_report_fd = fds[3];
  place_fds (fds, extra, n_extra);
  if (prctl (PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
    nsbox_child_fail (NSBOX_STEP_PDEATHSIG, errno, NULL);
  /* A non-dumpable process's /proc/PID files belong to root: an
   * unprivileged launcher could not write our id maps. Dumpable only until
   * the maps are written; this memory is a copy of the launcher's. */
  if (caller_undumpable && prctl (PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
    nsbox_child_fail (NSBOX_STEP_DUMPABLE, errno, NULL);
  read_sync_byte ();
  if (caller_undumpable && prctl (PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
    nsbox_child_fail (NSBOX_STEP_DUMPABLE, errno, NULL);
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
  struct pollfd launcher = { NSBOX_CHILD_REPORT_FD, 0, 0 };
  if (poll (&launcher, 1, 0) != 0)
    _exit (127);
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

/* A plain fork without glibc's fork handlers (their locks may have been
 * held by another thread of the launcher when it cloned us). clone, not
 * clone3: the filter may already be installed, and answers clone3 with
 * ENOSYS. With only flags set, the argument order of clone is the same on
 * every architecture. */
void
nsbox_child_send_fd (char tag, int fd, int step, const char *detail)
{
  union
  {
    char buf[CMSG_SPACE (sizeof (int))];
    struct cmsghdr align;
  } control;
  memset (&control, 0, sizeof control);
  struct iovec iov = { &tag, 1 };
  struct msghdr msg;
  memset (&msg, 0, sizeof msg);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.buf;
  msg.msg_controllen = sizeof control.buf;
  struct cmsghdr *cm = CMSG_FIRSTHDR (&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN (sizeof (int));
  memcpy (CMSG_DATA (cm), &fd, sizeof fd);
  /* The kernel refuses to pass an fd when the sending user already has more
   * in flight than the sender's soft NOFILE limit, and every sandbox of a
   * launcher's user shares that count: a program holding thousands in
   * flight (up to its own limit, 4096, plus one message) must not stop
   * other sandboxes from starting. init's limits are set again later. */
  struct rlimit nofile;
  if (getrlimit (RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max)
    {
      nofile.rlim_cur = nofile.rlim_max;
      setrlimit (RLIMIT_NOFILE, &nofile);
    }
  ssize_t n;
  do
    n = sendmsg (NSBOX_CHILD_SYNC_FD, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n != 1)
    nsbox_child_fail (step, n < 0 ? errno : EPROTO, detail);
}

pid_t
nsbox_child_fork (void)
{
  return (pid_t)syscall (SYS_clone, (unsigned long)SIGCHLD, 0UL, 0UL, 0UL, 0UL);
}

/* Reaps everything; when the program itself ends, reports its status and
 * exits, and the kernel kills whatever is left in the PID namespace. */
void
nsbox_child_reap (pid_t program)
{
  struct nsbox_report report;
  memset (&report, 0, sizeof report);
  report.kind = NSBOX_REPORT_STATUS;
  bool ended = false;
  /* After the program's end, at most this many zombies are reaped before
   * init gives up on being alone (a chain of forks that exit could feed it
   * orphans without end) and ends the rest with its own exit. */
  int leftovers = 64;
  for (;;)
    {
      int status;
      struct rusage ru;
      /* Once the program ended, only what is already there is reaped:
       * ECHILD then means no process of the sandbox is left but init. */
      pid_t pid = wait4 (-1, &status, __WALL | (ended ? WNOHANG : 0), &ru);
      if (pid < 0 && errno == EINTR)
        continue;
      if (pid < 0 && !(ended && errno == ECHILD))
        nsbox_child_fail (NSBOX_STEP_WAIT, errno, NULL);
      if (pid > 0)
        {
          report.reaped_cpu_usec += nsbox_rusage_cpu_usec (&ru);
          if ((uint64_t)ru.ru_maxrss > report.reaped_maxrss_kb)
            report.reaped_maxrss_kb = (uint64_t)ru.ru_maxrss;
        }
      if (pid == program)
        {
          report.status = status;
          ended = true;
          continue;
        }
      if (!ended || (pid > 0 && --leftovers > 0))
        continue;
      /* ECHILD: none left; 0: others still run; a pid: too many. */
      report.alone = pid < 0;
      send_report (&report);
      _exit (0);
    }
}
