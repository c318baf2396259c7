/* Resource limits of one run: cgroup v2, cgroup v1 or rlimits, and what each
 * limit was really enforced by. */
#ifndef NSBOX_RESOURCES_H
#define NSBOX_RESOURCES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "result.h"
#include "sandbox.h"

enum nsbox_v1_controller
{
  NSBOX_V1_MEMORY = 0,
  NSBOX_V1_CPU,
  NSBOX_V1_PIDS,
  NSBOX_V1_CPUACCT, /* measures CPU time; enforces nothing */
  NSBOX_V1_COUNT_,
};

struct nsbox_limits
{
  enum nsbox_mechanism mech[NSBOX_LIMIT_COUNT_];
  char *v2_dir;                  /* run cgroup (v2), or NULL */
  int v2_fd;                     /* O_DIRECTORY fd for CLONE_INTO_CGROUP, or -1 */
  char *v1_dir[NSBOX_V1_COUNT_]; /* run cgroups (v1), or NULL */
  char *why_not_cgroup;          /* why cgroups could not be used, for --strict */
  int tasks_fd[NSBOX_V1_COUNT_]; /* opened tasks files, or -1 */
  /* Between prepare and attach: why cgroup v2 is not used, and the
   * launcher's own v1 cgroups (the parents of the run's). */
  char *why_not_v2;
  char *v1_base[NSBOX_V1_COUNT_];
};

/* In two steps, so that the native runtime can create cgroup v1 groups
 * while its child builds the sandbox's mounts. prepare: before clone, finds
 * the hierarchies and creates the run's cgroup v2 (clone3 starts the child
 * in it) with the configured limits, or notes why there is none; adds
 * RLIMIT_CORE 0 to `plan`. */
int nsbox_limits_prepare (struct nsbox_limits *limits, const struct nsbox_config *config,
                          struct nsbox_plan *plan, struct nsbox_error **err)
    __attribute__ ((visibility ("hidden")));

/* attach: without a cgroup v2, creates the run's cgroup v1 groups with the
 * limits; rlimits stand in for what no cgroup enforces; with config->strict,
 * fails unless every limit is a cgroup's. Opens the v1 tasks files for the
 * child to join them itself (plan->v1_tasks_fds, closed by
 * nsbox_limits_release) and fills the rest of the plan's limits part. */
int nsbox_limits_attach (struct nsbox_limits *limits, const struct nsbox_config *config,
                         struct nsbox_plan *plan, struct nsbox_error **err)
    __attribute__ ((visibility ("hidden")));

/* Closes the v1 tasks files once the child has them: opened by the
 * launcher, they could move any task it may see into the run cgroups. */
void nsbox_limits_close_tasks (struct nsbox_limits *limits, struct nsbox_plan *plan)
    __attribute__ ((visibility ("hidden")));

/* Kills every process of the run cgroup (cgroup.kill). Returns false when
 * that is not available, so the caller falls back to killing init. */
bool nsbox_limits_kill (struct nsbox_limits *limits) __attribute__ ((visibility ("hidden")));

/* Reads peak memory, OOM kills and CPU time into the result. */
void nsbox_limits_collect (struct nsbox_limits *limits, struct nsbox_result *result)
    __attribute__ ((visibility ("hidden")));

/* Removes the run cgroups and frees everything. Safe on a zeroed struct
 * with v2_fd = -1. */
void nsbox_limits_release (struct nsbox_limits *limits) __attribute__ ((visibility ("hidden")));

#endif
