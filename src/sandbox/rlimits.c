/* rlimits: every resource limit of the sandbox (the table below), and the
 * fallbacks for what no cgroup enforces: RLIMIT_AS for memory, RLIMIT_NPROC
 * (counted per user namespace) for pids-limit. The child sets them from the
 * plan (nsbox_rlimits_apply, below); runsc passes them to gVisor
 * (runsc_bundle.c). */
#include <errno.h>
#include <sys/resource.h>

#include "child.h"
#include "limit.h"
#include "util.h"

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
static int
rlimit_prepare (struct nsbox_limits *l, const struct nsbox_config *c, struct nsbox_plan *plan,
                struct nsbox_error **err)
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
  (void)l;
  (void)c;
  (void)err;
  return 0;
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

/* attach: the fallbacks for memory and pids-limit. */
static int
rlimit_attach (struct nsbox_limits *l, const struct nsbox_config *c, struct nsbox_plan *plan,
               struct nsbox_error **err)
{
  (void)err;
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
  return 0;
}

const struct nsbox_limits_ops nsbox_rlimit_ops = {
  .prepare = rlimit_prepare,
  .attach = rlimit_attach,
};

/* Child side. */

void
nsbox_rlimits_apply (const struct nsbox_limits_msg *lim)
{
  for (int i = 0; i < lim->nrlimits; i++)
    if (setrlimit (lim->rlimit_resources[i], &lim->rlimits[i]) < 0)
      nsbox_child_fail (NSBOX_STEP_RLIMIT, errno, NULL);
}
