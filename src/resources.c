/* Limits: cgroup v2 first (memory.max + memory.swap.max=0, cpu.max,
 * pids.max), else cgroup v1 where writable, else rlimits. Every run gets its
 * own cgroup below the one the launcher was started in; it is removed after
 * the run. What enforced each limit is recorded, never assumed. */
#include "resources.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "scope.h"
#include "util.h"

/* cpuacct measures the CPU time of a run: init's wait rusage misses what
 * the kernel reaps itself when init is killed (SIGCHLD ignored then). */
static const char *const v1_names[NSBOX_V1_COUNT_] = { "memory", "cpu", "pids", "cpuacct" };
static const int v1_limit[NSBOX_V1_COUNT_]
    = { NSBOX_LIMIT_MEMORY, NSBOX_LIMIT_CPUS, NSBOX_LIMIT_PIDS, -1 };
_Static_assert(NSBOX_V1_COUNT_ <= NSBOX_MAX_V1_CGROUPS, "plan->v1_tasks_fds is too small");

#define LAUNCHER_LEAF "nsbox.launcher"

/* Where the cgroup hierarchies are and where this process sits in them. */
struct cgroup_view
{
  char *v2_dir;   /* our own v2 cgroup directory */
  char *v2_mount; /* the cgroup2 mount, when it shows the whole hierarchy */
  bool v2_is_root;
  char *v1_dir[NSBOX_V1_COUNT_]; /* our own v1 cgroup directory per controller */
};

static void
view_free (struct cgroup_view *v)
{
  free (v->v2_dir);
  free (v->v2_mount);
  for (int i = 0; i < NSBOX_V1_COUNT_; i++)
    free (v->v1_dir[i]);
}

static int
read_small_file (const char *path, char *buf, size_t size)
{
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  ssize_t n = read (fd, buf, size - 1);
  if (n < 0)
    return -errno;
  buf[n] = '\0';
  return (int)n;
}

static int
write_file (const char *dir, const char *name, const char *text)
{
  char path[4096];
  snprintf (path, sizeof path, "%s/%s", dir, name);
  cleanup_close int fd = open (path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  size_t len = strlen (text);
  if (write (fd, text, len) != (ssize_t)len)
    return errno ? -errno : -EIO;
  return 0;
}

static bool
has_word (const char *list, const char *word, char sep)
{
  size_t wl = strlen (word);
  for (const char *p = list; p && *p;)
    {
      const char *end = strchr (p, sep);
      size_t len = end ? (size_t)(end - p) : strlen (p);
      while (len && (p[len - 1] == '\n' || p[len - 1] == ' '))
        len--;
      if (len == wl && strncmp (p, word, wl) == 0)
        return true;
      p = end ? end + 1 : NULL;
    }
  return false;
}

/* Joins a mount point and our path relative to the mount's root. */
static char *
cgroup_dir (const char *mountpoint, const char *mount_root, const char *own)
{
  size_t rl = strlen (mount_root);
  if (strcmp (mount_root, "/") == 0)
    rl = 0;
  else if (strncmp (own, mount_root, rl) != 0 || (own[rl] != '/' && own[rl] != '\0'))
    return NULL;
  char *dir = NULL;
  if (asprintf (&dir, "%s%s", mountpoint, own + rl) < 0)
    return NULL;
  size_t len = strlen (dir);
  if (len > 1 && dir[len - 1] == '/')
    dir[len - 1] = '\0';
  return dir;
}

/* /proc/self/cgroup: "0::/path" for v2, "N:ctrl,ctrl:/path" for v1. */
static void
read_own_paths (char **v2, char *v1[NSBOX_V1_COUNT_])
{
  cleanup_fclose FILE *f = fopen ("/proc/self/cgroup", "re");
  cleanup_free char *line = NULL;
  size_t cap = 0;
  while (f && getline (&line, &cap, f) > 0)
    {
      line[strcspn (line, "\n")] = '\0';
      char *c1 = strchr (line, ':');
      char *c2 = c1 ? strchr (c1 + 1, ':') : NULL;
      if (!c2)
        continue;
      *c2 = '\0';
      const char *ctrls = c1 + 1, *path = c2 + 1;
      if (strncmp (line, "0:", 2) == 0 && *ctrls == '\0')
        {
          free (*v2);
          *v2 = strdup (path);
          continue;
        }
      for (int i = 0; i < NSBOX_V1_COUNT_; i++)
        if (has_word (ctrls, v1_names[i], ',') && !v1[i])
          v1[i] = strdup (path);
    }
}

/* One mountinfo line: fields 4 (root) and 5 (mount point), then after " - "
 * the fs type and super options. */
static void
scan_mount (char *line, const char *own_v2, char *const own_v1[], struct cgroup_view *v)
{
  char *fields[6] = { 0 };
  char *save = NULL;
  for (int i = 0; i < 6; i++)
    if (!(fields[i] = strtok_r (i == 0 ? line : NULL, " ", &save)))
      return;
  char *sep = save ? strstr (save, "- ") : NULL;
  if (!fields[4] || !sep)
    return;
  char *rest = sep + 2, *s2 = NULL;
  char *fstype = strtok_r (rest, " ", &s2);
  strtok_r (NULL, " ", &s2);
  char *super = strtok_r (NULL, " \n", &s2);
  if (!fstype)
    return;
  if (strcmp (fstype, "cgroup2") == 0 && own_v2 && !v->v2_dir)
    {
      v->v2_dir = cgroup_dir (fields[4], fields[3], own_v2);
      v->v2_is_root = v->v2_dir && strcmp (fields[3], own_v2) == 0;
      if (strcmp (fields[3], "/") == 0)
        v->v2_mount = strdup (fields[4]);
    }
  if (strcmp (fstype, "cgroup") == 0 && super)
    for (int i = 0; i < NSBOX_V1_COUNT_; i++)
      if (own_v1[i] && !v->v1_dir[i] && has_word (super, v1_names[i], ','))
        v->v1_dir[i] = cgroup_dir (fields[4], fields[3], own_v1[i]);
}

static void
view_load (struct cgroup_view *v)
{
  cleanup_free char *own_v2 = NULL;
  char *own_v1[NSBOX_V1_COUNT_] = { 0 };
  read_own_paths (&own_v2, own_v1);
  cleanup_fclose FILE *f = fopen ("/proc/self/mountinfo", "re");
  cleanup_free char *line = NULL;
  size_t cap = 0;
  while (f && getline (&line, &cap, f) > 0)
    scan_mount (line, own_v2, own_v1, v);
  for (int i = 0; i < NSBOX_V1_COUNT_; i++)
    free (own_v1[i]);
}

static void
remove_cgroup (int dir_fd, const char *name)
{
  /* The last tasks of the PID namespace may still be leaving. */
  for (int i = 0; i < 200; i++)
    {
      if (unlinkat (dir_fd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
        return;
      if (errno != EBUSY)
        return;
      struct timespec ts = { 0, 1000000 };
      nanosleep (&ts, NULL);
    }
}

/* A launcher killed with SIGKILL cannot remove its run cgroups; its sandbox
 * died with it (PDEATHSIG, PID namespace), so the next run removes them.
 * rmdir fails harmlessly on a cgroup that still holds tasks. */
static void
sweep_stale (const char *dir)
{
  DIR *d = opendir (dir);
  if (!d)
    return;
  struct dirent *e;
  while ((e = readdir (d)))
    {
      int pid = 0;
      if (e->d_type != DT_DIR || sscanf (e->d_name, "nsbox-%d-", &pid) != 1 || pid <= 0)
        continue;
      if (kill (pid, 0) < 0 && errno == ESRCH)
        remove_cgroup (dirfd (d), e->d_name);
    }
  closedir (d);
}

static char *
unique_name (void)
{
  static atomic_uint counter;
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  char *name = NULL;
  if (asprintf (&name, "nsbox-%d-%u-%lx", (int)getpid (), atomic_fetch_add (&counter, 1),
                (unsigned long)ts.tv_nsec)
      < 0)
    return NULL;
  return name;
}

/* Only processes of this launcher may live in `dir`: we are about to make it
 * an inner node. */
static bool
only_us_in (const char *dir)
{
  char path[4096], buf[4096];
  snprintf (path, sizeof path, "%s/cgroup.procs", dir);
  if (read_small_file (path, buf, sizeof buf) < 0)
    return false;
  pid_t self = getpid ();
  for (char *p = buf; *p;)
    {
      char *end;
      long pid = strtol (p, &end, 10);
      if (end == p)
        break;
      if (pid != self)
        return false;
      p = end;
      while (*p == '\n')
        p++;
    }
  return true;
}

static pthread_mutex_t delegate_lock = PTHREAD_MUTEX_INITIALIZER;

/* Whether the controllers nsbox needs are available to children of `dir`. */
static bool
has_memory_and_pids (const char *dir)
{
  char buf[512], path[4096];
  snprintf (path, sizeof path, "%s/cgroup.controllers", dir);
  return read_small_file (path, buf, sizeof buf) >= 0 && has_word (buf, "memory", ' ')
         && has_word (buf, "pids", ' ');
}

static void
enable_controllers (const char *dir)
{
  char buf[512], path[4096];
  snprintf (path, sizeof path, "%s/cgroup.subtree_control", dir);
  if (read_small_file (path, buf, sizeof buf) < 0)
    buf[0] = '\0';
  const char *const ctrls[] = { "memory", "pids", "cpu" };
  for (size_t i = 0; i < ARRAY_SIZE (ctrls); i++)
    if (!has_word (buf, ctrls[i], ' '))
      {
        char plus[16];
        snprintf (plus, sizeof plus, "+%s", ctrls[i]);
        write_file (dir, "cgroup.subtree_control", plus);
      }
}

/* A launcher that may write the top of the hierarchy (root) but sits in a
 * cgroup it cannot use - a login session's scope holding the shell too, or
 * one without the controllers - puts its runs in <mount>/nsbox, as container
 * engines' cgroupfs drivers do. It never holds a process, so it can be a
 * parent with controllers. */
static char *
v2_top_level (const struct cgroup_view *v)
{
  if (!v->v2_mount || !has_memory_and_pids (v->v2_mount))
    return NULL;
  char *base = NULL;
  if (asprintf (&base, "%s/nsbox", v->v2_mount) < 0)
    return NULL;
  if ((mkdir (base, 0755) < 0 && errno != EEXIST) || access (base, W_OK) < 0)
    {
      free (base);
      return NULL;
    }
  enable_controllers (v->v2_mount);
  enable_controllers (base);
  return base;
}

/* Makes `own` a parent with the controllers enabled for its children. A
 * non-root cgroup that holds processes cannot enable controllers, so the
 * launcher first moves itself into a leaf of its own. Returns the directory
 * run cgroups go into, or NULL with *why set. */
static char *
v2_delegate (const struct cgroup_view *v, const char **why)
{
  char buf[512], path[4096];
  cleanup_free char *base = strdup (v->v2_dir);
  if (!base)
    return NULL;
  char *slash = strrchr (base, '/');
  if (slash && strcmp (slash + 1, LAUNCHER_LEAF) == 0)
    *slash = '\0';
  else if (!v->v2_is_root)
    {
      snprintf (path, sizeof path, "%s/cgroup.subtree_control", base);
      if (read_small_file (path, buf, sizeof buf) < 0)
        buf[0] = '\0';
      bool enabled = has_word (buf, "memory", ' ') && has_word (buf, "pids", ' ');
      if (!enabled)
        {
          if (!only_us_in (base))
            {
              *why = "the launcher's cgroup v2 holds other processes (start nsbox in a delegated "
                     "cgroup of its own, e.g. systemd-run --user --scope -p Delegate=yes)";
              return NULL;
            }
          snprintf (path, sizeof path, "%s/" LAUNCHER_LEAF, base);
          char pid[32];
          snprintf (pid, sizeof pid, "%d", (int)getpid ());
          if ((mkdir (path, 0755) < 0 && errno != EEXIST)
              || write_file (path, "cgroup.procs", pid) < 0)
            {
              *why = "cannot move the launcher into a leaf of its cgroup v2";
              return NULL;
            }
        }
    }
  enable_controllers (base);
  return TAKE_PTR (base);
}

/* An unprivileged launcher that cannot use its own cgroup asks the user's
 * systemd for a delegated scope (scope.c, once per process), then delegates
 * in there as in any delegated cgroup. Only where the hierarchy has the
 * controllers at all: elsewhere a scope would not help. */
static char *
v2_user_scope (const struct cgroup_view *v, const char **why)
{
  static _Thread_local char why_both[768];
  const char *why_scope = NULL;
  if (geteuid () == 0 || !v->v2_mount || !has_memory_and_pids (v->v2_mount))
    return NULL;
  if (nsbox_scope_join (&why_scope) < 0)
    {
      snprintf (why_both, sizeof why_both, "%s; %s", *why, why_scope);
      *why = why_both;
      return NULL;
    }
  struct cgroup_view moved = { 0 };
  view_load (&moved);
  char *base
      = moved.v2_dir && has_memory_and_pids (moved.v2_dir) ? v2_delegate (&moved, why) : NULL;
  view_free (&moved);
  return base;
}

static int
v2_write_limits (const char *dir, const struct nsbox_config *c, bool *cpu_ok)
{
  char text[64];
  snprintf (text, sizeof text, "%" PRIu64, c->memory_bytes);
  int r = write_file (dir, "memory.max", text);
  if (r < 0)
    return r;
  char swap[4096];
  snprintf (swap, sizeof swap, "%s/memory.swap.max", dir);
  if (access (swap, F_OK) == 0 && (r = write_file (dir, "memory.swap.max", "0")) < 0)
    return r;
  snprintf (text, sizeof text, "%" PRIu64, c->pids_limit);
  if ((r = write_file (dir, "pids.max", text)) < 0)
    return r;
  snprintf (text, sizeof text, "%" PRIu64 " 100000", c->cpus_milli * 100);
  *cpu_ok = write_file (dir, "cpu.max", text) == 0;
  return 0;
}

static bool
try_v2 (struct nsbox_limits *l, const struct cgroup_view *v, const struct nsbox_config *c,
        const char **why)
{
  if (!v->v2_dir)
    return (*why = "no cgroup v2 hierarchy"), false;
  const char *why_own = "cgroup v2 has no memory and pids controllers here";
  pthread_mutex_lock (&delegate_lock);
  cleanup_free char *base = has_memory_and_pids (v->v2_dir) ? v2_delegate (v, &why_own) : NULL;
  if (!base)
    base = v2_top_level (v);
  if (!base)
    base = v2_user_scope (v, &why_own);
  pthread_mutex_unlock (&delegate_lock);
  if (!base)
    *why = why_own;
  cleanup_free char *name = unique_name ();
  if (!base || !name)
    return false;
  sweep_stale (base);
  if (asprintf (&l->v2_dir, "%s/%s", base, name) < 0)
    return (l->v2_dir = NULL), (*why = "out of memory"), false;
  bool cpu_ok = false;
  if (mkdir (l->v2_dir, 0755) < 0 || v2_write_limits (l->v2_dir, c, &cpu_ok) < 0
      || (l->v2_fd = open (l->v2_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
    {
      *why = "cannot create a cgroup v2 for the run";
      rmdir (l->v2_dir);
      free (TAKE_PTR (l->v2_dir));
      return false;
    }
  l->mech[NSBOX_LIMIT_MEMORY] = NSBOX_MECH_CGROUP2;
  l->mech[NSBOX_LIMIT_PIDS] = NSBOX_MECH_CGROUP2;
  if (cpu_ok)
    l->mech[NSBOX_LIMIT_CPUS] = NSBOX_MECH_CGROUP2;
  return true;
}

static int
v1_write_limits (int ctrl, const char *dir, const struct nsbox_config *c)
{
  char text[64];
  switch (ctrl)
    {
    case NSBOX_V1_MEMORY:
      {
        snprintf (text, sizeof text, "%" PRIu64, c->memory_bytes);
        int r = write_file (dir, "memory.limit_in_bytes", text);
        if (r < 0)
          return r;
        /* memsw exists only with swap accounting; without it set swappiness 0. */
        if (write_file (dir, "memory.memsw.limit_in_bytes", text) < 0)
          write_file (dir, "memory.swappiness", "0");
        return 0;
      }
    case NSBOX_V1_CPU:
      {
        int r = write_file (dir, "cpu.cfs_period_us", "100000");
        snprintf (text, sizeof text, "%" PRIu64, c->cpus_milli * 100);
        return r < 0 ? r : write_file (dir, "cpu.cfs_quota_us", text);
      }
    case NSBOX_V1_PIDS:
      snprintf (text, sizeof text, "%" PRIu64, c->pids_limit);
      return write_file (dir, "pids.max", text);
    case NSBOX_V1_CPUACCT:
      return 0;
    default:
      return -EINVAL;
    }
}

static void
try_v1 (struct nsbox_limits *l, const struct nsbox_config *c)
{
  for (int i = 0; i < NSBOX_V1_COUNT_; i++)
    {
      if (!l->v1_base[i] || (v1_limit[i] >= 0 && l->mech[v1_limit[i]] != NSBOX_MECH_NONE))
        continue;
      /* cpuacct co-mounted with cpu: the cpu run cgroup measures already. */
      if (i == NSBOX_V1_CPUACCT && l->v1_base[NSBOX_V1_CPU]
          && strcmp (l->v1_base[i], l->v1_base[NSBOX_V1_CPU]) == 0)
        continue;
      cleanup_free char *name = unique_name ();
      char *dir = NULL;
      sweep_stale (l->v1_base[i]);
      if (!name || asprintf (&dir, "%s/%s", l->v1_base[i], name) < 0)
        continue;
      if (mkdir (dir, 0755) < 0)
        {
          free (dir);
          continue;
        }
      if (v1_write_limits (i, dir, c) < 0)
        {
          rmdir (dir);
          free (dir);
          continue;
        }
      l->v1_dir[i] = dir;
      if (v1_limit[i] >= 0)
        l->mech[v1_limit[i]] = NSBOX_MECH_CGROUP1;
    }
}

/* Every resource limit of the sandbox, set whatever the launcher had (a
 * systemd unit's LimitRTPRIO would otherwise give the program SCHED_FIFO,
 * which cpu.max does not throttle). The README has the table and why. */
static const struct
{
  int resource;
  rlim_t cur, max;
} sandbox_rlimits[] = {
  { RLIMIT_CORE, 0, 0 },
  { RLIMIT_CPU, RLIM_INFINITY, RLIM_INFINITY },
  { RLIMIT_FSIZE, RLIM_INFINITY, RLIM_INFINITY },
  { RLIMIT_DATA, RLIM_INFINITY, RLIM_INFINITY },
  { RLIMIT_STACK, 8 << 20, 8 << 20 },
  { RLIMIT_RSS, RLIM_INFINITY, RLIM_INFINITY },
  { RLIMIT_AS, RLIM_INFINITY, RLIM_INFINITY },
  { RLIMIT_NPROC, RLIM_INFINITY, RLIM_INFINITY },
  { RLIMIT_NOFILE, 1024, 4096 },
  { RLIMIT_MEMLOCK, 64 << 10, 64 << 10 },
  { RLIMIT_LOCKS, RLIM_INFINITY, RLIM_INFINITY },
  { RLIMIT_SIGPENDING, 1024, 1024 },
  { RLIMIT_MSGQUEUE, 819200, 819200 },
  { RLIMIT_NICE, 0, 0 },
  { RLIMIT_RTPRIO, 0, 0 },
  { RLIMIT_RTTIME, 0, 0 },
};

/* The sandbox's limits into the plan. Raising a hard limit needs
 * CAP_SYS_RESOURCE in the initial user namespace, which the sandbox's init
 * never has (not even when root starts it): a value above the launcher's
 * own hard limit becomes that limit. */
static void
plan_rlimits (struct nsbox_plan *plan)
{
  plan->nrlimits = 0;
  for (size_t i = 0; i < ARRAY_SIZE (sandbox_rlimits) && i < NSBOX_MAX_RLIMITS; i++)
    {
      struct rlimit want = { sandbox_rlimits[i].cur, sandbox_rlimits[i].max }, have;
      if (getrlimit (sandbox_rlimits[i].resource, &have) == 0 && have.rlim_max < want.rlim_max)
        want.rlim_max = have.rlim_max;
      if (want.rlim_cur > want.rlim_max)
        want.rlim_cur = want.rlim_max;
      plan->rlimit_resources[plan->nrlimits] = sandbox_rlimits[i].resource;
      plan->rlimits[plan->nrlimits++] = want;
    }
}

/* A limit of the table set to `value` instead (the rlimit fallbacks of
 * memory and pids-limit), never above what plan_rlimits allowed. */
static void
tighten_rlimit (struct nsbox_plan *plan, int resource, rlim_t value)
{
  for (int i = 0; i < plan->nrlimits; i++)
    if (plan->rlimit_resources[i] == resource)
      {
        if (value < plan->rlimits[i].rlim_max)
          plan->rlimits[i].rlim_max = value;
        plan->rlimits[i].rlim_cur = plan->rlimits[i].rlim_max;
      }
}

static int
check_strict (const struct nsbox_limits *l, const struct nsbox_config *c, struct nsbox_error **err)
{
  static const char *const names[] = { "memory", "cpus", "pids-limit" };
  if (!c->strict)
    return 0;
  for (int i = NSBOX_LIMIT_MEMORY; i <= NSBOX_LIMIT_PIDS; i++)
    if (l->mech[i] != NSBOX_MECH_CGROUP1 && l->mech[i] != NSBOX_MECH_CGROUP2)
      return nsbox_error_set (err, EPERM,
                              "strict: the %s limit cannot be enforced by a cgroup here (%s)",
                              names[i], l->why_not_cgroup ? l->why_not_cgroup : "unknown reason");
  return 0;
}

/* The child writes "0" to each itself: see plan->v1_tasks_fds. */
static int
open_tasks (struct nsbox_limits *l, struct nsbox_plan *plan, struct nsbox_error **err)
{
  plan->n_v1_tasks_fds = 0;
  for (int i = 0; i < NSBOX_V1_COUNT_; i++)
    {
      if (!l->v1_dir[i])
        continue;
      char path[4096];
      snprintf (path, sizeof path, "%s/tasks", l->v1_dir[i]);
      l->tasks_fd[i] = open (path, O_WRONLY | O_CLOEXEC);
      if (l->tasks_fd[i] < 0)
        return nsbox_error_sys (err, errno, "open '%s'", path);
      plan->v1_tasks_fds[plan->n_v1_tasks_fds++] = l->tasks_fd[i];
    }
  return 0;
}

int
nsbox_limits_prepare (struct nsbox_limits *l, const struct nsbox_config *c, struct nsbox_plan *plan,
                      struct nsbox_error **err)
{
  struct cgroup_view view = { 0 };
  for (int i = 0; i < NSBOX_V1_COUNT_; i++)
    l->tasks_fd[i] = -1;
  view_load (&view);
  const char *why = NULL;
  if (!try_v2 (l, &view, c, &why))
    for (int i = 0; i < NSBOX_V1_COUNT_; i++)
      l->v1_base[i] = TAKE_PTR (view.v1_dir[i]);
  view_free (&view);
  if (why && !(l->why_not_v2 = strdup (why)))
    return nsbox_error_set (err, ENOMEM, "out of memory");
  plan_rlimits (plan);
  plan->unshare_cgroupns = l->v2_fd < 0;
  return 0;
}

int
nsbox_limits_attach (struct nsbox_limits *l, const struct nsbox_config *c, struct nsbox_plan *plan,
                     struct nsbox_error **err)
{
  try_v1 (l, c);
  if (l->why_not_v2
      && asprintf (&l->why_not_cgroup, "%s; cgroup v1 %s", l->why_not_v2,
                   geteuid () == 0 ? "controller missing" : "not writable by this user")
             < 0)
    return (l->why_not_cgroup = NULL), nsbox_error_set (err, ENOMEM, "out of memory");
  if (l->mech[NSBOX_LIMIT_MEMORY] == NSBOX_MECH_NONE)
    {
      tighten_rlimit (plan, RLIMIT_AS, (rlim_t)c->memory_bytes);
      l->mech[NSBOX_LIMIT_MEMORY] = NSBOX_MECH_RLIMIT;
    }
  if (l->mech[NSBOX_LIMIT_PIDS] == NSBOX_MECH_NONE)
    {
      tighten_rlimit (plan, RLIMIT_NPROC, (rlim_t)c->pids_limit);
      l->mech[NSBOX_LIMIT_PIDS] = NSBOX_MECH_RLIMIT;
    }
  l->mech[NSBOX_LIMIT_TMP] = NSBOX_MECH_TMPFS;
  int r = check_strict (l, c, err);
  return r < 0 ? r : open_tasks (l, plan, err);
}

bool
nsbox_limits_kill (struct nsbox_limits *l)
{
  return l->v2_dir && write_file (l->v2_dir, "cgroup.kill", "1") == 0;
}

/* Value of "key N" in a flat keyed file such as memory.events. */
static bool
read_keyed (const char *dir, const char *file, const char *key, uint64_t *value)
{
  char path[4096], buf[4096];
  snprintf (path, sizeof path, "%s/%s", dir, file);
  if (read_small_file (path, buf, sizeof buf) < 0)
    return false;
  size_t kl = strlen (key);
  for (char *p = buf; p && *p; p = strchr (p, '\n'), p = p ? p + 1 : NULL)
    if (strncmp (p, key, kl) == 0 && p[kl] == ' ')
      {
        *value = strtoull (p + kl + 1, NULL, 10);
        return true;
      }
  return false;
}

static bool
read_number (const char *dir, const char *file, uint64_t *value)
{
  char path[4096], buf[64];
  snprintf (path, sizeof path, "%s/%s", dir, file);
  if (read_small_file (path, buf, sizeof buf) <= 0)
    return false;
  *value = strtoull (buf, NULL, 10);
  return true;
}

void
nsbox_limits_collect (struct nsbox_limits *l, struct nsbox_result *res)
{
  uint64_t v = 0;
  if (l->v2_dir)
    {
      if (read_number (l->v2_dir, "memory.peak", &v))
        res->memory_peak_bytes = v;
      if (read_keyed (l->v2_dir, "memory.events", "oom_kill", &v) && v > 0)
        res->oom_killed = true;
      if (read_keyed (l->v2_dir, "cpu.stat", "usage_usec", &v))
        res->cpu_ms = v / 1000;
    }
  const char *mem = l->v1_dir[NSBOX_V1_MEMORY];
  if (mem)
    {
      if (read_number (mem, "memory.max_usage_in_bytes", &v))
        res->memory_peak_bytes = v;
      if (read_keyed (mem, "memory.oom_control", "oom_kill", &v) && v > 0)
        res->oom_killed = true;
    }
  const char *acct
      = l->v1_dir[NSBOX_V1_CPUACCT] ? l->v1_dir[NSBOX_V1_CPUACCT] : l->v1_dir[NSBOX_V1_CPU];
  if (acct && read_number (acct, "cpuacct.usage", &v))
    res->cpu_ms = v / 1000000;
}

void
nsbox_limits_close_tasks (struct nsbox_limits *l, struct nsbox_plan *plan)
{
  for (int i = 0; i < NSBOX_V1_COUNT_; i++)
    {
      if (l->tasks_fd[i] >= 0)
        close (l->tasks_fd[i]);
      l->tasks_fd[i] = -1;
    }
  plan->n_v1_tasks_fds = 0;
}

void
nsbox_limits_release (struct nsbox_limits *l)
{
  if (l->v2_fd >= 0)
    close (l->v2_fd);
  l->v2_fd = -1;
  for (int i = 0; i < NSBOX_V1_COUNT_; i++)
    {
      if (l->tasks_fd[i] >= 0)
        close (l->tasks_fd[i]);
      l->tasks_fd[i] = -1;
    }
  if (l->v2_dir)
    remove_cgroup (AT_FDCWD, l->v2_dir);
  free (TAKE_PTR (l->v2_dir));
  for (int i = 0; i < NSBOX_V1_COUNT_; i++)
    {
      if (l->v1_dir[i])
        remove_cgroup (AT_FDCWD, l->v1_dir[i]);
      free (TAKE_PTR (l->v1_dir[i]));
    }
  free (TAKE_PTR (l->why_not_cgroup));
  free (TAKE_PTR (l->why_not_v2));
  for (int i = 0; i < NSBOX_V1_COUNT_; i++)
    free (TAKE_PTR (l->v1_base[i]));
}
