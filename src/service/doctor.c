/* `nsbox doctor` (doctor.h). Each check looks at the machine the way nsbox
 * will use it, most by doing the thing itself (a user namespace with its
 * maps and mounts, a fresh proc, a real sandbox running print(45)), and
 * names the one command or setting that fixes what it found. The limits
 * are read from that real run's result: which mechanism each limit got is
 * what nsbox run would get. */
#include "doctor.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/magic.h>

#include "config.h"
#include "error.h"
#include "image.h"
#include "result.h"
#include "runsc.h"
#include "util.h"

enum status
{
  OK = 0,
  DEGRADED,
  FAILING,
};

static const char *const status_names[] = { "ok", "degraded", "failing" };

#define CHECKS_MAX 16

struct check
{
  const char *name;
  enum status status;
  char *detail;
  char *fix; /* NULL when there is nothing to fix */
};

struct report
{
  struct check checks[CHECKS_MAX];
  size_t n;
};

static void __attribute__ ((format (printf, 5, 6)))
add (struct report *r, const char *name, enum status status, const char *fix, const char *fmt, ...)
{
  if (r->n >= CHECKS_MAX)
    return;
  va_list ap;
  va_start (ap, fmt);
  char *detail = vxasprintf (fmt, ap);
  va_end (ap);
  r->checks[r->n++] = (struct check){ name, status, detail, fix ? strdup (fix) : NULL };
}

/* A sysctl as a number; -1 when the file is not there (or not a number). */
static long long
sysctl_value (const char *path)
{
  char buf[64];
  if (nsbox_read_small (path, buf, sizeof buf) <= 0)
    return -1;
  char *end = NULL;
  long long v = strtoll (buf, &end, 10);
  return end != buf ? v : -1;
}

/* ---- user namespaces and a fresh proc, tried in a child ---- */

enum userns_step
{
  STEP_NONE = 0,
  STEP_UNSHARE,
  STEP_MAPS,
  STEP_MOUNT,
  STEP_PROC,
};

struct probe
{
  enum userns_step step; /* the step that failed */
  int error;
};

static int
write_text (const char *path, const char *text)
{
  int fd = open (path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  ssize_t n = write (fd, text, strlen (text));
  int saved = errno;
  close (fd);
  return n == (ssize_t)strlen (text) ? 0 : -(n < 0 ? saved : EIO);
}

/* In a forked child: a user namespace mapping this user to root, a mount
 * namespace with a tmpfs, then in a new PID namespace a fresh proc: what
 * every sandbox does first. */
static struct probe
child_probe (void)
{
  uid_t uid = geteuid ();
  gid_t gid = getegid ();
  if (unshare (CLONE_NEWUSER | CLONE_NEWNS) < 0)
    return (struct probe){ STEP_UNSHARE, errno };
  char map[64];
  int r = write_text ("/proc/self/setgroups", "deny");
  if (r == 0 || r == -ENOENT)
    {
      snprintf (map, sizeof map, "0 %u 1", (unsigned)uid);
      r = write_text ("/proc/self/uid_map", map);
    }
  if (r == 0)
    {
      snprintf (map, sizeof map, "0 %u 1", (unsigned)gid);
      r = write_text ("/proc/self/gid_map", map);
    }
  if (r < 0)
    return (struct probe){ STEP_MAPS, -r };
  if (mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0
      || mount ("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=64k") < 0)
    return (struct probe){ STEP_MOUNT, errno };
  if (unshare (CLONE_NEWPID) < 0)
    return (struct probe){ STEP_PROC, errno };
  pid_t pid = fork ();
  if (pid < 0)
    return (struct probe){ STEP_PROC, errno };
  if (pid == 0)
    {
      if (mkdir ("/tmp/proc", 0555) < 0
          || mount ("proc", "/tmp/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        _exit (errno & 0xff);
      _exit (0);
    }
  int status = 0;
  if (waitpid (pid, &status, 0) < 0)
    return (struct probe){ STEP_PROC, errno };
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    return (struct probe){ STEP_PROC, WIFEXITED (status) ? WEXITSTATUS (status) : EINTR };
  return (struct probe){ STEP_NONE, 0 };
}

static struct probe
probe_userns (void)
{
  int fds[2];
  if (pipe2 (fds, O_CLOEXEC) < 0)
    return (struct probe){ STEP_UNSHARE, errno };
  pid_t pid = fork ();
  if (pid < 0)
    {
      close (fds[0]);
      close (fds[1]);
      return (struct probe){ STEP_UNSHARE, errno };
    }
  if (pid == 0)
    {
      close (fds[0]);
      struct probe p = child_probe ();
      ssize_t n = write (fds[1], &p, sizeof p);
      _exit (n == (ssize_t)sizeof p ? 0 : 1);
    }
  close (fds[1]);
  struct probe p = { STEP_UNSHARE, EIO };
  ssize_t n;
  do
    n = read (fds[0], &p, sizeof p);
  while (n < 0 && errno == EINTR);
  close (fds[0]);
  waitpid (pid, NULL, 0);
  if (n != (ssize_t)sizeof p)
    p = (struct probe){ STEP_UNSHARE, EIO };
  return p;
}

/* Mounts that cover parts of /proc (a container's masked paths): a user
 * namespace may not mount a proc that would reveal them. */
static char *
proc_overmounts (void)
{
  FILE *f = fopen ("/proc/self/mountinfo", "re");
  if (!f)
    return NULL;
  char *line = NULL, *list = NULL;
  size_t size = 0, n = 0;
  while (getline (&line, &size, f) > 0)
    {
      char mount_point[4096];
      if (sscanf (line, "%*s %*s %*s %*s %4095s", mount_point) != 1
          || strncmp (mount_point, "/proc/", 6) != 0
          || strcmp (mount_point, "/proc/sys/fs/binfmt_misc") == 0)
        continue;
      if (n++ < 4)
        {
          char *grown = xasprintf ("%s%s%s", list ? list : "", list ? ", " : "", mount_point);
          free (list);
          list = grown;
        }
    }
  free (line);
  fclose (f);
  if (n > 4 && list)
    {
      char *grown = xasprintf ("%s and %zu more", list, n - 4);
      free (list);
      list = grown;
    }
  return list;
}

static void
check_userns (struct report *r, struct probe p)
{
  static const char *const steps[] = {
    [STEP_NONE] = "",
    [STEP_UNSHARE] = "unshare(CLONE_NEWUSER)",
    [STEP_MAPS] = "writing its uid and gid maps",
    [STEP_MOUNT] = "mounting a tmpfs in it",
    [STEP_PROC] = "mounting a fresh proc",
  };
  long long max = sysctl_value ("/proc/sys/user/max_user_namespaces");
  long long clone = sysctl_value ("/proc/sys/kernel/unprivileged_userns_clone");
  long long apparmor = sysctl_value ("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
  bool root = geteuid () == 0;
  char settings[160];
  snprintf (settings, sizeof settings, "user.max_user_namespaces %lld%s%s%s%s", max,
            clone >= 0 ? ", kernel.unprivileged_userns_clone " : "",
            clone >= 0 ? (clone ? "1" : "0") : "",
            apparmor >= 0 ? ", kernel.apparmor_restrict_unprivileged_userns " : "",
            apparmor >= 0 ? (apparmor ? "1" : "0") : "");
  if (p.step == STEP_NONE || p.step == STEP_PROC)
    add (r, "user namespaces", OK, NULL, "a user namespace with its maps and mounts works (%s)",
         settings);
  else
    {
      const char *fix;
      if (max == 0 || (p.step == STEP_UNSHARE && p.error == ENOSPC))
        fix = "sysctl -w user.max_user_namespaces=15000 (to keep it: echo "
              "user.max_user_namespaces=15000 > /etc/sysctl.d/90-nsbox.conf)";
      else if (!root && clone == 0)
        fix = "sysctl -w kernel.unprivileged_userns_clone=1 (to keep it: echo "
              "kernel.unprivileged_userns_clone=1 > /etc/sysctl.d/90-nsbox.conf)";
      else if (!root && apparmor == 1)
        fix = "let nsbox create user namespaces under AppArmor: write /etc/apparmor.d/nsbox "
              "with 'abi <abi/4.0>, include <tunables/global> profile nsbox "
              "/usr/local/bin/nsbox flags=(unconfined) { userns, }' (the path of your nsbox), "
              "then apparmor_parser -r /etc/apparmor.d/nsbox";
      else
        fix = "user namespaces are refused by something other than a sysctl (a seccomp filter "
              "or an LSM of the container nsbox runs in): run nsbox on the host, or allow "
              "unshare(CLONE_NEWUSER) there";
      add (r, "user namespaces", FAILING, fix, "%s failed: %s (%s)", steps[p.step],
           strerror (p.error), settings);
    }
  struct statfs sf;
  const char *shm = statfs ("/dev/shm", &sf) < 0 ? ""
                    : sf.f_type == TMPFS_MAGIC   ? "; /dev/shm is a tmpfs"
                                                 : "; /dev/shm is not a tmpfs";
  if (p.step == STEP_NONE)
    add (r, "/proc", OK, NULL,
         "a fresh proc mounts in a new PID namespace%s (the sandbox mounts its own of both)", shm);
  else if (p.step == STEP_PROC)
    {
      cleanup_free char *covered = proc_overmounts ();
      add (r, "/proc", FAILING,
           "run nsbox where /proc is whole, not partly covered by a container's masked paths "
           "(docker: --security-opt systempaths=unconfined)",
           "mounting a fresh proc failed: %s%s%s", strerror (p.error),
           covered ? "; mounts cover " : "", covered ? covered : "");
    }
  else
    add (r, "/proc", FAILING, "fix the user namespaces first", "not tried: no user namespace");
}

/* ---- cgroups and the limits ---- */

enum layout
{
  LAYOUT_NONE,
  LAYOUT_V2,
  LAYOUT_HYBRID,
  LAYOUT_V1,
};

static enum layout
cgroup_layout (void)
{
  struct statfs sf;
  if (statfs ("/sys/fs/cgroup", &sf) < 0)
    return LAYOUT_NONE;
  if (sf.f_type == CGROUP2_SUPER_MAGIC)
    return LAYOUT_V2;
  if (statfs ("/sys/fs/cgroup/unified", &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC)
    return LAYOUT_HYBRID;
  return sf.f_type == TMPFS_MAGIC ? LAYOUT_V1 : LAYOUT_NONE;
}

/* This process's cgroup v2 directory, when the hierarchy is v2. */
static char *
own_cgroup2 (void)
{
  char buf[4096];
  if (nsbox_read_small ("/proc/self/cgroup", buf, sizeof buf) <= 0)
    return NULL;
  char *line = strstr (buf, "0::");
  if (!line)
    return NULL;
  line += 3;
  line[strcspn (line, "\n")] = '\0';
  return xasprintf ("/sys/fs/cgroup%s", line);
}

static bool
user_bus (void)
{
  const char *address = getenv ("DBUS_SESSION_BUS_ADDRESS");
  if (address && *address)
    return true;
  char path[64];
  snprintf (path, sizeof path, "/run/user/%u/bus", (unsigned)geteuid ());
  struct stat st;
  return stat (path, &st) == 0 && S_ISSOCK (st.st_mode);
}

static void
check_cgroups (struct report *r, enum layout layout)
{
  bool root = geteuid () == 0;
  cleanup_free char *own = layout == LAYOUT_V2 ? own_cgroup2 () : NULL;
  struct stat st;
  bool delegated = own && stat (own, &st) == 0 && st.st_uid == geteuid ();
  switch (layout)
    {
    case LAYOUT_V2:
      add (r, "cgroups", OK, NULL, "cgroup v2 at /sys/fs/cgroup; this process in %s (%s%s)",
           own ? own + strlen ("/sys/fs/cgroup") : "?",
           root        ? "root may manage it"
           : delegated ? "delegated to this user"
                       : "not delegated",
           root          ? ""
           : user_bus () ? ", a user bus for a systemd scope"
                         : ", no user bus");
      return;
    case LAYOUT_HYBRID:
      add (r, "cgroups", OK, NULL,
           "hybrid: cgroup v1 controllers, cgroup v2 without controllers at "
           "/sys/fs/cgroup/unified%s",
           root ? "" : " (v1 cannot be delegated to an unprivileged user)");
      return;
    case LAYOUT_V1:
      add (r, "cgroups", OK, NULL, "cgroup v1 only%s",
           root ? "" : " (v1 cannot be delegated to an unprivileged user)");
      return;
    case LAYOUT_NONE:
      break;
    }
  add (r, "cgroups", DEGRADED,
       "mount cgroup2 at /sys/fs/cgroup (mount -t cgroup2 none /sys/fs/cgroup)",
       "no cgroup hierarchy at /sys/fs/cgroup");
}

/* What fixes limits enforced by rlimit or not at all, here. */
static const char *
limits_fix (enum layout layout)
{
  if (geteuid () == 0)
    return "mount cgroup2 at /sys/fs/cgroup with the memory, cpu and pids controllers, or the "
           "cgroup v1 memory, cpu and pids hierarchies";
  if (layout == LAYOUT_HYBRID || layout == LAYOUT_V1)
    return "cgroup v1 cannot be delegated to an unprivileged user: boot with "
           "systemd.unified_cgroup_hierarchy=1 on the kernel command line (cgroup v2, which "
           "systemd delegates), or run nsbox as root";
  if (!user_bus ())
    return "no user bus for a delegated systemd scope: run nsbox from a login session of this "
           "user (loginctl enable-linger USER; XDG_RUNTIME_DIR=/run/user/UID), or in a "
           "delegated cgroup: systemd-run --user --scope -p Delegate=yes nsbox ...";
  return "let systemd delegate the controllers to users: systemctl edit user@.service with "
         "[Service] Delegate=cpu cpuset io memory pids, then log in again";
}

static void
check_limits (struct report *r, const nsbox_result *res, const char *strict_why, enum layout layout)
{
  static const char *const names[] = { "memory", "cpus", "pids" };
  char detail[256] = "";
  bool weak = false;
  for (int i = NSBOX_LIMIT_MEMORY; i <= NSBOX_LIMIT_PIDS; i++)
    {
      enum nsbox_mechanism m = nsbox_result_limit (res, (enum nsbox_limit)i);
      /* Under gVisor, pids is its RLIMIT_NPROC by design (README, runsc). */
      bool gvisor_pids = i == NSBOX_LIMIT_PIDS && m == NSBOX_MECH_RLIMIT
                         && strcmp (nsbox_result_runtime (res), "runsc") == 0;
      weak |= m != NSBOX_MECH_CGROUP1 && m != NSBOX_MECH_CGROUP2 && !gvisor_pids;
      size_t len = strlen (detail);
      snprintf (detail + len, sizeof detail - len, "%s%s by %s%s", i ? ", " : "", names[i],
                nsbox_mechanism_name (m), gvisor_pids ? " (gVisor's, as designed)" : "");
    }
  if (!weak)
    add (r, "limits", OK, NULL, "%s", detail);
  else
    add (r, "limits", DEGRADED, limits_fix (layout), "%s%s%s", detail,
         strict_why ? "; a cgroup could not: " : "", strict_why ? strict_why : "");
}

/* ---- the store, the image, runsc, seccomp ---- */

static void
check_store (struct report *r, const nsbox_config *c)
{
  cleanup_free char *store = c->store ? strdup (c->store) : nsbox_default_store ();
  if (!store)
    {
      add (r, "store", DEGRADED, "set NSBOX_STORE or HOME", "no directory for the image store");
      return;
    }
  /* The store, or the nearest directory that would hold it. */
  cleanup_free char *dir = strdup (store);
  struct statvfs vfs = { 0 };
  while (dir && statvfs (dir, &vfs) < 0 && strrchr (dir, '/') && strlen (dir) > 1)
    *strrchr (dir, '/') = '\0';
  bool exists = access (store, F_OK) == 0;
  bool writable = dir && access (dir, W_OK) == 0;
  unsigned long long free_mib
      = dir ? (unsigned long long)vfs.f_bavail * vfs.f_frsize / (1024 * 1024) : 0;
  if (!writable)
    add (r, "store", DEGRADED, "make the store writable, or set --store / NSBOX_STORE",
         "%s%s: not writable by uid %u (images cannot be pulled)", store,
         exists ? "" : " (missing)", (unsigned)geteuid ());
  else if (free_mib < 512)
    add (r, "store", DEGRADED, "free space where the store is, or set --store / NSBOX_STORE",
         "%s: %llu MiB free (an image needs about 150 MiB, a pull twice that)", store, free_mib);
  else
    add (r, "store", OK, NULL, "%s%s: writable, %llu MiB free", store,
         exists ? "" : " (created at the first pull)", free_mib);
}

/* The image (or rootfs) a sandbox will start on; *rootfs set when there is
 * one. */
static void
check_image (struct report *r, nsbox_config *c, struct nsbox_image *held, bool *usable)
{
  *usable = false;
  if (c->rootfs)
    {
      struct stat st;
      if (stat (c->rootfs, &st) == 0 && S_ISDIR (st.st_mode))
        {
          *usable = true;
          add (r, "image", OK, NULL, "rootfs %s (configured instead of an image)", c->rootfs);
        }
      else
        add (r, "image", FAILING, "give --rootfs an unpacked root filesystem directory",
             "rootfs %s is not a directory", c->rootfs);
      return;
    }
  struct nsbox_error *err = NULL;
  if (nsbox_image_hold (c->store, c->image, NSBOX_PULL_NEVER, held, &err) == 0)
    {
      nsbox_error_free (err);
      size_t len = 0;
      while (held->env && held->env[len])
        len++;
      if (nsbox_config_set (c, "rootfs", held->rootfs, NULL) == 0
          && nsbox_config_set_base_env (c, (const char *const *)held->env, len, NULL) == 0
          && nsbox_config_set_image_digest (c, held->digest, NULL) == 0)
        *usable = true;
      add (r, "image", OK, NULL, "%s is in the store", c->image);
      return;
    }
  bool missing = nsbox_error_errno (err) == ENOENT;
  cleanup_free char *shown = nsbox_printable (c->image);
  cleanup_free char *fix = xasprintf ("nsbox-image pull %s (or nsbox-image import a docker "
                                      "save archive of it)",
                                      shown ? shown : "IMAGE");
  add (r, "image", missing ? DEGRADED : FAILING, fix, "%s: %s", c->image,
       missing ? "not in the store yet (nsbox run pulls it first; needs the registry)"
               : nsbox_error_message (err));
  nsbox_error_free (err);
}

static void
check_runsc (struct report *r, const nsbox_config *c, bool rootfs)
{
  bool needed = c->runtime == NSBOX_RUNTIME_RUNSC;
  cleanup_free char *runsc = NULL;
  if (nsbox_runsc_find (&runsc, NULL) < 0)
    {
      add (r, "runsc", needed ? FAILING : OK,
           needed ? "install gVisor's runsc (https://gvisor.dev/docs/user_guide/install/) in "
                    "PATH, or set NSBOX_RUNSC"
                  : NULL,
           "not installed%s",
           needed ? " (runtime: runsc needs it)" : " (needed only for runtime: runsc or auto)");
      return;
    }
  if (!rootfs)
    {
      add (r, "runsc", OK, NULL, "%s (its self-check needs an image: not tried)", runsc);
      return;
    }
  if (nsbox_runsc_usable (c))
    add (r, "runsc", OK, NULL, "%s: its self-check passed (a trivial job under gVisor)", runsc);
  else
    add (r, "runsc", needed ? FAILING : DEGRADED,
         "run nsbox run --runtime runsc with NSBOX_RUNSC_DEBUG_LOG=DIR and read its log; "
         "rootless runsc needs user namespaces",
         "%s: its self-check failed (runtime auto falls back to native)", runsc);
}

static void
check_seccomp (struct report *r)
{
  char buf[4096];
  const char *mode = NULL;
  if (nsbox_read_small ("/proc/self/status", buf, sizeof buf) > 0)
    mode = strstr (buf, "\nSeccomp:");
  if (!mode)
    {
      add (r, "seccomp", FAILING, "use a kernel built with CONFIG_SECCOMP_FILTER",
           "the kernel reports no seccomp support");
      return;
    }
  int level = atoi (mode + strlen ("\nSeccomp:"));
  add (r, "seccomp", OK, NULL, "available%s",
       level == 2 ? " (nsbox itself already runs under a "
                    "filter: a container's, stacked)"
                  : "");
}

/* ---- the real thing ---- */

static nsbox_result *
check_sandbox (struct report *r, const nsbox_config *c, bool usable, bool namespaces)
{
  if (!namespaces)
    {
      add (r, "sandbox", FAILING, "see the user namespaces and /proc checks",
           "not tried: the namespaces every sandbox needs cannot be made here");
      return NULL;
    }
  if (!usable)
    {
      add (r, "sandbox", DEGRADED, "fix the image first", "not tried: no image to start it on");
      return NULL;
    }
  nsbox_result *res = NULL;
  struct nsbox_error *err = NULL;
  static const char code[] = "print(45)\n";
  if (nsbox_run (c, code, sizeof code - 1, &res, &err) < 0)
    {
      add (r, "sandbox", FAILING, "see the checks above", "print(45) could not run: %s",
           nsbox_error_message (err));
      nsbox_error_free (err);
      return NULL;
    }
  size_t len = 0;
  const char *out = nsbox_result_stdout (res, &len);
  if (nsbox_result_exit_code (res) == 0 && len == 3 && memcmp (out, "45\n", 3) == 0)
    add (r, "sandbox", OK, NULL, "print(45) printed 45 in %" PRIu64 " ms (runtime %s)",
         nsbox_result_duration_ms (res), nsbox_result_runtime (res));
  else
    {
      size_t elen = 0;
      const char *errs = nsbox_result_stderr (res, &elen);
      add (r, "sandbox", FAILING, "see the program's error", "print(45) exited %d: %.*s",
           nsbox_result_exit_code (res), (int)(elen > 200 ? 200 : elen), errs);
    }
  return res;
}

/* Why no cgroup took the limits: the message of a strict run. */
static char *
strict_reason (const nsbox_config *c)
{
  cleanup_config nsbox_config *strict = nsbox_config_dup (c, NULL);
  if (!strict || nsbox_config_set (strict, "strict", "true", NULL) < 0)
    return NULL;
  nsbox_result *res = NULL;
  struct nsbox_error *err = NULL;
  char *why = NULL;
  if (nsbox_run (strict, "", 0, &res, &err) < 0)
    why = strdup (nsbox_error_message (err));
  nsbox_error_free (err);
  nsbox_result_free (res);
  return why;
}

/* ---- the report ---- */

static enum status
verdict (const struct report *r)
{
  enum status worst = OK;
  for (size_t i = 0; i < r->n; i++)
    if (r->checks[i].status > worst)
      worst = r->checks[i].status;
  return worst;
}

static void
print_text (const struct report *r, enum status v)
{
  struct utsname u;
  uname (&u);
  printf ("nsbox doctor: kernel %s, uid %u\n", u.release, (unsigned)geteuid ());
  for (size_t i = 0; i < r->n; i++)
    {
      const struct check *c = &r->checks[i];
      cleanup_free char *detail = nsbox_printable (c->detail ? c->detail : "");
      printf ("%-9s %-16s %s\n", status_names[c->status], c->name, detail ? detail : "");
      if (c->fix)
        printf ("%-9s %-16s fix: %s\n", "", "", c->fix);
    }
  static const char *const verdicts[] = {
    "ok: nsbox runs here with every limit enforced",
    "degraded: nsbox runs here, but not everything is enforced or available (see the fixes)",
    "failing: nsbox cannot run here (see the fixes)",
  };
  printf ("%s\n", verdicts[v]);
}

static void
print_json (const struct report *r, enum status v)
{
  json_t *checks = json_array ();
  for (size_t i = 0; checks && i < r->n; i++)
    {
      const struct check *c = &r->checks[i];
      cleanup_free char *detail = nsbox_printable (c->detail ? c->detail : "");
      json_array_append_new (checks, json_pack ("{s:s,s:s,s:s,s:s?}", "name", c->name, "status",
                                                status_names[c->status], "detail",
                                                detail ? detail : "", "fix", c->fix));
    }
  json_t *o = json_pack ("{s:s,s:I,s:o}", "verdict", status_names[v], "uid", (json_int_t)geteuid (),
                         "checks", checks);
  char *text = o ? json_dumps (o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  if (text)
    printf ("%s\n", text);
  free (text);
  json_decref (o);
}

int
nsbox_doctor (nsbox_config *config, bool json)
{
  /* The doctor's own runs are not the session's: no quota applies. */
  static const char *const quotas[]
      = { "quota-runs-per-minute", "quota-concurrent", "quota-cpu-time", "quota-wall-time" };
  for (size_t i = 0; i < ARRAY_SIZE (quotas); i++)
    nsbox_config_set (config, quotas[i], "", NULL);
  struct report r = { .n = 0 };
  struct probe p = probe_userns ();
  check_userns (&r, p);
  enum layout layout = cgroup_layout ();
  check_cgroups (&r, layout);
  check_seccomp (&r);
  check_store (&r, config);
  struct nsbox_image held = { .lock_fd = -1 };
  bool usable = false;
  check_image (&r, config, &held, &usable);
  nsbox_result *res = check_sandbox (&r, config, usable, p.step == STEP_NONE);
  if (res)
    {
      cleanup_free char *why = NULL;
      for (int i = NSBOX_LIMIT_MEMORY; i <= NSBOX_LIMIT_PIDS; i++)
        {
          enum nsbox_mechanism m = nsbox_result_limit (res, (enum nsbox_limit)i);
          bool gvisor = strcmp (nsbox_result_runtime (res), "runsc") == 0;
          if (m != NSBOX_MECH_CGROUP1 && m != NSBOX_MECH_CGROUP2 && !why && !gvisor)
            why = strict_reason (config);
        }
      check_limits (&r, res, why, layout);
      nsbox_result_free (res);
    }
  else
    add (&r, "limits", DEGRADED, NULL, "unknown: no sandbox started");
  check_runsc (&r, config, usable && p.step == STEP_NONE);
  nsbox_image_release (&held);
  enum status v = verdict (&r);
  /* Nothing starts: whatever else is fine, nsbox cannot run. */
  if (p.step != STEP_NONE)
    v = FAILING;
  if (json)
    print_json (&r, v);
  else
    print_text (&r, v);
  for (size_t i = 0; i < r.n; i++)
    {
      free (r.checks[i].detail);
      free (r.checks[i].fix);
    }
  return v == OK ? NSBOX_DOCTOR_OK : v == DEGRADED ? NSBOX_DOCTOR_DEGRADED : NSBOX_DOCTOR_FAILING;
}
