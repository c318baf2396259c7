/* The runsc runtime (gVisor): the sandbox is runsc's, started from the
 * OCI bundle of runsc.c; the launcher watches it from the host. */
#include <poll.h>
#include <stdint.h>

#include "launch-private.h"
#include "runsc.h"

static int
runsc_start (struct nsbox_launch *r, const nsbox_config *c, const nsbox_config *limits_view,
             struct nsbox_error **err)
{
  int ret = nsbox_limits_attach (&r->limits, limits_view, &r->plan, err);
  if (ret < 0)
    return ret;
  return nsbox_runsc_start (&r->plan, &r->limits, c, &r->runsc.job, &r->child, &r->streams, err);
}

static void
runsc_kill (struct nsbox_launch *r)
{
  if (r->runsc.job)
    nsbox_runsc_discard (TAKE_PTR (r->runsc.job));
}

static int
runsc_finish (struct nsbox_launch *r, const struct nsbox_dispatch *d, struct nsbox_result *res,
              struct nsbox_error **err)
{
  if (d->output_dir_fd >= 0)
    {
      nsbox_launch_kill (r);
      return nsbox_launch_refuse_output_dir (err);
    }
  return nsbox_runsc_finish (TAKE_PTR (r->runsc.job), &r->child, &r->streams, &r->limits, d, res,
                             err);
}

/* How long runsc's processes must use no CPU before the program inside
 * gVisor counts as waiting on its stdin, and how much counts as none. */
#define RUNSC_QUIET_USEC 30000
#define RUNSC_QUIET_TOLERANCE_USEC 1500

/* The program inside gVisor is out of the host's sight: it counts as
 * waiting on its stdin once the helper started it and the sandbox's CPU
 * time stood still for a while. */
static enum nsbox_launch_state
runsc_probe (struct nsbox_launch *r)
{
  if (r->runsc.waiting)
    return NSBOX_LAUNCH_WAITING;
  if (!nsbox_runsc_helper_started (r->runsc.job))
    return NSBOX_LAUNCH_STARTING;
  uint64_t now = nsbox_now_ms () * 1000, cpu = nsbox_launch_cpu_usec (r);
  if (r->runsc.quiet_since_usec == 0 || cpu - r->runsc.quiet_cpu_usec > RUNSC_QUIET_TOLERANCE_USEC)
    {
      r->runsc.quiet_since_usec = now;
      r->runsc.quiet_cpu_usec = cpu;
      return NSBOX_LAUNCH_STARTING;
    }
  r->runsc.waiting = now - r->runsc.quiet_since_usec >= RUNSC_QUIET_USEC;
  return r->runsc.waiting ? NSBOX_LAUNCH_WAITING : NSBOX_LAUNCH_STARTING;
}

const struct nsbox_runtime_ops nsbox_runsc_ops = {
  .name = "runsc",
  .host_limits = nsbox_runsc_host_limits,
  .start = runsc_start,
  .finish = runsc_finish,
  .kill = runsc_kill,
  .probe = runsc_probe,
};
