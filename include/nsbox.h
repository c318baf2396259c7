/* nsbox: run untrusted Python in a fresh, single-use Linux sandbox.
 *
 * This header is the whole public API of libnsbox. Handles are opaque.
 * Every function that can fail returns an int (>= 0 on success, a negative
 * errno on failure) or a pointer (NULL on failure), and fills an optional
 * `struct nsbox_error **err` that the caller frees with nsbox_error_free().
 * The library never prints, never exits and keeps no global state that would
 * stop two runs from proceeding in parallel threads. */
#ifndef NSBOX_H
#define NSBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C"
{
#endif

#if defined(NSBOX_BUILDING)
#define NSBOX_EXPORT __attribute__ ((visibility ("default")))
#else
#define NSBOX_EXPORT
#endif

  /* Error object: the positive errno of the failure (the function that
   * failed returned its negative) and an allocated message such as
   * "mount tmpfs on '/tmp': Operation not permitted". */
  struct nsbox_error;

  /* Returns the message; valid until the error is freed. */
  NSBOX_EXPORT const char *nsbox_error_message (const struct nsbox_error *error);
  /* Returns the positive errno value that caused the error (EINVAL for bad
   * input, EBADMSG for a malformed file, ...). */
  NSBOX_EXPORT int nsbox_error_errno (const struct nsbox_error *error);
  /* Frees the error; NULL is allowed. */
  NSBOX_EXPORT void nsbox_error_free (struct nsbox_error *error);

  /* Configuration. Every key uses the one vocabulary shared with the YAML file,
   * the CLI flags and the JSON result: image, rootfs, pull, store, runtime,
   * timeout, memory, cpus, pids-limit, max-output-bytes, output-capture,
   * tmp-size, network, user, env, command, inputs, output-dir, strict,
   * seccomp-policy, pull, store, audit-log, audit-code, session,
   * quota-runs-per-minute, quota-concurrent, quota-cpu-time,
   * quota-wall-time, quota-window.
   * With a quota key set, nsbox_run and nsbox_pool_run check the run's
   * session (the session key, or a pooled run's own) against its quotas
   * before any sandbox starts; a refused run returns 0 with a result that
   * says so (nsbox_result_quota_refusal). The accounting is kept per session
   * id for the whole process (every configuration and pool shares it).
   * With audit-log set, nsbox_run and nsbox_pool_run append one
   * hash-chained JSON Lines record per run (README.md, "The audit log"); a
   * log that cannot be opened fails the run before a sandbox starts, and a
   * record that cannot be written fails a run that ended (-errno). */
  typedef struct nsbox_config nsbox_config;

  /* A configuration holding the built-in defaults. */
  NSBOX_EXPORT nsbox_config *nsbox_config_new (struct nsbox_error **err);
  NSBOX_EXPORT void nsbox_config_free (nsbox_config *config);

  /* Sets one key from its textual form ("64m", "500ms", "0.5", "65534:65534").
   * `inputs` takes "PATH[:NAME]" and adds one file (an empty value clears
   * the list); `output-dir` names an existing directory (native runtime).
   * `env` takes "NAME=VALUE" and adds or replaces that variable; `command`
   * takes one argument and appends it (see nsbox_config_set_command to replace
   * the whole command). An unknown key or invalid value fails with -EINVAL and
   * leaves the configuration unchanged. */
  NSBOX_EXPORT int nsbox_config_set (nsbox_config *config, const char *key, const char *value,
                                     struct nsbox_error **err);

  /* Replaces the command (argv of the program run in the sandbox; default
   * `python -`). argc must be >= 1. */
  NSBOX_EXPORT int nsbox_config_set_command (nsbox_config *config, size_t argc,
                                             const char *const *argv, struct nsbox_error **err);

  /* Loads a YAML configuration file over the current values. Errors name the
   * file, line and column; on error the configuration is unchanged. */
  NSBOX_EXPORT int nsbox_config_load_yaml (nsbox_config *config, const char *path,
                                           struct nsbox_error **err);

  /* Returns the textual value of a scalar key (caller frees), or NULL with
   * -EINVAL for an unknown key. */
  NSBOX_EXPORT char *nsbox_config_get (const nsbox_config *config, const char *key,
                                       struct nsbox_error **err);

  /* Result of one run. */
  typedef struct nsbox_result nsbox_result;

  /* How a limit was enforced. cgroup v2 needs a cgroup the launcher may
   * manage: any for root; for an unprivileged caller one delegated to it,
   * or, when its own cgroup is not usable, a transient scope (Delegate=yes)
   * its systemd user instance makes on the user bus. Moving
   * into that scope moves the whole calling process, every thread and the
   * children it starts later; it happens at most once per process, under a
   * lock, on the first run that needs it, and lasts until the process
   * exits. Where none of this is possible the limits fall back to cgroup v1
   * or rlimits, and the result says so. */
  enum nsbox_mechanism
  {
    NSBOX_MECH_NONE = 0,
    NSBOX_MECH_RLIMIT,
    NSBOX_MECH_CGROUP1,
    NSBOX_MECH_CGROUP2,
    NSBOX_MECH_TMPFS,
  };

  enum nsbox_limit
  {
    NSBOX_LIMIT_MEMORY = 0,
    NSBOX_LIMIT_CPUS,
    NSBOX_LIMIT_PIDS,
    NSBOX_LIMIT_TMP,
    NSBOX_LIMIT_COUNT_,
  };

  /* Runs `code` (fed to the program's stdin) in a fresh sandbox described by
   * `config`. Returns 0 and stores a result the caller frees with
   * nsbox_result_free() whenever the program ran, whatever its outcome
   * (non-zero exit, timeout, memory kill). Fails when the sandbox could not be
   * set up: the error then says which step failed and why. Safe to call from
   * several threads at once with different or shared (unmodified) configs. */
  NSBOX_EXPORT int nsbox_run (const nsbox_config *config, const char *code, size_t code_len,
                              nsbox_result **result, struct nsbox_error **err);

  NSBOX_EXPORT void nsbox_result_free (nsbox_result *result);

  /* The program's exit status, or 128+N when signal N killed it; -1 when
   * a quota refused the run. */
  NSBOX_EXPORT int nsbox_result_exit_code (const nsbox_result *result);
  /* The signal that killed the program, or 0. */
  NSBOX_EXPORT int nsbox_result_signal (const nsbox_result *result);
  NSBOX_EXPORT bool nsbox_result_timed_out (const nsbox_result *result);
  NSBOX_EXPORT bool nsbox_result_oom_killed (const nsbox_result *result);
  /* Captured output (not NUL-terminated; may contain any byte), valid until the
   * result is freed; at most max-output-bytes of the program's bytes per
   * stream. With output-capture head-tail a cut stream holds its head, a
   * marker line "[nsbox: N bytes omitted]" (not counted in the cap) and its
   * tail. */
  NSBOX_EXPORT const char *nsbox_result_stdout (const nsbox_result *result, size_t *len);
  NSBOX_EXPORT const char *nsbox_result_stderr (const nsbox_result *result, size_t *len);
  /* The program wrote more than max-output-bytes to the stream. */
  NSBOX_EXPORT bool nsbox_result_stdout_truncated (const nsbox_result *result);
  NSBOX_EXPORT bool nsbox_result_stderr_truncated (const nsbox_result *result);
  /* How many bytes the program wrote to the stream that the captured output
   * lacks (0 when it is complete). */
  NSBOX_EXPORT uint64_t nsbox_result_stdout_omitted_bytes (const nsbox_result *result);
  NSBOX_EXPORT uint64_t nsbox_result_stderr_omitted_bytes (const nsbox_result *result);
  /* The timeout and the memory limit in force for the run (a pooled run's
   * own timeout when it gave one). */
  NSBOX_EXPORT uint64_t nsbox_result_timeout_ms (const nsbox_result *result);
  NSBOX_EXPORT uint64_t nsbox_result_memory_limit_bytes (const nsbox_result *result);
  NSBOX_EXPORT uint64_t nsbox_result_duration_ms (const nsbox_result *result);
  NSBOX_EXPORT uint64_t nsbox_result_cpu_ms (const nsbox_result *result);
  /* Peak memory of the sandbox in bytes, or 0 when no mechanism measured it. */
  NSBOX_EXPORT uint64_t nsbox_result_memory_peak_bytes (const nsbox_result *result);
  NSBOX_EXPORT enum nsbox_mechanism nsbox_result_limit (const nsbox_result *result,
                                                        enum nsbox_limit limit);
  /* "native" or "runsc". */
  NSBOX_EXPORT const char *nsbox_result_runtime (const nsbox_result *result);

  /* Whether a pool served the run with a sandbox started ahead of time
   * ("served": "warm" in the JSON) rather than one started for it ("cold":
   * every nsbox_run, and a pooled run that found no entry ready). */
  NSBOX_EXPORT bool nsbox_result_warm (const nsbox_result *result);

  /* The quota that refused the run ("runs-per-minute", "concurrent",
   * "cpu-time", "wall-time"; "quota_refusal" in the JSON), or NULL when no
   * quota refused it. A refused run started no sandbox and ran nothing: its
   * exit code is -1 and its other fields are zero. retry_after_ms says how
   * long until the same run would be admitted (0 when not refused). */
  NSBOX_EXPORT const char *nsbox_result_quota_refusal (const nsbox_result *result);
  NSBOX_EXPORT uint64_t nsbox_result_retry_after_ms (const nsbox_result *result);

  /* The files collected from /tmp/out into output-dir (sorted by name):
   * how many, and each one's name (as written in output-dir), size in bytes
   * and SHA-256 (64 lowercase hex digits). i out of range gives NULL or 0. */
  NSBOX_EXPORT size_t nsbox_result_file_count (const nsbox_result *result);
  NSBOX_EXPORT const char *nsbox_result_file_name (const nsbox_result *result, size_t i);
  NSBOX_EXPORT uint64_t nsbox_result_file_size (const nsbox_result *result, size_t i);
  NSBOX_EXPORT const char *nsbox_result_file_sha256 (const nsbox_result *result, size_t i);
  /* What was left in /tmp/out and not collected, each with the reason ("a
   * symbolic link", "a hard link (more than one name)", "already exists in
   * output-dir", ...). A name starting with '/' ("/tmp/out", "/tmp/out: more
   * refused", "/tmp/out: not examined") is about the directory or a
   * summary, never a file. The name may hold
   * any bytes but '/' and NUL. */
  NSBOX_EXPORT size_t nsbox_result_refused_count (const nsbox_result *result);
  NSBOX_EXPORT const char *nsbox_result_refused_name (const nsbox_result *result, size_t i);
  NSBOX_EXPORT const char *nsbox_result_refused_reason (const nsbox_result *result, size_t i);

  /* "none", "rlimit", "cgroup1", "cgroup2", "tmpfs". */
  NSBOX_EXPORT const char *nsbox_mechanism_name (enum nsbox_mechanism mechanism);

  /* The result as one JSON object (see README.md); stdout and stderr are
   * converted to valid UTF-8, invalid bytes replaced by U+FFFD. Caller frees. */
  NSBOX_EXPORT char *nsbox_result_to_json (const nsbox_result *result, struct nsbox_error **err);

  /* The result as plain text for a model to read, NUL-terminated valid
   * UTF-8 (the format is stable; README.md, "The text result"): the exit
   * code, what stopped the program in words ("timed out after 5s",
   * "killed: memory limit 256m exceeded", "killed by signal 9 (SIGKILL)",
   * "output truncated: N bytes omitted from stdout"), then stdout and
   * stderr under "--- stdout ---" and "--- stderr ---" ("(empty)" when
   * empty). A run a quota refused is two lines instead: "refused: this
   * session's quota Q (LIMIT) is used up; retry in T" and "the code did not
   * run (no sandbox was started)". Caller frees; NULL with err filled on
   * failure. */
  NSBOX_EXPORT char *nsbox_result_to_text (const nsbox_result *result, struct nsbox_error **err);

  /* The warm pool: sandboxes started ahead of time, each used for exactly
   * one run. An entry is a complete sandbox as nsbox_run builds it, its
   * command started and blocked reading its stdin; nsbox_pool_run takes one,
   * writes the code, closes stdin and supervises it like a cold run (the
   * timeout counts from this call), then destroys it. Background threads
   * refill the pool. An entry is never given a second run, never forked from
   * a shared parent, and is discarded past its max age, when the image's
   * rootfs or the seccomp policy file changes (checked every second), or when
   * anything about it is unexpected (its init died, its program left its
   * stdin read or wrote output before dispatch, or - native runtime - used
   * CPU). A pool with no entry ready serves the run cold; it never waits for
   * one. nsbox_run and nsbox_pool_run are not cancellation points: a
   * pthread_cancel takes effect after they return. */
  typedef struct nsbox_pool nsbox_pool;
  typedef struct nsbox_pool_options nsbox_pool_options;
  typedef struct nsbox_run_options nsbox_run_options;

  /* Pool options: "size" (entries kept started, 0 to 1024, default 2),
   * "max-age" (an idle entry's life, at least 1s, default 5m), "refill-concurrency"
   * (entries started at once, 1 to 64, default 1). */
  NSBOX_EXPORT nsbox_pool_options *nsbox_pool_options_new (struct nsbox_error **err);
  NSBOX_EXPORT int nsbox_pool_options_set (nsbox_pool_options *options, const char *key,
                                           const char *value, struct nsbox_error **err);
  NSBOX_EXPORT void nsbox_pool_options_free (nsbox_pool_options *options);

  /* Copies `config` (later changes to it do not reach the pool), pulls its
   * image once per its `pull` policy, and starts the refill threads. options
   * may be NULL (the defaults). The entries belong to this process: in a
   * child it forks, the copies of their fds are closed at once and the
   * pool serves every run cold (nsbox_pool_free there frees memory only). */
  NSBOX_EXPORT int nsbox_pool_new (const nsbox_config *config, const nsbox_pool_options *options,
                                   nsbox_pool **pool, struct nsbox_error **err);

  /* Per-run options for a pooled run: "timeout" and "max-output-bytes",
   * which may only be lower than the pool's; "session" (the audit log's
   * session id for this run); "inputs" ("PATH[:NAME]", each
   * call adds one; a run with inputs is served cold, as its sandbox needs
   * them from its start) and "output-dir" (native runtime only). Every
   * other configuration key needs a different sandbox and is refused
   * (-EINVAL). */
  NSBOX_EXPORT nsbox_run_options *nsbox_run_options_new (struct nsbox_error **err);
  NSBOX_EXPORT int nsbox_run_options_set (nsbox_run_options *options, const char *key,
                                          const char *value, struct nsbox_error **err);
  NSBOX_EXPORT void nsbox_run_options_free (nsbox_run_options *options);

  /* Output as it comes: `output` is called, on the thread doing the run,
   * with each piece the program writes to stdout (stream 1) or stderr
   * (stream 2), as soon as the launcher reads it, up to max-output-bytes of
   * each stream (what is past the cap is counted in the result, never
   * passed on). A piece may end inside a UTF-8 character. The result holds
   * the output as always. NULL output: none (the default). For
   * nsbox_pool_run and nsbox_sandbox_run. */
  typedef void (*nsbox_output_fn) (void *data, int stream, const char *bytes, size_t len);
  NSBOX_EXPORT void nsbox_run_options_set_output (nsbox_run_options *options,
                                                  nsbox_output_fn output, void *data);

  /* Like nsbox_run, with the pool's configuration; options may be NULL.
   * Thread-safe. duration_ms and cpu_ms count from this call;
   * memory_peak_bytes is the sandbox's peak since its program started, as
   * for a cold run. */
  NSBOX_EXPORT int nsbox_pool_run (nsbox_pool *pool, const char *code, size_t code_len,
                                   const nsbox_run_options *options, nsbox_result **result,
                                   struct nsbox_error **err);

  /* Destroys every entry and stops the refill threads. No nsbox_pool_run
   * may be in progress. NULL is allowed. */
  NSBOX_EXPORT void nsbox_pool_free (nsbox_pool *pool);

  /* A live sandbox for one conversation: one Python interpreter kept for
   * any number of runs, each run's code executed in the same __main__
   * namespace (variables, functions and imports survive), /tmp and the
   * working directory kept, a background process the code started left
   * running inside it. Built fresh with the pool's configuration (native
   * runtime; runsc refuses with ENOTSUP), never shared, and destroyed by
   * nsbox_sandbox_close. Memory, pids, cpu and tmp-size are the
   * sandbox's, for its whole life; timeout and max-output-bytes are each
   * run's. The driver that keeps the interpreter is inside the sandbox and
   * the program's to break: nothing the launcher enforces depends on it.
   *
   * Sandbox options, each by default the pool configuration's key of the
   * same name: "sandbox-max-runs" (0: no limit), "sandbox-max-lifetime"
   * and "sandbox-idle-timeout": a thread of the sandbox destroys it at
   * its idle timeout or lifetime's end (never during a run), and a run
   * asked for after any of them is refused (ESRCH); and "session" (the
   * audit log's and the quotas' label for its runs). */
  typedef struct nsbox_sandbox nsbox_sandbox;
  typedef struct nsbox_sandbox_options nsbox_sandbox_options;

  NSBOX_EXPORT nsbox_sandbox_options *nsbox_sandbox_options_new (struct nsbox_error **err);
  NSBOX_EXPORT int nsbox_sandbox_options_set (nsbox_sandbox_options *options, const char *key,
                                              const char *value, struct nsbox_error **err);
  NSBOX_EXPORT void nsbox_sandbox_options_free (nsbox_sandbox_options *options);

  /* Starts a sandbox with the pool's configuration; options may be NULL.
   * The pool must outlive it. */
  NSBOX_EXPORT int nsbox_sandbox_open (nsbox_pool *pool, const nsbox_sandbox_options *options,
                                       nsbox_sandbox **sandbox, struct nsbox_error **err);

  /* The sandbox's id: 32 lowercase hex digits (128 random bits). */
  NSBOX_EXPORT const char *nsbox_sandbox_id (const nsbox_sandbox *sandbox);

  /* One run in the sandbox, with the run options of nsbox_pool_run
   * ("timeout", "max-output-bytes", "session"; inputs and output-dir are
   * refused). The result says sandbox_id, sandbox_run (1, 2, ...) and
   * value, the repr of the code's last expression when it is one and not
   * None (NULL otherwise; at most max-output-bytes). A traceback goes to
   * stderr, exit code 1, and the interpreter survives it; SystemExit(N)
   * gives exit code N, the interpreter survives it too. At the timeout the
   * code is interrupted (KeyboardInterrupt, exit code 130, timed_out): the
   * state survives; code that does not return within 2 s of it gets the
   * sandbox killed (exit code 137, sandbox_lost). A sandbox whose program
   * died is lost too. After a loss every run fails with ESRCH saying why.
   * Thread-safe; one run at a time: a run while another is in progress on
   * the same sandbox fails at once with EBUSY. Output a background thread
   * or process writes after a run ended is the next run's. */
  NSBOX_EXPORT int nsbox_sandbox_run (nsbox_sandbox *sandbox, const char *code, size_t code_len,
                                      const nsbox_run_options *options, nsbox_result **result,
                                      struct nsbox_error **err);

  /* The value of the code's last expression (NUL-terminated, UTF-8 as the
   * code wrote it; len may be NULL), or NULL. */
  NSBOX_EXPORT const char *nsbox_result_value (const nsbox_result *result, size_t *len);
  /* For a run of a live sandbox: its id (else NULL), its run number (else
   * 0), and whether the sandbox is gone. */
  NSBOX_EXPORT const char *nsbox_result_sandbox_id (const nsbox_result *result);
  NSBOX_EXPORT uint64_t nsbox_result_sandbox_run (const nsbox_result *result);
  NSBOX_EXPORT bool nsbox_result_sandbox_lost (const nsbox_result *result);

  /* Kills everything of the sandbox and frees it; waits for a run in
   * progress. NULL is allowed. */
  NSBOX_EXPORT void nsbox_sandbox_close (nsbox_sandbox *sandbox);

#ifdef __cplusplus
}
#endif

#endif
