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
};

/* Chooses mechanisms for memory, cpus and pids, creates the run cgroup(s)
 * with the configured limits, and adds the rlimits the child must set to
 * `plan`. With config->strict, fails unless every limit is a cgroup's. */
int nsbox_limits_prepare (struct nsbox_limits *limits, const struct nsbox_config *config,
                          struct nsbox_plan *plan, struct nsbox_error **err)
    __attribute__ ((visibility ("hidden")));

/* Opens the v1 cgroups' tasks files for the child to join them itself
 * (fds in plan->v1_tasks_fds, closed by nsbox_limits_release). */
int nsbox_limits_open_tasks (struct nsbox_limits *limits, struct nsbox_plan *plan,
                             struct nsbox_error **err) __attribute__ ((visibility ("hidden")));

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
