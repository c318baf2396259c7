/* The parent's poll loop: feed stdin, capture capped output, enforce the
 * wall-clock timeout, kill and reap. */
#ifndef NSBOX_SUPERVISE_H
#define NSBOX_SUPERVISE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "capture.h"
#include "limit.h"
#include "result.h"
#include "sandbox.h"
#include "spawn.h"

/* What bounds one run from the moment its code is handed over. */
struct nsbox_dispatch
{
  const char *code;
  size_t code_len;
  uint64_t timeout_ms;
  uint64_t max_output_bytes;
  /* A connected socket (a server's client) whose hang-up kills the run,
   * which then fails with ECANCELED; -1 for none. */
  int cancel_fd;
  /* Also a shutdown of the peer's sending side (POLLRDHUP) kills it; else
   * only a full hang-up (POLLHUP, POLLERR) does. */
  bool cancel_on_half_close;
  enum nsbox_capture_mode capture;
  /* The configured memory limit, for the result (it names the limit in
   * force when the run is killed by it). */
  uint64_t memory_bytes;
  /* Where the files the program left in /tmp/out go (native runtime), or
   * -1. */
  int output_dir_fd;
  /* Told of the output as it comes (nsbox_run_options_set_output), or
   * NULL. */
  void (*output) (void *data, int stream, const char *bytes, size_t len);
  void *output_data;
};

/* Runs until the sandbox is gone and its output drained. Fills the output,
 * timing and exit fields of `res`. Returns a setup error reported by the
 * child (after reaping it) as a negative errno with `err` filled. Closes
 * every fd in `streams`, and reaps the child and closes its pidfd, except
 * when init reported the program's status with no other process left: then
 * init is only exiting, and the pidfd stays open for the caller to reap it
 * (nsbox_spawn_abort) off the run's time. */
int nsbox_supervise (struct nsbox_child *child, struct nsbox_streams *streams,
                     struct nsbox_limits *limits, const struct nsbox_dispatch *dispatch,
                     struct nsbox_result *res, struct nsbox_error **err) NSBOX_INTERNAL;

/* Reads what is there from a non-blocking fd into c: <0 on error, 0 at
 * EOF (the fd is then closed and set to -1), 1 otherwise. */
int nsbox_supervise_drain (int *fd, struct nsbox_capture *c) NSBOX_INTERNAL;

/* Ends both captures into the result's output fields. */
void nsbox_supervise_store_output (struct nsbox_capture *stdout_c, struct nsbox_capture *stderr_c,
                                   struct nsbox_result *res) NSBOX_INTERNAL;

/* A program that closes its end of a pipe must not kill the launcher (or
 * the embedding program) with SIGPIPE: blocked in the calling thread for
 * the supervision, and the one it caused consumed after. */
struct nsbox_sigpipe_guard
{
  sigset_t old;
  bool was_pending;
};
void nsbox_sigpipe_block (struct nsbox_sigpipe_guard *guard) NSBOX_INTERNAL;
void nsbox_sigpipe_restore (const struct nsbox_sigpipe_guard *guard) NSBOX_INTERNAL;

/* The CPU time of the process tree under pid (every thread's children),
 * from /proc; UINT64_MAX when it cannot be read. */
uint64_t nsbox_tree_cpu_usec (pid_t pid) NSBOX_INTERNAL;
/* The inode of the PID namespace of pid's first child (0 when it cannot
 * be read): a sandbox's, from its init. */
uint64_t nsbox_child_pid_namespace (pid_t pid) NSBOX_INTERNAL;
/* The memory of the process tree under pid whose processes are in the PID
 * namespace ns: the sum of their proportional set sizes, in bytes
 * (UINT64_MAX when ns is 0). Safe to call after the tree is gone: a pid
 * now another's is not counted. */
uint64_t nsbox_tree_pss_bytes (pid_t pid, uint64_t ns) NSBOX_INTERNAL;

#endif
