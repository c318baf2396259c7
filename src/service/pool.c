/* The warm pool: sandboxes started ahead of time, each used for exactly one
 * run. An entry is a whole sandbox as nsbox_run builds it (launch.h), its
 * program started and blocked reading its stdin. A run takes the oldest
 * entry, checks from the host that nothing happened in it since it was
 * ready, and finishes it with its code; the refill threads start the next
 * one. No entry is ever reused or forked from another: each is its own
 * clone of the launcher, its own exec of the program, so its own hash seed,
 * random state and address layout.
 *
 *   refill threads (refill-concurrency): start entries up to `size`, wait
 *     until each program blocks on its stdin, and destroy what runs and the
 *     sweep discarded (the graveyard), off the request path;
 *   the sweep (in the first refill thread, every SWEEP_MS): discards entries
 *     past max-age, entries whose init died or whose pipes stirred, and all
 *     entries when the image's rootfs or the seccomp policy file changed.
 *
 * An entry's init dies with the thread that cloned it (PR_SET_PDEATHSIG):
 * refill threads live until nsbox_pool_free has destroyed every entry.
 *
 * A process that forks keeps its pools; its child gets foreign copies: the
 * launches' fds closed (run.c), no threads, every run served cold, and
 * nsbox_pool_free there frees memory only. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gate.h"
#include "config_keys.h"
#include "config.h"
#include "error.h"
#include "files.h"
#include "forksafe.h"
#include "image.h"
#include "launch.h"
#include "pool.h"
#include "pool-private.h"
#include "result.h"
#include "supervise.h"
#include "units.h"
#include "util.h"

#define SWEEP_MS 250
#define IDENTITY_MS 1000
/* How long a new entry may take to reach its stdin read before it is
 * discarded as unexpected. */
#define START_DEADLINE_MS 30000
/* CPU an idle native entry may show between ready and dispatch: none is
 * expected (init waits, the program blocks in read). */
#define NATIVE_IDLE_CPU_USEC 5000
/* Back-off after a failed start, doubling up to the maximum. */
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 10000

struct entry
{
  struct nsbox_launch *launch;
  uint64_t ready_ms;
  uint64_t ready_cpu_usec;
  unsigned generation;
  bool spent; /* its run is over: only nsbox_launch_release is left */
  struct entry *next;
};

/* The entries of one kind: for single runs, or live sandboxes
 * (nsbox_sandbox_open), whose program is the driver (live.c). */
struct shelf
{
  struct entry *ready, **ready_tail; /* oldest first */
  size_t n_ready, n_starting;
  uint64_t size; /* how many it keeps */
  bool live;
  /* Whether it is filled yet: live sandboxes only once one was opened
   * from the pool, so that a pool that never opens one pays nothing. */
  bool wanted;
  /* Back-off after a failed start, doubling up to the maximum: each
   * shelf's own (a driver that cannot start must not slow single runs). */
  uint64_t backoff_until_ms, backoff_ms;
  /* Its last start failed, and why (nsbox serve's health check). */
  bool failing;
  char failing_why[192];
};

enum
{
  SHELF_SINGLE,
  SHELF_LIVE,
  SHELF_COUNT_
};

struct nsbox_pool
{
  nsbox_config *config;
  struct nsbox_pool_options options;
  pthread_mutex_t lock;
  pthread_cond_t wake;
  struct shelf shelves[SHELF_COUNT_];
  struct entry *graveyard; /* discarded and spent entries, freed by the threads */
  size_t in_flight;        /* runs between take and result */
  bool stopping;
  unsigned generation;
  char *identity;
  struct nsbox_pool_stats stats;
  pthread_t threads[POOL_MAX_REFILL + 1];
  size_t n_threads;
  bool foreign;                     /* a forked copy: no threads, nothing of it is ours */
  struct nsbox_fork_node fork_node; /* every pool of the process, for fork */
};

/* ---- fork: every pool of the process, locked across it ---- */

static void
init_wake (struct nsbox_pool *p)
{
  nsbox_cond_init_monotonic (&p->wake);
}

static void
pool_lock (struct nsbox_fork_node *node)
{
  pthread_mutex_lock (&container_of (node, struct nsbox_pool, fork_node)->lock);
}

static void
pool_unlock (struct nsbox_fork_node *node)
{
  pthread_mutex_unlock (&container_of (node, struct nsbox_pool, fork_node)->lock);
}

static void
pool_forked (struct nsbox_fork_node *node)
{
  struct nsbox_pool *p = container_of (node, struct nsbox_pool, fork_node);
  p->foreign = true;
  /* The parent's refill threads wait on it; none exists here, and a
   * broadcast must not wait for them. */
  init_wake (p);
  pthread_mutex_unlock (&p->lock);
}

static struct nsbox_fork_registry pools = NSBOX_FORK_REGISTRY (pool_lock, pool_unlock, pool_forked);

static void
pool_register (struct nsbox_pool *p)
{
  nsbox_fork_add (&pools, &p->fork_node);
}

static void
pool_unregister (struct nsbox_pool *p)
{
  if (p->foreign)
    return;
  nsbox_fork_remove (&pools, &p->fork_node);
}

/* ---- identity: what the entries were built from ---- */

/* The image's rootfs as the store resolves it now (never pulling), and the
 * policy file's identity. NULL when it cannot be read. */
static char *
current_identity (const nsbox_config *c)
{
  cleanup_free char *rootfs = NULL;
  if (c->rootfs)
    rootfs = realpath (c->rootfs, NULL);
  else
    {
      struct nsbox_image image = { .lock_fd = -1 };
      if (nsbox_image_hold (c->store, c->image, NSBOX_PULL_NEVER, &image, NULL) == 0)
        rootfs = TAKE_PTR (image.rootfs);
      nsbox_image_release (&image);
    }
  if (!rootfs)
    return NULL;
  struct stat st = { 0 };
  if (c->seccomp_policy && stat (c->seccomp_policy, &st) < 0)
    return NULL;
  return xasprintf ("%s|%llu:%llu:%lld.%09ld:%lld", rootfs, (unsigned long long)st.st_dev,
                    (unsigned long long)st.st_ino, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
                    (long long)st.st_size);
}

/* ---- entries ---- */

static void
bury_locked (struct nsbox_pool *p, struct entry *e)
{
  e->next = p->graveyard;
  p->graveyard = e;
  p->stats.discarded++;
  pthread_cond_broadcast (&p->wake);
}

/* Starts one entry and waits until its program blocks reading its code. */
static int
start_entry (struct nsbox_pool *p, bool live, struct entry **out, struct nsbox_error **err)
{
  struct nsbox_launch *launch = NULL;
  int r = live ? nsbox_launch_start_live (p->config, &launch, err)
               : nsbox_launch_start (p->config, &launch, err);
  if (r < 0)
    return r;
  uint64_t deadline = nsbox_now_ms () + START_DEADLINE_MS, pause_us = 200;
  for (;;)
    {
      enum nsbox_launch_state state = nsbox_launch_probe (launch);
      if (state == NSBOX_LAUNCH_WAITING)
        break;
      if (state == NSBOX_LAUNCH_BROKEN || nsbox_now_ms () > deadline)
        {
          /* Its setup error, if any, would go unread: the refill loop
           * only counts failures and backs off. */
          nsbox_launch_destroy (launch);
          return nsbox_error_set (err, EPROTO,
                                  state == NSBOX_LAUNCH_BROKEN
                                      ? "pool: a new sandbox's program ended or wrote before "
                                        "it was given code"
                                      : "pool: a new sandbox's program did not reach its "
                                        "stdin read within %d s",
                                  START_DEADLINE_MS / 1000);
        }
      struct timespec ts = { 0, (long)pause_us * 1000L };
      nanosleep (&ts, NULL);
      if (pause_us < 2000)
        pause_us += 200;
    }
  struct entry *e = calloc (1, sizeof *e);
  if (!e)
    {
      nsbox_launch_destroy (launch);
      return nsbox_error_oom (err);
    }
  e->launch = launch;
  e->ready_ms = nsbox_now_ms ();
  e->ready_cpu_usec = nsbox_launch_cpu_usec (launch);
  *out = e;
  return 0;
}

static void
destroy_entry (struct entry *e)
{
  if (e->spent)
    nsbox_launch_release (e->launch);
  else
    nsbox_launch_destroy (e->launch);
  free (e);
}

/* Called with the lock held: moves broken, old and stale entries to the
 * graveyard and refreshes the identity. */
static void
sweep_locked (struct nsbox_pool *p, bool check_identity)
{
  if (check_identity)
    {
      pthread_mutex_unlock (&p->lock);
      char *now = current_identity (p->config);
      pthread_mutex_lock (&p->lock);
      if (now && p->identity && strcmp (now, p->identity) != 0)
        p->generation++;
      if (now)
        {
          free (p->identity);
          p->identity = now;
        }
    }
  uint64_t t = nsbox_now_ms ();
  for (struct shelf *sh = p->shelves; sh < p->shelves + SHELF_COUNT_; sh++)
    {
      for (struct entry **pe = &sh->ready; *pe;)
        {
          struct entry *e = *pe;
          if (e->generation == p->generation && t - e->ready_ms <= p->options.max_age_ms
              && nsbox_launch_probe (e->launch) == NSBOX_LAUNCH_WAITING)
            {
              pe = &e->next;
              continue;
            }
          *pe = e->next;
          sh->n_ready--;
          bury_locked (p, e);
        }
      sh->ready_tail = &sh->ready;
      while (*sh->ready_tail)
        sh->ready_tail = &(*sh->ready_tail)->next;
    }
}

/* The shelf a refill thread should start an entry for now, or NULL. A
 * start clones this process: its copy-on-write faults and the new
 * program's start would land on the runs in flight. With an entry of its
 * kind still ready it waits for them to end. Single runs first. */
static struct shelf *
shelf_to_fill (struct nsbox_pool *p, uint64_t now)
{
  for (struct shelf *sh = p->shelves; sh < p->shelves + SHELF_COUNT_; sh++)
    if (sh->wanted && sh->n_ready + sh->n_starting < sh->size && now >= sh->backoff_until_ms
        && (p->in_flight == 0 || sh->n_ready == 0))
      return sh;
  return NULL;
}

/* How long a refill thread may sleep: until the sweep, or the end of a
 * shelf's back-off. */
static uint64_t
refill_wait (const struct nsbox_pool *p, uint64_t now)
{
  uint64_t wait = SWEEP_MS;
  for (const struct shelf *sh = p->shelves; sh < p->shelves + SHELF_COUNT_; sh++)
    if (sh->backoff_until_ms > now && sh->backoff_until_ms - now < wait)
      wait = sh->backoff_until_ms - now;
  return wait ? wait : 1;
}

static void
timed_wait (struct nsbox_pool *p, uint64_t ms)
{
  struct timespec ts = nsbox_monotonic_after (ms);
  pthread_cond_timedwait (&p->wake, &p->lock, &ts);
}

struct refill_arg
{
  struct nsbox_pool *pool;
  bool sweeper;
};

static void *
refill_main (void *arg)
{
  struct refill_arg a = *(struct refill_arg *)arg;
  free (arg);
  struct nsbox_pool *p = a.pool;
  uint64_t next_sweep = 0, next_identity = nsbox_now_ms () + IDENTITY_MS;
  pthread_mutex_lock (&p->lock);
  while (!p->stopping)
    {
      uint64_t now = nsbox_now_ms ();
      if (a.sweeper && now >= next_sweep)
        {
          bool identity = now >= next_identity;
          sweep_locked (p, identity);
          next_sweep = now + SWEEP_MS;
          if (identity)
            next_identity = now + IDENTITY_MS;
          continue;
        }
      if (p->graveyard)
        {
          struct entry *e = p->graveyard;
          p->graveyard = e->next;
          pthread_mutex_unlock (&p->lock);
          destroy_entry (e);
          pthread_mutex_lock (&p->lock);
          continue;
        }
      struct shelf *sh = a.sweeper ? NULL : shelf_to_fill (p, now);
      if (sh)
        {
          sh->n_starting++;
          unsigned generation = p->generation;
          pthread_mutex_unlock (&p->lock);
          struct entry *e = NULL;
          struct nsbox_error *why = NULL;
          int r = start_entry (p, sh->live, &e, &why);
          pthread_mutex_lock (&p->lock);
          sh->n_starting--;
          if (r < 0 || !e)
            {
              p->stats.start_failures++;
              sh->failing = true;
              snprintf (sh->failing_why, sizeof sh->failing_why, "%s",
                        why ? nsbox_error_message (why) : "unknown error");
              sh->backoff_ms = sh->backoff_ms ? sh->backoff_ms * 2 : BACKOFF_MIN_MS;
              if (sh->backoff_ms > BACKOFF_MAX_MS)
                sh->backoff_ms = BACKOFF_MAX_MS;
              sh->backoff_until_ms = nsbox_now_ms () + sh->backoff_ms;
              nsbox_error_free (why);
              continue;
            }
          sh->backoff_ms = 0;
          sh->failing = false;
          e->generation = generation;
          if (generation != p->generation || p->stopping)
            {
              bury_locked (p, e);
              continue;
            }
          *sh->ready_tail = e;
          sh->ready_tail = &e->next;
          sh->n_ready++;
          p->stats.started++;
          continue;
        }
      timed_wait (p, refill_wait (p, now));
    }
  pthread_mutex_unlock (&p->lock);
  return NULL;
}

/* ---- the pool ---- */

int
nsbox_pool_new (const nsbox_config *config, const nsbox_pool_options *options, nsbox_pool **out,
                struct nsbox_error **err)
{
  if (!config || !out)
    return nsbox_error_set (err, EINVAL, "nsbox_pool_new: invalid arguments");
  int files = nsbox_launch_check_files (config, nsbox_launch_resolve_runtime (config),
                                        config->output_dir != NULL, err);
  if (files < 0)
    return files;
  struct nsbox_pool *p = calloc (1, sizeof *p);
  if (!p)
    return nsbox_error_oom (err);
  if (options)
    p->options = *options;
  else
    p->options = (struct nsbox_pool_options){
      .size = 2, .sandboxes = 1, .max_age_ms = 300000, .refill = 1
    };
  for (int i = 0; i < SHELF_COUNT_; i++)
    p->shelves[i].ready_tail = &p->shelves[i].ready;
  p->shelves[SHELF_SINGLE].size = p->options.size;
  p->shelves[SHELF_SINGLE].wanted = true;
  /* Under runsc a live sandbox is refused (run.c): none is kept. */
  if (nsbox_launch_resolve_runtime (config) != NSBOX_RUNTIME_RUNSC)
    p->shelves[SHELF_LIVE].size = p->options.sandboxes;
  p->shelves[SHELF_LIVE].live = true;
  p->config = nsbox_config_dup (config, err);
  if (!p->config)
    {
      free (p);
      return -ENOMEM;
    }
  /* Pull now, once, per the configured policy: entries then resolve the
   * image without pulling, and the sweep notices a tag that moves. */
  if (!p->config->rootfs)
    {
      struct nsbox_image image = { .lock_fd = -1 };
      int r = nsbox_image_hold (p->config->store, p->config->image, p->config->pull, &image, err);
      nsbox_image_release (&image);
      if (r < 0)
        {
          nsbox_config_free (p->config);
          free (p);
          return r;
        }
      p->config->pull = NSBOX_PULL_NEVER;
    }
  p->identity = current_identity (p->config);
  init_wake (p);
  pthread_mutex_init (&p->lock, NULL);
  pool_register (p);
  /* The refill threads, and one more that only sweeps (a start can take
   * seconds: the sweep must not wait behind one). */
  for (size_t i = 0; i <= p->options.refill; i++)
    {
      struct refill_arg *a = malloc (sizeof *a);
      int r = a ? 0 : ENOMEM;
      if (a)
        {
          *a = (struct refill_arg){ p, i == p->options.refill };
          r = pthread_create (&p->threads[i], NULL, refill_main, a);
          if (r != 0)
            free (a);
        }
      if (r != 0)
        {
          nsbox_pool_free (p);
          return nsbox_error_sys (err, r, "pool: start a refill thread");
        }
      p->n_threads++;
    }
  *out = p;
  return 0;
}

void
nsbox_pool_free (nsbox_pool *p)
{
  if (!p)
    return;
  pool_unregister (p);
  if (p->foreign)
    {
      /* A forked copy: the threads are the parent's, so are the entries
       * (their handles are freed, nothing of them touched). */
      struct entry *lists[]
          = { p->shelves[SHELF_SINGLE].ready, p->shelves[SHELF_LIVE].ready, p->graveyard };
      for (size_t i = 0; i < ARRAY_SIZE (lists); i++)
        for (struct entry *e = lists[i], *next; e; e = next)
          {
            next = e->next;
            destroy_entry (e);
          }
      nsbox_config_free (p->config);
      free (p->identity);
      free (p);
      return;
    }
  pthread_mutex_lock (&p->lock);
  p->stopping = true;
  pthread_cond_broadcast (&p->wake);
  struct entry *all[SHELF_COUNT_];
  for (int i = 0; i < SHELF_COUNT_; i++)
    {
      all[i] = p->shelves[i].ready;
      p->shelves[i].ready = NULL;
      p->shelves[i].n_ready = 0;
    }
  pthread_mutex_unlock (&p->lock);
  /* Entries die with the threads that cloned them: destroy them first. */
  for (int i = 0; i < SHELF_COUNT_; i++)
    for (struct entry *e = all[i], *next; e; e = next)
      {
        next = e->next;
        destroy_entry (e);
      }
  for (size_t i = 0; i < p->n_threads; i++)
    pthread_join (p->threads[i], NULL);
  for (struct entry *e = p->graveyard, *next; e; e = next)
    {
      next = e->next;
      destroy_entry (e);
    }
  pthread_cond_destroy (&p->wake);
  pthread_mutex_destroy (&p->lock);
  nsbox_config_free (p->config);
  free (p->identity);
  free (p);
}

/* The shelf's oldest entry that is still exactly as it was when ready, or
 * NULL. */
static struct entry *
take_entry (struct nsbox_pool *p, struct shelf *sh, uint64_t *cpu_at_dispatch)
{
  for (;;)
    {
      pthread_mutex_lock (&p->lock);
      struct entry *e = sh->ready;
      if (e)
        {
          sh->ready = e->next;
          if (!sh->ready)
            sh->ready_tail = &sh->ready;
          sh->n_ready--;
          if (sh->n_ready == 0)
            pthread_cond_broadcast (&p->wake);
        }
      bool stale = e
                   && (e->generation != p->generation
                       || nsbox_now_ms () - e->ready_ms > p->options.max_age_ms);
      if (stale)
        bury_locked (p, e);
      pthread_mutex_unlock (&p->lock);
      if (!e)
        return NULL;
      if (stale)
        continue;
      uint64_t cpu = nsbox_launch_cpu_usec (e->launch);
      bool idle = nsbox_launch_probe (e->launch) == NSBOX_LAUNCH_WAITING
                  && (strcmp (nsbox_launch_runtime (e->launch), "runsc") == 0 || cpu == UINT64_MAX
                      || e->ready_cpu_usec == UINT64_MAX
                      || cpu - e->ready_cpu_usec <= NATIVE_IDLE_CPU_USEC);
      if (idle)
        {
          *cpu_at_dispatch = cpu;
          return e;
        }
      pthread_mutex_lock (&p->lock);
      bury_locked (p, e);
      pthread_mutex_unlock (&p->lock);
    }
}

/* The pool's timeout and output cap, lowered by the run's options; a run
 * may not raise them. */
const nsbox_config *
nsbox_pool_config (nsbox_pool *p)
{
  return p->config;
}

static int
run_limits (nsbox_pool *p, const nsbox_run_options *options, uint64_t *timeout_ms,
            uint64_t *max_output, struct nsbox_error **err)
{
  *timeout_ms = p->config->timeout_ms;
  *max_output = p->config->max_output_bytes;
  if (options && options->timeout_ms)
    {
      if (options->timeout_ms > *timeout_ms)
        return nsbox_error_set (err, EINVAL,
                                "timeout %" PRIu64 "ms is longer than the pool's %" PRIu64
                                "ms: a pooled run may only shorten it",
                                options->timeout_ms, *timeout_ms);
      *timeout_ms = options->timeout_ms;
    }
  if (options && options->max_output_bytes != UINT64_MAX)
    {
      if (options->max_output_bytes > *max_output)
        return nsbox_error_set (err, EINVAL,
                                "max-output-bytes %" PRIu64 " is larger than the pool's %" PRIu64
                                ": a pooled run may only lower it",
                                options->max_output_bytes, *max_output);
      *max_output = options->max_output_bytes;
    }
  return 0;
}

/* Inputs and an output directory need the native runtime. */
static int
check_files (nsbox_pool *p, const nsbox_run_options *options, struct nsbox_error **err)
{
  if (!options || (!options->inputs_len && !options->output_dir))
    return 0;
  nsbox_config view = *p->config;
  view.inputs_len = options->inputs_len;
  return nsbox_launch_check_files (&view, nsbox_launch_resolve_runtime (p->config),
                                   options->output_dir != NULL, err);
}

int
nsbox_pool_dispatch (nsbox_pool *p, const nsbox_run_options *options, const char *code,
                     size_t code_len, struct nsbox_dispatch *d, struct nsbox_error **err)
{
  uint64_t timeout_ms, max_output;
  int r = run_limits (p, options, &timeout_ms, &max_output, err);
  if (r < 0)
    return r;
  *d = (struct nsbox_dispatch){
    .code = code,
    .code_len = code_len,
    .timeout_ms = timeout_ms,
    .max_output_bytes = max_output,
    .cancel_fd = options ? options->cancel_fd : -1,
    .cancel_on_half_close = options && options->cancel_on_half_close,
    .capture = p->config->output_capture,
    .memory_bytes = p->config->memory_bytes,
    .output_dir_fd = -1,
    .output = options ? options->output : NULL,
    .output_data = options ? options->output_data : NULL,
  };
  return 0;
}

int
nsbox_pool_check_options (nsbox_pool *p, const nsbox_run_options *options, struct nsbox_error **err)
{
  uint64_t t, m;
  int r = run_limits (p, options, &t, &m, err);
  return r < 0 ? r : check_files (p, options, err);
}

/* The pool's configuration with the run's inputs added, for a cold run. */
static nsbox_config *
config_with_inputs (nsbox_pool *p, const nsbox_run_options *options, struct nsbox_error **err)
{
  cleanup_config nsbox_config *c = nsbox_config_dup (p->config, err);
  if (!c)
    return NULL;
  for (size_t i = 0; i < options->inputs_len; i++)
    if (nsbox_config_set (c, "inputs", options->inputs[i], err) < 0)
      return NULL;
  return TAKE_PTR (c);
}

int
nsbox_pool_run (nsbox_pool *p, const char *code, size_t code_len, const nsbox_run_options *options,
                nsbox_result **out, struct nsbox_error **err)
{
  bool warm;
  return nsbox_pool_run_served (p, code, code_len, options, out, &warm, err);
}

static int
pool_run (nsbox_pool *p, const char *code, size_t code_len, const nsbox_run_options *options,
          nsbox_result **out, bool *warm, struct nsbox_error **err)
{
  *warm = false;
  if (!p || !out || (!code && code_len))
    return nsbox_error_set (err, EINVAL, "nsbox_pool_run: invalid arguments");
  struct nsbox_dispatch d;
  int r = nsbox_pool_dispatch (p, options, code, code_len, &d, err);
  if (r < 0 || (r = check_files (p, options, err)) < 0)
    return r;
  const char *output_dir
      = options && options->output_dir ? options->output_dir : p->config->output_dir;
  cleanup_close int output_dir_fd = -1;
  if (output_dir && (r = nsbox_output_dir_open (output_dir, &output_dir_fd, err)) < 0)
    return r;
  /* Inputs are placed while a sandbox is built: a run with its own is
   * served cold. */
  cleanup_config nsbox_config *cold_config = NULL;
  if (options && options->inputs_len && !(cold_config = config_with_inputs (p, options, err)))
    return -EINVAL;
  d.output_dir_fd = output_dir_fd;
  struct nsbox_result *res = calloc (1, sizeof *res);
  if (!res)
    return nsbox_error_oom (err);
  uint64_t cpu_at_dispatch = 0;
  pthread_mutex_lock (&p->lock);
  p->in_flight++;
  bool foreign = p->foreign;
  pthread_mutex_unlock (&p->lock);
  /* A forked copy serves cold: its entries are the parent's. */
  struct entry *e
      = foreign || cold_config ? NULL : take_entry (p, &p->shelves[SHELF_SINGLE], &cpu_at_dispatch);
  *warm = e != NULL;
  if (e)
    {
      r = nsbox_launch_finish (e->launch, &d, res, err);
      res->warm = true;
      /* cpu_ms counts from dispatch: the program's start-up is not the run's. */
      uint64_t before_ms = cpu_at_dispatch == UINT64_MAX ? 0 : cpu_at_dispatch / 1000;
      res->cpu_ms = res->cpu_ms > before_ms ? res->cpu_ms - before_ms : 0;
    }
  else
    {
      struct nsbox_launch *launch = NULL;
      r = nsbox_launch_start (cold_config ? cold_config : p->config, &launch, err);
      if (r >= 0)
        r = nsbox_launch_finish (launch, &d, res, err);
      if (launch && !(e = calloc (1, sizeof *e)))
        nsbox_launch_release (launch);
      else if (launch)
        e->launch = launch;
    }
  /* The run is over and its sandbox's processes are gone; the rest of its
   * teardown (unmounting, removing the cgroups) is left to the threads,
   * off the caller's time. A forked copy has none: it releases at once. */
  if (e)
    e->spent = true;
  if (e && foreign)
    {
      destroy_entry (e);
      e = NULL;
    }
  pthread_mutex_lock (&p->lock);
  if (e)
    {
      e->next = p->graveyard;
      p->graveyard = e;
    }
  if (--p->in_flight == 0 || e)
    pthread_cond_broadcast (&p->wake);
  if (r < 0)
    p->stats.errors++;
  else if (res->warm)
    p->stats.warm++;
  else
    p->stats.cold++;
  pthread_mutex_unlock (&p->lock);
  if (r < 0)
    {
      nsbox_result_free (res);
      return r;
    }
  *out = res;
  return 0;
}

void
nsbox_pool_get_stats (nsbox_pool *p, struct nsbox_pool_stats *stats)
{
  pthread_mutex_lock (&p->lock);
  *stats = p->stats;
  stats->ready = p->shelves[SHELF_SINGLE].n_ready;
  stats->starting = p->shelves[SHELF_SINGLE].n_starting;
  stats->size = p->options.size;
  stats->sandboxes_ready = p->shelves[SHELF_LIVE].n_ready;
  stats->sandboxes_size = p->shelves[SHELF_LIVE].size;
  stats->failing = false;
  for (size_t i = 0; i < SHELF_COUNT_ && !stats->failing; i++)
    if (p->shelves[i].failing)
      {
        stats->failing = true;
        snprintf (stats->failing_why, sizeof stats->failing_why, "%s%s",
                  i == SHELF_LIVE ? "live sandboxes: " : "", p->shelves[i].failing_why);
      }
  pthread_mutex_unlock (&p->lock);
}

size_t
nsbox_pool_ready (nsbox_pool *p)
{
  pthread_mutex_lock (&p->lock);
  size_t n = p->shelves[SHELF_SINGLE].n_ready;
  pthread_mutex_unlock (&p->lock);
  return n;
}

struct nsbox_launch *
nsbox_pool_take_sandbox (nsbox_pool *p)
{
  pthread_mutex_lock (&p->lock);
  bool foreign = p->foreign;
  struct shelf *sh = &p->shelves[SHELF_LIVE];
  if (!sh->wanted)
    {
      sh->wanted = true;
      pthread_cond_broadcast (&p->wake);
    }
  pthread_mutex_unlock (&p->lock);
  uint64_t cpu = 0;
  struct entry *e = foreign ? NULL : take_entry (p, sh, &cpu);
  if (!e)
    return NULL;
  struct nsbox_launch *launch = e->launch;
  free (e);
  nsbox_launch_count_cpu_from (launch, cpu);
  pthread_mutex_lock (&p->lock);
  p->stats.sandboxes_warm++;
  pthread_mutex_unlock (&p->lock);
  return launch;
}

struct pooled_run
{
  nsbox_pool *pool;
  const char *code;
  size_t code_len;
  const nsbox_run_options *options;
  bool *warm;
};

static int
pooled_run (void *ctx, nsbox_result **out, struct nsbox_error **err)
{
  const struct pooled_run *r = ctx;
  return pool_run (r->pool, r->code, r->code_len, r->options, out, r->warm, err);
}

/* Behind the gate (gate.h), not cancellable: a cancelled caller would leave
 * its sandbox running with nobody to enforce its timeout (a pooled one's
 * init belongs to a refill thread, so parent death would not end it
 * either). */
int
nsbox_pool_run_served (nsbox_pool *p, const char *code, size_t code_len,
                       const nsbox_run_options *options, nsbox_result **out, bool *warm,
                       struct nsbox_error **err)
{
  bool warm_unused, refused;
  struct pooled_run run = {
    .pool = p,
    .code = code,
    .code_len = code_len,
    .options = options,
    .warm = warm ? warm : &warm_unused,
  };
  struct nsbox_gate gate = {
    .config = p ? p->config : NULL,
    .session = options ? options->session : NULL,
    .client = options ? options->client : NULL,
    .quota_scope = options ? options->quota_scope : NULL,
    .code = code,
    .code_len = code_len,
    .timeout_ms = options && options->timeout_ms ? options->timeout_ms
                  : p                            ? p->config->timeout_ms
                                                 : 0,
  };
  int r = nsbox_gate_run (&gate, pooled_run, &run, out, &refused, err);
  if (refused && warm)
    *warm = false;
  return r;
}
