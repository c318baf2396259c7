/* Sessions and quotas: per session, runs per minute (a token bucket),
 * concurrent runs, and CPU and wall time per rolling window. Checked before
 * a sandbox starts; a refused run starts nothing. The accounting lives in
 * this process (the library and the servers), or, for separate CLI
 * invocations, in a locked state file per session under the image store. */
#ifndef NSBOX_QUOTA_H
#define NSBOX_QUOTA_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "error.h"
#include "result.h"
#include "util.h"

/* The window is kept as this many buckets of window/60 each. */
#define NSBOX_QUOTA_BUCKETS 60
/* What one run may use at most, reserved at admission. */
struct nsbox_quota_limits
{
  uint64_t runs_per_minute; /* 0: no limit */
  uint64_t concurrent;
  uint64_t cpu_ms;
  uint64_t wall_ms;
  uint64_t window_ms; /* > 0 */
};

struct nsbox_quota_flight
{
  uint64_t id;
  pid_t pid;          /* the launcher holding it (state files) */
  uint64_t starttime; /* its /proc/PID/stat start time, against pid reuse */
  uint64_t started_ms;
  uint64_t deadline_ms; /* when it must have ended (its timeout) */
  uint64_t cpu_ms;      /* reserved */
  uint64_t wall_ms;
};

struct nsbox_quota_bucket
{
  uint64_t epoch; /* realtime / (window/60); 0: empty */
  uint64_t cpu_ms;
  uint64_t wall_ms;
};

/* One session's accounting, the same in memory and in a state file. */
struct nsbox_quota_session
{
  uint64_t window_ms; /* of the buckets (usage under another is moved, not lost) */
  uint64_t tat_us;    /* the token bucket as GCRA: theoretical arrival time */
  struct nsbox_quota_bucket buckets[NSBOX_QUOTA_BUCKETS];
  struct nsbox_quota_flight *flights;
  size_t n_flights;
};

/* The decision for one run at now_ms: NSBOX_QUOTA_NONE and the flight
 * recorded in s (flight->id, pid and starttime set by the caller), or the
 * quota that refuses it and how long until it would not (s unchanged).
 * need_cpu_ms and need_wall_ms are what the run may use at most. -EINVAL
 * when no wait could ever admit it (it needs more than a whole quota),
 * -ENOMEM. */
int nsbox_quota_decide (struct nsbox_quota_session *s, const struct nsbox_quota_limits *l,
                        uint64_t now_ms, struct nsbox_quota_flight *flight,
                        enum nsbox_quota_kind *refused, uint64_t *retry_after_ms,
                        struct nsbox_error **err) NSBOX_INTERNAL;

/* Ends a flight: its reservation replaced by what it used (charged even
 * when the flight is no longer there). */
void nsbox_quota_settle (struct nsbox_quota_session *s, uint64_t id, uint64_t now_ms,
                         uint64_t cpu_ms, uint64_t wall_ms) NSBOX_INTERNAL;

/* Nothing left to remember at now_ms: no run in flight, a full token
 * bucket, an empty window (the process's table forgets such a session). */
bool nsbox_quota_idle (const struct nsbox_quota_session *s, uint64_t now_ms) NSBOX_INTERNAL;

/* The state file's text and back (-EBADMSG naming the line). */
char *nsbox_quota_format (const struct nsbox_quota_session *s) NSBOX_INTERNAL;
int nsbox_quota_parse (const char *text, struct nsbox_quota_session *s,
                       struct nsbox_error **err) NSBOX_INTERNAL;
void nsbox_quota_session_clear (struct nsbox_quota_session *s) NSBOX_INTERNAL;

/* ---- the gate around a run (quota_gate.c) ---- */

struct nsbox_quota_ticket
{
  bool active; /* a quota applies and a flight was recorded */
  char *key;   /* the session ("" for none) */
  uint64_t id;
  uint64_t started_ms;
  uint64_t reserved_cpu_ms; /* charged whole when the run ends without a result */
  char *state_dir;          /* the state files' directory, or NULL: this process */
};

struct nsbox_quota_refusal
{
  enum nsbox_quota_kind kind;
  uint64_t retry_after_ms;
};

/* Whether any quota key is set. */
bool nsbox_quota_configured (const nsbox_config *c) NSBOX_INTERNAL;

/* Before a run of `session` (NULL: the config's) that may last timeout_ms:
 * 0 with the ticket held (ticket->active false when no quota is set), 1
 * with *refusal filled when a quota refuses it, or -errno. */
int nsbox_quota_enter (const nsbox_config *c, const char *session, uint64_t timeout_ms,
                       struct nsbox_quota_ticket *ticket, struct nsbox_quota_refusal *refusal,
                       struct nsbox_error **err) NSBOX_INTERNAL;

/* After the run: charges what it used (the result's cpu_ms and
 * duration_ms; with no result - an error, a client that hung up - its whole
 * CPU reservation and the time since enter) and
 * releases the ticket. Never fails the run: a state file that cannot be
 * written keeps the reservation, which a reader charges in full once this
 * launcher has exited. */
void nsbox_quota_leave (struct nsbox_quota_ticket *ticket,
                        const nsbox_result *result) NSBOX_INTERNAL;

/* nsbox_quota_enter for nsbox_run and nsbox_pool_run: 0 admitted, or 1
 * with *refused the result of the refused run. */
int nsbox_quota_admit (const nsbox_config *c, const char *session, uint64_t timeout_ms,
                       struct nsbox_quota_ticket *ticket, nsbox_result **refused,
                       struct nsbox_error **err) NSBOX_INTERNAL;

#endif
