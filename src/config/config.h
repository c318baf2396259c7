/* Internal view of struct nsbox_config and the parsers behind the one
 * vocabulary of keys (shared by YAML, CLI flags, the C setter and JSON). */
#ifndef NSBOX_CONFIG_H
#define NSBOX_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "capture.h"
#include "image.h"
#include "nsbox.h"
#include "units.h"
#include "util.h"

#define NSBOX_EGRESS_PORTS_MAX 32
#define NSBOX_EGRESS_LIST_MAX 256
/* Runs of one session in flight at once, whatever quota-concurrent says. */
#define NSBOX_QUOTA_FLIGHTS_MAX 1024

enum nsbox_runtime
{
  NSBOX_RUNTIME_NATIVE = 0,
  NSBOX_RUNTIME_RUNSC,
  NSBOX_RUNTIME_AUTO,
};

struct nsbox_config
{
  char *image;  /* OCI reference, always set; rootfs wins when set */
  char *rootfs; /* unpacked root filesystem directory */
  enum nsbox_runtime runtime;
  uint64_t timeout_ms;       /* > 0 */
  uint64_t memory_bytes;     /* > 0 */
  uint64_t cpus_milli;       /* CPU bandwidth in thousandths of a CPU, > 0 */
  uint64_t pids_limit;       /* > 0 */
  uint64_t max_output_bytes; /* per stream */
  uint64_t tmp_size_bytes;   /* > 0 */
  char *network;             /* "none" or "proxy" */
  /* network: proxy (egress.h). Patterns and pins are kept normalised. */
  char **egress_allow; /* "name" or "*.name" */
  size_t egress_allow_len;
  char **egress_resolve; /* "name=address" */
  size_t egress_resolve_len;
  uint16_t egress_ports[NSBOX_EGRESS_PORTS_MAX]; /* CONNECT and http:// ports allowed */
  size_t egress_ports_len;                       /* 0: the default, 80 and 443 */
  uint64_t egress_connections;                   /* per run, > 0 */
  uint64_t egress_concurrent;                    /* at once, > 0 */
  uint64_t egress_bytes;                         /* per run, each way, > 0 */
  uint64_t egress_idle_ms;                       /* > 0 */
  uid_t uid;                                     /* inside the sandbox */
  gid_t gid;
  char **env; /* "NAME=VALUE", NULL-terminated, unique names */
  size_t env_len;
  char **command; /* NULL-terminated argv */
  size_t command_len;
  char **inputs; /* "PATH:NAME" (NAME always given), unique names */
  size_t inputs_len;
  char *output_dir; /* where files left in /tmp/out go, or NULL */
  enum nsbox_capture_mode output_capture;
  bool strict;
  char *seccomp_policy; /* path of a policy YAML; NULL: the built-in one */
  enum nsbox_pull_policy pull;
  char *store;     /* image store directory; NULL: $NSBOX_STORE or the default */
  char *audit_log; /* JSON Lines audit log: a path, or "fd:N"; NULL: none */
  bool audit_code; /* the audit record holds the code and its output */
  char *session;   /* the caller's session id, for the audit log and quotas; or NULL */
  uint64_t quota_runs_per_minute; /* per session; 0: no quota */
  uint64_t quota_concurrent;
  uint64_t quota_cpu_ms;
  uint64_t quota_wall_ms;
  uint64_t quota_window_ms; /* > 0 */
  /* A live sandbox's life (nsbox_sandbox_open): idle and total, from 1s
   * to the bounds below; runs, 0 for no limit. */
  uint64_t sandbox_idle_timeout_ms;
  uint64_t sandbox_max_lifetime_ms;
  uint64_t sandbox_max_runs;
  bool mcp_per_session;  /* mcp-state: per-session */
  char *quota_state_dir; /* the CLI's state files (quota.h), or NULL: this process */
  char **base_env;       /* an image's Env resolved outside the library (the CLI), or NULL */
  size_t base_env_len;
  char *image_digest; /* the manifest digest of `image` when the CLI resolved it to rootfs */
};

/* The key table, for the CLI: NULL-terminated list of key names and whether
 * each takes a value (strict is a boolean flag on the CLI). */
struct nsbox_key_info
{
  const char *name;
  const char *help;
  bool is_boolean;
  bool repeatable;
};
const struct nsbox_key_info *nsbox_config_keys (void) NSBOX_INTERNAL;

/* The bounds of the sandbox-* keys, which nsbox_sandbox_options_set
 * takes too. */
#define NSBOX_SANDBOX_IDLE_MAX_MS (24ULL * 60 * 60 * 1000)
#define NSBOX_SANDBOX_LIFETIME_MAX_MS (7 * NSBOX_SANDBOX_IDLE_MAX_MS)
#define NSBOX_SANDBOX_RUNS_MAX 1000000000ULL

/* A session id: 1 to NSBOX_SESSION_MAX letters, digits and ._:@+=/- */
#define NSBOX_SESSION_MAX 128
bool nsbox_session_valid (const char *value) NSBOX_INTERNAL;

/* Replaces the base environment (NAME=VALUE strings) that the configured
 * `env` is added to; NULL restores the bare-rootfs default. */
int nsbox_config_set_base_env (nsbox_config *config, const char *const *env, size_t len,
                               struct nsbox_error **err) NSBOX_INTERNAL;

/* The manifest digest of `image`, which the CLI resolved itself to the
 * `rootfs` it set: the run is then still the image's (the audit log). */
int nsbox_config_set_image_digest (nsbox_config *config, const char *digest,
                                   struct nsbox_error **err) NSBOX_INTERNAL;

/* Internal to the CLI: separate invocations share the quota accounting
 * through state files in dir (`<store>/quota`; NULL: this process). */
int nsbox_config_set_quota_state (nsbox_config *config, const char *dir,
                                  struct nsbox_error **err) NSBOX_INTERNAL;

/* Deep copy (used by nsbox_run to take a stable snapshot). */
nsbox_config *nsbox_config_dup (const nsbox_config *config,
                                struct nsbox_error **err) NSBOX_INTERNAL;

static inline void
nsbox_config_freep (nsbox_config **config)
{
  nsbox_config_free (*config);
}

#define cleanup_config __attribute__ ((cleanup (nsbox_config_freep)))

#endif
