/* Library hygiene: many sandboxes through nsbox_run in one process, one at a
 * time and from four threads at once, leave nothing behind in it: no fd, no
 * heap or RSS growth after warm-up, no child process or zombie, no cgroup
 * directory, no mount. The runs happen in a forked child (Criterion's
 * worker has threads of its own); it reports snapshots through a pipe.
 *
 * NSBOX_HYGIENE_RUNS (default 1000 native, 40 under runsc, whose runs take
 * about half a second each) sets the number of runs per phase. */
#include "harness.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <malloc.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nsbox.h"

enum
{
  SNAP_WARM = 0, /* after the single-thread warm-up */
  SNAP_SERIAL,   /* after N runs one at a time */
  SNAP_WARM_MT,  /* after the four-thread warm-up */
  SNAP_THREADS,  /* after N runs from four threads */
  SNAP_COUNT_,
};

static const char *const snap_names[SNAP_COUNT_]
    = { "after warm-up", "after the serial runs", "after the threaded warm-up",
        "after the threaded runs" };

struct snapshot
{
  int fds;
  long rss_kb;
  long long heap_bytes; /* mallinfo2 uordblks + hblkhd: bytes in use */
  int children;         /* processes whose parent is the child, zombies included */
  int threads;
  int cgroups;
  int mounts;
};

struct report
{
  struct snapshot snap[SNAP_COUNT_];
  int runs_done;
  int failures;
  char first_failure[256];
};

static long
status_kb (const char *field)
{
  char buf[4096];
  int fd = open ("/proc/self/status", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read (fd, buf, sizeof buf - 1) : -1;
  if (fd >= 0)
    close (fd);
  if (n <= 0)
    return -1;
  buf[n] = '\0';
  const char *p = strstr (buf, field);
  return p ? strtol (p + strlen (field), NULL, 10) : -1;
}

static int
count_children (void)
{
  DIR *d = opendir ("/proc");
  int n = 0;
  struct dirent *e;
  char path[300], buf[4096];
  while (d && (e = readdir (d)))
    {
      if (!isdigit ((unsigned char)e->d_name[0]))
        continue;
      snprintf (path, sizeof path, "/proc/%s/status", e->d_name);
      int fd = open (path, O_RDONLY | O_CLOEXEC);
      ssize_t len = fd >= 0 ? read (fd, buf, sizeof buf - 1) : -1;
      if (fd >= 0)
        close (fd);
      if (len <= 0)
        continue;
      buf[len] = '\0';
      const char *pp = strstr (buf, "\nPPid:");
      if (pp && strtol (pp + 6, NULL, 10) == getpid ())
        n++;
    }
  if (d)
    closedir (d);
  return n;
}

static int
count_mounts (void)
{
  FILE *f = fopen ("/proc/self/mountinfo", "re");
  int n = 0;
  char line[4096];
  while (f && fgets (line, sizeof line, f))
    n++;
  if (f)
    fclose (f);
  return n;
}

/* The threads of this process. pthread_join returns once the kernel has
 * cleared the thread's tid, which happens before the exiting task leaves the
 * thread group, so for a moment after the last join /proc may still count a
 * thread. Wait up to 2 s for the count to settle at 1: a thread that is still
 * there after that is one nsbox left behind. */
static int
settled_threads (void)
{
  int n = (int)status_kb ("Threads:");
  for (int i = 0; i < 200 && n > 1; i++)
    {
      nanosleep (&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
      n = (int)status_kb ("Threads:");
    }
  return n;
}

static void
take_snapshot (struct snapshot *s)
{
  s->threads = settled_threads ();
  struct mallinfo2 mi = mallinfo2 ();
  s->heap_bytes = (long long)(mi.uordblks + mi.hblkhd);
  s->fds = count_fds (getpid ()) - 1; /* the directory's own fd */
  s->rss_kb = status_kb ("VmRSS:");
  s->children = count_children ();
  s->cgroups = have_cgroups () ? count_nsbox_cgroups (getpid (), NULL, 0) : 0;
  s->mounts = count_mounts ();
}

struct worker
{
  nsbox_config *config;
  int runs;
  struct report *report;
};

static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;

static void
one_run (nsbox_config *config, struct report *report)
{
  struct nsbox_error *err = NULL;
  nsbox_result *res = NULL;
  int r = nsbox_run (config, NULL, 0, &res, &err);
  bool ok = r >= 0 && nsbox_result_exit_code (res) == 0;
  pthread_mutex_lock (&report_lock);
  report->runs_done++;
  if (!ok && report->failures++ == 0)
    snprintf (report->first_failure, sizeof report->first_failure, "%s",
              r < 0 ? (err ? nsbox_error_message (err) : "nsbox_run failed")
                    : "the program did not exit 0");
  pthread_mutex_unlock (&report_lock);
  nsbox_result_free (res);
  nsbox_error_free (err);
}

static void *
worker_main (void *arg)
{
  struct worker *w = arg;
  for (int i = 0; i < w->runs; i++)
    one_run (w->config, w->report);
  return NULL;
}

static void
threaded (nsbox_config *config, int runs, struct report *report)
{
  pthread_t threads[4];
  struct worker w[4];
  for (int i = 0; i < 4; i++)
    {
      w[i] = (struct worker){ config, runs / 4, report };
      if (pthread_create (&threads[i], NULL, worker_main, &w[i]) != 0)
        _exit (3);
    }
  for (int i = 0; i < 4; i++)
    pthread_join (threads[i], NULL);
}

/* The forked child: configure, run the phases, write the report. */
static void __attribute__ ((noreturn))
hygiene_child (int fd, int runs, uid_t uid, gid_t gid, bool drop)
{
  signal (SIGPIPE, SIG_DFL);
  prctl (PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (drop && (setgroups (0, NULL) < 0 || setgid (gid) < 0 || setuid (uid) < 0))
    _exit (2);
  prctl (PR_SET_DUMPABLE, 1, 0, 0, 0);
  static struct report report;
  struct nsbox_error *err = NULL;
  nsbox_config *config = nsbox_config_new (&err);
  const char *const command[] = { "/bin/true" };
  if (!config || nsbox_config_set (config, "rootfs", harness_rootfs (), &err) < 0
      || nsbox_config_set (config, "runtime", harness_runtime (), &err) < 0
      || nsbox_config_set (config, "timeout", "20s", &err) < 0
      || nsbox_config_set_command (config, 1, command, &err) < 0)
    {
      snprintf (report.first_failure, sizeof report.first_failure, "configure: %s",
                err ? nsbox_error_message (err) : "?");
      report.failures = 1;
      (void)!write (fd, &report, sizeof report);
      _exit (0);
    }
  int warm = runs / 20 > 8 ? runs / 20 : 8;
  for (int i = 0; i < warm; i++)
    one_run (config, &report);
  take_snapshot (&report.snap[SNAP_WARM]);
  for (int i = 0; i < runs; i++)
    one_run (config, &report);
  take_snapshot (&report.snap[SNAP_SERIAL]);
  threaded (config, warm * 4, &report);
  take_snapshot (&report.snap[SNAP_WARM_MT]);
  threaded (config, runs, &report);
  take_snapshot (&report.snap[SNAP_THREADS]);
  nsbox_config_free (config);
  (void)!write (fd, &report, sizeof report);
  _exit (0);
}

static int
hygiene_runs (void)
{
  const char *v = getenv ("NSBOX_HYGIENE_RUNS");
  if (v && *v)
    return atoi (v);
  return harness_is_runsc () ? 40 : 1000;
}

static void
assert_same (const struct report *r, int from, int to)
{
  const struct snapshot *a = &r->snap[from], *b = &r->snap[to];
  const char *when = snap_names[to], *since = snap_names[from];
  cr_expect_eq (b->fds, a->fds, "open fds %s: %d, %s: %d", since, a->fds, when, b->fds);
  cr_expect_eq (b->children, 0, "%d child process(es) %s", b->children, when);
  cr_expect_eq (b->threads, 1, "%d threads %s", b->threads, when);
  cr_expect_eq (b->cgroups, 0, "%d nsbox cgroup(s) of the process left %s", b->cgroups, when);
  cr_expect_eq (b->mounts, a->mounts, "mounts %s: %d, %s: %d", since, a->mounts, when, b->mounts);
  /* 64 KiB of heap over a thousand runs is less than 64 bytes per run. */
  cr_expect (b->heap_bytes - a->heap_bytes <= 64 * 1024,
             "heap in use grew by %lld bytes from %s to %s", b->heap_bytes - a->heap_bytes, since,
             when);
#ifndef __SANITIZE_ADDRESS__
  /* Under ASan freed memory stays in its quarantine (256 MB), so RSS grows
   * with every free; LeakSanitizer checks this build for leaks instead. */
  cr_expect (b->rss_kb - a->rss_kb <= 4096, "RSS grew by %ld kB from %s to %s",
             b->rss_kb - a->rss_kb, since, when);
#endif
}

Test (hygiene, thousand_runs_in_one_process_leave_nothing_behind, .timeout = 600)
{
  int runs = hygiene_runs ();
  harness_rootfs ();
  bool drop = harness_test_user () != NULL;
  uid_t uid = drop ? sandbox_host_uid () : getuid ();
  gid_t gid = drop ? sandbox_host_gid () : getgid ();
  int p[2];
  cr_assert (pipe2 (p, O_CLOEXEC) == 0);
  pid_t pid = fork ();
  cr_assert (pid >= 0, "fork: %s", strerror (errno));
  if (pid == 0)
    {
      close (p[0]);
      hygiene_child (p[1], runs, uid, gid, drop);
    }
  close (p[1]);
  struct report r;
  memset (&r, 0, sizeof r);
  size_t got = 0;
  while (got < sizeof r)
    {
      ssize_t n = read (p[0], (char *)&r + got, sizeof r - got);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      got += (size_t)n;
    }
  close (p[0]);
  int status;
  while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
    ;
  cr_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0 && got == sizeof r,
             "the hygiene child ended with status 0x%x after %zu report bytes", status, got);
  cr_assert_eq (r.failures, 0, "%d of %d runs failed; first: %s", r.failures, r.runs_done,
                r.first_failure);
  cr_log_info ("hygiene: %d runs; fds %d, rss %ld/%ld/%ld/%ld kB, heap %lld/%lld/%lld/%lld",
               r.runs_done, r.snap[SNAP_WARM].fds, r.snap[0].rss_kb, r.snap[1].rss_kb,
               r.snap[2].rss_kb, r.snap[3].rss_kb, r.snap[0].heap_bytes, r.snap[1].heap_bytes,
               r.snap[2].heap_bytes, r.snap[3].heap_bytes);
  assert_same (&r, SNAP_WARM, SNAP_SERIAL);
  assert_same (&r, SNAP_WARM_MT, SNAP_THREADS);
  cr_expect_eq (r.snap[SNAP_THREADS].fds, r.snap[SNAP_WARM].fds,
                "open fds after warm-up: %d, after the threaded runs: %d", r.snap[SNAP_WARM].fds,
                r.snap[SNAP_THREADS].fds);
}
