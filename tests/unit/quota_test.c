/* Sessions and quotas: the arithmetic on a clock of the test's own
 * (nsbox_quota_decide and nsbox_quota_settle), the state file's text, and
 * the gate raced by threads (this process) and by processes (state
 * files). No sandbox starts here: the gate decides before one would. */
#include <criterion/criterion.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "error.h"
#include "quota.h"
#include "supervise.h"

#define T0 1800000000000ULL /* some realtime, in ms */

static struct nsbox_quota_limits
limits (uint64_t rate, uint64_t concurrent, uint64_t cpu_ms, uint64_t wall_ms)
{
  return (struct nsbox_quota_limits){ rate, concurrent, cpu_ms, wall_ms, 60 * 1000 };
}

/* One admission: the refused quota (NSBOX_QUOTA_NONE when admitted). */
static enum nsbox_quota_kind
try_run (struct nsbox_quota_session *s, const struct nsbox_quota_limits *l, uint64_t now,
         uint64_t id, uint64_t need_cpu, uint64_t need_wall, uint64_t *retry)
{
  struct nsbox_quota_flight f
      = { .id = id, .deadline_ms = now + need_wall, .cpu_ms = need_cpu, .wall_ms = need_wall };
  enum nsbox_quota_kind kind = NSBOX_QUOTA_NONE;
  uint64_t wait = 0;
  struct nsbox_error *err = NULL;
  int r = nsbox_quota_decide (s, l, now, &f, &kind, &wait, &err);
  cr_assert_eq (r, 0, "decide: %s", err ? nsbox_error_message (err) : "?");
  if (retry)
    *retry = wait;
  return kind;
}

Test (quota, burst_refused_exactly_past_the_rate_then_admitted_after_the_refill)
{
  struct nsbox_quota_session s = { 0 };
  struct nsbox_quota_limits l = limits (5, 0, 0, 0);
  uint64_t retry = 0;
  for (uint64_t i = 1; i <= 5; i++)
    {
      cr_expect_eq (try_run (&s, &l, T0, i, 0, 0, NULL), NSBOX_QUOTA_NONE, "run %lu", i);
      nsbox_quota_settle (&s, i, T0, 0, 0);
    }
  cr_expect_eq (try_run (&s, &l, T0, 6, 0, 0, &retry), NSBOX_QUOTA_RATE);
  /* 5 per minute: one token every 12 s. */
  cr_expect_eq (retry, 12000);
  cr_expect_eq (try_run (&s, &l, T0 + retry - 1, 7, 0, 0, NULL), NSBOX_QUOTA_RATE);
  cr_expect_eq (try_run (&s, &l, T0 + retry, 8, 0, 0, NULL), NSBOX_QUOTA_NONE);
  nsbox_quota_settle (&s, 8, T0 + retry, 0, 0);
  cr_expect_eq (try_run (&s, &l, T0 + retry, 9, 0, 0, NULL), NSBOX_QUOTA_RATE);
  /* A minute idle refills the whole burst, no more. */
  uint64_t later = T0 + retry + 60000;
  for (uint64_t i = 10; i < 15; i++)
    {
      cr_expect_eq (try_run (&s, &l, later, i, 0, 0, NULL), NSBOX_QUOTA_NONE, "run %lu", i);
      nsbox_quota_settle (&s, i, later, 0, 0);
    }
  cr_expect_eq (try_run (&s, &l, later, 15, 0, 0, NULL), NSBOX_QUOTA_RATE);
  nsbox_quota_session_clear (&s);
}

Test (quota, a_refusal_spends_no_token)
{
  struct nsbox_quota_session s = { 0 };
  struct nsbox_quota_limits l = limits (1, 0, 0, 0);
  cr_expect_eq (try_run (&s, &l, T0, 1, 0, 0, NULL), NSBOX_QUOTA_NONE);
  for (uint64_t i = 2; i < 50; i++)
    cr_expect_eq (try_run (&s, &l, T0 + i * 1000, i, 0, 0, NULL), NSBOX_QUOTA_RATE);
  cr_expect_eq (try_run (&s, &l, T0 + 60000, 99, 0, 0, NULL), NSBOX_QUOTA_NONE);
  nsbox_quota_session_clear (&s);
}

Test (quota, concurrent_runs_are_counted_until_they_end)
{
  struct nsbox_quota_session s = { 0 };
  struct nsbox_quota_limits l = limits (0, 2, 0, 0);
  uint64_t retry = 0;
  cr_expect_eq (try_run (&s, &l, T0, 1, 0, 5000, NULL), NSBOX_QUOTA_NONE);
  cr_expect_eq (try_run (&s, &l, T0 + 1000, 2, 0, 5000, NULL), NSBOX_QUOTA_NONE);
  cr_expect_eq (try_run (&s, &l, T0 + 2000, 3, 0, 5000, &retry), NSBOX_QUOTA_CONCURRENT);
  /* Until the first one is due to end. */
  cr_expect_eq (retry, 3000);
  nsbox_quota_settle (&s, 2, T0 + 2500, 0, 1500);
  cr_expect_eq (try_run (&s, &l, T0 + 2500, 4, 0, 5000, NULL), NSBOX_QUOTA_NONE);
  cr_expect_eq (s.n_flights, 2);
  nsbox_quota_session_clear (&s);
}

Test (quota, cpu_time_counts_what_runs_used_not_their_wall_time)
{
  struct nsbox_quota_session s = { 0 };
  /* Each run may use 1 s of CPU; 3 s per minute. */
  struct nsbox_quota_limits l = limits (0, 0, 3000, 0);
  uint64_t now = T0, retry = 0;
  for (uint64_t i = 1; i <= 20; i++, now += 1000)
    {
      /* Sleepers: a second of wall time, 10 ms of CPU each. */
      cr_expect_eq (try_run (&s, &l, now, i, 1000, 1000, NULL), NSBOX_QUOTA_NONE, "sleeper %lu", i);
      nsbox_quota_settle (&s, i, now + 1000, 10, 1000);
    }
  /* 200 ms used in the last minute: two busy runs fit, the third too. */
  for (uint64_t i = 21; i <= 22; i++)
    {
      cr_expect_eq (try_run (&s, &l, now, i, 1000, 1000, NULL), NSBOX_QUOTA_NONE, "busy %lu", i);
      nsbox_quota_settle (&s, i, now, 1000, 1000);
    }
  cr_expect_eq (try_run (&s, &l, now, 23, 1000, 1000, &retry), NSBOX_QUOTA_CPU);
  /* 2.2 s used: 200 ms must leave the window, the sleepers' oldest
   * buckets do: the first one's bucket leaves a minute after it. */
  cr_expect_gt (retry, 0);
  cr_expect_leq (retry, 60000);
  cr_expect_eq (try_run (&s, &l, now + retry, 24, 1000, 1000, NULL), NSBOX_QUOTA_NONE);
  nsbox_quota_settle (&s, 24, now + retry, 1000, 1000);
  /* A minute after the busy runs the window is empty again. */
  cr_expect_eq (try_run (&s, &l, now + 61000 + retry, 25, 1000, 1000, NULL), NSBOX_QUOTA_NONE);
  nsbox_quota_session_clear (&s);
}

Test (quota, reservations_in_flight_stop_an_overspend)
{
  struct nsbox_quota_session s = { 0 };
  struct nsbox_quota_limits l = limits (0, 0, 3000, 10000);
  for (uint64_t i = 1; i <= 3; i++)
    cr_expect_eq (try_run (&s, &l, T0, i, 1000, 2000, NULL), NSBOX_QUOTA_NONE);
  /* Nothing used yet, but three runs may use 3 s of CPU between them. */
  uint64_t retry = 0;
  cr_expect_eq (try_run (&s, &l, T0, 4, 1000, 2000, &retry), NSBOX_QUOTA_CPU);
  cr_expect_eq (retry, 2000, "until the first flight lands");
  /* One that used no CPU frees its whole reservation. */
  nsbox_quota_settle (&s, 1, T0 + 100, 0, 100);
  cr_expect_eq (try_run (&s, &l, T0 + 100, 5, 1000, 2000, NULL), NSBOX_QUOTA_NONE);
  nsbox_quota_session_clear (&s);
}

Test (quota, wall_time_quota)
{
  struct nsbox_quota_session s = { 0 };
  struct nsbox_quota_limits l = limits (0, 0, 0, 5000);
  cr_expect_eq (try_run (&s, &l, T0, 1, 0, 2000, NULL), NSBOX_QUOTA_NONE);
  nsbox_quota_settle (&s, 1, T0 + 2000, 0, 2000);
  cr_expect_eq (try_run (&s, &l, T0 + 2000, 2, 0, 2000, NULL), NSBOX_QUOTA_NONE);
  nsbox_quota_settle (&s, 2, T0 + 4000, 0, 2000);
  cr_expect_eq (try_run (&s, &l, T0 + 4000, 3, 0, 2000, NULL), NSBOX_QUOTA_WALL);
  nsbox_quota_session_clear (&s);
}

Test (quota, a_flight_long_past_its_deadline_is_dropped_and_charged)
{
  struct nsbox_quota_session s = { 0 };
  struct nsbox_quota_limits l = limits (0, 1, 5000, 0);
  cr_expect_eq (try_run (&s, &l, T0, 1, 2000, 1000, NULL), NSBOX_QUOTA_NONE);
  /* A fork's copy of a table keeps its parent's flight, never settled. */
  cr_expect_eq (try_run (&s, &l, T0 + 30000, 2, 2000, 1000, NULL), NSBOX_QUOTA_CONCURRENT);
  cr_expect_eq (try_run (&s, &l, T0 + 62000, 3, 2000, 1000, NULL), NSBOX_QUOTA_NONE);
  /* Its whole reservation was charged: 2 s + 2 s reserved of 5 s. */
  cr_expect_eq (try_run (&s, &l, T0 + 62000, 4, 2000, 1000, NULL), NSBOX_QUOTA_CONCURRENT);
  nsbox_quota_settle (&s, 3, T0 + 63000, 2000, 1000);
  cr_expect_eq (try_run (&s, &l, T0 + 63000, 5, 2000, 1000, NULL), NSBOX_QUOTA_CPU);
  nsbox_quota_session_clear (&s);
}

Test (quota, a_run_larger_than_the_quota_is_an_error)
{
  struct nsbox_quota_session s = { 0 };
  struct nsbox_quota_limits l = limits (0, 0, 1000, 0);
  struct nsbox_quota_flight f = { .id = 1, .cpu_ms = 2500, .wall_ms = 5000 };
  enum nsbox_quota_kind kind;
  uint64_t retry;
  struct nsbox_error *err = NULL;
  cr_expect_eq (nsbox_quota_decide (&s, &l, T0, &f, &kind, &retry, &err), -EINVAL);
  cr_assert_not_null (err);
  cr_expect (strstr (nsbox_error_message (err), "quota-cpu-time") != NULL, "%s",
             nsbox_error_message (err));
  nsbox_error_free (err);
  nsbox_quota_session_clear (&s);
}

Test (quota, another_window_keeps_the_usage)
{
  struct nsbox_quota_session s = { 0 };
  struct nsbox_quota_limits l = limits (0, 0, 2000, 0);
  cr_expect_eq (try_run (&s, &l, T0, 1, 1000, 1000, NULL), NSBOX_QUOTA_NONE);
  nsbox_quota_settle (&s, 1, T0, 1500, 1000);
  l.window_ms = 3600 * 1000;
  cr_expect_eq (try_run (&s, &l, T0 + 10, 2, 1000, 1000, NULL), NSBOX_QUOTA_CPU);
  nsbox_quota_session_clear (&s);
}

Test (quota, a_clock_that_went_back_cannot_lock_a_session_out)
{
  struct nsbox_quota_session s = { 0 };
  struct nsbox_quota_limits l = limits (60, 0, 0, 0);
  cr_expect_eq (try_run (&s, &l, T0 + 86400000, 1, 0, 0, NULL), NSBOX_QUOTA_NONE);
  nsbox_quota_settle (&s, 1, T0 + 86400000, 0, 0);
  /* A day back: the bucket counts as fully used, not used for a day: one
   * token's wait (60 per minute), not 24 hours. */
  uint64_t retry = 0;
  cr_expect_eq (try_run (&s, &l, T0, 2, 0, 0, &retry), NSBOX_QUOTA_RATE);
  cr_expect_eq (retry, 1000);
  nsbox_quota_session_clear (&s);
}

Test (quota, state_text_round_trip)
{
  struct nsbox_quota_session s = { 0 };
  struct nsbox_quota_limits l = limits (5, 3, 10000, 20000);
  cr_expect_eq (try_run (&s, &l, T0, 11, 500, 1000, NULL), NSBOX_QUOTA_NONE);
  nsbox_quota_settle (&s, 11, T0 + 700, 300, 700);
  cr_expect_eq (try_run (&s, &l, T0 + 800, 12, 500, 1000, NULL), NSBOX_QUOTA_NONE);
  s.flights[0].pid = 4242;
  s.flights[0].starttime = 777;
  char *text = nsbox_quota_format (&s);
  cr_assert_not_null (text);
  struct nsbox_quota_session back = { 0 };
  struct nsbox_error *err = NULL;
  cr_assert_eq (nsbox_quota_parse (text, &back, &err), 0, "%s",
                err ? nsbox_error_message (err) : "");
  cr_expect_eq (back.window_ms, s.window_ms);
  cr_expect_eq (back.tat_us, s.tat_us);
  cr_expect_eq (memcmp (back.buckets, s.buckets, sizeof s.buckets), 0);
  cr_assert_eq (back.n_flights, 1);
  const struct nsbox_quota_flight *a = &back.flights[0], *b = &s.flights[0];
  cr_expect (a->id == b->id && a->pid == b->pid && a->starttime == b->starttime
             && a->started_ms == b->started_ms && a->deadline_ms == b->deadline_ms
             && a->cpu_ms == b->cpu_ms && a->wall_ms == b->wall_ms);
  char *again = nsbox_quota_format (&back);
  cr_expect_str_eq (again, text);
  free (again);
  free (text);
  nsbox_quota_session_clear (&back);
  nsbox_quota_session_clear (&s);
}

Test (quota, corrupt_state_text_is_refused)
{
  static const char *const bad[] = {
    "",
    "nsbox-quota 2\nwindow 60000\ntat 0\n",
    "nsbox-quota 1\nwindow 60000\n",
    "nsbox-quota 1\nwindow x\ntat 0\n",
    "nsbox-quota 1\nwindow 60000\ntat 0\nbucket 5 1\n",
    "nsbox-quota 1\nwindow 60000\ntat 0\nbucket 5 1 2\nbucket 65 1 2\n",
    "nsbox-quota 1\nwindow 60000\ntat 0\nbucket 0 1 2\n",
    "nsbox-quota 1\nwindow 60000\ntat 0\nflight 1 0 1 2 3 4 5\n",
    "nsbox-quota 1\nwindow 60000\ntat 0\nflight 1 2 3 4 5 6 7 8\n",
    "nsbox-quota 1\nwindow 60000\ntat 0\nrun 1\n",
    "nsbox-quota 1\nwindow 60000\ntat 99999999999999999999999\n",
    "nsbox-quota 1\nwindow 60000\ntat 0 \n",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      struct nsbox_quota_session s = { 0 };
      struct nsbox_error *err = NULL;
      cr_expect_eq (nsbox_quota_parse (bad[i], &s, &err), -EBADMSG, "case %zu accepted", i);
      nsbox_error_free (err);
      nsbox_quota_session_clear (&s);
    }
}

/* ---- the gate, raced ---- */

struct racer
{
  const nsbox_config *config;
  pthread_barrier_t *start;
  int admitted;
};

static void *
race (void *arg)
{
  struct racer *r = arg;
  struct nsbox_quota_ticket t;
  struct nsbox_quota_refusal refusal;
  pthread_barrier_wait (r->start);
  int ret = nsbox_quota_enter (r->config, NULL, 1000, &t, &refusal, NULL);
  r->admitted = ret == 0;
  /* Held while the others try: concurrency counts it. */
  usleep (200 * 1000);
  nsbox_quota_leave (&t, NULL);
  return NULL;
}

static nsbox_config *
quota_config (const char *session, const char *key, const char *value)
{
  nsbox_config *c = nsbox_config_new (NULL);
  cr_assert_not_null (c);
  cr_assert_eq (nsbox_config_set (c, "session", session, NULL), 0);
  cr_assert_eq (nsbox_config_set (c, key, value, NULL), 0);
  return c;
}

static int
race_threads (const nsbox_config *c, int n)
{
  pthread_barrier_t start;
  pthread_barrier_init (&start, NULL, (unsigned)n);
  pthread_t threads[64];
  struct racer racers[64];
  for (int i = 0; i < n; i++)
    {
      racers[i] = (struct racer){ c, &start, 0 };
      cr_assert_eq (pthread_create (&threads[i], NULL, race, &racers[i]), 0);
    }
  int admitted = 0;
  for (int i = 0; i < n; i++)
    {
      pthread_join (threads[i], NULL);
      admitted += racers[i].admitted;
    }
  pthread_barrier_destroy (&start);
  return admitted;
}

Test (quota, threads_cannot_overspend_the_rate_or_the_concurrency)
{
  nsbox_config *c = quota_config ("unit-threads-rate", "quota-runs-per-minute", "7");
  cr_expect_eq (race_threads (c, 40), 7);
  nsbox_config_free (c);
  c = quota_config ("unit-threads-concurrent", "quota-concurrent", "3");
  cr_expect_eq (race_threads (c, 40), 3);
  /* Sessions are independent: another session has its own three. */
  cr_expect_eq (nsbox_config_set (c, "session", "unit-threads-other", NULL), 0);
  cr_expect_eq (race_threads (c, 10), 3);
  nsbox_config_free (c);
}

/* A run that ended without a result (an error, a client that hung up) is
 * charged its whole CPU reservation: hanging up is no way around the quota. */
Test (quota, a_run_without_a_result_is_charged_its_reservation)
{
  nsbox_config *c = quota_config ("unit-no-result", "quota-cpu-time", "3s");
  cr_assert_eq (nsbox_config_set (c, "cpus", "0.5", NULL), 0);
  int admitted = 0;
  for (int i = 0; i < 5; i++)
    {
      struct nsbox_quota_ticket t;
      struct nsbox_quota_refusal refusal;
      /* Each may use 2 s x 0.5 CPU = 1 s. */
      if (nsbox_quota_enter (c, NULL, 2000, &t, &refusal, NULL) == 0)
        {
          admitted++;
          nsbox_quota_leave (&t, NULL);
        }
    }
  cr_expect_eq (admitted, 3, "3 s of CPU, 1 s charged per run without a result: %d admitted",
                admitted);
  nsbox_config_free (c);
}

Test (quota, processes_sharing_a_state_file_cannot_overspend)
{
  char dir[] = "/tmp/nsbox-quota-test-XXXXXX";
  cr_assert_not_null (mkdtemp (dir));
  nsbox_config *c = quota_config ("unit-processes", "quota-runs-per-minute", "5");
  cr_assert_eq (nsbox_config_set_quota_state (c, dir, NULL), 0);
  int *admitted = mmap (NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert_neq (admitted, MAP_FAILED);
  int ready[2];
  cr_assert_eq (pipe (ready), 0);
  enum
  {
    N = 16
  };
  pid_t pids[N];
  for (int i = 0; i < N; i++)
    {
      pids[i] = fork ();
      cr_assert_geq (pids[i], 0);
      if (pids[i] == 0)
        {
          char go;
          close (ready[1]);
          /* All start together when the parent closes the pipe. */
          if (read (ready[0], &go, 1) < 0)
            _exit (2);
          struct nsbox_quota_ticket t;
          struct nsbox_quota_refusal refusal;
          int r = nsbox_quota_enter (c, NULL, 1000, &t, &refusal, NULL);
          if (r == 0)
            __atomic_add_fetch (admitted, 1, __ATOMIC_SEQ_CST);
          nsbox_quota_leave (&t, NULL);
          _exit (r == 0 || r == 1 ? 0 : 1);
        }
    }
  close (ready[0]);
  close (ready[1]);
  for (int i = 0; i < N; i++)
    {
      int status = 0;
      waitpid (pids[i], &status, 0);
      cr_expect (WIFEXITED (status) && WEXITSTATUS (status) == 0, "child %d failed", i);
    }
  cr_expect_eq (*admitted, 5);
  /* A concurrency slot of a launcher killed mid-run is freed, and charged. */
  cr_assert_eq (nsbox_config_set (c, "quota-runs-per-minute", "", NULL), 0);
  cr_assert_eq (nsbox_config_set (c, "quota-concurrent", "1", NULL), 0);
  /* The holder tells when it holds the slot: until then nothing else
   * competes for it (it may have to wait for a slot of the runs above). */
  int held[2];
  cr_assert_eq (pipe (held), 0);
  pid_t holder = fork ();
  cr_assert_geq (holder, 0);
  if (holder == 0)
    {
      close (held[0]);
      struct nsbox_quota_ticket t;
      struct nsbox_quota_refusal refusal;
      int got = 1;
      for (int i = 0; i < 1000 && got == 1; i++)
        if ((got = nsbox_quota_enter (c, NULL, 60000, &t, &refusal, NULL)) == 1)
          usleep (10 * 1000);
      if (got != 0 || write (held[1], "h", 1) != 1)
        _exit (1);
      pause ();
      _exit (0);
    }
  close (held[1]);
  char h;
  cr_assert_eq (read (held[0], &h, 1), 1, "the holder never got its slot");
  close (held[0]);
  struct nsbox_quota_ticket t;
  struct nsbox_quota_refusal refusal;
  int r = nsbox_quota_enter (c, NULL, 1000, &t, &refusal, NULL);
  if (r == 0)
    nsbox_quota_leave (&t, NULL);
  cr_expect_eq (r, 1, "the holder's slot was not counted");
  cr_expect_eq (refusal.kind, NSBOX_QUOTA_CONCURRENT);
  kill (holder, SIGKILL);
  waitpid (holder, NULL, 0);
  cr_expect_eq (nsbox_quota_enter (c, NULL, 1000, &t, &refusal, NULL), 0,
                "the killed holder's slot is still taken");
  nsbox_quota_leave (&t, NULL);
  nsbox_config_free (c);
  munmap (admitted, 4096);
  char cmd[128];
  snprintf (cmd, sizeof cmd, "rm -rf %s", dir);
  cr_expect_eq (system (cmd), 0);
}

Test (quota, a_corrupt_state_file_fails_closed)
{
  char dir[] = "/tmp/nsbox-quota-test-XXXXXX";
  cr_assert_not_null (mkdtemp (dir));
  nsbox_config *c = quota_config ("unit-corrupt", "quota-runs-per-minute", "5");
  cr_assert_eq (nsbox_config_set_quota_state (c, dir, NULL), 0);
  struct nsbox_quota_ticket t;
  struct nsbox_quota_refusal refusal;
  cr_assert_eq (nsbox_quota_enter (c, NULL, 1000, &t, &refusal, NULL), 0);
  nsbox_quota_leave (&t, NULL);
  char cmd[256];
  snprintf (cmd, sizeof cmd,
            "for f in %s/*; do case $f in *.lock) ;; *) echo junk > $f;; esac; done", dir);
  cr_assert_eq (system (cmd), 0);
  struct nsbox_error *err = NULL;
  cr_expect_eq (nsbox_quota_enter (c, NULL, 1000, &t, &refusal, &err), -EBADMSG);
  cr_assert_not_null (err);
  cr_expect (strstr (nsbox_error_message (err), "remove it to reset") != NULL, "%s",
             nsbox_error_message (err));
  nsbox_error_free (err);
  nsbox_config_free (c);
  snprintf (cmd, sizeof cmd, "rm -rf %s", dir);
  cr_expect_eq (system (cmd), 0);
}

/* The launcher reads a sandbox's process tree (supervise.c) when no cgroup
 * counts its CPU. The sandbox makes the tree as deep as it likes: the walk
 * must not recurse per level. Here it runs on a 256 KiB stack over a chain
 * of CHAIN processes (the test's own), which a walk with a frame of a few
 * KiB per level could not survive; the chain's CPU is counted. */
struct walk
{
  pid_t top;
  uint64_t usec;
};

static void *
walk_tree (void *arg)
{
  struct walk *w = arg;
  w->usec = nsbox_tree_cpu_usec (w->top);
  return NULL;
}

Test (quota, a_process_tree_is_walked_without_recursion, .timeout = 60)
{
  enum
  {
    CHAIN = 300
  };
  int ready[2];
  cr_assert_eq (pipe (ready), 0);
  pid_t top = fork ();
  cr_assert_geq (top, 0);
  if (top == 0)
    {
      close (ready[0]);
      setpgid (0, 0); /* the whole chain in one group, killed at once */
      prctl (PR_SET_PDEATHSIG, SIGKILL);
      /* Each dies with its parent: a walk that crashes the test's worker
       * must not leave the chain behind. */
      for (int depth = 0; depth < CHAIN; depth++)
        {
          pid_t parent = getpid ();
          pid_t child = fork ();
          if (child < 0)
            _exit (1);
          if (child > 0)
            {
              waitpid (child, NULL, 0);
              _exit (0);
            }
          if (prctl (PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid () != parent)
            _exit (1);
        }
      /* The deepest one burns a little CPU, then says the chain is whole. */
      for (volatile unsigned long i = 0; i < 200000000UL; i++)
        ;
      (void)!write (ready[1], "x", 1);
      close (ready[1]);
      pause ();
      _exit (0);
    }
  close (ready[1]);
  char x;
  cr_assert_eq (read (ready[0], &x, 1), 1, "the chain was not built");
  close (ready[0]);
  pthread_attr_t attr;
  pthread_attr_init (&attr);
  pthread_attr_setstacksize (&attr, 256 * 1024);
  struct walk w = { top, 0 };
  pthread_t thread;
  cr_assert_eq (pthread_create (&thread, &attr, walk_tree, &w), 0);
  pthread_join (thread, NULL);
  pthread_attr_destroy (&attr);
  cr_expect_neq (w.usec, UINT64_MAX);
  cr_expect_gt (w.usec, 50000, "the deepest process's CPU was not counted: %llu us",
                (unsigned long long)w.usec);
  kill (-top, SIGKILL);
  waitpid (top, NULL, 0);
}
