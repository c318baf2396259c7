/* The records a sandbox's setup side sends to the launcher: the native
 * init on its report pipe, the runsc helper into its report file. Both are
 * channels the program cannot reach (a close-on-exec fd; a file only the
 * helper's uid may open), and the launcher reads nothing else to decide
 * whether the setup failed. Plain C with fixed-size fields: the runsc
 * helper, built without libc, includes it too. */
#ifndef NSBOX_REPORT_H
#define NSBOX_REPORT_H

#include <stdint.h>

/* Setup steps of the child; each failure is reported as (step, errno, detail). */
enum nsbox_step
{
  NSBOX_STEP_NONE = 0,
  NSBOX_STEP_SYNC,
  NSBOX_STEP_FDS,
  NSBOX_STEP_JOIN_CGROUP,
  NSBOX_STEP_PDEATHSIG,
  NSBOX_STEP_DUMPABLE,
  NSBOX_STEP_CGROUPNS,
  NSBOX_STEP_MOUNT_PRIVATE,
  NSBOX_STEP_BIND_ROOTFS,
  NSBOX_STEP_REMOUNT_ROOTFS,
  NSBOX_STEP_MOUNT_TMP,
  NSBOX_STEP_MOUNT_DEV,
  NSBOX_STEP_CREATE_DEV,
  NSBOX_STEP_BIND_DEV,
  NSBOX_STEP_MOUNT_SHM,
  NSBOX_STEP_REMOUNT_DEV,
  NSBOX_STEP_MOUNT_PROC,
  NSBOX_STEP_MASK_PROC,
  NSBOX_STEP_READONLY_PROC,
  NSBOX_STEP_USERNS_LIMIT,
  NSBOX_STEP_PIVOT_ROOT,
  NSBOX_STEP_DETACH_OLD_ROOT,
  NSBOX_STEP_HOSTNAME,
  NSBOX_STEP_LOOPBACK,
  NSBOX_STEP_RLIMIT,
  NSBOX_STEP_SIGNALS,
  NSBOX_STEP_CAPBSET,
  NSBOX_STEP_SETGROUPS,
  NSBOX_STEP_SETGID,
  NSBOX_STEP_SETUID,
  NSBOX_STEP_CAPS,
  NSBOX_STEP_NO_NEW_PRIVS,
  NSBOX_STEP_FORK,
  NSBOX_STEP_SETSID,
  NSBOX_STEP_SECCOMP,
  NSBOX_STEP_EXEC,
  NSBOX_STEP_WAIT,
  NSBOX_STEP_READ_FILTER,
  NSBOX_STEP_INPUTS,
  NSBOX_STEP_TMP_OUT,
  NSBOX_STEP_EGRESS,
  NSBOX_STEP_COUNT_,
};

/* What a report record says. */
enum nsbox_report_kind
{
  NSBOX_REPORT_ERROR = 1, /* a setup step failed: step, err, detail */
  NSBOX_REPORT_STATUS,    /* the program ended: status is its wait status */
  NSBOX_REPORT_STARTED,   /* runsc: the helper holds its report file */
};

struct nsbox_report
{
  int32_t kind;
  int32_t step;
  int32_t err;
  int32_t status;
  /* status: init has no other process left (its wait4 said ECHILD), so
   * nothing of the sandbox runs any more but init, which only exits. */
  int32_t alone;
  int32_t unused;
  /* status: the CPU time (microseconds) of every process init reaped, and
   * the largest ru_maxrss (KiB) wait4 gave for one of them, which the
   * kernel carries across execve (so it includes what the process held
   * before; init's is a copy of the launcher's). */
  uint64_t reaped_cpu_usec;
  uint64_t reaped_maxrss_kb;
  char detail[240];
};

/* The launcher's side (report.c; not for the runsc helper, which has no
 * libc). */
#ifndef NSBOX_REPORT_RECORDS_ONLY
#include "util.h"
/* A step's description, e.g. "mount tmpfs on". */
const char *nsbox_step_name (int step) NSBOX_INTERNAL;
/* A failed step's report as the run's error: "sandbox setup: STEP 'DETAIL':
 * strerror". Returns -err. */
int nsbox_report_to_error (const struct nsbox_report *report,
                           struct nsbox_error **err) NSBOX_INTERNAL;
#endif

#endif
