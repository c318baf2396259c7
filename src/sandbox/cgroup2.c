/* cgroup v2: the run's cgroup (memory.max with memory.swap.max 0, cpu.max,
 * pids.max), created before clone so that clone3 starts the child in it
 * (CLONE_INTO_CGROUP); cgroup.kill ends it; memory.peak, memory.events and
 * cpu.stat report. An unprivileged launcher needs a delegated subtree: its
 * own cgroup when it may make it an inner node, else a scope from systemd
 * (scope.c). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "error.h"
#include "limit.h"
#include "scope.h"
#include "util.h"

#define LAUNCHER_LEAF "nsbox.launcher"

/* Only processes of this launcher may live in `dir`: we are about to make it
 * an inner node. */
static bool
only_us_in (const char *dir)
{
  char path[4096], buf[4096];
  snprintf (path, sizeof path, "%s/cgroup.procs", dir);
  if (nsbox_read_small (path, buf, sizeof buf) < 0)
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
  return nsbox_read_small (path, buf, sizeof buf) >= 0 && nsbox_cgroup_has_word (buf, "memory", ' ')
         && nsbox_cgroup_has_word (buf, "pids", ' ');
}

static void
enable_controllers (const char *dir)
{
  char buf[512], path[4096];
  snprintf (path, sizeof path, "%s/cgroup.subtree_control", dir);
  if (nsbox_read_small (path, buf, sizeof buf) < 0)
    buf[0] = '\0';
  const char *const ctrls[] = { "memory", "pids", "cpu" };
  for (size_t i = 0; i < ARRAY_SIZE (ctrls); i++)
    if (!nsbox_cgroup_has_word (buf, ctrls[i], ' '))
      {
        char plus[16];
        snprintf (plus, sizeof plus, "+%s", ctrls[i]);
        nsbox_cgroup_write (dir, "cgroup.subtree_control", plus);
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
  char *base = xasprintf ("%s/nsbox", v->v2_mount);
  if (!base)
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
v2_delegate (const struct cgroup_view *v, struct nsbox_error **why)
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
      if (nsbox_read_small (path, buf, sizeof buf) < 0)
        buf[0] = '\0';
      bool enabled
          = nsbox_cgroup_has_word (buf, "memory", ' ') && nsbox_cgroup_has_word (buf, "pids", ' ');
      if (!enabled)
        {
          if (!only_us_in (base))
            {
              nsbox_error_set (why, EOPNOTSUPP,
                               "the launcher's cgroup v2 holds other processes (start nsbox in a "
                               "delegated cgroup of its own, e.g. systemd-run --user --scope -p "
                               "Delegate=yes)");
              return NULL;
            }
          snprintf (path, sizeof path, "%s/" LAUNCHER_LEAF, base);
          char pid[32];
          snprintf (pid, sizeof pid, "%d", (int)getpid ());
          if ((mkdir (path, 0755) < 0 && errno != EEXIST)
              || nsbox_cgroup_write (path, "cgroup.procs", pid) < 0)
            {
              nsbox_error_set (why, EOPNOTSUPP,
                               "cannot move the launcher into a leaf of its cgroup v2");
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
v2_user_scope (const struct cgroup_view *v, struct nsbox_error **why)
{
  const char *why_scope = NULL;
  if (geteuid () == 0 || !v->v2_mount || !has_memory_and_pids (v->v2_mount))
    return NULL;
  if (nsbox_scope_join (&why_scope) < 0)
    {
      nsbox_error_append (why, "%s", why_scope);
      return NULL;
    }
  struct cgroup_view moved = { 0 };
  nsbox_cgroup_view_load (&moved);
  char *base = NULL;
  if (moved.v2_dir && has_memory_and_pids (moved.v2_dir))
    {
      /* The reason to try a scope is no longer the reason. */
      nsbox_error_free (TAKE_PTR (*why));
      base = v2_delegate (&moved, why);
    }
  nsbox_cgroup_view_free (&moved);
  return base;
}

static int
v2_write_limits (const char *dir, const struct nsbox_config *c, bool *cpu_ok)
{
  char text[64];
  snprintf (text, sizeof text, "%" PRIu64, c->memory_bytes);
  int r = nsbox_cgroup_write (dir, "memory.max", text);
  if (r < 0)
    return r;
  char swap[4096];
  snprintf (swap, sizeof swap, "%s/memory.swap.max", dir);
  if (access (swap, F_OK) == 0 && (r = nsbox_cgroup_write (dir, "memory.swap.max", "0")) < 0)
    return r;
  snprintf (text, sizeof text, "%" PRIu64, c->pids_limit);
  if ((r = nsbox_cgroup_write (dir, "pids.max", text)) < 0)
    return r;
  snprintf (text, sizeof text, "%" PRIu64 " 100000", c->cpus_milli * 100);
  *cpu_ok = nsbox_cgroup_write (dir, "cpu.max", text) == 0;
  return 0;
}

/* prepare: the run's cgroup v2 in the first place that allows one (the
 * launcher's own cgroup, delegated; the top of the hierarchy for root; a
 * scope from systemd), with every limit written. Without one,
 * l->why_not_v2 says why. */
static int
cgroup2_prepare (struct nsbox_limits *l, const struct nsbox_config *c, struct nsbox_plan *plan,
                 struct nsbox_error **err)
{
  (void)plan;
  (void)err;
  const struct cgroup_view *v = l->view;
  struct nsbox_error **why = &l->why_not_v2;
  if (!v->v2_dir)
    return nsbox_error_set (why, EOPNOTSUPP, "no cgroup v2 hierarchy"), 0;
  pthread_mutex_lock (&delegate_lock);
  cleanup_free char *base = NULL;
  if (has_memory_and_pids (v->v2_dir))
    base = v2_delegate (v, why);
  else
    nsbox_error_set (why, EOPNOTSUPP, "cgroup v2 has no memory and pids controllers here");
  if (!base)
    base = v2_top_level (v);
  if (!base)
    base = v2_user_scope (v, why);
  pthread_mutex_unlock (&delegate_lock);
  cleanup_free char *name = nsbox_cgroup_run_name ();
  if (!base || !name)
    return 0;
  nsbox_error_free (TAKE_PTR (*why));
  nsbox_cgroup_sweep_stale (base);
  if (!(l->v2_dir = xasprintf ("%s/%s", base, name)))
    return nsbox_error_oom (err);
  bool cpu_ok = false;
  if (mkdir (l->v2_dir, 0755) < 0 || v2_write_limits (l->v2_dir, c, &cpu_ok) < 0
      || (l->v2_fd = open (l->v2_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
    {
      nsbox_error_set (why, EOPNOTSUPP, "cannot create a cgroup v2 for the run");
      rmdir (l->v2_dir);
      free (TAKE_PTR (l->v2_dir));
      return 0;
    }
  l->mech[NSBOX_LIMIT_MEMORY] = NSBOX_MECH_CGROUP2;
  l->mech[NSBOX_LIMIT_PIDS] = NSBOX_MECH_CGROUP2;
  if (cpu_ok)
    l->mech[NSBOX_LIMIT_CPUS] = NSBOX_MECH_CGROUP2;
  return 0;
}

static bool
cgroup2_kill (struct nsbox_limits *l)
{
  return l->v2_dir && nsbox_cgroup_write (l->v2_dir, "cgroup.kill", "1") == 0;
}

static bool
cgroup2_cpu_usec (struct nsbox_limits *l, uint64_t *usec)
{
  return l->v2_dir && nsbox_cgroup_read_keyed (l->v2_dir, "cpu.stat", "usage_usec", usec);
}

static void
cgroup2_collect (struct nsbox_limits *l, struct nsbox_result *res)
{
  uint64_t v = 0;
  if (!l->v2_dir)
    return;
  if (nsbox_cgroup_read_number (l->v2_dir, "memory.peak", &v))
    res->memory_peak_bytes = v;
  if (nsbox_cgroup_read_keyed (l->v2_dir, "memory.events", "oom_kill", &v) && v > 0)
    res->oom_killed = true;
  if (cgroup2_cpu_usec (l, &v))
    res->cpu_ms = v / 1000;
}

static void
cgroup2_release (struct nsbox_limits *l)
{
  if (l->v2_fd >= 0)
    close (TAKE_FD (l->v2_fd));
  if (l->v2_dir)
    nsbox_cgroup_remove (AT_FDCWD, l->v2_dir);
  free (TAKE_PTR (l->v2_dir));
}

const struct nsbox_limits_ops nsbox_cgroup2_ops = {
  .prepare = cgroup2_prepare,
  .kill = cgroup2_kill,
  .collect = cgroup2_collect,
  .cpu_usec = cgroup2_cpu_usec,
  .release = cgroup2_release,
};
