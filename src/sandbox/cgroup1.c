/* cgroup v1: where no cgroup v2 is used, a run cgroup per controller
 * (memory with memsw, cpu's CFS quota, pids, cpuacct for CPU time) below
 * the launcher's own, made after clone while the child builds its mounts;
 * the child joins them itself (nsbox_cgroup1_join) before it starts the
 * program. Both sides are here. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "child.h"
#include "error.h"
#include "limit.h"
#include "util.h"

_Static_assert(NSBOX_V1_COUNT_ <= NSBOX_MAX_V1_CGROUPS, "plan->v1_tasks_fds is too small");

/* The limit each controller enforces (-1: it measures only). */
static const int v1_limit[NSBOX_V1_COUNT_]
    = { NSBOX_LIMIT_MEMORY, NSBOX_LIMIT_CPUS, NSBOX_LIMIT_PIDS, -1 };

/* prepare: without a cgroup v2 for the run, the launcher's own v1 cgroups
 * become the parents of the run's (made at attach). */
static int
cgroup1_prepare (struct nsbox_limits *l, const struct nsbox_config *c, struct nsbox_plan *plan,
                 struct nsbox_error **err)
{
  (void)c;
  (void)plan;
  (void)err;
  if (l->v2_dir)
    return 0;
  for (int i = 0; i < NSBOX_V1_COUNT_; i++)
    l->v1_base[i] = TAKE_PTR (l->view->v1_dir[i]);
  return 0;
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
        int r = nsbox_cgroup_write (dir, "memory.limit_in_bytes", text);
        if (r < 0)
          return r;
        /* memsw exists only with swap accounting; without it set swappiness 0. */
        if (nsbox_cgroup_write (dir, "memory.memsw.limit_in_bytes", text) < 0)
          nsbox_cgroup_write (dir, "memory.swappiness", "0");
        return 0;
      }
    case NSBOX_V1_CPU:
      {
        int r = nsbox_cgroup_write (dir, "cpu.cfs_period_us", "100000");
        snprintf (text, sizeof text, "%" PRIu64, c->cpus_milli * 100);
        return r < 0 ? r : nsbox_cgroup_write (dir, "cpu.cfs_quota_us", text);
      }
    case NSBOX_V1_PIDS:
      snprintf (text, sizeof text, "%" PRIu64, c->pids_limit);
      return nsbox_cgroup_write (dir, "pids.max", text);
    case NSBOX_V1_CPUACCT:
      return 0;
    default:
      return -EINVAL;
    }
}

/* attach: a run cgroup per controller for each limit cgroup v2 left
 * unenforced (and cpuacct to measure CPU time), in the launcher's own
 * cgroups. A controller that is missing or not writable is skipped: its
 * limit falls to rlimits. */
static void
make_run_cgroups (struct nsbox_limits *l, const struct nsbox_config *c)
{
  for (int i = 0; i < NSBOX_V1_COUNT_; i++)
    {
      if (!l->v1_base[i] || (v1_limit[i] >= 0 && l->mech[v1_limit[i]] != NSBOX_MECH_NONE))
        continue;
      /* cpuacct co-mounted with cpu: the cpu run cgroup measures already. */
      if (i == NSBOX_V1_CPUACCT && l->v1_base[NSBOX_V1_CPU]
          && strcmp (l->v1_base[i], l->v1_base[NSBOX_V1_CPU]) == 0)
        continue;
      cleanup_free char *name = nsbox_cgroup_run_name ();
      nsbox_cgroup_sweep_stale (l->v1_base[i]);
      char *dir = name ? xasprintf ("%s/%s", l->v1_base[i], name) : NULL;
      if (!dir)
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

static int
cgroup1_attach (struct nsbox_limits *l, const struct nsbox_config *c, struct nsbox_plan *plan,
                struct nsbox_error **err)
{
  make_run_cgroups (l, c);
  return open_tasks (l, plan, err);
}

static bool
cgroup1_cpu_usec (struct nsbox_limits *l, uint64_t *usec)
{
  const char *acct
      = l->v1_dir[NSBOX_V1_CPUACCT] ? l->v1_dir[NSBOX_V1_CPUACCT] : l->v1_dir[NSBOX_V1_CPU];
  uint64_t ns = 0;
  if (!acct || !nsbox_cgroup_read_number (acct, "cpuacct.usage", &ns))
    return false;
  *usec = ns / 1000;
  return true;
}

static void
cgroup1_collect (struct nsbox_limits *l, struct nsbox_result *res)
{
  uint64_t v = 0;
  const char *mem = l->v1_dir[NSBOX_V1_MEMORY];
  if (mem)
    {
      if (nsbox_cgroup_read_number (mem, "memory.max_usage_in_bytes", &v))
        res->memory_peak_bytes = v;
      if (nsbox_cgroup_read_keyed (mem, "memory.oom_control", "oom_kill", &v) && v > 0)
        res->oom_killed = true;
    }
  if (cgroup1_cpu_usec (l, &v))
    res->cpu_ms = v / 1000;
}

static void
cgroup1_release (struct nsbox_limits *l)
{
  for (int i = 0; i < NSBOX_V1_COUNT_; i++)
    {
      if (l->tasks_fd[i] >= 0)
        close (TAKE_FD (l->tasks_fd[i]));
      if (l->v1_dir[i])
        nsbox_cgroup_remove (AT_FDCWD, l->v1_dir[i]);
      free (TAKE_PTR (l->v1_dir[i]));
      free (TAKE_PTR (l->v1_base[i]));
    }
}

const struct nsbox_limits_ops nsbox_cgroup1_ops = {
  .prepare = cgroup1_prepare,
  .attach = cgroup1_attach,
  .collect = cgroup1_collect,
  .cpu_usec = cgroup1_cpu_usec,
  .release = cgroup1_release,
};

/* Child side. */

void
nsbox_cgroup1_join (const int *tasks_fds, int n)
{
  for (int i = 0; i < n; i++)
    if (write (tasks_fds[i], "0", 1) != 1)
      nsbox_child_fail (NSBOX_STEP_JOIN_CGROUP, errno, NULL);
}
