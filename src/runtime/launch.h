/* One sandbox between its start and its run: the plan, limits and child of
 * either runtime behind one handle. nsbox_run is a start followed at once
 * by a finish; the pool (pool.c) starts its entries ahead of time and
 * finishes each with the code of one run. */
#ifndef NSBOX_LAUNCH_H
#define NSBOX_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "result.h"
#include "supervise.h"
#include "util.h"

struct nsbox_launch;

/* One cold run: start, then finish at once with the config's limits (the
 * library's nsbox_run, behind the gate of src/service/gate.h). */
int nsbox_launch_run (const nsbox_config *config, const char *code, size_t code_len,
                      nsbox_result **out, struct nsbox_error **err) NSBOX_INTERNAL;

/* Builds the whole sandbox `config` describes (every namespace, mounts,
 * limits, capabilities dropped, seccomp installed) and starts its command,
 * which blocks reading its stdin. Nothing of it is left on failure. */
int nsbox_launch_start (const nsbox_config *config, struct nsbox_launch **launch,
                        struct nsbox_error **err) NSBOX_INTERNAL;

/* Like nsbox_launch_start, for a live sandbox (live.c): the program is
 * the driver, which keeps one interpreter for every run of the sandbox;
 * native runtime only. */
int nsbox_launch_start_live (const nsbox_config *config, struct nsbox_launch **launch,
                             struct nsbox_error **err) NSBOX_INTERNAL;

/* A live sandbox's first run counts its CPU time from `usec` (as
 * nsbox_launch_cpu_usec gave it; a warm pool's entry: when it was taken),
 * not from the sandbox's start. */
void nsbox_launch_count_cpu_from (struct nsbox_launch *launch, uint64_t usec) NSBOX_INTERNAL;

struct nsbox_inputs;
/* Before a live sandbox's run: its inputs copied to /tmp/in/NAME in the
 * sandbox (nsbox_inputs_copy_beneath). Nothing runs; the sandbox is kept
 * on failure. */
int nsbox_launch_place_inputs (struct nsbox_launch *launch, const struct nsbox_inputs *inputs,
                               struct nsbox_error **err) NSBOX_INTERNAL;

/* Run number `run` of a live sandbox: its code, supervised with the
 * dispatch's timeout and caps, fills `res` (in_sandbox, value, and with the
 * dispatch's output_dir_fd the files the run left in /tmp/out, taken out
 * of it; 0 also when
 * the run ended the sandbox: then res->sandbox_lost, and nothing of it
 * runs any more, the caller only releases it). At the timeout the code is
 * interrupted (SIGINT: KeyboardInterrupt); one that does not return within
 * a grace period of 2 s loses the sandbox. -errno with err when the
 * launcher failed (the sandbox is then killed, and res->sandbox_lost set
 * when it was), or when collecting the outputs did (the sandbox lives
 * on). */
int nsbox_launch_turn (struct nsbox_launch *launch, uint64_t run,
                       const struct nsbox_dispatch *dispatch, struct nsbox_result *res,
                       struct nsbox_error **err) NSBOX_INTERNAL;

/* Feeds `code` to the program, closes its stdin and supervises it exactly
 * like a cold run, the timeout counted from this call; fills `res`. When it
 * returns, in every case, no process of the sandbox is left but, at most,
 * its init in its own exit: init reported its program's end with no child
 * left (nsbox_supervise), and is not reaped yet. What is left is freed by
 * nsbox_launch_release, which the caller calls, at once or off its request
 * path: init (reaped first), the mount namespace (unmounting it is most of
 * a sandbox's teardown), the cgroups, the image lock, the fds and `launch`
 * itself. */
int nsbox_launch_finish (struct nsbox_launch *launch, const struct nsbox_dispatch *dispatch,
                         struct nsbox_result *res, struct nsbox_error **err) NSBOX_INTERNAL;

/* Frees what nsbox_launch_finish left of a sandbox, and `launch`. NULL is
 * allowed. */
void nsbox_launch_release (struct nsbox_launch *launch) NSBOX_INTERNAL;

/* Kills a sandbox that never ran, reaps it, removes its cgroups and work
 * directory and frees `launch`. NULL is allowed. */
void nsbox_launch_destroy (struct nsbox_launch *launch) NSBOX_INTERNAL;

enum nsbox_launch_state
{
  NSBOX_LAUNCH_STARTING = 0, /* the program is still initialising */
  NSBOX_LAUNCH_WAITING,      /* the program blocks reading its code (a live driver: its pipe) */
  NSBOX_LAUNCH_BROKEN,       /* init gone, a report arrived, or output came */
};

/* What the sandbox is doing now, from the host's side: its init's pidfd, the
 * report and output pipes, and (native) the program's own syscall in
 * /proc; under runsc, the helper's "started" record and the sandbox's CPU
 * time standing still. Never blocks. */
enum nsbox_launch_state nsbox_launch_probe (struct nsbox_launch *launch) NSBOX_INTERNAL;

/* CPU time the sandbox's processes used so far, in microseconds (cgroup
 * accounting, or the process tree in /proc), or UINT64_MAX when unknown. */
uint64_t nsbox_launch_cpu_usec (struct nsbox_launch *launch) NSBOX_INTERNAL;
/* The sandbox's init, as the host sees it: its pid and the inode of the
 * PID namespace of its program (for nsbox_tree_pss_bytes). While both run,
 * before the program ran any code it was given. */
void nsbox_launch_identity (struct nsbox_launch *launch, pid_t *pid,
                            uint64_t *pid_namespace) NSBOX_INTERNAL;

/* The runtime a sandbox of `config` uses: auto resolved. */
enum nsbox_runtime nsbox_launch_resolve_runtime (const nsbox_config *config) NSBOX_INTERNAL;

/* Whether inputs (config) and an output directory (output_dir) are
 * available with `runtime`: 0, or -EINVAL saying why not (runsc). */
int nsbox_launch_check_files (const nsbox_config *config, enum nsbox_runtime runtime,
                              bool output_dir, struct nsbox_error **err) NSBOX_INTERNAL;

/* The runtime the sandbox really uses ("native" or "runsc"). */
const char *nsbox_launch_runtime (const struct nsbox_launch *launch) NSBOX_INTERNAL;

#endif
