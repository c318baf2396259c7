/* Inside a launch (run.c, the engine) and its runtimes (launch_native.c,
 * launch_runsc.c): the handle of one sandbox, and the operations each
 * runtime gives the engine, like the limits backends of limit.h. */
#ifndef NSBOX_LAUNCH_PRIVATE_H
#define NSBOX_LAUNCH_PRIVATE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "digest.h"
#include "forksafe.h"
#include "image.h"
#include "launch.h"
#include "limit.h"
#include "result.h"
#include "sandbox.h"
#include "spawn.h"
#include "supervise.h"
#include "util.h"

struct nsbox_launch;

/* One runtime. The engine builds the plan and the limits (prepare), then
 * calls these; each may be NULL where the runtime has nothing to do. */
struct nsbox_runtime_ops
{
  const char *name; /* the result's "runtime" */
  /* The limits the host enforces itself, changed in the view the limits
   * are attached from (runsc: its sandbox's own processes). */
  void (*host_limits) (struct nsbox_config *limits_view);
  /* Starts the sandbox of the prepared plan: its program then waits on
   * stdin. */
  int (*start) (struct nsbox_launch *r, const nsbox_config *config, const nsbox_config *limits_view,
                struct nsbox_error **err);
  /* Feeds the code, supervises, fills res (the engine adds what is
   * common). */
  int (*finish) (struct nsbox_launch *r, const struct nsbox_dispatch *d, struct nsbox_result *res,
                 struct nsbox_error **err);
  /* After the engine's kill of the sandbox: what else of it to end. */
  void (*kill) (struct nsbox_launch *r);
  /* After the engine's look at init and the pipes (nothing there yet). */
  enum nsbox_launch_state (*probe) (struct nsbox_launch *r);
  /* Release: what the runtime holds, before the limits go (the mounts
   * first: their tmpfs pages are charged to the cgroups). */
  void (*release) (struct nsbox_launch *r);
  /* In a forked child: close the runtime's fds (no signal, no kill). */
  void (*forked) (struct nsbox_launch *r);
};

extern const struct nsbox_runtime_ops nsbox_native_ops NSBOX_INTERNAL;
extern const struct nsbox_runtime_ops nsbox_runsc_ops NSBOX_INTERNAL;

struct nsbox_runsc_job;

/* What only the native runtime holds. */
struct nsbox_native_launch
{
  int sync_fd; /* the launcher's end, where init's /tmp fd waits */
  int tmp_fd;  /* init's /tmp, once received (while waiting for the listener) */
  /* init's mount namespace, held from the start so that its teardown
   * (every mount unmounted) comes with nsbox_launch_release, not with
   * init's exit inside the run; -1 if it could not be opened. */
  int mnt_ns_fd;
  pid_t program; /* the program's host pid, once found */
};

/* What only runsc holds. */
struct nsbox_runsc_launch
{
  struct nsbox_runsc_job *job;
  uint64_t quiet_since_usec, quiet_cpu_usec; /* CPU time standing still */
  bool waiting; /* was seen waiting once (gVisor's own timers use some CPU later) */
};

struct nsbox_launch
{
  const struct nsbox_runtime_ops *ops;
  struct nsbox_plan plan;
  struct nsbox_limits limits;
  char *rootfs;
  char **envp;
  struct nsbox_image image; /* held while the image runs: no gc under it */
  bool own_bpf;
  char policy_sha256[NSBOX_SHA256_HEX]; /* of the BPF program, for the audit log */
  char image_digest[80];                /* the image's manifest digest, or "" */
  struct nsbox_pipes pipes;
  bool egress; /* network: proxy: init sends the proxy's listener too */
  struct nsbox_egress *proxy;
  enum nsbox_runtime runtime;
  struct nsbox_child child;
  struct nsbox_streams streams;
  struct nsbox_native_launch native;
  struct nsbox_runsc_launch runsc;
  /* A live sandbox (live.c): the launcher's ends of the control pipes
   * (code_fd writes the code, answer_fd reads the answers), the program's
   * pidfd once found, the CPU time counted so far, and the driver's
   * command line; code_child_fd is the driver's end of the code pipe, the
   * fd it waits on (0, its stdin, for a single run). */
  int code_fd, answer_fd, code_child_fd;
  int program_pidfd;
  uint64_t live_cpu_usec;
  char *live_argv[8];
  char live_fd_args[2][16];
  /* Every launch of the process, for fork (run.c). */
  struct nsbox_fork_node fork_node;
  bool foreign; /* this is a forked copy of the process that started it */
};

/* 0, or -ECHILD when `launch` is a forked copy's (foreign): nothing of it
 * may be run. */
int nsbox_launch_owned (const struct nsbox_launch *launch, struct nsbox_error **err) NSBOX_INTERNAL;

/* What a result says of the sandbox that ran it: how each limit was
 * enforced, the runtime, the filter's digest and the image's. */
void nsbox_launch_describe (const struct nsbox_launch *launch,
                            struct nsbox_result *res) NSBOX_INTERNAL;

/* Native: the sandbox's /tmp (an O_PATH fd init sent), kept by the launch;
 * -1 when it did not come. */
int nsbox_native_tmp_fd (struct nsbox_launch *r) NSBOX_INTERNAL;

/* Native: the program's host pid (init's one child), or -1. */
pid_t nsbox_native_program (struct nsbox_launch *r) NSBOX_INTERNAL;

/* The Python source of a live sandbox's driver (live.c). */
extern const char nsbox_live_driver[] NSBOX_INTERNAL;

/* Kills what runs of the sandbox and reaps its init (a runtime's finish
 * calls it when it fails before the supervision). */
void nsbox_launch_kill (struct nsbox_launch *r) NSBOX_INTERNAL;

/* Closes the streams still open. */
void nsbox_launch_close_streams (struct nsbox_streams *s) NSBOX_INTERNAL;

/* "output-dir is not available with runtime runsc ...": -EINVAL. */
int nsbox_launch_refuse_output_dir (struct nsbox_error **err) NSBOX_INTERNAL;

#endif
