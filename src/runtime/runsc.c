/* runtime runsc: the same job under gVisor.
 *
 *   nsbox (caller's uid)
 *     |  private work dir in /dev/shm (or TMPDIR): bundle/ (config.json, the
 *     |  seccomp helper and filter), report, state/, log/ (runsc_bundle.c)
 *     |  clone3(NEWUSER|NEWPID|NEWNS, into the run's cgroups, PIDFD)
 *     |  uid/gid map "0 <host> 1": the caller, or 65534 when nsbox is root,
 *     |  so no part of gVisor ever runs as host root
 *     `- init (pid 1, our code): joins v1 cgroups, mounts its own /proc
 *        `- runsc --rootless --network=none --ignore-cgroups run ...
 *             `- gofer, sentry (and the ptrace stubs of the sandbox)
 *
 * When the init ends (runsc exited, timeout, the launcher died: PDEATHSIG)
 * the kernel kills everything left in its PID namespace, so no gVisor
 * process can outlive the run. Stdio are the pipes nsbox_supervise drives,
 * exactly as for the native runtime (spawn.c); init reports runsc's wait
 * status through the same report pipe. Inside gVisor the program starts
 * through runsc-exec (src/helper/), which installs the run's seccomp filter
 * and reports a failed setup step into the bundle's report file. Whether
 * runtime auto may use runsc: runsc_check.c.
 *
 * Limits: the run's cgroups (memory, cpus) hold runsc, gofer and sentry,
 * so they count gVisor's own memory too; pids is gVisor's RLIMIT_NPROC
 * (host tasks are not the sandbox's processes); rlimit fallbacks and
 * RLIMIT_CORE 0 are process.rlimits, which gVisor enforces; tmp-size is
 * the size of gVisor's tmpfs. */
#include "runsc.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "error.h"
#include "fileio.h"
#include "limit.h"
#include "runsc_bundle.h"
#include "spawn.h"
#include "supervise.h"
#include "userns.h"
#include "util.h"

static const char *const default_runsc_dirs[]
    = { "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin" };

/* The index of "--root=STATE" in runsc_job.argv (build_argv). */
#define ARGV_ROOT 4

/* Everything the init child needs, prepared before clone. */
struct nsbox_runsc_job
{
  char *runsc; /* absolute path of the runsc binary */
  struct nsbox_runsc_bundle bundle;
  char id[64];
  const char *argv[16];
  const char *envp[4];
  char *owned[8]; /* strings in argv/envp we allocated */
  size_t n_owned;
  const int *v1_tasks_fds;
  int n_v1_tasks_fds;
  bool root; /* nsbox runs as root */
  bool caller_undumpable;
  struct nsbox_pipes pipes;
};

/* ---- the init child (async-signal-safe only; steps shared with init.c) ---- */

static void __attribute__ ((noreturn)) init_main (void *arg)
{
  const struct nsbox_runsc_job *job = arg;
  /* The tasks fds are in the launcher's numbering: before the prologue
   * closes them. */
  nsbox_child_set_report_fd (job->pipes.fds[2 * NSBOX_CHANNEL_REPORT]);
  nsbox_cgroup1_join (job->v1_tasks_fds, job->n_v1_tasks_fds);
  int fds[5];
  nsbox_pipes_child_ends (&job->pipes, fds);
  nsbox_child_prologue (fds, NULL, 0, job->caller_undumpable);
  close (NSBOX_CHILD_SYNC_FD);
  /* Root of the user namespace (the mapped host id), without the
   * launcher's supplementary groups, with a /proc of its own: runsc
   * re-executes itself through /proc/self/exe. */
  nsbox_userns_become (0, 0, job->root);
  if (mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    nsbox_child_fail (NSBOX_STEP_MOUNT_PRIVATE, errno, "/");
  if (mount ("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
    nsbox_child_fail (NSBOX_STEP_MOUNT_PROC, errno, "/proc");
  nsbox_child_rearm_parent_death ();
  nsbox_child_reset_signals ();
  pid_t runsc = nsbox_child_fork ();
  if (runsc < 0)
    nsbox_child_fail (NSBOX_STEP_FORK, errno, NULL);
  if (runsc == 0)
    {
      if (prctl (PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
        nsbox_child_fail (NSBOX_STEP_PDEATHSIG, errno, NULL);
      execve (job->runsc, (char *const *)job->argv, (char *const *)job->envp);
      nsbox_child_fail (NSBOX_STEP_EXEC, errno, job->runsc);
    }
  close (0);
  close (1);
  close (2);
  if (prctl (PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
    nsbox_child_fail (NSBOX_STEP_WAIT, errno, NULL);
  nsbox_child_reap (runsc);
}

/* ---- the launcher's side ---- */

static int
own (struct nsbox_runsc_job *job, char *s)
{
  if (!s || job->n_owned >= ARRAY_SIZE (job->owned))
    {
      free (s);
      return -ENOMEM;
    }
  job->owned[job->n_owned++] = s;
  return 0;
}

static bool
is_executable_file (const char *path)
{
  struct stat st;
  return stat (path, &st) == 0 && S_ISREG (st.st_mode) && access (path, X_OK) == 0;
}

/* NSBOX_RUNSC, else `runsc` in the launcher's PATH, else the usual
 * directories. */
int
nsbox_runsc_find (char **out, struct nsbox_error **err)
{
  const char *env = getenv ("NSBOX_RUNSC");
  if (env && *env)
    {
      char *path = realpath (env, NULL);
      if (!path || !is_executable_file (path))
        {
          free (path);
          return nsbox_error_set (err, ENOENT,
                                  "runtime 'runsc': NSBOX_RUNSC '%s' is not an "
                                  "executable file",
                                  env);
        }
      *out = path;
      return 0;
    }
  const char *search = getenv ("PATH");
  for (int pass = 0; pass < 2; pass++)
    {
      size_t ndirs = pass == 0 ? 1 : ARRAY_SIZE (default_runsc_dirs);
      for (size_t d = 0; d < ndirs; d++)
        {
          const char *p = pass == 0 ? search : default_runsc_dirs[d];
          while (p && *p)
            {
              size_t len = strcspn (p, ":");
              char candidate[4096];
              if (len > 0 && len < sizeof candidate - 8)
                {
                  snprintf (candidate, sizeof candidate, "%.*s/runsc", (int)len, p);
                  if (candidate[0] == '/' && is_executable_file (candidate))
                    {
                      *out = realpath (candidate, NULL);
                      if (!*out)
                        return nsbox_error_oom (err);
                      return 0;
                    }
                }
              p += len;
              if (*p == ':')
                p++;
            }
        }
    }
  return nsbox_error_set (err, ENOENT,
                          "runtime 'runsc': no runsc binary found in PATH or the "
                          "usual directories (install gVisor, e.g. apt-get install "
                          "runsc, or set NSBOX_RUNSC)");
}

static int
build_argv (struct nsbox_runsc_job *job, struct nsbox_error **err)
{
  static atomic_uint counter;
  snprintf (job->id, sizeof job->id, "nsbox-%d-%u", (int)getpid (), atomic_fetch_add (&counter, 1));
  char *root_flag = xasprintf ("--root=%s", job->bundle.state);
  if (own (job, root_flag) < 0)
    return nsbox_error_oom (err);
  char *log_flag = xasprintf ("--log=%s", job->bundle.log);
  if (own (job, log_flag) < 0)
    return nsbox_error_oom (err);
  char *panic_flag = xasprintf ("--panic-log=%s", job->bundle.panic);
  if (own (job, panic_flag) < 0)
    return nsbox_error_oom (err);
  char *tmpdir = xasprintf ("TMPDIR=%s", job->bundle.workdir);
  if (own (job, tmpdir) < 0)
    return nsbox_error_oom (err);
  size_t argc = 0;
  /* --root=STATE is argv[ARGV_ROOT]: force_delete passes it on. */
  const char *const head[] = { "runsc",   "--rootless", "--network=none", "--ignore-cgroups",
                               root_flag, log_flag,     panic_flag };
  for (size_t i = 0; i < ARRAY_SIZE (head); i++)
    job->argv[argc++] = head[i];
  /* NSBOX_RUNSC_DEBUG_LOG=DIR: runsc's debug logs (one file per runsc
   * process) go to DIR, for finding out why gVisor refused a job. */
  const char *debug_dir = getenv ("NSBOX_RUNSC_DEBUG_LOG");
  if (debug_dir && debug_dir[0] == '/')
    {
      char *flag = xasprintf ("--debug-log=%s/", debug_dir);
      if (own (job, flag) < 0)
        return nsbox_error_oom (err);
      job->argv[argc++] = "--debug";
      job->argv[argc++] = flag;
    }
  const char *const tail[] = { "run", "--bundle", job->bundle.dir, job->id };
  for (size_t i = 0; i < ARRAY_SIZE (tail); i++)
    job->argv[argc++] = tail[i];
  job->argv[argc] = NULL;
  job->envp[0] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  job->envp[1] = tmpdir;
  job->envp[2] = NULL;
  return 0;
}

/* What runsc's processes logged as errors (--log: JSON objects, appended
 * back to back by runsc, gofer and sandbox): the last (runsc's own
 * summary), with the first (usually the root cause) when they differ. */
static char *
read_runsc_error (const char *log)
{
  cleanup_close int fd = open (log, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return NULL;
  char buf[16384];
  size_t len = 0;
  ssize_t n;
  while (len < sizeof buf && (n = read (fd, buf + len, sizeof buf - len)) > 0)
    len += (size_t)n;
  cleanup_free char *first = NULL;
  char *last = NULL;
  size_t off = 0;
  while (off < len)
    {
      while (off < len && (buf[off] == '\n' || buf[off] == ' '))
        off++;
      json_error_t jerr;
      json_t *j = json_loadb (buf + off, len - off, JSON_DISABLE_EOF_CHECK, &jerr);
      if (!j)
        break;
      off += jerr.position > 0 ? (size_t)jerr.position : len;
      const char *msg = json_string_value (json_object_get (j, "msg"));
      if (msg && !first)
        first = strdup (msg);
      if (msg)
        {
          free (last);
          last = strdup (msg);
        }
      json_decref (j);
    }
  if (last && first && strcmp (first, last) != 0)
    {
      char *both = xasprintf ("%s (%s)", last, first);
      if (both)
        {
          free (last);
          last = both;
        }
    }
  return last;
}

/* The first line of a Go panic or fatal error in runsc's panic log (its
 * processes write there only when they die of one), or NULL. */
static char *
read_runsc_panic (const char *log)
{
  cleanup_close int fd = open (log, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return NULL;
  char buf[8192];
  ssize_t n = nsbox_pread_full (fd, buf, sizeof buf - 1, 0);
  if (n <= 0)
    return NULL;
  buf[n] = '\0';
  for (char *line = buf; *line;)
    {
      size_t len = strcspn (line, "\n");
      if (strncmp (line, "panic: ", 7) == 0 || strncmp (line, "fatal error: ", 13) == 0)
        return strndup (line, len);
      line += len + (line[len] == '\n');
    }
  return NULL;
}

/* Safety net after an abnormal end: the PID namespace took every process
 * with it, `runsc delete --force` cleans what it knows of in the state
 * directory before we remove the whole work directory. */
static void
force_delete (const struct nsbox_runsc_job *job)
{
  pid_t pid = fork ();
  if (pid == 0)
    {
      int null = open ("/dev/null", O_RDWR | O_CLOEXEC);
      if (null >= 0)
        {
          dup2 (null, 0);
          dup2 (null, 1);
          dup2 (null, 2);
        }
      if (job->root
          && (setgroups (0, NULL) < 0
              || setresgid (NSBOX_ROOT_HOST_ID, NSBOX_ROOT_HOST_ID, NSBOX_ROOT_HOST_ID) < 0
              || setresuid (NSBOX_ROOT_HOST_ID, NSBOX_ROOT_HOST_ID, NSBOX_ROOT_HOST_ID) < 0))
        _exit (127);
      const char *const argv[]
          = { "runsc", "--rootless", "--ignore-cgroups", job->argv[ARGV_ROOT], "delete", "--force",
              job->id, NULL };
      execve (job->runsc, (char *const *)argv, (char *const *)job->envp);
      _exit (127);
    }
  if (pid > 0)
    while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
      ;
}

/* The helper's records (src/report.h): "started" once it holds the file,
 * then at most one failed setup step. */
struct helper_report
{
  bool started;
  struct nsbox_report error;
};

static void
read_helper_report (const struct nsbox_runsc_job *job, struct helper_report *out)
{
  memset (out, 0, sizeof *out);
  cleanup_close int fd = open (job->bundle.report, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  struct nsbox_report r;
  for (int i = 0; fd >= 0 && i < 4; i++)
    {
      ssize_t n = pread (fd, &r, sizeof r, (off_t)i * (off_t)sizeof r);
      if (n != (ssize_t)sizeof r)
        break;
      if (r.kind == NSBOX_REPORT_STARTED)
        out->started = true;
      else if (r.kind == NSBOX_REPORT_ERROR && out->error.kind == 0)
        out->error = r;
    }
}

/* runsc exits with the program's status, or 128 + signal when a signal
 * killed it (as shells report), or 128 when runsc itself failed (then its
 * error log says why). Whether the helper's setup failed is in its report
 * file, which the program cannot write; nothing the program printed is
 * read. */
static int
conclude (const struct nsbox_runsc_job *job, struct nsbox_result *res, struct nsbox_error **err)
{
  if (res->timed_out)
    return 0;
  if (res->oom_killed)
    {
      res->signal = SIGKILL;
      res->exit_code = 128 + SIGKILL;
      return 0;
    }
  /* gVisor's kernel died under the program (runsc then exits with a
   * status of its own, which is not the program's). */
  cleanup_free char *panic = read_runsc_panic (job->bundle.panic);
  if (panic)
    return nsbox_error_set (err, EPROTO,
                            "runtime 'runsc': gVisor's kernel failed during the run, so the "
                            "program's exit status is unknown (%s)",
                            panic);
  if (res->signal == 0 && res->exit_code == 128)
    {
      cleanup_free char *why = read_runsc_error (job->bundle.log);
      if (why)
        return nsbox_error_set (err, EPROTO, "runtime 'runsc': %s", why);
    }
  struct helper_report report;
  read_helper_report (job, &report);
  if (!report.started)
    return nsbox_error_set (err, EPROTO,
                            "runtime 'runsc': the sandbox's helper did not start (runsc "
                            "exited with status %d)",
                            res->exit_code);
  if (report.error.kind == NSBOX_REPORT_ERROR)
    return nsbox_report_to_error (&report.error, err);
  if (res->signal == 0 && res->exit_code > 128 && res->exit_code < 128 + 65)
    res->signal = res->exit_code - 128;
  return 0;
}

static void
job_release (struct nsbox_runsc_job *job)
{
  nsbox_runsc_bundle_remove (&job->bundle);
  free (job->runsc);
  for (size_t i = 0; i < job->n_owned; i++)
    free (job->owned[i]);
  nsbox_pipes_close (&job->pipes);
}

static void
job_free (struct nsbox_runsc_job *job)
{
  job_release (job);
  free (job);
}

int
nsbox_runsc_start (const struct nsbox_plan *plan, struct nsbox_limits *limits,
                   const struct nsbox_config *c, struct nsbox_runsc_job **out,
                   struct nsbox_child *child, struct nsbox_streams *streams,
                   struct nsbox_error **err)
{
  struct nsbox_runsc_job *job = calloc (1, sizeof *job);
  if (!job)
    return nsbox_error_oom (err);
  job->root = geteuid () == 0;
  nsbox_pipes_init (&job->pipes);
  /* The configured pids limit is gVisor's RLIMIT_NPROC; a host cgroup
   * around runsc only bounds gVisor's own tasks. */
  limits->mech[NSBOX_LIMIT_PIDS] = NSBOX_MECH_RLIMIT;
  int r = nsbox_runsc_find (&job->runsc, err);
  if (r < 0 || (r = nsbox_runsc_bundle_create (&job->bundle, plan, c, err)) < 0
      || (r = build_argv (job, err)) < 0 || (r = nsbox_pipes_open (&job->pipes, err)) < 0)
    {
      job_free (job);
      return r;
    }
  job->caller_undumpable = plan->caller_undumpable;
  job->v1_tasks_fds = plan->v1_tasks_fds;
  job->n_v1_tasks_fds = plan->n_v1_tasks_fds;
  struct nsbox_spawn spawn = {
    .namespaces = CLONE_NEWPID | CLONE_NEWNS,
    .cgroup_fd = limits->v2_fd,
    .child_main = init_main,
    .arg = job,
    .uid = 0,
    .gid = 0,
    .caller_undumpable = job->caller_undumpable,
    .pipes = &job->pipes,
  };
  if ((r = nsbox_spawn (&spawn, child, err)) < 0)
    {
      job_free (job);
      return nsbox_error_prefix (err, "runtime 'runsc'");
    }
  nsbox_pipes_close_child_ends (&job->pipes);
  *streams = nsbox_pipes_take_streams (&job->pipes);
  *out = job;
  return 0;
}

bool
nsbox_runsc_helper_started (const struct nsbox_runsc_job *job)
{
  struct helper_report report;
  read_helper_report (job, &report);
  return report.started && report.error.kind == 0;
}

int
nsbox_runsc_finish (struct nsbox_runsc_job *job, struct nsbox_child *child,
                    struct nsbox_streams *streams, struct nsbox_limits *limits,
                    const struct nsbox_dispatch *dispatch, struct nsbox_result *res,
                    struct nsbox_error **err)
{
  int r = nsbox_supervise (child, streams, limits, dispatch, res, err);
  nsbox_limits_collect (limits, res);
  if (r < 0)
    r = nsbox_error_prefix (err, "runtime 'runsc'");
  else
    r = conclude (job, res, err);
  if (r < 0 || res->timed_out || res->oom_killed || res->exit_code == 128)
    force_delete (job);
  job_free (job);
  return r;
}

void
nsbox_runsc_discard (struct nsbox_runsc_job *job)
{
  force_delete (job);
  job_free (job);
}

void
nsbox_runsc_host_limits (struct nsbox_config *view)
{
  uint64_t backstop = 256 + 32 * view->pids_limit;
  view->pids_limit = backstop;
}
