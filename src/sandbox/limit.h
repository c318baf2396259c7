/* Resource limits of one run. Three backends enforce them, tried in this
 * order behind one small table of operations (the crun model): cgroup v2
 * (cgroup2.c), cgroup v1 (cgroup1.c), rlimits (rlimits.c). limits.c asks
 * each in turn, records what really enforced each limit, never assumes it,
 * and says why no cgroup could (for --strict). */
#ifndef NSBOX_LIMIT_H
#define NSBOX_LIMIT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "result.h"
#include "sandbox.h"
#include "util.h"

enum nsbox_v1_controller
{
  NSBOX_V1_MEMORY = 0,
  NSBOX_V1_CPU,
  NSBOX_V1_PIDS,
  NSBOX_V1_CPUACCT, /* measures CPU time; enforces nothing */
  NSBOX_V1_COUNT_,
};

struct cgroup_view;

struct nsbox_limits
{
  enum nsbox_mechanism mech[NSBOX_LIMIT_COUNT_];
  /* cgroup2.c */
  char *v2_dir; /* the run's cgroup, or NULL */
  int v2_fd;    /* O_DIRECTORY fd of it for CLONE_INTO_CGROUP, or -1 */
  /* cgroup1.c: the launcher's own cgroups (the run's parents) between
   * prepare and attach, the run's cgroups, their opened tasks files. */
  char *v1_base[NSBOX_V1_COUNT_];
  char *v1_dir[NSBOX_V1_COUNT_];
  int tasks_fd[NSBOX_V1_COUNT_];
  /* Why cgroup v2, then any cgroup, enforces nothing here. */
  struct nsbox_error *why_not_v2;
  struct nsbox_error *why_not_cgroup;
  /* The hierarchies, while the backends prepare. */
  struct cgroup_view *view;
};

/* One backend. Each step takes the limits still NSBOX_MECH_NONE that it
 * can enforce and records its mechanism in l->mech; a step that cannot is
 * not an error (it may say why in l->why_not_*), a step that fails is. */
struct nsbox_limits_ops
{
  /* Parent, before clone. */
  int (*prepare) (struct nsbox_limits *l, const struct nsbox_config *c, struct nsbox_plan *plan,
                  struct nsbox_error **err);
  /* Parent, after clone, while the child builds its mounts. */
  int (*attach) (struct nsbox_limits *l, const struct nsbox_config *c, struct nsbox_plan *plan,
                 struct nsbox_error **err);
  /* Kills every task it holds; false when it cannot. */
  bool (*kill) (struct nsbox_limits *l);
  /* Peak memory, OOM kills and CPU time into the result. */
  void (*collect) (struct nsbox_limits *l, struct nsbox_result *res);
  /* CPU time used so far by the run cgroup, in microseconds; false when it
   * measures none. */
  bool (*cpu_usec) (struct nsbox_limits *l, uint64_t *usec);
  void (*release) (struct nsbox_limits *l);
};

extern const struct nsbox_limits_ops nsbox_cgroup2_ops NSBOX_INTERNAL;
extern const struct nsbox_limits_ops nsbox_cgroup1_ops NSBOX_INTERNAL;
extern const struct nsbox_limits_ops nsbox_rlimit_ops NSBOX_INTERNAL;

/* Before use: every fd -1, everything else empty. */
void nsbox_limits_init (struct nsbox_limits *limits) NSBOX_INTERNAL;

/* In two steps, so that the native runtime can create cgroup v1 groups
 * while its child builds the sandbox's mounts. prepare: before clone, finds
 * the hierarchies and creates the run's cgroup v2 (clone3 starts the child
 * in it) with the configured limits, or notes why there is none; plans
 * every rlimit of the sandbox. */
int nsbox_limits_prepare (struct nsbox_limits *limits, const struct nsbox_config *config,
                          struct nsbox_plan *plan, struct nsbox_error **err) NSBOX_INTERNAL;

/* attach: without a cgroup v2, creates the run's cgroup v1 groups with the
 * limits; rlimits stand in for what no cgroup enforces; with config->strict,
 * fails unless every limit is a cgroup's. Opens the v1 tasks files for the
 * child to join them itself (plan->v1_tasks_fds, closed by
 * nsbox_limits_release) and fills the rest of the plan's limits part. */
int nsbox_limits_attach (struct nsbox_limits *limits, const struct nsbox_config *config,
                         struct nsbox_plan *plan, struct nsbox_error **err) NSBOX_INTERNAL;

/* Closes the v1 tasks files once the child has them: opened by the
 * launcher, they could move any task it may see into the run cgroups. */
void nsbox_limits_close_tasks (struct nsbox_limits *limits, struct nsbox_plan *plan) NSBOX_INTERNAL;

/* Kills every process of the run cgroup (cgroup.kill). Returns false when
 * that is not available, so the caller falls back to killing init. */
bool nsbox_limits_kill (struct nsbox_limits *limits) NSBOX_INTERNAL;

/* Reads peak memory, OOM kills and CPU time into the result. */
void nsbox_limits_collect (struct nsbox_limits *limits, struct nsbox_result *result) NSBOX_INTERNAL;

/* CPU time used so far by the run cgroup, in microseconds; false when no
 * cgroup measures it. */
bool nsbox_limits_cpu_usec (struct nsbox_limits *limits, uint64_t *usec) NSBOX_INTERNAL;

/* Removes the run cgroups and frees everything. Safe after
 * nsbox_limits_init. */
void nsbox_limits_release (struct nsbox_limits *limits) NSBOX_INTERNAL;

/* Child side (cgroup1.c, async-signal-safe, failing through
 * nsbox_child_fail): moves the caller into the run's v1 cgroups by writing
 * "0" to each tasks file; every process it starts afterwards is counted and
 * limited by them. */
void nsbox_cgroup1_join (const int *tasks_fds, int n) NSBOX_INTERNAL;

/* Child side (rlimits.c): sets the limits the launcher settled. */
void nsbox_rlimits_apply (const struct nsbox_limits_msg *lim) NSBOX_INTERNAL;

#endif
