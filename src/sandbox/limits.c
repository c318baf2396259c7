/* Limits of one run: asks the backends in order (cgroup v2, cgroup v1,
 * rlimits), each taking what it can enforce, and records what enforced
 * each limit; --strict refuses a run where no cgroup does. */
#include "limit.h"

#include <errno.h>
#include <unistd.h>

#include "cgroup.h"
#include "error.h"
#include "util.h"

static const struct nsbox_limits_ops *const backends[]
    = { &nsbox_cgroup2_ops, &nsbox_cgroup1_ops, &nsbox_rlimit_ops };

void
nsbox_limits_init (struct nsbox_limits *l)
{
  *l = (struct nsbox_limits){ .v2_fd = -1 };
  for (int i = 0; i < NSBOX_V1_COUNT_; i++)
    l->tasks_fd[i] = -1;
}

static int
check_strict (const struct nsbox_limits *l, const struct nsbox_config *c, struct nsbox_error **err)
{
  static const char *const names[] = { "memory", "cpus", "pids-limit" };
  if (!c->strict)
    return 0;
  for (int i = NSBOX_LIMIT_MEMORY; i <= NSBOX_LIMIT_PIDS; i++)
    if (l->mech[i] != NSBOX_MECH_CGROUP1 && l->mech[i] != NSBOX_MECH_CGROUP2)
      return nsbox_error_set (
          err, EPERM, "strict: the %s limit cannot be enforced by a cgroup here (%s)", names[i],
          l->why_not_cgroup ? nsbox_error_message (l->why_not_cgroup) : "unknown reason");
  return 0;
}

int
nsbox_limits_prepare (struct nsbox_limits *l, const struct nsbox_config *c, struct nsbox_plan *plan,
                      struct nsbox_error **err)
{
  struct cgroup_view view = { 0 };
  nsbox_cgroup_view_load (&view);
  l->view = &view;
  int r = 0;
  for (size_t i = 0; i < ARRAY_SIZE (backends) && r >= 0; i++)
    if (backends[i]->prepare)
      r = backends[i]->prepare (l, c, plan, err);
  l->view = NULL;
  nsbox_cgroup_view_free (&view);
  plan->unshare_cgroupns = l->v2_fd < 0;
  return r;
}

int
nsbox_limits_attach (struct nsbox_limits *l, const struct nsbox_config *c, struct nsbox_plan *plan,
                     struct nsbox_error **err)
{
  int r = 0;
  for (size_t i = 0; i < ARRAY_SIZE (backends) && r >= 0; i++)
    if (backends[i]->attach)
      r = backends[i]->attach (l, c, plan, err);
  if (r < 0)
    return r;
  if (l->why_not_v2)
    {
      l->why_not_cgroup = NULL;
      nsbox_error_set (&l->why_not_cgroup, EOPNOTSUPP, "%s; cgroup v1 %s",
                       nsbox_error_message (l->why_not_v2),
                       geteuid () == 0 ? "controller missing" : "not writable by this user");
    }
  l->mech[NSBOX_LIMIT_TMP] = NSBOX_MECH_TMPFS;
  return check_strict (l, c, err);
}

bool
nsbox_limits_kill (struct nsbox_limits *l)
{
  for (size_t i = 0; i < ARRAY_SIZE (backends); i++)
    if (backends[i]->kill && backends[i]->kill (l))
      return true;
  return false;
}

void
nsbox_limits_collect (struct nsbox_limits *l, struct nsbox_result *res)
{
  for (size_t i = 0; i < ARRAY_SIZE (backends); i++)
    if (backends[i]->collect)
      backends[i]->collect (l, res);
}

bool
nsbox_limits_cpu_usec (struct nsbox_limits *l, uint64_t *usec)
{
  for (size_t i = 0; i < ARRAY_SIZE (backends); i++)
    if (backends[i]->cpu_usec && backends[i]->cpu_usec (l, usec))
      return true;
  return false;
}

void
nsbox_limits_close_tasks (struct nsbox_limits *l, struct nsbox_plan *plan)
{
  for (int i = 0; i < NSBOX_V1_COUNT_; i++)
    if (l->tasks_fd[i] >= 0)
      close (TAKE_FD (l->tasks_fd[i]));
  plan->n_v1_tasks_fds = 0;
}

void
nsbox_limits_release (struct nsbox_limits *l)
{
  for (size_t i = 0; i < ARRAY_SIZE (backends); i++)
    if (backends[i]->release)
      backends[i]->release (l);
  nsbox_error_free (TAKE_PTR (l->why_not_cgroup));
  nsbox_error_free (TAKE_PTR (l->why_not_v2));
}
