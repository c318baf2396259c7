/* runtime runsc: the same job under gVisor.
 *
 *   nsbox (caller's uid)
 *     |  private work dir in /dev/shm (or TMPDIR): bundle/ (config.json, the
 *     |  seccomp helper and filter), state/, log/ (see make_workdir)
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
 * exactly as for the native runtime; init reports runsc's wait status
 * through the same report pipe. Inside gVisor the program starts through
 * runsc-exec (src/helper/), which installs the run's seccomp filter.
 *
 * Limits: the run's cgroups (memory, cpus) hold runsc, gofer and sentry,
 * so they count gVisor's own memory too; pids is gVisor's RLIMIT_NPROC
 * (host tasks are not the sandbox's processes); rlimit fallbacks and
 * RLIMIT_CORE 0 are process.rlimits, which gVisor enforces; tmp-size is
 * the size of gVisor's tmpfs. */
#include "runsc.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <grp.h>
#include <inttypes.h>
#include <jansson.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "seccomp.h"
#include "supervise.h"
#include "util.h"

/* Host uid/gid that gVisor's processes run as when nsbox is root. */
#define RUNSC_ROOT_HOST_ID 65534

/* Inside the sandbox: the helper that installs the seccomp filter and
 * executes the command, and the filter. Their directory is bind-mounted
 * read-only on the rootfs's /mnt: gVisor's gofer, unprivileged, can only
 * mount on a mount point that exists in the (read-only) rootfs. */
#define SANDBOX_HELPER_DIR "/mnt"
#define SANDBOX_EXEC "/mnt/.nsbox-exec"
#define SANDBOX_FILTER "/mnt/.nsbox-filter"
/* The helper's report file (src/report.h records), bound read-write over an
 * empty file of the helper's directory: a host file of the launcher's, which
 * inside gVisor belongs to uid 0 with mode 0600, so the program, never uid
 * 0, cannot open it. */
#define SANDBOX_REPORT "/mnt/.nsbox-report"
/* Capabilities the helper starts with, to open the report file and become
 * the sandbox user; it gives them up before the program runs. */
static const char *const helper_caps[] = { "CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP" };

/* src/helper/runsc-exec.c, embedded by src/runsc_exec_blob.S. */
extern const unsigned char nsbox_runsc_exec[] __attribute__ ((visibility ("hidden")));
extern const uint64_t nsbox_runsc_exec_len __attribute__ ((visibility ("hidden")));

static const char *const default_runsc_dirs[]
    = { "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin" };

enum
{
  R_STDIN = 0,
  R_STDOUT,
  R_STDERR,
  R_REPORT,
  R_SYNC,
  R_PIPES_,
};

/* The index of "--root=STATE" in runsc_job.argv (build_argv). */
#define ARGV_ROOT 4

/* Everything the init child needs, prepared before clone. */
struct runsc_job
{
  char *runsc;   /* absolute path of the runsc binary */
  char *workdir; /* private, removed afterwards */
  char *bundle;  /* workdir/bundle */
  char *state;   /* workdir/state: runsc --root */
  char *log;     /* workdir/runsc.log: runsc's error log (JSON lines) */
  char *report;  /* workdir/report: the helper's records (src/report.h) */
  char id[64];
  const char *argv[16];
  const char *envp[4];
  char *owned[8]; /* strings in argv/envp we allocated */
  size_t n_owned;
  const int *v1_tasks_fds;
  int n_v1_tasks_fds;
  bool root; /* nsbox runs as root: map to RUNSC_ROOT_HOST_ID */
  bool caller_undumpable;
  int fds[2 * R_PIPES_];
};

/* ---- the init child (async-signal-safe only; steps shared with init.c) ---- */

/* Becomes root of the user namespace (the mapped host id), without the
 * launcher's supplementary groups, and gives the namespace its own /proc:
 * runsc re-executes itself through /proc/self/exe. */
static void
init_enter_namespace (const struct runsc_job *job)
{
  if (job->root && syscall (SYS_setgroups, 0, NULL) < 0)
    nsbox_child_fail (NSBOX_STEP_SETGROUPS, errno, NULL);
  if (syscall (SYS_setresgid, 0, 0, 0) < 0)
    nsbox_child_fail (NSBOX_STEP_SETGID, errno, NULL);
  if (syscall (SYS_setresuid, 0, 0, 0) < 0)
    nsbox_child_fail (NSBOX_STEP_SETUID, errno, NULL);
  if (mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    nsbox_child_fail (NSBOX_STEP_MOUNT_PRIVATE, errno, "/");
  if (mount ("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
    nsbox_child_fail (NSBOX_STEP_MOUNT_PROC, errno, "/proc");
}

static void __attribute__ ((noreturn)) init_main (const struct runsc_job *job)
{
  nsbox_child_set_report_fd (job->fds[2 * R_REPORT + 1]);
  nsbox_child_join_v1_cgroups (job->v1_tasks_fds, job->n_v1_tasks_fds);
  const int fds[5]
      = { job->fds[2 * R_STDIN], job->fds[2 * R_STDOUT + 1], job->fds[2 * R_STDERR + 1],
          job->fds[2 * R_REPORT + 1], job->fds[2 * R_SYNC] };
  nsbox_child_place_fds (fds);
  if (prctl (PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
    nsbox_child_fail (NSBOX_STEP_PDEATHSIG, errno, NULL);
  /* A non-dumpable process's /proc/PID files belong to root: dumpable
   * until the launcher has written our id maps (as the native init). */
  if (job->caller_undumpable && prctl (PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
    nsbox_child_fail (NSBOX_STEP_DUMPABLE, errno, NULL);
  nsbox_child_wait_for_parent ();
  if (job->caller_undumpable && prctl (PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
    nsbox_child_fail (NSBOX_STEP_DUMPABLE, errno, NULL);
  init_enter_namespace (job);
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
own (struct runsc_job *job, char *s)
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
static int
find_runsc (char **out, struct nsbox_error **err)
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
                        return nsbox_error_set (err, ENOMEM, "out of memory");
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

static const char *
rlimit_name (int resource)
{
  static const struct
  {
    int resource;
    const char *name;
  } names[] = {
    { RLIMIT_CPU, "RLIMIT_CPU" },           { RLIMIT_FSIZE, "RLIMIT_FSIZE" },
    { RLIMIT_DATA, "RLIMIT_DATA" },         { RLIMIT_STACK, "RLIMIT_STACK" },
    { RLIMIT_CORE, "RLIMIT_CORE" },         { RLIMIT_RSS, "RLIMIT_RSS" },
    { RLIMIT_NPROC, "RLIMIT_NPROC" },       { RLIMIT_NOFILE, "RLIMIT_NOFILE" },
    { RLIMIT_MEMLOCK, "RLIMIT_MEMLOCK" },   { RLIMIT_AS, "RLIMIT_AS" },
    { RLIMIT_LOCKS, "RLIMIT_LOCKS" },       { RLIMIT_SIGPENDING, "RLIMIT_SIGPENDING" },
    { RLIMIT_MSGQUEUE, "RLIMIT_MSGQUEUE" }, { RLIMIT_NICE, "RLIMIT_NICE" },
    { RLIMIT_RTPRIO, "RLIMIT_RTPRIO" },     { RLIMIT_RTTIME, "RLIMIT_RTTIME" },
  };
  for (size_t i = 0; i < ARRAY_SIZE (names); i++)
    if (names[i].resource == resource)
      return names[i].name;
  return NULL;
}

static int
add (json_t *array, json_t *item)
{
  return item ? json_array_append_new (array, item) : -1;
}

/* process.rlimits: the plan's (every limit, as natively),
 * with RLIMIT_NPROC = pids-limit always: gVisor enforces it for the one
 * user of the sandbox, and the host cgroup cannot count gVisor's tasks. */
static json_t *
build_rlimits (const struct nsbox_plan *plan, const struct nsbox_config *c)
{
  json_t *a = json_array ();
  if (!a)
    return NULL;
  for (int i = 0; i < plan->nrlimits; i++)
    {
      const char *name = rlimit_name (plan->rlimit_resources[i]);
      /* JSON has no unsigned 64-bit integers: an unlimited limit is left to
       * gVisor, whose own default for those is unlimited too. */
      if (!name || plan->rlimit_resources[i] == RLIMIT_NPROC
          || plan->rlimits[i].rlim_max == RLIM_INFINITY)
        continue;
      if (add (a, json_pack ("{s:s, s:I, s:I}", "type", name, "hard",
                             (json_int_t)plan->rlimits[i].rlim_max, "soft",
                             (json_int_t)plan->rlimits[i].rlim_cur))
          < 0)
        goto fail;
    }
  if (add (a, json_pack ("{s:s, s:I, s:I}", "type", "RLIMIT_NPROC", "hard",
                         (json_int_t)c->pids_limit, "soft", (json_int_t)c->pids_limit))
      < 0)
    goto fail;
  return a;
fail:
  json_decref (a);
  return NULL;
}

static json_t *
string_array (const char *const *strings, size_t n)
{
  json_t *a = json_array ();
  for (size_t i = 0; a && i < n; i++)
    if (add (a, json_string (strings[i])) < 0)
      {
        json_decref (a);
        return NULL;
      }
  return a;
}

/* The helper runs as uid 0 of the sandbox with helper_caps (and
 * no_new_privs); it makes the program's process the configured user with
 * no capabilities. argv: the helper's FILTER REPORT UID GID, then the
 * command. */
static json_t *
build_process (const struct nsbox_plan *plan, const struct nsbox_config *c)
{
  json_t *args = json_array (), *env = json_array ();
  json_t *caps
      = json_pack ("{s:o, s:o, s:[], s:o, s:[]}", "bounding",
                   string_array (helper_caps, ARRAY_SIZE (helper_caps)), "effective",
                   string_array (helper_caps, ARRAY_SIZE (helper_caps)), "inheritable", "permitted",
                   string_array (helper_caps, ARRAY_SIZE (helper_caps)), "ambient");
  json_t *rlimits = build_rlimits (plan, c);
  char uid[16], gid[16];
  snprintf (uid, sizeof uid, "%u", (unsigned)c->uid);
  snprintf (gid, sizeof gid, "%u", (unsigned)c->gid);
  if (!args || !env || !caps || !rlimits)
    goto fail;
  const char *const head[] = { SANDBOX_EXEC, SANDBOX_FILTER, SANDBOX_REPORT, uid, gid };
  for (size_t i = 0; i < ARRAY_SIZE (head); i++)
    if (add (args, json_string (head[i])) < 0)
      goto fail;
  for (char *const *a = plan->argv; *a; a++)
    if (add (args, json_string (*a)) < 0)
      goto fail;
  for (char *const *e = plan->envp; *e; e++)
    if (add (env, json_string (*e)) < 0)
      goto fail;
  return json_pack ("{s:b, s:{s:i, s:i}, s:o, s:o, s:s, s:o, s:b, s:o}", "terminal", 0, "user",
                    "uid", 0, "gid", 0, "args", args, "env", env, "cwd", "/", "capabilities", caps,
                    "noNewPrivileges", 1, "rlimits", rlimits);
fail:
  json_decref (args);
  json_decref (env);
  json_decref (caps);
  json_decref (rlimits);
  return NULL;
}

static bool
rootfs_has_dir (const struct nsbox_plan *plan, const char *dir)
{
  char path[4096];
  struct stat st;
  snprintf (path, sizeof path, "%s%s", plan->rootfs, dir);
  return lstat (path, &st) == 0 && S_ISDIR (st.st_mode);
}

/* /proc, a minimal /dev (gVisor fills in its devices), /dev/shm and /tmp
 * of tmp-size, the helper's directory, and an empty read-only /sys where
 * the rootfs has one (gVisor would otherwise mount its sysfs; the native
 * runtime has none). */
static json_t *
build_mounts (const struct runsc_job *job, const struct nsbox_plan *plan,
              const struct nsbox_config *c)
{
  char tmp_size[64], helper_src[4096];
  snprintf (tmp_size, sizeof tmp_size, "size=%" PRIu64, c->tmp_size_bytes);
  snprintf (helper_src, sizeof helper_src, "%s/helper", job->bundle);
  json_t *mounts = json_pack (
      "[{s:s, s:s, s:s, s:[s,s,s]},"
      " {s:s, s:s, s:s, s:[s,s,s,s]},"
      " {s:s, s:s, s:s, s:[s,s,s,s,s]},"
      " {s:s, s:s, s:s, s:[s,s,s,s]},"
      " {s:s, s:s, s:s, s:[s,s,s,s]},"
      " {s:s, s:s, s:s, s:[s,s,s,s,s]}]",
      "destination", "/proc", "type", "proc", "source", "proc", "options", "nosuid", "noexec",
      "nodev", "destination", "/dev", "type", "tmpfs", "source", "tmpfs", "options", "nosuid",
      "noexec", "mode=755", "size=65536k", "destination", "/dev/shm", "type", "tmpfs", "source",
      "shm", "options", "nosuid", "nodev", "noexec", "mode=1777", tmp_size, "destination", "/tmp",
      "type", "tmpfs", "source", "tmpfs", "options", "nosuid", "nodev", "mode=1777", tmp_size,
      "destination", SANDBOX_HELPER_DIR, "type", "bind", "source", helper_src, "options", "ro",
      "bind", "nodev", "nosuid", "destination", SANDBOX_REPORT, "type", "bind", "source",
      job->report, "options", "rw", "bind", "nodev", "nosuid", "noexec");
  if (mounts && rootfs_has_dir (plan, "/sys")
      && add (mounts, json_pack ("{s:s, s:s, s:s, s:[s,s,s,s,s]}", "destination", "/sys", "type",
                                 "tmpfs", "source", "none", "options", "ro", "nosuid", "nodev",
                                 "noexec", "mode=555"))
             < 0)
    {
      json_decref (mounts);
      return NULL;
    }
  return mounts;
}

/* linux.resources: what the configuration asks for. With --ignore-cgroups
 * runsc does not apply them on the host; the run's own cgroups around runsc
 * do, and the result says which limit was enforced by what. */
static json_t *
build_linux (const struct nsbox_config *c)
{
  return json_pack ("{s:[{s:s},{s:s},{s:s},{s:s},{s:s}],"
                    " s:{s:{s:I, s:I}, s:{s:I, s:I}, s:{s:I}}}",
                    "namespaces", "type", "pid", "type", "network", "type", "ipc", "type", "uts",
                    "type", "mount", "resources", "memory", "limit", (json_int_t)c->memory_bytes,
                    "swap", (json_int_t)c->memory_bytes, "cpu", "quota",
                    (json_int_t)(c->cpus_milli * 100), "period", (json_int_t)100000, "pids",
                    "limit", (json_int_t)c->pids_limit);
}

static int
give_to_gvisor (const struct runsc_job *job, int fd, mode_t mode, const char *path,
                struct nsbox_error **err)
{
  if (job->root && fchown (fd, 0, RUNSC_ROOT_HOST_ID) < 0)
    return nsbox_error_sys (err, errno, "chown '%s'", path);
  /* Unprivileged, the group bits would reach the caller's group. */
  if (fchmod (fd, job->root ? mode : mode & 0700) < 0)
    return nsbox_error_sys (err, errno, "chmod '%s'", path);
  return 0;
}

static int
make_gvisor_dir (const struct runsc_job *job, const char *path, struct nsbox_error **err)
{
  if (mkdir (path, 0700) < 0)
    return nsbox_error_sys (err, errno, "create '%s'", path);
  cleanup_close int fd = open (path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return nsbox_error_sys (err, errno, "open '%s'", path);
  return give_to_gvisor (job, fd, 0750, path, err);
}

/* Files and directories gVisor writes: its own. */
static int
own_by_gvisor (const struct runsc_job *job, int fd, const char *path, struct nsbox_error **err)
{
  if (job->root && fchown (fd, RUNSC_ROOT_HOST_ID, RUNSC_ROOT_HOST_ID) < 0)
    return nsbox_error_sys (err, errno, "chown '%s'", path);
  return 0;
}

static int
write_config (const struct runsc_job *job, const struct nsbox_plan *plan,
              const struct nsbox_config *c, struct nsbox_error **err)
{
  json_t *process = build_process (plan, c);
  json_t *mounts = build_mounts (job, plan, c);
  json_t *linux_ = build_linux (c);
  if (!process || !mounts || !linux_)
    {
      json_decref (process);
      json_decref (mounts);
      json_decref (linux_);
      return nsbox_error_set (err, ENOMEM, "out of memory");
    }
  json_t *spec = json_pack ("{s:s, s:o, s:{s:s, s:b}, s:s, s:o, s:o}", "ociVersion", "1.0.2",
                            "process", process, "root", "path", plan->rootfs, "readonly", 1,
                            "hostname", "nsbox", "mounts", mounts, "linux", linux_);
  if (!spec)
    return nsbox_error_set (err, ENOMEM, "out of memory");
  char path[4096];
  snprintf (path, sizeof path, "%s/config.json", job->bundle);
  /* argv and the environment (--env values) are in it: readable by gVisor
   * only (see make_workdir). */
  cleanup_close int fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  int r = 0;
  if (fd < 0)
    r = nsbox_error_sys (err, errno, "create '%s'", path);
  else if ((r = give_to_gvisor (job, fd, 0640, path, err)) < 0)
    ;
  else if (json_dumpfd (spec, fd, JSON_COMPACT) < 0)
    r = nsbox_error_sys (err, errno ? errno : EIO, "write '%s'", path);
  json_decref (spec);
  return r;
}

/* A file of the bundle: ours, only readable by gVisor. */
static int
write_bundle_file (const struct runsc_job *job, const char *name, const void *data, size_t len,
                   mode_t mode, struct nsbox_error **err)
{
  char path[4096];
  snprintf (path, sizeof path, "%s/helper/%s", job->bundle, name);
  cleanup_close int fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0)
    return nsbox_error_sys (err, errno, "create '%s'", path);
  const char *p = data;
  while (len > 0)
    {
      ssize_t n = write (fd, p, len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return nsbox_error_sys (err, n < 0 ? errno : EIO, "write '%s'", path);
      p += n;
      len -= (size_t)n;
    }
  return give_to_gvisor (job, fd, mode, path, err);
}

/* The helper and the run's filter: the same BPF the native runtime
 * installs, evaluated by gVisor's sentry for the program. */
static int
write_helper (const struct runsc_job *job, const struct nsbox_plan *plan, struct nsbox_error **err)
{
  if (plan->bpf.len == 0)
    return nsbox_error_set (err, EINVAL, "runtime 'runsc': no seccomp filter prepared");
  if (!rootfs_has_dir (plan, SANDBOX_HELPER_DIR))
    return nsbox_error_set (err, ENOTDIR,
                            "runtime 'runsc': rootfs '%s' has no '%s' directory "
                            "(the mount point of nsbox's seccomp helper)",
                            plan->rootfs, SANDBOX_HELPER_DIR);
  char dir[4096];
  snprintf (dir, sizeof dir, "%s/helper", job->bundle);
  int r = make_gvisor_dir (job, dir, err);
  if (r < 0)
    return r;
  r = write_bundle_file (job, ".nsbox-exec", nsbox_runsc_exec, (size_t)nsbox_runsc_exec_len, 0750,
                         err);
  if (r < 0
      || (r = write_bundle_file (job, ".nsbox-filter", plan->bpf.insns,
                                 (size_t)plan->bpf.len * sizeof plan->bpf.insns[0], 0640, err))
             < 0)
    return r;
  /* The mount point of the report file. */
  return write_bundle_file (job, ".nsbox-report", "", 0, 0640, err);
}

/* Removes everything below the directory `fd` (closed here) without ever
 * following a symlink: as root we clean up after processes of host uid
 * 65534, which another process of that uid could tamper with. */
static void
remove_below (int fd)
{
  DIR *d = fdopendir (fd);
  if (!d)
    {
      close (fd);
      return;
    }
  struct dirent *e;
  while ((e = readdir (d)))
    {
      if (strcmp (e->d_name, ".") == 0 || strcmp (e->d_name, "..") == 0)
        continue;
      if (unlinkat (dirfd (d), e->d_name, 0) == 0 || errno != EISDIR)
        continue;
      int sub = openat (dirfd (d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0)
        remove_below (sub);
      unlinkat (dirfd (d), e->d_name, AT_REMOVEDIR);
    }
  closedir (d);
}

static void
remove_tree (const char *dir)
{
  int fd = open (dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return;
  remove_below (fd);
  rmdir (dir);
}

static void
job_release (struct runsc_job *job)
{
  if (job->workdir)
    remove_tree (job->workdir);
  free (job->runsc);
  free (job->workdir);
  free (job->bundle);
  free (job->state);
  free (job->log);
  free (job->report);
  for (size_t i = 0; i < job->n_owned; i++)
    free (job->owned[i]);
  for (int i = 0; i < 2 * R_PIPES_; i++)
    if (job->fds[i] >= 0)
      close (job->fds[i]);
}

/* A launcher killed with SIGKILL took its gVisor processes with it (PID
 * namespace) but could not remove its work dir: the next run does. Only
 * directories we own (nobody else can create them for us to remove) of
 * launchers that are gone. */
static void
sweep_stale (const char *base)
{
  DIR *d = opendir (base);
  if (!d)
    return;
  struct dirent *e;
  while ((e = readdir (d)))
    {
      int pid = 0;
      struct stat st;
      if (sscanf (e->d_name, "nsbox-runsc-%d-", &pid) != 1 || pid <= 0 || pid == getpid ()
          || (kill (pid, 0) == 0 || errno != ESRCH)
          || fstatat (dirfd (d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR (st.st_mode)
          || st.st_uid != geteuid ())
        continue;
      int fd = openat (dirfd (d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0)
        continue;
      remove_below (fd);
      unlinkat (dirfd (d), e->d_name, AT_REMOVEDIR);
    }
  closedir (d);
}

/* Layout, when nsbox is root (gVisor runs as host uid 65534):
 *   nsbox-runsc-PID-XXXXXX/  root:65534 0750: only gVisor and root get in
 *     bundle/                root:65534 0750: config.json (argv, the
 *                            environment) 0640, the helper's directory: read
 *                            by gVisor, changed by nobody else
 *     report                 65534 0600: the helper's records
 *     state/ log/            65534 0700: runsc --root, runsc --log
 * For an unprivileged launcher everything is its own, 0700 and 0600. */
static int
make_workdir (struct runsc_job *job, struct nsbox_error **err)
{
  /* TMPDIR, else tmpfs: on a disk file system creating and removing the
   * bundle and runsc's state costs about 8 ms a run. */
  const char *base = getenv ("TMPDIR");
  struct stat st;
  if (!base || base[0] != '/')
    base = stat ("/dev/shm", &st) == 0 && S_ISDIR (st.st_mode)
                   && access ("/dev/shm", W_OK | X_OK) == 0
               ? "/dev/shm"
               : "/tmp";
  sweep_stale (base);
  /* The launcher's pid in the name: observers (and the tests) can tell
   * whose gVisor processes they see. */
  if (asprintf (&job->workdir, "%s/nsbox-runsc-%d-XXXXXX", base, (int)getpid ()) < 0)
    return (job->workdir = NULL), nsbox_error_set (err, ENOMEM, "out of memory");
  if (!mkdtemp (job->workdir))
    {
      int e = errno;
      free (TAKE_PTR (job->workdir));
      return nsbox_error_sys (err, e, "create the runsc work directory in '%s'", base);
    }
  char logdir[4096];
  snprintf (logdir, sizeof logdir, "%s/log", job->workdir);
  if (asprintf (&job->bundle, "%s/bundle", job->workdir) < 0
      || asprintf (&job->state, "%s/state", job->workdir) < 0
      || asprintf (&job->log, "%s/runsc.log", logdir) < 0
      || asprintf (&job->report, "%s/report", job->workdir) < 0)
    return nsbox_error_set (err, ENOMEM, "out of memory");
  cleanup_close int workdir_fd
      = open (job->workdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  int r;
  if (workdir_fd < 0)
    return nsbox_error_sys (err, errno, "open '%s'", job->workdir);
  if ((r = give_to_gvisor (job, workdir_fd, 0750, job->workdir, err)) < 0
      || (r = make_gvisor_dir (job, job->bundle, err)) < 0)
    return r;
  const char *const owned_by_gvisor[] = { job->state, logdir };
  for (size_t i = 0; i < ARRAY_SIZE (owned_by_gvisor); i++)
    {
      if (mkdir (owned_by_gvisor[i], 0700) < 0)
        return nsbox_error_sys (err, errno, "create '%s'", owned_by_gvisor[i]);
      cleanup_close int fd
          = open (owned_by_gvisor[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0)
        return nsbox_error_sys (err, errno, "open '%s'", owned_by_gvisor[i]);
      if ((r = own_by_gvisor (job, fd, owned_by_gvisor[i], err)) < 0)
        return r;
    }
  cleanup_close int report_fd
      = open (job->report, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (report_fd < 0)
    return nsbox_error_sys (err, errno, "create '%s'", job->report);
  return own_by_gvisor (job, report_fd, job->report, err);
}

static int
build_argv (struct runsc_job *job, struct nsbox_error **err)
{
  static atomic_uint counter;
  snprintf (job->id, sizeof job->id, "nsbox-%d-%u", (int)getpid (), atomic_fetch_add (&counter, 1));
  char *root_flag = NULL, *log_flag = NULL, *tmpdir = NULL;
  if (asprintf (&root_flag, "--root=%s", job->state) < 0)
    root_flag = NULL;
  if (own (job, root_flag) < 0)
    return nsbox_error_set (err, ENOMEM, "out of memory");
  if (asprintf (&log_flag, "--log=%s", job->log) < 0)
    log_flag = NULL;
  if (own (job, log_flag) < 0)
    return nsbox_error_set (err, ENOMEM, "out of memory");
  if (asprintf (&tmpdir, "TMPDIR=%s", job->workdir) < 0)
    tmpdir = NULL;
  if (own (job, tmpdir) < 0)
    return nsbox_error_set (err, ENOMEM, "out of memory");
  size_t argc = 0;
  /* --root=STATE is argv[ARGV_ROOT]: force_delete passes it on. */
  const char *const head[]
      = { "runsc", "--rootless", "--network=none", "--ignore-cgroups", root_flag, log_flag };
  for (size_t i = 0; i < ARRAY_SIZE (head); i++)
    job->argv[argc++] = head[i];
  /* NSBOX_RUNSC_DEBUG_LOG=DIR: runsc's debug logs (one file per runsc
   * process) go to DIR, for finding out why gVisor refused a job. */
  const char *debug_dir = getenv ("NSBOX_RUNSC_DEBUG_LOG");
  if (debug_dir && debug_dir[0] == '/')
    {
      char *flag = NULL;
      if (asprintf (&flag, "--debug-log=%s/", debug_dir) < 0)
        flag = NULL;
      if (own (job, flag) < 0)
        return nsbox_error_set (err, ENOMEM, "out of memory");
      job->argv[argc++] = "--debug";
      job->argv[argc++] = flag;
    }
  const char *const tail[] = { "run", "--bundle", job->bundle, job->id };
  for (size_t i = 0; i < ARRAY_SIZE (tail); i++)
    job->argv[argc++] = tail[i];
  job->argv[argc] = NULL;
  job->envp[0] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  job->envp[1] = tmpdir;
  job->envp[2] = NULL;
  return 0;
}

static int
write_maps (const struct runsc_job *job, pid_t pid, struct nsbox_error **err)
{
  unsigned uid = job->root ? RUNSC_ROOT_HOST_ID : (unsigned)geteuid ();
  unsigned gid = job->root ? RUNSC_ROOT_HOST_ID : (unsigned)getegid ();
  char map[64];
  if (!job->root
      && nsbox_write_proc_file (pid, "setgroups", "deny", job->caller_undumpable, err) < 0)
    return nsbox_error_prefix (err, "runsc init: write id maps");
  snprintf (map, sizeof map, "0 %u 1\n", uid);
  if (nsbox_write_proc_file (pid, "uid_map", map, job->caller_undumpable, err) < 0)
    return nsbox_error_prefix (err, "runsc init: write id maps");
  snprintf (map, sizeof map, "0 %u 1\n", gid);
  if (nsbox_write_proc_file (pid, "gid_map", map, job->caller_undumpable, err) < 0)
    return nsbox_error_prefix (err, "runsc init: write id maps");
  return 0;
}

static int
spawn_init (struct runsc_job *job, struct nsbox_limits *limits, struct nsbox_child *child,
            struct nsbox_error **err)
{
  int pidfd = -1;
  struct clone_args args;
  memset (&args, 0, sizeof args);
  args.flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_PIDFD;
  args.pidfd = (uint64_t)(uintptr_t)&pidfd;
  args.exit_signal = 0;
  if (limits->v2_fd >= 0)
    {
      args.flags |= CLONE_INTO_CGROUP;
      args.cgroup = (uint64_t)limits->v2_fd;
    }
  long pid = syscall (SYS_clone3, &args, sizeof args);
  if (pid < 0)
    return nsbox_error_sys (err, errno,
                            "runtime 'runsc': create the PID and user namespaces "
                            "around runsc");
  if (pid == 0)
    init_main (job);
  int r = write_maps (job, (pid_t)pid, err);
  if (r >= 0 && write (job->fds[2 * R_SYNC + 1], "x", 1) != 1)
    r = nsbox_error_sys (err, errno, "signal the runsc init");
  if (r < 0)
    {
      syscall (SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
      siginfo_t info;
      waitid (P_PIDFD, (id_t)pidfd, &info, WEXITED | __WALL);
      close (pidfd);
      return r;
    }
  child->pid = (pid_t)pid;
  child->pidfd = pidfd;
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
      char *both = NULL;
      if (asprintf (&both, "%s (%s)", last, first) >= 0)
        {
          free (last);
          last = both;
        }
    }
  return last;
}

/* Safety net after an abnormal end: the PID namespace took every process
 * with it, `runsc delete --force` cleans what it knows of in the state
 * directory before we remove the whole work directory. */
static void
force_delete (const struct runsc_job *job)
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
              || setresgid (RUNSC_ROOT_HOST_ID, RUNSC_ROOT_HOST_ID, RUNSC_ROOT_HOST_ID) < 0
              || setresuid (RUNSC_ROOT_HOST_ID, RUNSC_ROOT_HOST_ID, RUNSC_ROOT_HOST_ID) < 0))
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

static int
open_pipes (struct runsc_job *job, struct nsbox_error **err)
{
  for (int i = 0; i < R_PIPES_; i++)
    if (pipe2 (&job->fds[2 * i], O_CLOEXEC) < 0)
      return nsbox_error_sys (err, errno, "create pipe");
  return 0;
}

static void
close_child_ends (struct runsc_job *job)
{
  const int ends[] = { 2 * R_STDIN,      2 * R_STDOUT + 1, 2 * R_STDERR + 1,
                       2 * R_REPORT + 1, 2 * R_SYNC,       2 * R_SYNC + 1 };
  for (size_t i = 0; i < ARRAY_SIZE (ends); i++)
    if (job->fds[ends[i]] >= 0)
      close (TAKE_FD (job->fds[ends[i]]));
}

/* The helper's records (src/report.h): "started" once it holds the file,
 * then at most one failed setup step. */
struct helper_report
{
  bool started;
  struct nsbox_report error;
};

static void
read_helper_report (const struct runsc_job *job, struct helper_report *out)
{
  memset (out, 0, sizeof *out);
  cleanup_close int fd = open (job->report, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
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
conclude (const struct runsc_job *job, struct nsbox_result *res, struct nsbox_error **err)
{
  if (res->timed_out)
    return 0;
  if (res->oom_killed)
    {
      res->signal = SIGKILL;
      res->exit_code = 128 + SIGKILL;
      return 0;
    }
  if (res->signal == 0 && res->exit_code == 128)
    {
      cleanup_free char *why = read_runsc_error (job->log);
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
    return nsbox_child_report_error (&report.error, err);
  if (res->signal == 0 && res->exit_code > 128 && res->exit_code < 128 + 65)
    res->signal = res->exit_code - 128;
  return 0;
}

static int
execute_job (struct runsc_job *job, const struct nsbox_plan *plan, struct nsbox_limits *limits,
             const struct nsbox_config *c, const char *code, size_t code_len,
             struct nsbox_result *res, struct nsbox_error **err)
{
  int r = find_runsc (&job->runsc, err);
  if (r < 0 || (r = make_workdir (job, err)) < 0 || (r = write_helper (job, plan, err)) < 0
      || (r = write_config (job, plan, c, err)) < 0 || (r = build_argv (job, err)) < 0
      || (r = open_pipes (job, err)) < 0)
    return r;
  job->caller_undumpable = plan->caller_undumpable;
  job->v1_tasks_fds = plan->v1_tasks_fds;
  job->n_v1_tasks_fds = plan->n_v1_tasks_fds;
  struct nsbox_child child = { -1, -1 };
  if ((r = spawn_init (job, limits, &child, err)) < 0)
    return nsbox_error_prefix (err, "runtime 'runsc'");
  close_child_ends (job);
  struct nsbox_streams streams = {
    .stdin_fd = TAKE_FD (job->fds[2 * R_STDIN + 1]),
    .stdout_fd = TAKE_FD (job->fds[2 * R_STDOUT]),
    .stderr_fd = TAKE_FD (job->fds[2 * R_STDERR]),
    .report_fd = TAKE_FD (job->fds[2 * R_REPORT]),
  };
  r = nsbox_supervise (&child, &streams, limits, code, code_len, c->timeout_ms, c->max_output_bytes,
                       res, err);
  nsbox_limits_collect (limits, res);
  if (r < 0)
    {
      force_delete (job);
      return nsbox_error_prefix (err, "runtime 'runsc'");
    }
  r = conclude (job, res, err);
  if (r < 0 || res->timed_out || res->oom_killed || res->exit_code == 128)
    force_delete (job);
  return r;
}

int
nsbox_runsc_execute (const struct nsbox_plan *plan, struct nsbox_limits *limits,
                     const struct nsbox_config *c, const char *code, size_t code_len,
                     struct nsbox_result *res, struct nsbox_error **err)
{
  struct runsc_job job;
  memset (&job, 0, sizeof job);
  job.root = geteuid () == 0;
  for (int i = 0; i < 2 * R_PIPES_; i++)
    job.fds[i] = -1;
  int r = execute_job (&job, plan, limits, c, code, code_len, res, err);
  job_release (&job);
  /* The configured pids limit is gVisor's RLIMIT_NPROC; a host cgroup
   * around runsc only bounds gVisor's own tasks. */
  limits->mech[NSBOX_LIMIT_PIDS] = NSBOX_MECH_RLIMIT;
  return r;
}

void
nsbox_runsc_host_limits (struct nsbox_config *view)
{
  uint64_t backstop = 256 + 8 * view->pids_limit;
  view->pids_limit = backstop;
}

/* ---- runtime auto: a cached self-check ---- */

static char *
check_cache_path (void)
{
  const char *xdg = getenv ("XDG_CACHE_HOME");
  const char *home = getenv ("HOME");
  char *dir = NULL, *path = NULL;
  if (xdg && xdg[0] == '/')
    {
      if (asprintf (&dir, "%s/nsbox", xdg) < 0)
        return NULL;
    }
  else if (home && home[0] == '/')
    {
      if (asprintf (&dir, "%s/.cache/nsbox", home) < 0)
        return NULL;
    }
  else
    return NULL;
  if (asprintf (&path, "%s/runsc-check-%u", dir, (unsigned)geteuid ()) < 0)
    path = NULL;
  free (dir);
  return path;
}

/* What the answer depends on: the runsc binary and the kernel. */
static char *
check_key (const char *runsc)
{
  struct stat st;
  struct utsname u;
  if (stat (runsc, &st) < 0 || uname (&u) < 0)
    return NULL;
  char *key = NULL;
  if (asprintf (&key, "v1 %s %ju %ju %lld.%09ld %jd %s", runsc, (uintmax_t)st.st_dev,
                (uintmax_t)st.st_ino, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
                (intmax_t)st.st_size, u.release)
      < 0)
    return NULL;
  return key;
}

static int
read_cached (const char *path, const char *key)
{
  char buf[1024];
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return -1;
  struct stat st;
  if (fstat (fd, &st) < 0 || st.st_uid != geteuid ())
    return -1;
  ssize_t n = read (fd, buf, sizeof buf - 1);
  if (n <= 0)
    return -1;
  buf[n] = '\0';
  size_t kl = strlen (key);
  if (strncmp (buf, key, kl) != 0 || buf[kl] != ' ')
    return -1;
  return strncmp (buf + kl + 1, "ok", 2) == 0 ? 1 : 0;
}

static void
write_cached (const char *path, const char *key, bool ok)
{
  cleanup_free char *dir = strdup (path);
  if (!dir)
    return;
  char *slash = strrchr (dir, '/');
  *slash = '\0';
  char *parent = strrchr (dir, '/');
  if (parent && parent != dir)
    {
      *parent = '\0';
      mkdir (dir, 0700);
      *parent = '/';
    }
  mkdir (dir, 0700);
  cleanup_free char *tmp = NULL;
  if (asprintf (&tmp, "%s.%d.tmp", path, (int)getpid ()) < 0)
    return;
  cleanup_close int fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return;
  dprintf (fd, "%s %s\n", key, ok ? "ok" : "fail");
  if (rename (tmp, path) < 0)
    unlink (tmp);
}

/* A trivial job with the real machinery, outside any cgroup of ours. */
static bool
self_check (const struct nsbox_config *c)
{
  if (!c->rootfs)
    return false;
  cleanup_free char *rootfs = realpath (c->rootfs, NULL);
  if (!rootfs)
    return false;
  static const char *const argv[] = { "python3", "-c", "pass", NULL };
  static const char *const envp[]
      = { "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", NULL };
  struct nsbox_plan plan;
  memset (&plan, 0, sizeof plan);
  plan.rootfs = rootfs;
  plan.argv = (char *const *)argv;
  plan.envp = (char *const *)envp;
  plan.bpf.insns = (struct sock_filter *)nsbox_default_bpf_insns;
  plan.bpf.len = nsbox_default_bpf_len;
  struct nsbox_config check_config = *c;
  check_config.timeout_ms = 10000;
  struct nsbox_limits none;
  memset (&none, 0, sizeof none);
  none.v2_fd = -1;
  for (int i = 0; i < NSBOX_V1_COUNT_; i++)
    none.tasks_fd[i] = -1;
  struct nsbox_result *res = calloc (1, sizeof *res);
  if (!res)
    return false;
  struct nsbox_error *err = NULL;
  int r = nsbox_runsc_execute (&plan, &none, &check_config, NULL, 0, res, &err);
  bool ok = r >= 0 && !res->timed_out && res->exit_code == 0;
  nsbox_error_free (err);
  nsbox_result_free (res);
  return ok;
}

bool
nsbox_runsc_usable (const struct nsbox_config *c)
{
  cleanup_free char *runsc = NULL;
  if (find_runsc (&runsc, NULL) < 0)
    return false;
  cleanup_free char *key = check_key (runsc);
  cleanup_free char *path = check_cache_path ();
  if (!key)
    return false;
  int cached = path ? read_cached (path, key) : -1;
  if (cached >= 0)
    return cached == 1;
  bool ok = self_check (c);
  if (path)
    write_cached (path, key, ok);
  return ok;
}
