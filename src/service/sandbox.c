/* Live sandboxes (nsbox_sandbox_*): one sandbox, with its driver
 * (src/runtime/live.c), kept for the runs of one conversation. Each run
 * passes the admission and audit gate like a single run, with the
 * sandbox's id in its record. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "error.h"
#include "files.h"
#include "gate.h"
#include "launch.h"
#include "pool-private.h"
#include "pool.h"
#include "sandbox-private.h"
#include "supervise.h"
#include "units.h"
#include "util.h"

/* Each field UINT64_MAX (session NULL): the pool's configuration's. */
struct nsbox_sandbox_options
{
  uint64_t idle_timeout_ms;
  uint64_t max_lifetime_ms;
  uint64_t max_runs; /* 0: no limit */
  char *session;
  char node[64]; /* the id's NODE. prefix, or "" */
};

struct nsbox_sandbox
{
  pthread_mutex_t lock; /* held for a whole run */
  nsbox_pool *pool;
  struct nsbox_launch *launch; /* NULL once gone */
  char id[NSBOX_SANDBOX_ID_SIZE];
  struct nsbox_sandbox_options options;
  uint64_t runs;
  uint64_t opened_ms;
  char gone[160]; /* why it is gone, once it is */
  /* The watcher: a thread that destroys the sandbox at its idle timeout or
   * its lifetime's end, whether or not anyone asks for a run again. */
  pthread_mutex_t watch_lock;
  pthread_cond_t watch_wake;
  pthread_t watcher;
  bool watching, closing;
  bool busy;      /* a run was asked for and is not over (watch_lock) */
  bool ended;     /* its processes are being or were destroyed (watch_lock) */
  bool started;   /* the watcher started it, or failed to (watch_lock) */
  bool warm;      /* taken from the pool's live entries */
  pid_t init_pid; /* its init, and init's PID namespace, for its memory */
  uint64_t init_pidns;
  int start_status;
  struct nsbox_error *start_err;
  pid_t owner;      /* the process whose thread the watcher is */
  uint64_t last_ms; /* the end of the last run (watch_lock) */
};

nsbox_sandbox_options *
nsbox_sandbox_options_new (struct nsbox_error **err)
{
  nsbox_sandbox_options *o = calloc (1, sizeof *o);
  if (!o)
    {
      nsbox_error_oom (err);
      return NULL;
    }
  o->idle_timeout_ms = o->max_lifetime_ms = o->max_runs = UINT64_MAX;
  return o;
}

void
nsbox_sandbox_options_free (nsbox_sandbox_options *o)
{
  if (!o)
    return;
  free (o->session);
  free (o);
}

void
nsbox_sandbox_options_set_node (nsbox_sandbox_options *o, const char *node)
{
  snprintf (o->node, sizeof o->node, "%s", node);
}

int
nsbox_sandbox_options_set (nsbox_sandbox_options *o, const char *key, const char *value,
                           struct nsbox_error **err)
{
  if (!o || !key || !value)
    return nsbox_error_set (err, EINVAL, "nsbox_sandbox_options_set: invalid arguments");
  uint64_t v = 0;
  if (strcmp (key, "sandbox-idle-timeout") == 0 || strcmp (key, "sandbox-max-lifetime") == 0)
    {
      /* The bounds of the configuration keys of the same names. */
      bool idle = strcmp (key, "sandbox-idle-timeout") == 0;
      uint64_t max = idle ? NSBOX_SANDBOX_IDLE_MAX_MS : NSBOX_SANDBOX_LIFETIME_MAX_MS;
      if (nsbox_parse_duration (value, &v) < 0 || v < 1000 || v > max)
        return nsbox_error_set (err, EINVAL,
                                "invalid value '%s' for '%s': expected a duration from 1s to %s "
                                "such as 90s, 10m or 1h",
                                value, key, idle ? "24h" : "7 days");
      *(idle ? &o->idle_timeout_ms : &o->max_lifetime_ms) = v;
      return 0;
    }
  if (strcmp (key, "sandbox-max-runs") == 0)
    {
      if (nsbox_parse_count (value, &v) < 0 || v > NSBOX_SANDBOX_RUNS_MAX)
        return nsbox_error_set (err, EINVAL,
                                "invalid value '%s' for 'sandbox-max-runs': expected a number "
                                "of runs (0: no limit)",
                                value);
      o->max_runs = v;
      return 0;
    }
  if (strcmp (key, "session") == 0)
    {
      if (!nsbox_session_valid (value))
        return nsbox_error_set (err, EINVAL,
                                "invalid value for sandbox option 'session': expected 1 to 128 "
                                "letters, digits and ._:@+=/-");
      char *copy = strdup (value);
      if (!copy)
        return nsbox_error_oom (err);
      free (o->session);
      o->session = copy;
      return 0;
    }
  return nsbox_error_set (err, EINVAL,
                          "unknown sandbox option '%s' (expected sandbox-idle-timeout, "
                          "sandbox-max-lifetime, sandbox-max-runs or session)",
                          key);
}

int
nsbox_sandbox_options_within (const nsbox_sandbox_options *o, const nsbox_config *c,
                              struct nsbox_error **err)
{
  const struct
  {
    const char *key;
    uint64_t asked, most; /* 0: no limit */
  } keys[] = {
    { "sandbox-idle-timeout", o->idle_timeout_ms, c->sandbox_idle_timeout_ms },
    { "sandbox-max-lifetime", o->max_lifetime_ms, c->sandbox_max_lifetime_ms },
    { "sandbox-max-runs", o->max_runs, c->sandbox_max_runs },
  };
  for (size_t i = 0; i < ARRAY_SIZE (keys); i++)
    if (keys[i].asked != UINT64_MAX && keys[i].most
        && (keys[i].asked == 0 || keys[i].asked > keys[i].most))
      {
        cleanup_free char *most = nsbox_config_get (c, keys[i].key, NULL);
        return nsbox_error_set (err, EINVAL,
                                "'%s' may only shorten the profile's (%s): configure a profile "
                                "instead",
                                keys[i].key, most ? most : "?");
      }
  return 0;
}

static int check_life (nsbox_sandbox *s, struct nsbox_error **err);

/* When the sandbox's life ends if no run comes first. */
static uint64_t
watch_deadline (const nsbox_sandbox *s)
{
  uint64_t end
      = s->options.max_lifetime_ms ? s->opened_ms + s->options.max_lifetime_ms : UINT64_MAX;
  if (s->options.idle_timeout_ms && s->last_ms + s->options.idle_timeout_ms < end)
    end = s->last_ms + s->options.idle_timeout_ms;
  return end;
}

/* Locked watch_lock: sleeps until the monotonic time `until` (ms), or a
 * signal. */
static void
watch_sleep (nsbox_sandbox *s, uint64_t until)
{
  uint64_t now = nsbox_now_ms ();
  if (until <= now)
    return;
  struct timespec ts = nsbox_monotonic_after (until - now > 3600000 ? 3600000 : until - now);
  pthread_cond_timedwait (&s->watch_wake, &s->watch_lock, &ts);
}

/* A run in progress holds the sandbox's lock: the watcher looks again
 * shortly after (the run's end moves the idle deadline anyway). */
#define WATCH_RETRY_MS 100

/* The watcher starts the sandbox too, when the pool has none ready: its
 * init's parent-death signal follows the thread that created it, so a
 * sandbox opened from a short-lived thread (a server's connection) must
 * not be that thread's. (A warm one's is the pool's refill thread, which
 * lives until the pool is freed.) It lives as long as the sandbox, and its
 * end kills what is left. */
static void *
watch (void *arg)
{
  nsbox_sandbox *s = arg;
  struct nsbox_launch *launch = NULL;
  struct nsbox_error *err = NULL;
  /* From the warm pool when it has one ready; else cold, here. */
  int r = 0;
  launch = nsbox_pool_take_sandbox (s->pool);
  bool cold = !launch;
  if (cold)
    r = nsbox_launch_start_live (nsbox_pool_config (s->pool), &launch, &err);
  /* Its memory is counted over its PID namespace, found from its program
   * once init has started it (a moment), before it is given any code. */
  pid_t init_pid = 0;
  uint64_t init_pidns = 0;
  for (int i = 0; r >= 0 && !init_pidns && i < 400; i++)
    {
      nsbox_launch_identity (launch, &init_pid, &init_pidns);
      if (!init_pidns)
        usleep (5000);
    }
  pthread_mutex_lock (&s->watch_lock);
  s->init_pid = init_pid;
  s->init_pidns = init_pidns;
  s->launch = launch;
  s->start_status = r;
  s->start_err = err;
  s->started = true;
  s->warm = r >= 0 && !cold;
  s->opened_ms = s->last_ms = nsbox_now_ms ();
  pthread_cond_broadcast (&s->watch_wake);
  while (r >= 0 && !s->closing)
    {
      uint64_t deadline = watch_deadline (s), now = nsbox_now_ms ();
      if (now < deadline)
        {
          watch_sleep (s, deadline);
          continue;
        }
      pthread_mutex_unlock (&s->watch_lock);
      bool gone = false;
      if (pthread_mutex_trylock (&s->lock) == 0)
        {
          check_life (s, NULL);
          gone = !s->launch;
          pthread_mutex_unlock (&s->lock);
        }
      pthread_mutex_lock (&s->watch_lock);
      if (gone)
        break;
      if (!s->closing)
        watch_sleep (s, nsbox_now_ms () + WATCH_RETRY_MS);
    }
  pthread_mutex_unlock (&s->watch_lock);
  return NULL;
}

int
nsbox_sandbox_open (nsbox_pool *pool, const nsbox_sandbox_options *options, nsbox_sandbox **out,
                    struct nsbox_error **err)
{
  if (!pool || !out)
    return nsbox_error_set (err, EINVAL, "nsbox_sandbox_open: invalid arguments");
  nsbox_sandbox *s = calloc (1, sizeof *s);
  if (!s)
    return nsbox_error_oom (err);
  const nsbox_config *c = nsbox_pool_config (pool);
  s->options.idle_timeout_ms = c->sandbox_idle_timeout_ms;
  s->options.max_lifetime_ms = c->sandbox_max_lifetime_ms;
  s->options.max_runs = c->sandbox_max_runs;
  if (options && options->idle_timeout_ms != UINT64_MAX)
    s->options.idle_timeout_ms = options->idle_timeout_ms;
  if (options && options->max_lifetime_ms != UINT64_MAX)
    s->options.max_lifetime_ms = options->max_lifetime_ms;
  if (options && options->max_runs != UINT64_MAX)
    s->options.max_runs = options->max_runs;
  if (options && options->session && !(s->options.session = strdup (options->session)))
    {
      free (s);
      return nsbox_error_oom (err);
    }
  char hex[33];
  int r = nsbox_random_id (hex);
  if (r < 0)
    {
      free (s->options.session);
      free (s);
      return nsbox_error_sys (err, -r, "choose the sandbox's id");
    }
  if (options && options->node[0])
    snprintf (s->id, sizeof s->id, "%s.%s", options->node, hex);
  else
    memcpy (s->id, hex, sizeof hex);
  pthread_mutex_init (&s->lock, NULL);
  pthread_mutex_init (&s->watch_lock, NULL);
  nsbox_cond_init_monotonic (&s->watch_wake);
  s->pool = pool;
  s->owner = getpid ();
  /* Without its watcher a sandbox would outlive its timeouts: none, no
   * sandbox. */
  if ((r = pthread_create (&s->watcher, NULL, watch, s)) != 0)
    {
      nsbox_sandbox_close (s);
      return nsbox_error_sys (err, r, "start the sandbox's watcher thread");
    }
  s->watching = true;
  pthread_mutex_lock (&s->watch_lock);
  while (!s->started)
    pthread_cond_wait (&s->watch_wake, &s->watch_lock);
  r = s->start_status;
  pthread_mutex_unlock (&s->watch_lock);
  if (r < 0)
    {
      if (err)
        *err = TAKE_PTR (s->start_err);
      nsbox_sandbox_close (s);
      return r;
    }
  *out = s;
  return 0;
}

const char *
nsbox_sandbox_id (const nsbox_sandbox *s)
{
  return s ? s->id : NULL;
}

/* Locked. Destroys what is left of the sandbox, saying why. */
static void
sandbox_end (nsbox_sandbox *s, const char *why)
{
  pthread_mutex_lock (&s->watch_lock);
  if (!s->gone[0])
    snprintf (s->gone, sizeof s->gone, "%s", why);
  s->ended = true;
  pthread_mutex_unlock (&s->watch_lock);
  if (s->launch)
    {
      nsbox_launch_destroy (s->launch);
      s->launch = NULL;
    }
}

/* Locked: a run past the sandbox's life ends it. */
static int
check_life (nsbox_sandbox *s, struct nsbox_error **err)
{
  uint64_t now = nsbox_now_ms ();
  pthread_mutex_lock (&s->watch_lock);
  uint64_t last = s->last_ms;
  pthread_mutex_unlock (&s->watch_lock);
  if (s->launch && s->options.max_lifetime_ms && now - s->opened_ms >= s->options.max_lifetime_ms)
    sandbox_end (s, "it reached its sandbox-max-lifetime");
  else if (s->launch && s->options.idle_timeout_ms && now - last >= s->options.idle_timeout_ms)
    sandbox_end (s, "it stayed idle past its sandbox-idle-timeout");
  else if (s->launch && s->options.max_runs && s->runs >= s->options.max_runs)
    sandbox_end (s, "it reached its sandbox-max-runs");
  if (!s->launch)
    return nsbox_error_set (err, ESRCH, "sandbox %s is gone (%s): open a new one", s->id,
                            s->gone[0] ? s->gone : "closed");
  return 0;
}

struct sandbox_turn
{
  nsbox_sandbox *s;
  const struct nsbox_dispatch *d;
  const struct nsbox_inputs *inputs;
};

static int
sandbox_turn (void *ctx, nsbox_result **out, struct nsbox_error **err)
{
  struct sandbox_turn *t = ctx;
  nsbox_sandbox *s = t->s;
  /* Admitted: the inputs go in now, or the run does not happen. */
  int placed = nsbox_launch_place_inputs (s->launch, t->inputs, err);
  if (placed < 0)
    return placed;
  nsbox_result *res = calloc (1, sizeof *res);
  if (!res)
    return nsbox_error_oom (err);
  pthread_mutex_lock (&s->watch_lock);
  uint64_t run = ++s->runs;
  pthread_mutex_unlock (&s->watch_lock);
  int r = nsbox_launch_turn (s->launch, run, t->d, res, err);
  memcpy (res->sandbox_id, s->id, sizeof res->sandbox_id);
  if (res->sandbox_lost)
    {
      char why[128];
      if (res->timed_out)
        snprintf (why, sizeof why, "run %" PRIu64 " did not return within 2s of its timeout", run);
      else
        snprintf (why, sizeof why, "its program ended in run %" PRIu64 " (exit code %d)", run,
                  res->exit_code);
      sandbox_end (s, why);
    }
  if (r < 0)
    {
      nsbox_result_free (res);
      return r;
    }
  *out = res;
  return 0;
}

int
nsbox_sandbox_run (nsbox_sandbox *s, const char *code, size_t code_len,
                   const nsbox_run_options *options, nsbox_result **out, struct nsbox_error **err)
{
  if (!s || !out || (!code && code_len))
    return nsbox_error_set (err, EINVAL, "nsbox_sandbox_run: invalid arguments");
  /* Busy only with another run: the watcher holds the lock for a moment
   * only, and is waited for. */
  pthread_mutex_lock (&s->watch_lock);
  bool busy = s->busy;
  s->busy = true;
  pthread_mutex_unlock (&s->watch_lock);
  if (busy)
    return nsbox_error_set (err, EBUSY, "sandbox %s is running another run: one at a time", s->id);
  pthread_mutex_lock (&s->lock);
  struct nsbox_dispatch d;
  const nsbox_config *c = nsbox_pool_config (s->pool);
  /* Files: the inputs opened on the host now, copied in once the run is
   * admitted; the output directory, the run's or the configuration's. */
  const char *output_dir = options && options->output_dir ? options->output_dir : c->output_dir;
  cleanup_close int output_dir_fd = -1;
  struct nsbox_inputs inputs = { 0 };
  int r = check_life (s, err);
  if (r >= 0)
    r = nsbox_pool_dispatch (s->pool, options, code, code_len, &d, err);
  if (r >= 0 && output_dir)
    r = nsbox_output_dir_open (output_dir, &output_dir_fd, err);
  if (r >= 0 && options && options->inputs_len)
    r = nsbox_inputs_open (options->inputs, options->inputs_len, &inputs, err);
  if (r < 0)
    {
      pthread_mutex_lock (&s->watch_lock);
      s->busy = false;
      pthread_mutex_unlock (&s->watch_lock);
      pthread_mutex_unlock (&s->lock);
      return r;
    }
  d.output_dir_fd = output_dir_fd;
  struct sandbox_turn t = { .s = s, .d = &d, .inputs = &inputs };
  const char *session = options && options->session ? options->session : s->options.session;
  struct nsbox_gate gate = {
    .config = c,
    .session = session,
    .client = options ? options->client : NULL,
    .quota_scope = options ? options->quota_scope : NULL,
    .sandbox_id = s->id,
    .code = code,
    .code_len = code_len,
    .timeout_ms = d.timeout_ms,
  };
  bool refused;
  r = nsbox_gate_run (&gate, sandbox_turn, &t, out, &refused, err);
  nsbox_inputs_close (&inputs);
  pthread_mutex_lock (&s->watch_lock);
  s->last_ms = nsbox_now_ms ();
  s->busy = false;
  pthread_cond_signal (&s->watch_wake);
  pthread_mutex_unlock (&s->watch_lock);
  pthread_mutex_unlock (&s->lock);
  return r;
}

void
nsbox_sandbox_get_state (nsbox_sandbox *s, struct nsbox_sandbox_state *st, bool memory)
{
  memset (st, 0, sizeof *st);
  uint64_t now = nsbox_now_ms ();
  pthread_mutex_lock (&s->watch_lock);
  st->runs = s->runs;
  st->busy = s->busy;
  st->warm = s->warm;
  st->gone = s->ended;
  st->age_ms = now - s->opened_ms;
  st->idle_ms = s->busy || now < s->last_ms ? 0 : now - s->last_ms;
  uint64_t deadline = watch_deadline (s);
  st->expires_in_ms = deadline == UINT64_MAX ? UINT64_MAX : deadline > now ? deadline - now : 0;
  st->lifetime_left_ms = !s->options.max_lifetime_ms ? UINT64_MAX
                         : st->age_ms < s->options.max_lifetime_ms
                             ? s->options.max_lifetime_ms - st->age_ms
                             : 0;
  snprintf (st->why, sizeof st->why, "%s", s->gone[0] ? s->gone : "closed");
  pid_t pid = s->init_pid;
  uint64_t ns = s->init_pidns;
  pthread_mutex_unlock (&s->watch_lock);
  /* Outside the lock: the walk takes as long as the sandbox makes it. It
   * counts only processes of the sandbox's PID namespace, whatever has
   * happened to them since. */
  if (memory && !st->gone)
    {
      uint64_t bytes = nsbox_tree_pss_bytes (pid, ns);
      st->memory_bytes = bytes == UINT64_MAX ? 0 : bytes;
    }
}

void
nsbox_sandbox_close (nsbox_sandbox *s)
{
  if (!s)
    return;
  pthread_mutex_lock (&s->watch_lock);
  s->closing = true;
  pthread_cond_signal (&s->watch_wake);
  pthread_mutex_unlock (&s->watch_lock);
  /* In a forked copy of the process no watcher runs (and the launch is
   * foreign: only its handle is freed). */
  if (s->watching && s->owner == getpid ())
    pthread_join (s->watcher, NULL);
  pthread_mutex_lock (&s->lock);
  sandbox_end (s, "closed");
  pthread_mutex_unlock (&s->lock);
  pthread_mutex_destroy (&s->lock);
  pthread_mutex_destroy (&s->watch_lock);
  pthread_cond_destroy (&s->watch_wake);
  nsbox_error_free (s->start_err);
  free (s->options.session);
  free (s);
}
