/* Live sandboxes through `nsbox repl --json` (the library's
 * nsbox_sandbox_*, tests/lib/repl_job.c): state kept between runs, the
 * interrupt at timeout and the sandbox's loss, and what is left on the host
 * afterwards (looked for in /proc, not taken from nsbox). The program's
 * attacks on its driver are in tests/hostile/driver_test.c. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

/* A background process whose command line names `marker`. */
static void
start_marked (struct repl_job *r, char *marker, size_t size)
{
  struct timespec ts;
  clock_gettime (CLOCK_REALTIME, &ts);
  snprintf (marker, size, "nsbox-live-%d-%ld", (int)getpid (), (long)ts.tv_nsec);
  char code[512];
  snprintf (code, sizeof code,
            "import subprocess, sys\n"
            "bg = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', '%s'])\n"
            "bg.pid > 0",
            marker);
  repl_feed (r, code);
}

Test (sandbox, state_survives_between_runs, .timeout = 120)
{
  if (repl_runsc_refused ())
    return;
  struct repl_job r;
  repl_start (&r, "10s");
  repl_feed (&r, "x = 41\nimport json\n"
                 "def twice(v):\n    return json.dumps([v, v])\n"
                 "open('/tmp/note', 'w').write('kept')");
  json_t *a = repl_next (&r, 30);
  cr_assert_eq (json_int_of (a, "exit_code"), 0, "run 1: %s", json_str_of (a, "stderr"));
  cr_assert_str_eq (json_str_of (a, "value"), "4");
  cr_assert_eq (json_int_of (a, "sandbox_run"), 1);
  const char *id = json_str_of (a, "sandbox_id");
  cr_assert (id && strlen (id) == 32 && strspn (id, "0123456789abcdef") == 32, "id %s", id);
  repl_feed (&r, "y = x + 1\n1/0");
  json_t *b = repl_next (&r, 30);
  cr_assert_eq (json_int_of (b, "exit_code"), 1);
  cr_assert (strstr (json_str_of (b, "stderr"), "ZeroDivisionError"), "stderr: %s",
             json_str_of (b, "stderr"));
  cr_assert (json_is_null (json_object_get (b, "value")));
  repl_feed (&r, "print(open('/tmp/note').read())\ntwice(y)");
  json_t *c = repl_next (&r, 30);
  cr_assert_eq (json_int_of (c, "exit_code"), 0, "run 3: %s", json_str_of (c, "stderr"));
  cr_assert_str_eq (json_str_of (c, "stdout"), "kept\n");
  cr_assert_str_eq (json_str_of (c, "value"), "'[42, 42]'");
  cr_assert_str_eq (json_str_of (c, "sandbox_id"), id);
  cr_assert_eq (json_int_of (c, "sandbox_run"), 3);
  cr_assert_not (json_bool_of (c, "sandbox_lost"));
  cr_assert_eq (repl_end (&r, NULL), 0);
}

Test (sandbox, two_sandboxes_share_nothing, .timeout = 120)
{
  if (repl_runsc_refused ())
    return;
  struct repl_job a, b;
  repl_start (&a, "10s");
  repl_start (&b, "10s");
  repl_feed (&a, "secret = 1\nopen('/tmp/mine', 'w').write('a')\nimport os\nos.getpid()");
  json_t *ra = repl_next (&a, 30);
  cr_assert_eq (json_int_of (ra, "exit_code"), 0, "%s", json_str_of (ra, "stderr"));
  repl_feed (&b, "import os\n"
                 "print('secret' in dir(), os.path.exists('/tmp/mine'), len(os.listdir('/proc')))");
  json_t *rb = repl_next (&b, 30);
  cr_assert_eq (json_int_of (rb, "exit_code"), 0, "%s", json_str_of (rb, "stderr"));
  cr_assert (strncmp (json_str_of (rb, "stdout"), "False False ", 12) == 0, "b saw: %s",
             json_str_of (rb, "stdout"));
  cr_assert_str_neq (json_str_of (ra, "sandbox_id"), json_str_of (rb, "sandbox_id"));
  cr_assert_eq (repl_end (&a, NULL), 0);
  cr_assert_eq (repl_end (&b, NULL), 0);
}

Test (sandbox, a_background_process_lives_until_the_sandbox_closes, .timeout = 120)
{
  if (repl_runsc_refused ())
    return;
  struct repl_job r;
  char marker[96];
  repl_start (&r, "10s");
  start_marked (&r, marker, sizeof marker);
  json_t *a = repl_next (&r, 30);
  cr_assert_eq (json_int_of (a, "exit_code"), 0, "%s", json_str_of (a, "stderr"));
  repl_feed (&r, "bg.poll() is None");
  json_t *b = repl_next (&r, 30);
  cr_assert_str_eq (json_str_of (b, "value"), "True");
  cr_assert_eq (host_processes_become (marker, 1, 5), 1,
                "the background process is not on the host");
  cr_assert_eq (repl_end (&r, NULL), 0);
  cr_assert_eq (host_processes_become (marker, 0, 2), 0, "a process of the closed sandbox is left");
}

Test (sandbox, timeout_interrupts_and_keeps_state, .timeout = 120)
{
  if (repl_runsc_refused ())
    return;
  struct repl_job r;
  char timeout[32];
  double timeout_s = harness_scaled (1);
  repl_start (&r, harness_scaled_duration (1, timeout, sizeof timeout));
  repl_feed (&r, "x = 5");
  json_t *first = repl_next (&r, 30);
  cr_assert_eq (json_int_of (first, "exit_code"), 0, "%s", json_str_of (first, "stderr"));
  repl_feed (&r, "while True:\n    pass");
  json_t *a = repl_next (&r, 30);
  double took = now_seconds () - r.fed_at;
  cr_assert (json_bool_of (a, "timed_out"));
  cr_assert_eq (json_int_of (a, "exit_code"), 130);
  cr_assert (strstr (json_str_of (a, "stderr"), "KeyboardInterrupt"), "stderr: %s",
             json_str_of (a, "stderr"));
  cr_assert_not (json_bool_of (a, "sandbox_lost"));
  cr_assert (took < timeout_s + 2 + harness_scaled (1), "the interrupted run took %.2fs", took);
  repl_feed (&r, "x * 2");
  json_t *b = repl_next (&r, 30);
  cr_assert_str_eq (json_str_of (b, "value"), "10");
  cr_assert_eq (repl_end (&r, NULL), 0);
}

Test (sandbox, ignoring_the_interrupt_loses_the_sandbox, .timeout = 120)
{
  if (repl_runsc_refused ())
    return;
  struct repl_job r;
  char marker[96], timeout[32];
  /* Long enough for the first run's Popen on a loaded machine. */
  double timeout_s = harness_scaled (2);
  repl_start (&r, harness_scaled_duration (2, timeout, sizeof timeout));
  start_marked (&r, marker, sizeof marker);
  json_t *first = repl_next (&r, 30);
  cr_assert_eq (json_int_of (first, "exit_code"), 0, "%s", json_str_of (first, "stderr"));
  int seen = host_processes_become (marker, 1, 5);
  cr_assert_eq (seen, 1, "%d host processes name %s", seen, marker);
  repl_feed (&r, "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n"
                 "    pass");
  json_t *a = repl_next (&r, 30);
  double took = now_seconds () - r.fed_at;
  cr_assert (json_bool_of (a, "sandbox_lost"));
  cr_assert (json_bool_of (a, "timed_out"));
  cr_assert_eq (json_int_of (a, "exit_code"), 137);
  cr_assert (took < timeout_s + 2 + harness_scaled (1), "the lost run took %.2fs", took);
  /* Gone from the host before the repl ends. */
  cr_assert_eq (host_processes_become (marker, 0, 2), 0, "a process of the lost sandbox is left");
  repl_feed (&r, "1");
  char *err;
  cr_assert_eq (repl_end (&r, &err), 125);
  cr_assert (strstr (err, "is gone (run 2 did not return within 2s of its timeout)"), "stderr: %s",
             err);
  free (err);
}

Test (sandbox, max_runs_ends_the_sandbox_and_the_audit_log_names_it, .timeout = 120)
{
  if (repl_runsc_refused ())
    return;
  char dir[] = "/tmp/nsbox-live-audit-XXXXXX";
  cr_assert_not_null (mkdtemp (dir));
  chmod (dir, 0777);
  char log[96];
  snprintf (log, sizeof log, "%s/audit.log", dir);
  struct repl_job r;
  memset (&r, 0, sizeof r);
  const char *const args[] = { "--json", "--sandbox-max-runs", "2", "--audit-log", log, NULL };
  run_nsbox_spawn ("repl", true, args, false, &r.job);
  repl_feed (&r, "n = 1");
  json_t *a = repl_next (&r, 30);
  cr_assert_eq (json_int_of (a, "exit_code"), 0, "%s", json_str_of (a, "stderr"));
  char id[33];
  snprintf (id, sizeof id, "%s", json_str_of (a, "sandbox_id"));
  repl_feed (&r, "n + 1");
  json_t *b = repl_next (&r, 30);
  cr_assert_str_eq (json_str_of (b, "value"), "2");
  repl_feed (&r, "n + 2");
  char *err;
  cr_assert_eq (repl_end (&r, &err), 125);
  cr_assert (strstr (err, "is gone (it reached its sandbox-max-runs)"), "stderr: %s", err);
  free (err);
  /* Two runs, each a record naming the sandbox. */
  FILE *f = fopen (log, "r");
  cr_assert_not_null (f, "no audit log at %s", log);
  char line[65536];
  int records = 0;
  while (fgets (line, sizeof line, f))
    {
      json_t *rec = json_loads (line, 0, NULL);
      cr_assert_not_null (rec, "not JSON: %s", line);
      cr_assert_str_eq (json_str_of (rec, "sandbox_id"), id, "record: %s", line);
      json_decref (rec);
      records++;
    }
  fclose (f);
  cr_assert_eq (records, 2);
  unlink (log);
  rmdir (dir);
}

/* The watcher ends a sandbox nobody runs in: its processes leave the host
 * at the deadline, with no further run asked for. */
static void
expect_watched_away (const char *key, const char *value, double deadline_s, bool keep_busy)
{
  if (repl_runsc_refused ())
    return;
  struct repl_job r;
  char marker[96];
  repl_start_with (&r, "10s", key, value);
  start_marked (&r, marker, sizeof marker);
  json_t *a = repl_next (&r, 30);
  cr_assert_eq (json_int_of (a, "exit_code"), 0, "%s", json_str_of (a, "stderr"));
  double opened = r.fed_at;
  int seen = host_processes_become (marker, 1, 5);
  cr_assert_eq (seen, 1, "%d host processes name %s", seen, marker);
  /* Before the deadline it is there; after it, gone from the host. */
  double until = opened + deadline_s + harness_scaled (3);
  bool gone = false;
  while (now_seconds () < until && !gone)
    {
      /* Runs whose results stay in the pipe: one past the deadline is
       * refused, and prints none. */
      if (keep_busy)
        repl_feed (&r, "1");
      usleep (200000);
      gone = host_processes_with (marker) == 0;
      cr_assert (gone || now_seconds () < until, "still there");
    }
  cr_assert (gone, "a process of the sandbox is still on the host %.1fs after %s %s",
             now_seconds () - opened, key, value);
  cr_assert (now_seconds () - opened >= deadline_s - 0.3, "gone after %.2fs, before its %s %s",
             now_seconds () - opened, key, value);
  repl_feed (&r, "1");
  char *err;
  cr_assert_eq (repl_end (&r, &err), 125);
  cr_assert (strstr (err, key + 2), "stderr does not name %s: %s", key + 2, err);
  free (err);
}

Test (sandbox, the_idle_timeout_removes_an_idle_sandbox_from_the_host, .timeout = 120)
{
  expect_watched_away ("--sandbox-idle-timeout", "2s", 2, false);
}

Test (sandbox, the_lifetime_ends_a_busy_sandbox, .timeout = 120)
{
  expect_watched_away ("--sandbox-max-lifetime", "3s", 3, true);
}
