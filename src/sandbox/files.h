/* Files in and out of a sandbox: inputs copied read-only to /mnt/in
 * (a live sandbox's run: to /tmp/in) (inputs.c), and the regular files a
 * program leaves in /tmp/out collected into an output directory after the
 * sandbox is gone, or after a live sandbox's run (collect.c). */
#ifndef NSBOX_FILES_H
#define NSBOX_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "file_names.h"
#include "nsbox.h"
#include "util.h"

/* Outputs: at most this many files collected, this many bytes in all; at
 * most this many entries of /tmp/out looked at, and this many refusals
 * listed one by one (the rest are summed up in one last entry). */
#define NSBOX_OUTPUTS_MAX 256
#define NSBOX_OUTPUTS_BYTES_MAX (UINT64_C (64) << 20)
#define NSBOX_OUTPUTS_SCAN_MAX 4096
#define NSBOX_OUTPUTS_REFUSED_LISTED 64

/* The inputs of one run, opened by the launcher before clone: the child
 * copies them into the tmpfs it mounts on /mnt (inputs.c, child side). */
struct nsbox_inputs
{
  int n;
  int fds[NSBOX_INPUTS_MAX];
  const char *names[NSBOX_INPUTS_MAX]; /* the config's strings */
  uint64_t sizes[NSBOX_INPUTS_MAX];
  uint64_t total;
  char mount_options[96]; /* tmpfs options for /mnt */
};

/* Opens every "PATH:NAME" of `specs` (canonical form: NAME always there):
 * regular files only, within the caps. Fails with the path and the reason;
 * closes what it opened then. */
int nsbox_inputs_open (char *const *specs, size_t n, struct nsbox_inputs *inputs,
                       struct nsbox_error **err) NSBOX_INTERNAL;
void nsbox_inputs_close (struct nsbox_inputs *inputs) NSBOX_INTERNAL;

/* Child side, relative to the rootfs (the working directory, before
 * pivot_root): a tmpfs on mnt, mnt/in holding a copy of each input
 * (read from fds first_fd, first_fd+1, ...: the child's numbering), then
 * remounted read-only. Async-signal-safe; fails through nsbox_child_fail. */
void nsbox_inputs_place (const struct nsbox_inputs *inputs, int first_fd) NSBOX_INTERNAL;

/* Opens the output directory for a run, a directory this process may write
 * into: created with its missing parents (mode 0700, as mkdir -p) when it
 * does not exist; one that exists but is not a directory, or is a symlink,
 * is refused. */
int nsbox_output_dir_open (const char *path, int *fd, struct nsbox_error **err) NSBOX_INTERNAL;

struct nsbox_result;

/* After the sandbox is gone (a live sandbox's: after one of its runs):
 * collects the regular files at the top of `out` below the sandbox's /tmp
 * (tmp_fd) into dir_fd, never following a link or leaving the tmpfs, and
 * lists them (name, size, SHA-256) and what was refused (name, reason) in
 * `res`; with take, each file collected is removed from `out`. Fails only
 * for an internal error (memory, SHA-256 unavailable). */
int nsbox_collect_outputs (int tmp_fd, int dir_fd, bool take, struct nsbox_result *res,
                           struct nsbox_error **err) NSBOX_INTERNAL;

/* openat2 of `name` beneath dirfd: no symlink, no magic link, no other
 * mount is followed; O_CLOEXEC and O_NOFOLLOW added. -1 with errno. */
int nsbox_open_beneath (int dirfd, const char *name, uint64_t flags) NSBOX_INTERNAL;

/* How the error of nsbox_inputs_copy_beneath begins when the sandbox's
 * program caused it (its /tmp full, /tmp/in made a link or a file, a
 * directory in the way): only the names of its own /tmp and the inputs
 * follow, so it may be told to whoever sent the code. */
#define NSBOX_INPUTS_REFUSED "the sandbox refused the inputs (nothing ran)"

/* A live sandbox's run: a copy of each input at /tmp/in/NAME below the
 * sandbox's /tmp (tmp_fd, made when missing), mode 0444, one of that name
 * replaced, in the inputs' order (a refusal leaves those before it in
 * place); never a link followed or the tmpfs left. Fails with the name
 * and the reason. The pages it writes are charged to the calling
 * process's memory cgroup, not the sandbox's (at most its tmp-size). */
int nsbox_inputs_copy_beneath (int tmp_fd, const struct nsbox_inputs *inputs,
                               struct nsbox_error **err) NSBOX_INTERNAL;

#endif
