/* runsc: the OCI bundle of one run. Layout, when nsbox is root (gVisor
 * runs as host uid 65534):
 *   nsbox-runsc-PID-XXXXXX/  root:65534 0750 (in TMPDIR, else /dev/shm)
 *     bundle/                config.json 0640, helper/ (the seccomp helper,
 *                            the filter, the report file's mount point)
 *     report                 65534 0600: the helper's records (report.h)
 *     state/ log/            65534 0700: runsc --root, runsc --log and
 *                            --panic-log
 * For an unprivileged launcher everything is its own, 0700 and 0600. */
#ifndef NSBOX_RUNSC_BUNDLE_H
#define NSBOX_RUNSC_BUNDLE_H

#include <stdbool.h>

#include "config.h"
#include "sandbox.h"
#include "util.h"

struct nsbox_runsc_bundle
{
  char *workdir; /* removed with everything below it */
  char *dir;     /* workdir/bundle: runsc run --bundle */
  char *state;   /* workdir/state: runsc --root */
  char *log;     /* workdir/log/runsc.log: runsc's error log (JSON lines) */
  char *panic;   /* workdir/log/panic.log: the Go runtime's panic reports */
  char *report;  /* workdir/report */
  bool root;     /* nsbox runs as root: gVisor is NSBOX_ROOT_HOST_ID */
  bool locked;   /* lock_fd holds an flock on workdir while the run lasts */
  int lock_fd;
};

/* Makes the work directory (removing those of launchers killed before
 * they could) and writes the bundle for `plan` and `config`. */
int nsbox_runsc_bundle_create (struct nsbox_runsc_bundle *bundle, const struct nsbox_plan *plan,
                               const struct nsbox_config *config,
                               struct nsbox_error **err) NSBOX_INTERNAL;

/* Removes the work directory, never following a symlink (as root it is
 * cleaned up after processes of host uid 65534), and frees the names. */
void nsbox_runsc_bundle_remove (struct nsbox_runsc_bundle *bundle) NSBOX_INTERNAL;

#endif
