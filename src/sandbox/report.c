/* Reading the records of report.h on the launcher's side. */
#include "report.h"

#include <errno.h>

#include "error.h"

static const char *const step_names[NSBOX_STEP_COUNT_] = {
  [NSBOX_STEP_NONE] = "unknown step",
  [NSBOX_STEP_SYNC] = "wait for the launcher",
  [NSBOX_STEP_FDS] = "set up file descriptors",
  [NSBOX_STEP_JOIN_CGROUP] = "join the run's cgroup v1",
  [NSBOX_STEP_PDEATHSIG] = "set parent-death signal",
  [NSBOX_STEP_DUMPABLE] = "set dumpable",
  [NSBOX_STEP_CGROUPNS] = "enter cgroup namespace",
  [NSBOX_STEP_MOUNT_PRIVATE] = "make mounts private on",
  [NSBOX_STEP_BIND_ROOTFS] = "bind rootfs",
  [NSBOX_STEP_REMOUNT_ROOTFS] = "remount rootfs read-only",
  [NSBOX_STEP_MOUNT_TMP] = "mount tmpfs on",
  [NSBOX_STEP_MOUNT_DEV] = "mount tmpfs on",
  [NSBOX_STEP_CREATE_DEV] = "create in /dev",
  [NSBOX_STEP_BIND_DEV] = "bind device",
  [NSBOX_STEP_MOUNT_SHM] = "mount tmpfs on",
  [NSBOX_STEP_REMOUNT_DEV] = "remount read-only",
  [NSBOX_STEP_MOUNT_PROC] = "mount proc on",
  [NSBOX_STEP_MASK_PROC] = "mask",
  [NSBOX_STEP_READONLY_PROC] = "make read-only",
  [NSBOX_STEP_USERNS_LIMIT] = "limit nested user namespaces through",
  [NSBOX_STEP_PIVOT_ROOT] = "pivot_root into",
  [NSBOX_STEP_DETACH_OLD_ROOT] = "detach old root",
  [NSBOX_STEP_HOSTNAME] = "set hostname",
  [NSBOX_STEP_LOOPBACK] = "bring up loopback",
  [NSBOX_STEP_RLIMIT] = "set resource limits",
  [NSBOX_STEP_SIGNALS] = "reset signal handling",
  [NSBOX_STEP_CAPBSET] = "drop capability bounding set",
  [NSBOX_STEP_SETGROUPS] = "clear supplementary groups",
  [NSBOX_STEP_SETGID] = "switch to sandbox gid",
  [NSBOX_STEP_SETUID] = "switch to sandbox uid",
  [NSBOX_STEP_CAPS] = "drop capabilities",
  [NSBOX_STEP_NO_NEW_PRIVS] = "set no_new_privs",
  [NSBOX_STEP_FORK] = "fork the program",
  [NSBOX_STEP_SETSID] = "start a new session",
  [NSBOX_STEP_SECCOMP] = "install seccomp filter",
  [NSBOX_STEP_EXEC] = "execute",
  [NSBOX_STEP_WAIT] = "wait for the program",
  [NSBOX_STEP_READ_FILTER] = "read seccomp filter",
  [NSBOX_STEP_INPUTS] = "place the inputs in",
  [NSBOX_STEP_TMP_OUT] = "prepare",
  [NSBOX_STEP_EGRESS] = "listen for the egress proxy on",
};

const char *
nsbox_step_name (int step)
{
  if (step < 0 || step >= NSBOX_STEP_COUNT_ || !step_names[step])
    return step_names[NSBOX_STEP_NONE];
  return step_names[step];
}

int
nsbox_report_to_error (const struct nsbox_report *r, struct nsbox_error **err)
{
  if (r->detail[0])
    return nsbox_error_sys (err, r->err, "sandbox setup: %s '%.*s'", nsbox_step_name (r->step),
                            (int)sizeof r->detail, r->detail);
  return nsbox_error_sys (err, r->err, "sandbox setup: %s", nsbox_step_name (r->step));
}
