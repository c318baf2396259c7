/* Internal view of struct nsbox_result. */
#ifndef NSBOX_RESULT_H
#define NSBOX_RESULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"
#include "nsbox.h"

/* The quota that refused a run (quota_refusal). */
enum nsbox_quota_kind
{
  NSBOX_QUOTA_NONE = 0,
  NSBOX_QUOTA_RATE,       /* quota-runs-per-minute */
  NSBOX_QUOTA_CONCURRENT, /* quota-concurrent */
  NSBOX_QUOTA_CPU,        /* quota-cpu-time */
  NSBOX_QUOTA_WALL,       /* quota-wall-time */
};

/* "runs-per-minute", "concurrent", "cpu-time", "wall-time" ("" for none). */
const char *nsbox_quota_kind_name (enum nsbox_quota_kind kind) NSBOX_INTERNAL;

/* A file collected from /tmp/out, and an entry that was not. */
/* A live sandbox's id: 32 lowercase hex digits, or NODE.HEX for one a
 * server's node opened (a DNS label of at most 63 bytes, a dot, the hex). */
#define NSBOX_SANDBOX_ID_SIZE (63 + 1 + 32 + 1)

struct nsbox_result_file
{
  char *name;
  uint64_t size;
  char sha256[65]; /* lowercase hex */
};

struct nsbox_result_refusal
{
  char *name;
  char *reason;
};

struct nsbox_result
{
  int exit_code; /* status, or 128+signal */
  int signal;    /* 0 when none */
  bool timed_out;
  bool oom_killed;
  char *stdout_buf;
  size_t stdout_len;
  char *stderr_buf;
  size_t stderr_len;
  bool stdout_truncated;
  bool stderr_truncated;
  uint64_t stdout_omitted; /* bytes of the stream not in stdout_buf */
  uint64_t stderr_omitted;
  uint64_t duration_ms;
  uint64_t cpu_ms;
  uint64_t memory_peak_bytes;
  uint64_t timeout_ms; /* the limits in force for this run */
  uint64_t memory_limit_bytes;
  enum nsbox_mechanism limits[NSBOX_LIMIT_COUNT_];
  const char *runtime;             /* static string */
  bool warm;                       /* served by a pooled sandbox started ahead of time */
  struct nsbox_result_file *files; /* collected into output-dir, by name */
  size_t n_files;
  struct nsbox_result_refusal *refused;
  size_t n_refused;
  char policy_sha256[65]; /* the seccomp filter's BPF digest, when audited; "" otherwise */
  char image_digest[80];  /* the image's manifest digest; "" for a plain rootfs */
  /* A run a quota refused (no sandbox started): the quota's name (static),
   * its limit as configured, and how long until it would be admitted. */
  const char *quota_refusal;
  char quota_limit[32];
  uint64_t retry_after_ms;
  /* network: proxy: the egress report (egress.h), a JSON object; or NULL. */
  struct json_t *egress;
  /* A run of a live sandbox (nsbox_sandbox_run): which sandbox and which of
   * its runs, whether its state is gone, and the repr of the code's last
   * expression (NULL when it had none, or it was None). */
  bool in_sandbox;
  bool sandbox_lost;
  char sandbox_id[NSBOX_SANDBOX_ID_SIZE];
  uint64_t sandbox_run;
  char *value;
  size_t value_len;
};

/* The result of a run a quota refused: exit code -1, nothing else. */
nsbox_result *nsbox_result_refused (const char *quota, const char *limit, uint64_t retry_after_ms,
                                    uint64_t timeout_ms) NSBOX_INTERNAL;

/* Copies `len` bytes as valid UTF-8 into a new NUL-terminated buffer:
 * invalid sequences become U+FFFD, NUL bytes are kept (hence *out_len). */
int nsbox_utf8_sanitize (const char *in, size_t len, char **out, size_t *out_len) NSBOX_INTERNAL;

/* `text` on one line of a terminal: valid UTF-8, every C0 and C1 control
 * character and DEL as '?'. Caller frees; NULL when out of memory. */
char *nsbox_printable (const char *text) NSBOX_INTERNAL;

/* "SIGKILL", "SIGRTMIN+2", "SIG99": the name the JSON result gives. */
void nsbox_signal_name (int sig, char *name, size_t size) NSBOX_INTERNAL;

/* The JSON result as a jansson object (a new reference; NULL when out of
 * memory), members in their documented order. */
struct json_t *nsbox_result_json_value (const nsbox_result *result) NSBOX_INTERNAL;

/* A result rebuilt from its JSON form (a server's answer), so that it is
 * shown exactly as a local one. -EBADMSG when a required member (exit_code,
 * stdout, stderr) is missing or any member has the wrong type. */
int nsbox_result_from_json (const char *json, size_t len, nsbox_result **result,
                            struct nsbox_error **err) NSBOX_INTERNAL;

#endif
