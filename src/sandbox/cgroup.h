/* cgroupfs, for the cgroup backends: where the hierarchies are mounted and
 * where this process sits in them, small control files, run cgroups. */
#ifndef NSBOX_CGROUP_H
#define NSBOX_CGROUP_H

#include <stdbool.h>
#include <stdint.h>

#include "limit.h"

struct cgroup_view
{
  char *v2_dir;   /* our own v2 cgroup directory */
  char *v2_mount; /* the cgroup2 mount, when it shows the whole hierarchy */
  bool v2_is_root;
  char *v1_dir[NSBOX_V1_COUNT_]; /* our own v1 cgroup directory per controller */
};

/* /proc/self/cgroup and /proc/self/mountinfo, as they are now. */
void nsbox_cgroup_view_load (struct cgroup_view *view) NSBOX_INTERNAL;
void nsbox_cgroup_view_free (struct cgroup_view *view) NSBOX_INTERNAL;

/* The controller names of enum nsbox_v1_controller. */
extern const char *const nsbox_v1_names[NSBOX_V1_COUNT_] NSBOX_INTERNAL;
/* Writes text to DIR/NAME: 0 or -errno. */
int nsbox_cgroup_write (const char *dir, const char *name, const char *text) NSBOX_INTERNAL;
/* Whether `word` is one of the `sep`-separated words of list. */
bool nsbox_cgroup_has_word (const char *list, const char *word, char sep) NSBOX_INTERNAL;
/* "key N" of a flat keyed file (memory.events), or a file holding a number. */
bool nsbox_cgroup_read_keyed (const char *dir, const char *file, const char *key,
                              uint64_t *value) NSBOX_INTERNAL;
bool nsbox_cgroup_read_number (const char *dir, const char *file, uint64_t *value) NSBOX_INTERNAL;

/* "nsbox-<pid>-<counter>-<nanoseconds>": whose run cgroup it is. */
char *nsbox_cgroup_run_name (void) NSBOX_INTERNAL;
/* Removes a run cgroup, waiting (bounded) for its last tasks to leave. */
void nsbox_cgroup_remove (int dir_fd, const char *name) NSBOX_INTERNAL;
/* Removes the run cgroups in dir of launchers that are gone (killed: their
 * sandbox died with them, but they could not clean up). */
void nsbox_cgroup_sweep_stale (const char *dir) NSBOX_INTERNAL;

#endif
