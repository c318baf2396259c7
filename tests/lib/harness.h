/* Helpers for the integration tests: run one piece of code in a real sandbox
 * through the nsbox CLI or through libnsbox, as root or as the unprivileged
 * test user, and observe the host around it.
 *
 * Environment:
 *   NSBOX_TEST_ROOTFS     the Python rootfs directory (required)
 *   NSBOX_BIN             the nsbox binary (default build/nsbox)
 *   NSBOX_TEST_USER       when set, every sandbox is started as this user
 *                         (the test binary itself stays root)
 *   NSBOX_TEST_MUST_WORK  1: every skip is a failure
 *   NSBOX_TEST_RUNTIME    when set (native, runsc), every run gets
 *                         --runtime VALUE (CLI) or runtime=VALUE (library)
 *                         before the case's own arguments
 *   NSBOX_TEST_CALIBRATION  a file shared by the workers of one pass, where
 *                         the first to need it records harness_time_scale
 *                         (run-tests.sh gives each pass a fresh one)
 *   NSBOX_TEST_TIME_SCALE a number >= 1 used instead of measuring
 *   NSBOX_TEST_REFERENCE_MS  the trivial run's time where the bounds were
 *                         tuned, for a place other than the host (the
 *                         check-vm guest)
 *   NSBOX_TEST_LAUNCHER_CGROUP  a cgroup v2 directory below which NSBOX_BIN,
 *                         a wrapper, starts each CLI launcher alone in a
 *                         fresh cgroup (check-vm's nsbox-scoped): for the
 *                         host probe (harness_expected_mechanism) */
#ifndef NSBOX_TEST_HARNESS_H
#define NSBOX_TEST_HARNESS_H

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <jansson.h>

#include "nsbox.h"

/* How a case reaches the launcher. */
enum run_mode
{
  RUN_CLI = 0, /* NSBOX_BIN run --rootfs ROOTFS --json EXTRA... */
  RUN_LIB,     /* nsbox_run() in a forked child */
};

struct run_out
{
  /* The exit status nsbox gave (CLI) or would give (library: computed from
   * the result with the CLI's rules: 124 timed out, 137 memory kill, 125
   * nsbox_run failed), or -1 when the launcher was killed by a signal. */
  int exit_status;
  int term_signal; /* signal that killed the launcher process, or 0 */
  /* CLI: its stdout and stderr. Library: the JSON result, and
   * "nsbox: <error message>\n" when nsbox_run or the configuration failed.
   * Both are NUL-terminated (the NUL is not counted). */
  char *out;
  size_t out_len;
  char *err;
  size_t err_len;
  double seconds;     /* wall time of the launcher process */
  json_t *json;       /* the parsed result, or NULL */
  json_t *json_error; /* or nsbox's own {"error", "stage"}, or NULL */
  long peak_rss_kb;   /* wait4 ru_maxrss of the launcher process */
  /* CLI: user plus system CPU seconds of the launcher and every process it
   * (or one of its descendants) waited for, as wait4 counts them: under
   * runsc, gVisor's own. Library: 0. */
  double cpu_seconds;
  /* Extra, for assertions and messages: */
  long base_rss_kb; /* library: RSS of the forked launcher before nsbox_run; CLI: 0 */
  pid_t pid;        /* pid of the launcher process (names its cgroups) */
  enum run_mode mode;
  bool as_json;
  bool non_dumpable; /* library run from a non-dumpable caller */
  char *description; /* built by run_describe() */
};

/* Configuration from the environment. Fails the test when unusable. */
const char *harness_rootfs (void);
const char *harness_nsbox_bin (void);
/* The test user's name, or NULL when sandboxes run as the harness's user. */
const char *harness_test_user (void);
bool harness_must_work (void);
/* NSBOX_TEST_RUNTIME, or "native" when unset: the runtime every run uses
 * and the result's `runtime` field is expected to name. */
const char *harness_runtime (void);
/* harness_runtime () is runsc: for the cases whose expectation differs
 * under gVisor (each says why). */
bool harness_is_runsc (void);
/* The host uid the sandbox's processes run as: 65534 when started by root,
 * else the (test) user's own uid. */
uid_t sandbox_host_uid (void);
gid_t sandbox_host_gid (void);

/* Speed. Every bound on how long something may take was chosen on a
 * machine where a trivial run ("pass") through the CLI took about
 * HARNESS_REFERENCE_NATIVE_S natively and HARNESS_REFERENCE_RUNSC_S under
 * runsc. harness_time_scale measures the same trivial run here and now
 * (median of five, as this pass's user and runtime, under whatever load the
 * machine has) and returns how many times slower it is, never less than 1:
 * time bounds are multiplied by it, so a verdict depends on containment,
 * not on the machine's speed. Measured once per pass (see
 * NSBOX_TEST_CALIBRATION) and logged. */
/* A test's Criterion `.timeout` is only a hang guard: every test ran in
 * less than an eighth of its own with two CPU hogs beside the suite. */
#define HARNESS_REFERENCE_NATIVE_S 0.025
#define HARNESS_REFERENCE_RUNSC_S 0.300
/* What ASan, LeakSanitizer and UBSan add to that trivial run in either
 * runtime on the same idle machine (startup, the leak scan at exit; 135
 * against 46 ms natively, 1065 against 980 ms under runsc): a sanitizer
 * build's reference is that much more, so that its time scale measures
 * the load, as in any other build, and not the sanitizers' fixed cost. */
#define HARNESS_SANITIZER_EXTRA_S 0.090
double harness_time_scale (void);
/* seconds * harness_time_scale () */
double harness_scaled (double seconds);
/* The same as a duration argument ("2300ms") in buf; returns buf. */
const char *harness_scaled_duration (double seconds, char *buf, size_t size);

/* The one skip macro: for genuinely missing kernel features only. */
#define NSBOX_SKIP_UNLESS(cond, reason)                                                            \
  do                                                                                               \
    {                                                                                              \
      if (!(cond))                                                                                 \
        {                                                                                          \
          if (harness_must_work ())                                                                \
            cr_assert_fail ("NSBOX_TEST_MUST_WORK=1 forbids skipping: %s", (reason));              \
          else                                                                                     \
            cr_skip_test ("%s", (reason));                                                         \
        }                                                                                          \
    }                                                                                              \
  while (0)

/* From now on, this test process starts every launcher (CLI or library
 * child) with its resource limits raised as far as it may (soft to hard;
 * RTPRIO 99 and NICE 40 where it has CAP_SYS_RESOURCE), as a systemd unit
 * with generous Limit*= settings would: nsbox must set the sandbox's own
 * limits whatever it inherited. */
void harness_raise_launcher_rlimits (void);
/* The limit a launcher started after harness_raise_launcher_rlimits has
 * (probed in a child that raises it the same way). */
struct rlimit harness_raised_rlimit (int resource);

/* Runs `code` through the CLI with --json. extra_args is NULL or a
 * NULL-terminated list of further CLI arguments ("--timeout", "1s", ...,
 * possibly "--", COMMAND...). */
void run_cli (const char *code, size_t len, const char *const *extra_args, struct run_out *out);
/* The same without --json: out/err are the program's raw output plus the
 * CLI's own notes on stderr. */
void run_cli_text (const char *code, size_t len, const char *const *extra_args,
                   struct run_out *out);
/* The CLI in steps, to watch the host while a sandbox runs: spawn, feed the
 * code (small code only: written at once), then wait. run_cli_wait feeds
 * `code` itself when run_job_feed was not called. */
struct run_job
{
  pid_t pid;
  int in_fd, out_fd, err_fd;
  double start;
  bool as_json;
};
void run_cli_spawn (const char *const *extra_args, bool as_json, struct run_job *job);
/* The same for any nsbox COMMAND; sandbox_args: --rootfs and the forced
 * runtime first, as run_cli_spawn gives `run`. */
void run_nsbox_spawn (const char *command, bool sandbox_args, const char *const *extra_args,
                      bool as_json, struct run_job *job);
void run_job_feed (struct run_job *job, const char *code, size_t len);
void run_cli_wait (struct run_job *job, const char *code, size_t len, struct run_out *out);
/* The same case through the library: the CLI-style extra arguments become
 * nsbox_config_load_yaml (--config), nsbox_config_set (--KEY VALUE,
 * --KEY=VALUE) and nsbox_config_set_command (-- COMMAND...). */
void run_lib (const char *code, size_t len, const char *const *extra_args, struct run_out *out);
/* run_lib from a caller that is not dumpable (PR_SET_DUMPABLE 0), as a
 * program that dropped root with setuid() without exec'ing is. */
void run_lib_non_dumpable (const char *code, size_t len, const char *const *extra_args,
                           struct run_out *out);
/* For other launchers built on the library (pool_job.c): */
/* Forks a launcher child set up as run_lib's: raised rlimits, the test user
 * when set, dies with the test worker. Returns 0 in the child. */
pid_t harness_fork_launcher (void);
/* Ends such a child: exit 0, or 23 when LeakSanitizer finds a leak. */
void harness_launcher_exit (void) __attribute__ ((noreturn));
/* The case's CLI-style arguments applied to a configuration, as run_lib. */
int harness_configure (nsbox_config *config, const char *const *args, struct nsbox_error **err);
/* A run_out from a result's JSON, or from an error message (json NULL). */
void harness_result_to_out (const char *json, const char *error, struct run_out *out);

/* A warm pool (nsbox_pool_*) in a forked launcher, driven one command at a
 * time. pool_start makes it with the case's arguments and pool `size`;
 * pool_run waits (bounded) until an entry is ready, then runs `code` with
 * per-run options ("timeout", "1s", ..., NULL) and fills `out` as run_lib;
 * out->seconds is the request's time in the launcher. */
struct pool_job
{
  pid_t pid;
  int cmd_fd, resp_fd;
};
void pool_start (const char *const *extra_args, unsigned size, struct pool_job *job);
void pool_run (struct pool_job *job, const char *code, const char *const *run_options,
               struct run_out *out);
/* Waits until at least n entries are ready; false after 30 s (scaled). */
bool pool_wait_ready (struct pool_job *job, unsigned n);
/* The pool's counters: runs served warm and cold, entries discarded. */
struct pool_counts
{
  unsigned long long warm, cold, discarded, started;
};
struct pool_counts pool_counts (struct pool_job *job);
/* The launcher forks a child that does not exec, runs in both, then once
 * more in the parent (pool_job.c, fork_check). */
struct pool_fork_outcome
{
  bool parent_ok, parent_warm; /* printed its text, not timed out; warm */
  int child_status;            /* 0: its run was served cold and printed */
  bool after_ok, after_warm;   /* the parent's run after the child freed its copy */
};
void pool_fork_check (struct pool_job *job, struct pool_fork_outcome *outcome);
/* While a proxied run (`code`, which prints "done") holds a connection, the
 * launcher forks a child that does not exec: the sockets and pipes the
 * child holds that the launcher did not hold before the run, and the new
 * sockets the launcher held when it forked. */
void pool_proxied_fork_check (struct pool_job *job, const char *code, int *child_new,
                              int *launcher_new_sockets, bool *run_ok);
/* Host pids of the entries' inits (the launcher's children). */
int pool_entry_pids (struct pool_job *job, pid_t *pids, int max);
/* nsbox_pool_free, then the launcher exits; asserts it ended cleanly. */
void pool_stop (struct pool_job *job);

/* `nsbox serve` as the test user (serve_job.c), on a unix socket in a
 * fresh directory of that user, with --rootfs, the forced runtime and the
 * case's arguments; serve_start waits until /v1/health answers. */
struct serve_job
{
  struct run_job job;
  char dir[64];
  char socket[128];
  char server_arg[160]; /* "unix:" socket, or the url */
  char url[64];         /* serve_start_tcp: "http://127.0.0.1:PORT" */
  uint16_t port;
  char auth[160]; /* serve_start_tcp: "Authorization: Bearer TOKEN" */
};
void serve_start (const char *const *extra_args, struct serve_job *s);
/* SIGTERM, then waits (bounded); returns the server's exit status and its
 * stderr in *log (caller frees; may be NULL). */
int serve_stop (struct serve_job *s, char **log);
/* serve_stop, asserting the server exited 0 (a sanitizer's report, a
 * failed drain would not). */
void serve_stop_ok (struct serve_job *s);
/* `nsbox run --server ... --json EXTRA` with `code` on stdin, like run_cli. */
void serve_run (struct serve_job *s, const char *code, const char *const *extra_args,
                struct run_out *out);
/* One HTTP request on the server's socket, or to http://HOST:PORT
 * (libcurl). Returns the status (-1 when no answer came);
 * *body (caller frees) the answer; *retry_after whether that header came.
 * headers: NULL-terminated "Name: value" list or NULL. */
long serve_http (const char *socket, const char *method, const char *path, const char *body,
                 size_t body_len, const char *const *headers, char **answer, bool *retry_after);
/* A free TCP port on 127.0.0.1 (bound, then released). */
uint16_t free_tcp_port (void);
/* serve_start on tcp:127.0.0.1:PORT with a token file (in s->dir) holding
 * `token`; s->url is "http://127.0.0.1:PORT", s->auth its Authorization
 * header, s->socket empty. */
void serve_start_tcp (const char *const *extra_args, const char *token, struct serve_job *s);

/* Raw HTTP/1.1 exchanges (http_raw.c): every byte of the request written,
 * a failed write recorded and never retried, the answer read whole. */
struct raw_peer
{
  const char *unix_path; /* the server's unix socket, or NULL: TCP */
  uint16_t port;         /* TCP to 127.0.0.1:port */
  const char *source;    /* TCP: the source address to bind (e.g. "127.0.0.2"), or NULL */
};
struct raw_answer
{
  long status;            /* -1: no status line came */
  bool retry_after, json; /* the headers had Retry-After, Content-Type: application/json */
  bool complete;          /* the head and Content-Length bytes of body came */
  bool closed, timed_out; /* the server closed; nothing more came in time */
  int write_errno;        /* the failed write's errno (EPIPE, ECONNRESET), or 0 */
  int read_errno;         /* the failed read's errno, or 0 */
  size_t sent, unsent;    /* request bytes written, and not */
  long long content_length;
  char *head; /* status line and headers (NUL-terminated) */
  char *body; /* into raw, NUL-terminated */
  char *raw;
  size_t raw_len, raw_alloc, body_at;
};
int raw_connect (const struct raw_peer *p);
/* "METHOD PATH HTTP/1.1" with Host, Content-Type: application/json,
 * Content-Length and, when auth is not NULL, "Authorization: Bearer auth";
 * caller frees. */
char *raw_request_head (const char *method, const char *path, size_t content_length,
                        const char *auth);
/* Writes head then body on fd while reading the answer, until the answer
 * is whole, the server closed, or timeout seconds passed; with stop_early
 * the writing stops once the answer's head came (a client that reads an
 * early answer, as curl does). */
void raw_exchange_on (int fd, const char *head, const char *body, size_t body_len, bool stop_early,
                      double timeout, struct raw_answer *a);
/* Connects, raw_exchange_on (not stopping early, harness_scaled (120)),
 * closes. */
void raw_exchange (const struct raw_peer *p, const char *head, const char *body, size_t body_len,
                   struct raw_answer *a);
void raw_answer_free (struct raw_answer *a);
/* Whether the server ended the connection (end of stream or reset) within
 * `seconds`; what it sends meanwhile is read and dropped. */
bool raw_closed_within (int fd, double seconds);
/* Raises this process's soft RLIMIT_NOFILE to want (asserts the hard
 * limit allows it). */
void raise_nofile (rlim_t want);
/* A field of /proc/PID/status in KiB (VmRSS, VmHWM). */
long proc_status_kib (pid_t pid, const char *field);
/* The sockets among PID's open fds (from /proc, not from nsbox). */
int proc_socket_count (pid_t pid);
/* The whole file (NUL-terminated; *len without the NUL), or NULL when it
 * cannot be opened. Caller frees. */
char *read_file (const char *path, size_t *len);
/* SHA-256 of data as 64 lowercase hex digits, computed here (libcrypto),
 * never taken from nsbox. */
void sha256_hex (const char *data, size_t len, char hex[65]);

/* Who launchers run as: *drop when the harness switches to the test user
 * (NSBOX_TEST_USER), with its uid and gid (else the harness's own). */
void harness_test_ids (bool *drop, uid_t *uid, gid_t *gid);

/* Directory of the test user (or of the harness's user) for files the
 * server must read: a fresh 0700 directory; free and rm -r it. */
char *user_dir (void);

/* CLOCK_MONOTONIC in seconds. */
double now_seconds (void);

/* Host processes seen from /proc. */
void sleep_seconds (double seconds);
/* Gone, or a zombie. */
bool process_gone (pid_t pid);
/* The children of every thread of pid; returns how many (at most max). */
int children_of (pid_t pid, pid_t *out, int max);
/* A used sandbox whose init is pid holds nothing any more: init is gone, or
 * it has no child left (it reported its program's end alone and is only
 * exiting). Every process of the sandbox descends from its init. */
bool sandbox_emptied (pid_t init);
int count_fds (pid_t pid);
long rss_kb (pid_t pid);

/* run_cli or run_lib. */
void run_mode (enum run_mode mode, const char *code, const char *const *extra_args,
               struct run_out *out);
void run_out_free (struct run_out *out);

const char *run_mode_name (enum run_mode mode);
/* A one-paragraph account of the run for failure messages. Valid until
 * run_out_free. */
const char *run_describe (struct run_out *out);

/* Assert with the run's account appended. */
#define RUN_ASSERT(out, cond, fmt, ...)                                                            \
  cr_assert ((cond), fmt "\n%s", ##__VA_ARGS__, run_describe (out))

/* Result fields; each asserts the JSON is there and the field has the type. */
json_t *run_json (struct run_out *out);
/* A member of a JSON object: a string (NULL when it is none), an integer
 * or a boolean (asserted to be one). */
const char *json_str_of (json_t *j, const char *key);
long long json_int_of (json_t *j, const char *key);
bool json_bool_of (json_t *j, const char *key);
long long run_json_int (struct run_out *out, const char *key);
bool run_json_bool (struct run_out *out, const char *key);
/* A string field, or NULL when it is JSON null. */
const char *run_json_str (struct run_out *out, const char *key, size_t *len);
/* limits.<name> */
const char *run_json_limit (struct run_out *out, const char *name);
/* JSON stdout/stderr (NUL-terminated; may contain NULs). */
const char *run_stdout (struct run_out *out, size_t *len);
const char *run_stderr (struct run_out *out, size_t *len);

/* The run completed, the program exited 0 and printed exactly `expected`. */
void assert_prints (struct run_out *out, const char *expected);
/* nsbox refused: exit 125, exactly one stderr line "nsbox: ..." containing
 * every NULL-terminated needle, and no stdout or (--json) the same message
 * as {"error": ..., "stage": ...}. */
void assert_refused (struct run_out *out, const char *const *needles);
/* That JSON error's stage ("input" or "run"), or NULL without one. */
const char *refusal_stage (const struct run_out *out);
/* What runsc refuses and the native runtime runs: under runsc
 * assert_refused with the needles, natively assert_prints `expected`. */
void assert_refused_by_runsc_else_prints (struct run_out *out, const char *const *needles,
                                          const char *expected);

/* A "NAME=VALUE" environment entry unique to this run, to find the
 * sandbox's processes on the host through /proc/PID/environ. */
void make_run_tag (char *buf, size_t size);

/* Code that starts a daemon (fork, setsid, fork) which re-executes
 * /bin/sleep 1000 with a run tag of its own as its whole environment, then
 * prints "started". `tag` receives that "NAME=VALUE", the needle for
 * count_uid_processes. */
void daemon_code (char *code, size_t size, char *tag, size_t tag_size);

/* Host TCP listener on 127.0.0.1 on an ephemeral port. */
int tcp_listener (uint16_t *port);
/* Whether a connection to the listener was completed. */
bool listener_was_connected (int fd);

/* A 0600 file holding `content` in a fresh 0700 directory; returns its path
 * (free it, and remove with remove_canary). */
char *canary_file (const char *content);
void remove_canary (char *path);
/* Opens `path` read-only WITHOUT O_CLOEXEC, so it is inherited by the
 * launcher, to check the sandbox cannot reach it. */
int open_inheritable (const char *path);

/* Processes with real uid `uid`; with `environ_needle`, only those whose
 * /proc/PID/environ contains it. A short list goes to desc. */
int count_uid_processes (uid_t uid, const char *environ_needle, char *desc, size_t desc_size);
/* Polls until count_uid_processes is 0 or timeout_ms (scaled by
 * harness_time_scale) passed; returns the last count. */
int wait_uid_processes_gone (uid_t uid, const char *environ_needle, int timeout_ms, char *desc,
                             size_t desc_size);

/* Host processes of gVisor (their executable is the runsc binary) that
 * belong to the runs of the launcher `launcher_pid` (their command line
 * names its work directory, nsbox-runsc-<pid>-* in /dev/shm or TMPDIR). */
int count_runsc_processes (pid_t launcher_pid, char *desc, size_t desc_size);
/* Polls count_runsc_processes until it is at least `at_least` (or, with
 * at_least 0, until it is 0) or timeout_ms (scaled by harness_time_scale)
 * passed; returns the last count. */
int wait_runsc_processes (pid_t launcher_pid, int at_least, int timeout_ms, char *desc,
                          size_t desc_size);
/* Whether a runsc binary is there (NSBOX_RUNSC or the usual directories). */
bool runsc_installed (void);

/* How many host processes have `marker` in their command line (from
 * /proc); and that count once it is `want`, or what it is after `seconds`
 * (scaled): a process just started or just killed may take a moment. */
int host_processes_with (const char *marker);
/* The pid of one of them, or 0. */
pid_t host_process_with (const char *marker);
int host_processes_become (const char *marker, int want, double seconds);

/* `nsbox repl --json` fed block by block (repl_job.c): a live sandbox of
 * the library's, its result lines read as they come. Its sandbox's
 * processes carry `tag` (make_run_tag) in their environment. */
#define REPL_MAX_RESULTS 32
struct repl_job
{
  struct run_job job;
  char buf[1 << 20];
  size_t len;
  json_t *results[REPL_MAX_RESULTS]; /* freed by repl_end */
  size_t n;
  double fed_at; /* when the last block was fed */
  char tag[64];
};
void repl_start (struct repl_job *r, const char *timeout);
/* With one more flag and its value (key NULL: none). */
void repl_start_with (struct repl_job *r, const char *timeout, const char *key, const char *value);
/* One block (an empty line ends it). */
void repl_feed (struct repl_job *r, const char *block);
/* The next result line, within `seconds` (scaled); NULL at EOF. */
json_t *repl_next (struct repl_job *r, double seconds);
/* Closes stdin, waits for the repl; its exit status, stderr in *err. */
int repl_end (struct repl_job *r, char **err);
/* Under runsc, a live sandbox is refused, saying so: true then. */
bool repl_runsc_refused (void);
/* Python: fd, the driver's answer pipe (the highest pipe the program has). */
#define REPL_FIND_ANSWER_FD                                                                        \
  "import os, stat\n"                                                                              \
  "def is_pipe(f):\n"                                                                              \
  "    try:\n"                                                                                     \
  "        return stat.S_ISFIFO(os.fstat(f).st_mode)\n"                                            \
  "    except OSError:\n"                                                                          \
  "        return False\n"                                                                         \
  "fd = [f for f in range(3, 64) if is_pipe(f)][-1]\n"

/* Whether any cgroup hierarchy is visible. */
bool have_cgroups (void);
/* Directories named nsbox-<launcher_pid>-* (any nsbox-* when launcher_pid
 * is 0) below the test process's own cgroup in every hierarchy. */
int count_nsbox_cgroups (pid_t launcher_pid, char *desc, size_t desc_size);

/* How this host can enforce a limit ("memory", "cpus" or "pids") for a
 * launcher started as `mode` starts one, by the user who launches the
 * sandboxes (the test user, else the harness's own): "cgroup2", "cgroup1",
 * "rlimit" or "none". Found without asking nsbox, from the cgroup mounts
 * (/proc/self/mountinfo), the test process's own cgroups (/proc/self/cgroup:
 * its launchers start there), the controllers each offers and whether that
 * user may write there:
 *   - cgroup v2, for memory and pids (and cpus with the cpu controller,
 *     else none). The test process's own cgroup does not count: nsbox
 *     cannot use a cgroup that holds other processes, the harness's. So:
 *     root, when the hierarchy's root has the memory and pids controllers
 *     (it may make a cgroup at the top); another user, through the CLI,
 *     when NSBOX_TEST_LAUNCHER_CGROUP is the user's to write and gives its
 *     children those controllers; or when the hierarchy's root has them
 *     and the user has a systemd user bus (a delegated scope);
 *   - else cgroup v1, per limit: the controller's hierarchy (memory, cpu
 *     with CFS quota files, pids) holds the test process in a directory
 *     that user may write;
 *   - else RLIMIT_AS for memory, RLIMIT_NPROC for pids, nothing for cpus.
 * Under runsc pids is always "rlimit" (gVisor's own RLIMIT_NPROC: the host
 * cannot see gVisor's tasks), memory and cpus as natively (README, runsc).
 * Probed once per test process and mode. */
const char *harness_expected_mechanism (enum run_mode mode, const char *limit);
/* What the probe found, one line, for failure messages. */
const char *harness_host_probe (enum run_mode mode);
/* limits.memory, limits.cpus and limits.pids of the run are what
 * harness_expected_mechanism says for its mode: a weaker mechanism than the
 * host offers fails, and so does a stronger one (a claim the host cannot
 * back). */
void assert_limit_mechanisms (struct run_out *out);

/* Counts, from the host, the tasks (threads included) of one native
 * sandbox while it runs: every task in the PID namespace of the process of
 * host uid sandbox_host_uid () whose environment holds `tag` (make_run_tag,
 * given with --env), the sandbox's init included. A process polls until
 * task_watch_stop, which returns the most tasks seen at once (0 when the
 * sandbox was never seen) and describes that moment in desc. gVisor's
 * tasks are not host tasks: under runsc the watch sees none. */
/* The PID namespace of /proc/PID ("self" too) as its link text, e.g.
 * "pid:[4026531836]"; false when it cannot be read. */
bool read_pid_ns (const char *pid, char *ns, size_t size);
/* Reads up to size - 1 bytes of path into buf, NUL-terminated, the
 * length in *len; false when it cannot be opened. */
bool read_whole (const char *path, char *buf, size_t size, size_t *len);

struct task_watch;
struct task_watch *task_watch_start (const char *tag);
int task_watch_stop (struct task_watch *watch, char *desc, size_t desc_size);

/* A fresh 0755 directory under /tmp that the test user can read (free it;
 * remove with remove_tree). */
char *make_public_dir (void);
void write_text_file (const char *path, const char *text, mode_t mode);
void remove_tree (const char *path);

/* Parameterised over the CLI and the library. Use as
 *   MODE_TEST (suite, name, .timeout = 30) { ... *mode ... } */
extern enum run_mode harness_modes[2];
#define MODE_TEST(suite, name, ...)                                                                \
  ParameterizedTestParameters (suite, name)                                                        \
  {                                                                                                \
    return cr_make_param_array (enum run_mode, harness_modes, 2);                                  \
  }                                                                                                \
  ParameterizedTest (enum run_mode *mode, suite, name, __VA_ARGS__)

#endif
