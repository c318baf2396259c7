/* runsc: the OCI bundle of one run, in a private work directory (see
 * runsc_bundle.h): config.json, the seccomp helper with the run's filter,
 * the helper's report file, runsc's state and log directories. */
#include "runsc_bundle.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "remove.h"
#include "userns.h"
#include "util.h"

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

/* src/helper/runsc-exec.c, embedded by src/runsc_exec_blob.S. */
extern const unsigned char nsbox_runsc_exec[] NSBOX_INTERNAL;
extern const uint64_t nsbox_runsc_exec_len NSBOX_INTERNAL;

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

/* process.rlimits: the plan's (every limit, as natively), with
 * RLIMIT_NPROC from pids-limit always: the host cgroup cannot count
 * gVisor's tasks, so gVisor's own RLIMIT_NPROC is the limit. pids-limit
 * counts every task of the sandbox, init included, as natively; gVisor
 * counts a task against the user that created it, at clone: the helper at
 * PID 1 (uid 0, created by gVisor, never counted) forks the program, which
 * becomes the sandbox user only after it was counted for uid 0. The
 * sandbox user's count so leaves out both: pids-limit - 2, and uid 0
 * holds those two (nsbox_runsc_bundle_create refuses a pids-limit below
 * 4). With the sandbox user 0, every task counts for uid 0: at most
 * pids-limit - 2 of them, stricter than native, never weaker. */
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
  json_int_t nproc = (json_int_t)c->pids_limit - 2;
  if (add (a, json_pack ("{s:s, s:I, s:I}", "type", "RLIMIT_NPROC", "hard", nproc, "soft", nproc))
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
build_mounts (const struct nsbox_runsc_bundle *b, const struct nsbox_plan *plan,
              const struct nsbox_config *c)
{
  char tmp_size[64], helper_src[4096];
  snprintf (tmp_size, sizeof tmp_size, "size=%" PRIu64, c->tmp_size_bytes);
  snprintf (helper_src, sizeof helper_src, "%s/helper", b->dir);
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
      "bind", "nodev", "nosuid", "destination", SANDBOX_REPORT, "type", "bind", "source", b->report,
      "options", "rw", "bind", "nodev", "nosuid", "noexec");
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
give_to_gvisor (const struct nsbox_runsc_bundle *b, int fd, mode_t mode, const char *path,
                struct nsbox_error **err)
{
  if (b->root && fchown (fd, 0, NSBOX_ROOT_HOST_ID) < 0)
    return nsbox_error_sys (err, errno, "chown '%s'", path);
  /* Unprivileged, the group bits would reach the caller's group. */
  if (fchmod (fd, b->root ? mode : mode & 0700) < 0)
    return nsbox_error_sys (err, errno, "chmod '%s'", path);
  return 0;
}

static int
make_gvisor_dir (const struct nsbox_runsc_bundle *b, const char *path, struct nsbox_error **err)
{
  if (mkdir (path, 0700) < 0)
    return nsbox_error_sys (err, errno, "create '%s'", path);
  cleanup_close int fd = open (path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return nsbox_error_sys (err, errno, "open '%s'", path);
  return give_to_gvisor (b, fd, 0750, path, err);
}

/* Files and directories gVisor writes: its own. */
static int
own_by_gvisor (const struct nsbox_runsc_bundle *b, int fd, const char *path,
               struct nsbox_error **err)
{
  if (b->root && fchown (fd, NSBOX_ROOT_HOST_ID, NSBOX_ROOT_HOST_ID) < 0)
    return nsbox_error_sys (err, errno, "chown '%s'", path);
  return 0;
}

static int
write_config (const struct nsbox_runsc_bundle *b, const struct nsbox_plan *plan,
              const struct nsbox_config *c, struct nsbox_error **err)
{
  json_t *process = build_process (plan, c);
  json_t *mounts = build_mounts (b, plan, c);
  json_t *linux_ = build_linux (c);
  if (!process || !mounts || !linux_)
    {
      json_decref (process);
      json_decref (mounts);
      json_decref (linux_);
      return nsbox_error_oom (err);
    }
  json_t *spec = json_pack ("{s:s, s:o, s:{s:s, s:b}, s:s, s:o, s:o}", "ociVersion", "1.0.2",
                            "process", process, "root", "path", plan->rootfs, "readonly", 1,
                            "hostname", "nsbox", "mounts", mounts, "linux", linux_);
  if (!spec)
    return nsbox_error_oom (err);
  char path[4096];
  snprintf (path, sizeof path, "%s/config.json", b->dir);
  /* argv and the environment (--env values) are in it: readable by gVisor
   * only (see make_workdir). */
  cleanup_close int fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  int r = 0;
  if (fd < 0)
    r = nsbox_error_sys (err, errno, "create '%s'", path);
  else if ((r = give_to_gvisor (b, fd, 0640, path, err)) < 0)
    ;
  else if (json_dumpfd (spec, fd, JSON_COMPACT) < 0)
    r = nsbox_error_sys (err, errno ? errno : EIO, "write '%s'", path);
  json_decref (spec);
  return r;
}

/* A file of the bundle: ours, only readable by gVisor. */
static int
write_bundle_file (const struct nsbox_runsc_bundle *b, const char *name, const void *data,
                   size_t len, mode_t mode, struct nsbox_error **err)
{
  char path[4096];
  snprintf (path, sizeof path, "%s/helper/%s", b->dir, name);
  cleanup_close int fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0)
    return nsbox_error_sys (err, errno, "create '%s'", path);
  int r = nsbox_write_all (fd, data, len);
  if (r < 0)
    return nsbox_error_sys (err, -r, "write '%s'", path);
  return give_to_gvisor (b, fd, mode, path, err);
}

/* The helper and the run's filter: the same BPF the native runtime
 * installs, evaluated by gVisor's sentry for the program. */
static int
write_helper (const struct nsbox_runsc_bundle *b, const struct nsbox_plan *plan,
              struct nsbox_error **err)
{
  if (plan->bpf.len == 0)
    return nsbox_error_set (err, EINVAL, "runtime 'runsc': no seccomp filter prepared");
  if (!rootfs_has_dir (plan, SANDBOX_HELPER_DIR))
    return nsbox_error_set (err, ENOTDIR,
                            "runtime 'runsc': rootfs '%s' has no '%s' directory "
                            "(the mount point of nsbox's seccomp helper)",
                            plan->rootfs, SANDBOX_HELPER_DIR);
  char dir[4096];
  snprintf (dir, sizeof dir, "%s/helper", b->dir);
  int r = make_gvisor_dir (b, dir, err);
  if (r < 0)
    return r;
  r = write_bundle_file (b, ".nsbox-exec", nsbox_runsc_exec, (size_t)nsbox_runsc_exec_len, 0750,
                         err);
  if (r < 0
      || (r = write_bundle_file (b, ".nsbox-filter", plan->bpf.insns,
                                 (size_t)plan->bpf.len * sizeof plan->bpf.insns[0], 0640, err))
             < 0)
    return r;
  /* The mount point of the report file. */
  return write_bundle_file (b, ".nsbox-report", "", 0, 0640, err);
}

/* A launcher killed with SIGKILL took its gVisor processes with it (PID
 * namespace) but could not remove its work dir: the next run does. Only
 * directories we own (nobody else can create them for us to remove), and
 * only when no launcher holds the directory's lock: the pid in the name
 * says nothing about a launcher in another PID namespace that shares the
 * directory (a container with the same /dev/shm). */
static void
remove_stale (int dir_fd, const char *name)
{
  cleanup_close int fd = openat (dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat (fd, &st) < 0 || st.st_uid != geteuid () || flock (fd, LOCK_EX | LOCK_NB) < 0)
    return;
  nsbox_remove_at (dir_fd, name);
}

/* Layout, when nsbox is root (gVisor runs as host uid 65534):
 *   nsbox-runsc-PID-XXXXXX/  root:65534 0750: only gVisor and root get in
 *     bundle/                root:65534 0750: config.json (argv, the
 *                            environment) 0640, the helper's directory: read
 *                            by gVisor, changed by nobody else
 *     report                 65534 0600: the helper's records
 *     state/ log/            65534 0700: runsc --root, runsc --log and
 *                            --panic-log
 * For an unprivileged launcher everything is its own, 0700 and 0600. */
static int
make_workdir (struct nsbox_runsc_bundle *b, struct nsbox_error **err)
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
  nsbox_sweep_stale (base, "nsbox-runsc-", remove_stale);
  /* The launcher's pid in the name: observers (and the tests) can tell
   * whose gVisor processes they see. */
  if (!(b->workdir = xasprintf ("%s/nsbox-runsc-%d-XXXXXX", base, (int)getpid ())))
    return nsbox_error_oom (err);
  if (!mkdtemp (b->workdir))
    {
      int e = errno;
      free (TAKE_PTR (b->workdir));
      return nsbox_error_sys (err, e, "create the runsc work directory in '%s'", base);
    }
  char logdir[4096];
  snprintf (logdir, sizeof logdir, "%s/log", b->workdir);
  if (!(b->dir = xasprintf ("%s/bundle", b->workdir))
      || !(b->state = xasprintf ("%s/state", b->workdir))
      || !(b->log = xasprintf ("%s/runsc.log", logdir))
      || !(b->panic = xasprintf ("%s/panic.log", logdir))
      || !(b->report = xasprintf ("%s/report", b->workdir)))
    return nsbox_error_oom (err);
  cleanup_close int workdir_fd = open (b->workdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  int r;
  if (workdir_fd < 0)
    return nsbox_error_sys (err, errno, "open '%s'", b->workdir);
  /* Held until the directory is removed: a sweep by another launcher
   * leaves it alone (remove_stale). */
  if (flock (workdir_fd, LOCK_EX | LOCK_NB) < 0
      || (b->lock_fd = fcntl (workdir_fd, F_DUPFD_CLOEXEC, 3)) < 0)
    return nsbox_error_sys (err, errno, "lock '%s'", b->workdir);
  b->locked = true;
  if ((r = give_to_gvisor (b, workdir_fd, 0750, b->workdir, err)) < 0
      || (r = make_gvisor_dir (b, b->dir, err)) < 0)
    return r;
  const char *const owned_by_gvisor[] = { b->state, logdir };
  for (size_t i = 0; i < ARRAY_SIZE (owned_by_gvisor); i++)
    {
      if (mkdir (owned_by_gvisor[i], 0700) < 0)
        return nsbox_error_sys (err, errno, "create '%s'", owned_by_gvisor[i]);
      cleanup_close int fd
          = open (owned_by_gvisor[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0)
        return nsbox_error_sys (err, errno, "open '%s'", owned_by_gvisor[i]);
      if ((r = own_by_gvisor (b, fd, owned_by_gvisor[i], err)) < 0)
        return r;
    }
  cleanup_close int report_fd
      = open (b->report, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (report_fd < 0)
    return nsbox_error_sys (err, errno, "create '%s'", b->report);
  return own_by_gvisor (b, report_fd, b->report, err);
}

int
nsbox_runsc_bundle_create (struct nsbox_runsc_bundle *b, const struct nsbox_plan *plan,
                           const struct nsbox_config *c, struct nsbox_error **err)
{
  /* gVisor counts the helper and the program's first task for uid 0
   * (build_rlimits): an RLIMIT_NPROC below 2 stops the helper's own start,
   * and one that lets both start lets the program hold more tasks than a
   * pids-limit below 4. Refused rather than weaker than native. */
  if (c->pids_limit < 4)
    return nsbox_error_set (err, EINVAL,
                            "pids-limit %" PRIu64 " is below 4, the least runtime 'runsc' can "
                            "enforce exactly (its init and the program's first process count "
                            "apart from the sandbox user's tasks)",
                            c->pids_limit);
  /* The helper's report file belongs to uid 0 inside gVisor, which no
   * mode bit keeps from its owner: a program running as uid 0 could
   * write a setup failure of its choosing there. */
  if (c->uid == 0)
    return nsbox_error_set (err, EINVAL,
                            "user 0 is not allowed under runtime 'runsc': the sandbox's "
                            "setup report belongs to uid 0 there, and the program must not "
                            "be able to write it");
  b->root = geteuid () == 0;
  int r = make_workdir (b, err);
  if (r < 0 || (r = write_helper (b, plan, err)) < 0)
    return r;
  return write_config (b, plan, c, err);
}

void
nsbox_runsc_bundle_remove (struct nsbox_runsc_bundle *b)
{
  if (b->workdir)
    nsbox_remove_at (AT_FDCWD, b->workdir);
  if (b->locked)
    close (b->lock_fd);
  b->locked = false;
  free (TAKE_PTR (b->workdir));
  free (TAKE_PTR (b->dir));
  free (TAKE_PTR (b->state));
  free (TAKE_PTR (b->log));
  free (TAKE_PTR (b->panic));
  free (TAKE_PTR (b->report));
}
