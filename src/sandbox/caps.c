/* Capabilities: the child drops all five sets (bounding, ambient,
 * inheritable, permitted, effective) with libcap. The empty cap_t is
 * allocated in the parent; the calls below only issue prctl/capset. */
#include <errno.h>
#include <sys/capability.h>
#include <sys/prctl.h>

#include "child.h"
#include "sandbox.h"

void
nsbox_caps_drop_bounding (void)
{
  /* Bits beyond the kernel's last capability fail with EINVAL: harmless. */
  for (cap_value_t cap = 0; cap < (cap_value_t)cap_max_bits (); cap++)
    if (cap_drop_bound (cap) < 0 && errno != EINVAL)
      nsbox_child_fail (NSBOX_STEP_CAPBSET, errno, NULL);
  if (cap_reset_ambient () < 0)
    nsbox_child_fail (NSBOX_STEP_CAPS, errno, "ambient");
}

void
nsbox_caps_drop_all (const struct nsbox_plan *plan)
{
  if (cap_set_proc (plan->empty_caps) < 0)
    nsbox_child_fail (NSBOX_STEP_CAPS, errno, NULL);
}
