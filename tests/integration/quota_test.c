/* Sessions and quotas, by effect: a run a quota admits prints what its
 * code prints (the test's own marker); a refused one prints nothing, exits
 * 75 from the CLI (429 from serve) and says which quota. The counts come
 * from the programs' own output, never from nsbox's accounting: separate
 * CLI processes racing for one session's runs per minute, a concurrent run
 * limit seen while the first run is still alive on the host, CPU time that
 * busy loops spend and sleepers do not (a pool: the library's in-process
 * accounting), and the server's 429. */
#include <errno.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define EXIT_REFUSED 75

static char *
path_in (const char *dir, const char *name)
{
  char *p = NULL;
  cr_assert (asprintf (&p, "%s/%s", dir, name) > 0);
  return p;
}

/* The program ran: it printed the marker. */
static bool
ran (struct run_out *out, const char *marker)
{
  size_t len = 0;
  const char *text = run_stdout (out, &len);
  return text && memmem (text, len, marker, strlen (marker)) != NULL;
}

/* Refused by `quota`: nothing ran, exit 75, the JSON names it. */
static bool
refused_by (struct run_out *out, const char *quota, const char *marker)
{
  if (ran (out, marker) || out->exit_status != EXIT_REFUSED)
    return false;
  json_t *q = json_object_get (run_json (out), "quota_refusal");
  const char *name = json_string_value (json_object_get (q, "quota"));
  return name && strcmp (name, quota) == 0;
}

static long long
retry_after_ms (struct run_out *out)
{
  json_t *q = json_object_get (run_json (out), "quota_refusal");
  return json_integer_value (json_object_get (q, "retry_after_ms"));
}

static void
drop_dir (char *dir)
{
  char cmd[4200];
  snprintf (cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_expect_eq (system (cmd), 0);
  free (dir);
}

enum
{
  RATE = 6,    /* runs per minute: one token every 10 s */
  RACERS = 10, /* CLI processes started at once */
};

Test (quota, cli_processes_racing_get_exactly_the_rate_then_one_after_the_refill, .timeout = 300)
{
  char *dir = user_dir ();
  char *log = path_in (dir, "audit.log");
  char tag[64], code[128], marker[96];
  make_run_tag (tag, sizeof tag);
  snprintf (marker, sizeof marker, "ran-%s", tag);
  snprintf (code, sizeof code, "print('ran-%s')\n", tag);
  char rate[16];
  snprintf (rate, sizeof rate, "%d", RATE);
  const char *const args[]
      = { "--store", dir,           "--session", "race", "--quota-runs-per-minute",
          rate,      "--audit-log", log,         NULL };
  struct run_job jobs[RACERS];
  for (int i = 0; i < RACERS; i++)
    run_cli_spawn (args, true, &jobs[i]);
  /* Every launcher has its code before any is waited for: they race. */
  for (int i = 0; i < RACERS; i++)
    run_job_feed (&jobs[i], code, strlen (code));
  int admitted = 0, refused = 0;
  long long wait_ms = 0;
  for (int i = 0; i < RACERS; i++)
    {
      struct run_out out;
      run_cli_wait (&jobs[i], code, strlen (code), &out);
      if (ran (&out, marker))
        {
          RUN_ASSERT (&out, out.exit_status == 0, "an admitted run must succeed");
          admitted++;
        }
      else
        {
          RUN_ASSERT (&out, refused_by (&out, "runs-per-minute", marker),
                      "a run that did not print its marker must be refused by the rate");
          refused++;
          long long w = retry_after_ms (&out);
          cr_assert (w > 0 && w <= 10000, "retry_after_ms %lld, expected up to 10 s", w);
          if (w > wait_ms)
            wait_ms = w;
        }
      run_out_free (&out);
    }
  cr_expect_eq (admitted, RATE, "%d of %d racing launchers ran, the rate is %d", admitted, RACERS,
                RATE);
  cr_expect_eq (refused, RACERS - RATE);

  /* Another session is not this one's: it runs now. */
  const char *const other[]
      = { "--store", dir, "--session", "other", "--quota-runs-per-minute", rate, NULL };
  struct run_out out;
  run_cli (code, strlen (code), other, &out);
  RUN_ASSERT (&out, ran (&out, marker), "another session must not be refused");
  run_out_free (&out);

  /* After the wait it asked for, exactly one more. */
  sleep_seconds ((double)wait_ms / 1000 + 0.2);
  run_cli (code, strlen (code), args, &out);
  RUN_ASSERT (&out, ran (&out, marker), "a run after the refill time must be admitted");
  run_out_free (&out);
  run_cli (code, strlen (code), args, &out);
  RUN_ASSERT (&out, refused_by (&out, "runs-per-minute", marker),
              "the refill is one token, the next run is refused");
  run_out_free (&out);

  /* Each refusal is audited, as a refusal. */
  size_t len = 0;
  char *text = read_file (log, &len);
  cr_assert_not_null (text);
  int runs = 0, refusals = 0;
  for (char *p = text; (p = strstr (p, "\"event\":\"")); p++)
    {
      runs += strncmp (p, "\"event\":\"run\"", 13) == 0;
      refusals += strncmp (p, "\"event\":\"refused\"", 17) == 0
                  && strstr (p, "\"decision\":\"refused\"") != NULL;
    }
  cr_expect_eq (runs, admitted + 1, "audited runs");
  cr_expect_eq (refusals, refused + 1, "audited refusals");
  free (text);
  free (log);
  drop_dir (dir);
}

Test (quota, a_concurrent_run_is_refused_while_the_first_is_alive, .timeout = 120)
{
  char *dir = user_dir ();
  char sleep_code[128], timeout[32];
  snprintf (sleep_code, sizeof sleep_code, "import time\ntime.sleep(%.2f)\nprint('slept')\n",
            harness_scaled (3));
  harness_scaled_duration (30, timeout, sizeof timeout);
  const char *const args[]
      = { "--store",   dir,     "--session", "one-at-a-time", "--quota-concurrent", "1",
          "--timeout", timeout, NULL };
  struct run_job first;
  run_cli_spawn (args, true, &first);
  run_job_feed (&first, sleep_code, strlen (sleep_code));
  sleep_seconds (harness_scaled (1));
  struct run_out out;
  run_cli ("print('second')\n", 16, args, &out);
  cr_assert (!process_gone (first.pid), "the first run ended too early to judge");
  RUN_ASSERT (&out, refused_by (&out, "concurrent", "second"),
              "a second run while the first is alive must be refused");
  run_out_free (&out);
  run_cli_wait (&first, sleep_code, strlen (sleep_code), &out);
  RUN_ASSERT (&out, ran (&out, "slept"), "the first run must finish");
  run_out_free (&out);
  run_cli ("print('third')\n", 15, args, &out);
  RUN_ASSERT (&out, ran (&out, "third"), "once the first ended, a run is admitted");
  run_out_free (&out);
  drop_dir (dir);
}

/* Host CPU seconds that `for _ in range(n): pass` costs the rootfs's own
 * python3 (the least of three tries), run on the host outside any sandbox
 * (-S: its site setup would look for the host's paths). */
static double
host_loop_cpu (long n)
{
  double best = 0;
  for (int i = 0; i < 3; i++)
    {
      char cmd[4352];
      snprintf (cmd, sizeof cmd,
                "'%s/usr/bin/python3' -S -c 'import time\nt = time.process_time()\n"
                "for _ in range(%ld): pass\nprint(time.process_time() - t)'",
                harness_rootfs (), n);
      FILE *f = popen (cmd, "r");
      cr_assert_not_null (f, "popen python3");
      double c = 0;
      int got = fscanf (f, "%lf", &c);
      cr_assert (pclose (f) == 0 && got == 1 && c > 0, "%s", cmd);
      if (i == 0 || c < best)
        best = c;
    }
  return best;
}

/* CPU seconds that running CODE through `nsbox run` costs the host under the
 * test's runtime, the least of two tries: what wait4 counts for the launcher
 * and everything it waited for (under runsc, gVisor too), measured by the
 * kernel, not by nsbox. */
static double
sandbox_cpu (const char *code, const char *expect, const char *timeout)
{
  const char *const args[] = { "--timeout", timeout, NULL };
  double best = 0;
  for (int i = 0; i < 2; i++)
    {
      struct run_out out;
      run_cli (code, strlen (code), args, &out);
      RUN_ASSERT (&out, ran (&out, expect), "calibration run %d", i + 1);
      if (i == 0 || out.cpu_seconds < best)
        best = out.cpu_seconds;
      run_out_free (&out);
    }
  return best;
}

/* In one launcher (a pool: the library's in-process accounting), sleepers
 * whose wall time together exceeds the CPU quota all run; busy runs spend
 * it and are refused.
 *
 * Each busy run makes a fixed number of loop turns, about a second of CPU
 * as measured on the host first, and ends: what it spends does not depend
 * on how much of the machine it gets (the program's own clock is no
 * measure: gVisor counts the time its task is throttled as its CPU time).
 * What a busy run and a sleeper cost in a sandbox of the test's runtime is
 * then measured from the host, now, under the machine's present load: under
 * runsc gVisor's own CPU is the sandbox's, and it grows with the load (one
 * CI run saw a busy run and four sleepers spend 2.5 times the host loop).
 * A run is admitted while the CPU used so far plus its own possible CPU
 * (timeout times cpus, 0.5) fits in the quota; the quota leaves room for
 * the four sleepers and two busy runs beyond that, R. The busy runs go on
 * until they have spent more than R: with each costing the pool's sandbox
 * b, 2 to 4 are admitted while R/4 < b <= R, that is while b is between
 * about 0.6 and 2 times the measured cost (a pooled run does not pay the
 * start-up the measured one did, so b is the smaller, 0.75 to 1.1 times
 * here on a quiet machine), and the next is refused. The
 * sleepers spend more wall time than the quota and almost no CPU: they
 * must all run. */
Test (quota, cpu_time_counts_cpu_really_used, .timeout = 300)
{
  long turns = 10000000;
  turns = (long)((double)turns / host_loop_cpu (turns));
  double t = harness_scaled (12.0);
  char timeout[32], quota[32];
  snprintf (timeout, sizeof timeout, "%.0fms", t * 1000);
  char sleeper[96];
  snprintf (sleeper, sizeof sleeper, "import time\ntime.sleep(%.3f)\nprint('slept')\n", t * 0.3);
  char busy[160];
  snprintf (busy, sizeof busy,
            "print('busy', flush=True)\nfor _ in range(%ld): pass\nprint('burnt')\n", turns);
  double burn = sandbox_cpu (busy, "burnt", timeout);
  double nap = sandbox_cpu ("import time\ntime.sleep(0.2)\nprint('slept')\n", "slept", timeout);
  snprintf (quota, sizeof quota, "%.0fms", (t * 0.5 + nap * 4 + burn * 2) * 1000);
  cr_log_info ("%ld loop turns cost a sandbox %.3f s of CPU, a sleeper %.3f s; timeout %s, "
               "quota %s",
               turns, burn, nap, timeout, quota);
  const char *const args[]
      = { "--timeout", timeout, "--quota-cpu-time", quota, "--session", "cpu", NULL };
  struct pool_job pool;
  pool_start (args, 1, &pool);
  for (int i = 0; i < 4; i++)
    {
      struct run_out out;
      pool_run (&pool, sleeper, NULL, &out);
      RUN_ASSERT (&out, ran (&out, "slept"),
                  "sleeper %d must run: sleeping spends wall time, not CPU", i + 1);
      run_out_free (&out);
    }
  int busy_admitted = 0;
  bool refused = false;
  for (int i = 0; i < 8 && !refused; i++)
    {
      struct run_out out;
      pool_run (&pool, busy, NULL, &out);
      json_t *q = json_object_get (run_json (&out), "quota_refusal");
      const char *name = json_string_value (json_object_get (q, "quota"));
      if (name)
        {
          RUN_ASSERT (&out, strcmp (name, "cpu-time") == 0 && !ran (&out, "busy"),
                      "refused by the CPU quota, nothing ran");
          refused = true;
        }
      else
        {
          RUN_ASSERT (&out, ran (&out, "burnt"),
                      "an admitted busy run makes its %ld turns within %s", turns, timeout);
          /* For the log only: the verdicts never rest on nsbox's count. */
          cr_log_info ("busy run %d: cpu_ms %lld", i + 1,
                       (long long)json_integer_value (json_object_get (run_json (&out), "cpu_ms")));
          busy_admitted++;
        }
      run_out_free (&out);
    }
  cr_expect (refused, "busy runs of %.3f s CPU each were never refused by a quota of %s", burn,
             quota);
  /* Up to 7: under runsc the measured sleeper pays gVisor's start-up,
   * which a pooled sleeper does not, so the sleepers' room holds more
   * busy runs than natively (5 and 6 were seen in CI); and as few as 1,
   * when gVisor's own CPU for the pooled sleepers came out above the
   * measured one (seen once). Sleepers counted by their wall time instead
   * would have spent the quota before the fourth: that is the check above. */
  cr_expect (busy_admitted >= 1 && busy_admitted <= 7, "%d busy runs admitted, expected 1 to 7",
             busy_admitted);
  pool_stop (&pool);
}

Test (quota, serve_answers_429_with_retry_after_and_the_refusal, .timeout = 120)
{
  const char *const args[] = { "--quota-runs-per-minute", "2", "--pool-size", "1", NULL };
  struct serve_job s;
  serve_start (args, &s);
  static const char body[] = "{\"code\":\"print('served')\",\"session\":\"s429\"}";
  char *answer = NULL;
  bool retry = false;
  for (int i = 0; i < 2; i++)
    {
      long st
          = serve_http (s.socket, "POST", "/v1/runs", body, strlen (body), NULL, &answer, &retry);
      cr_assert (st == 200 && strstr (answer, "served\\n"), "run %d: %ld %s", i + 1, st, answer);
      free (answer);
    }
  long st = serve_http (s.socket, "POST", "/v1/runs", body, strlen (body), NULL, &answer, &retry);
  cr_assert (st == 429 && retry, "the third run must get 429 with Retry-After: %ld %s", st, answer);
  cr_assert (strstr (answer, "\"quota\":\"runs-per-minute\"") && !strstr (answer, "served\\n"),
             "%s", answer);
  free (answer);
  /* Another session, through the header. */
  static const char plain[] = "{\"code\":\"print('served')\"}";
  const char *const header[] = { "X-Nsbox-Session: s429-other", NULL };
  st = serve_http (s.socket, "POST", "/v1/runs", plain, strlen (plain), header, &answer, NULL);
  cr_assert (st == 200 && strstr (answer, "served\\n"), "%ld %s", st, answer);
  free (answer);
  /* nsbox run --server (as the launchers' user): the refusal's exit status
   * and text. */
  struct run_out out;
  const char *const session[] = { "--session", "s429-cli", NULL };
  for (int i = 0; i < 2; i++)
    {
      serve_run (&s, "print('served')\n", session, &out);
      RUN_ASSERT (&out, ran (&out, "served"), "run %d must be admitted", i + 1);
      run_out_free (&out);
    }
  serve_run (&s, "print('served')\n", session, &out);
  RUN_ASSERT (&out, refused_by (&out, "runs-per-minute", "served"),
              "nsbox run --server must report the refusal");
  run_out_free (&out);
  /* The same session named by another uid is that uid's own: this process
   * (root) is another uid than the launchers' in the unprivileged passes. */
  bool drop = false;
  uid_t uid;
  gid_t gid;
  harness_test_ids (&drop, &uid, &gid);
  static const char cli_session[] = "{\"code\":\"print('served')\",\"session\":\"s429-cli\"}";
  st = serve_http (s.socket, "POST", "/v1/runs", cli_session, strlen (cli_session), NULL, &answer,
                   NULL);
  cr_assert_eq (st, drop ? 200 : 429, "uid %u naming uid %u's spent session: %ld %s",
                (unsigned)getuid (), (unsigned)uid, st, answer);
  free (answer);
  st = serve_http (s.socket, "GET", "/metrics", NULL, 0, NULL, &answer, NULL);
  cr_assert (st == 200 && strstr (answer, "outcome=\"refused\""), "%s", answer);
  free (answer);
  char *log = NULL;
  cr_expect_eq (serve_stop (&s, &log), 0, "%s", log ? log : "");
  free (log);
}

/* `nsbox run` under strace as the launcher's user; returns its exit status
 * and whether it made a user or PID namespace (clone or unshare flags). */
static int
traced_run (const char *const *args, bool *namespaces)
{
  bool drop = false;
  uid_t uid;
  gid_t gid;
  harness_test_ids (&drop, &uid, &gid);
  char *dir = user_dir ();
  char *trace = path_in (dir, "trace");
  char who[96] = "";
  if (drop)
    snprintf (who, sizeof who, "setpriv --reuid=%u --regid=%u --clear-groups ", (unsigned)uid,
              (unsigned)gid);
  /* LeakSanitizer cannot run under ptrace: a sanitizer build's leak check
   * is off for the traced launcher (the untraced passes keep it). */
  const char *asan = getenv ("ASAN_OPTIONS");
  char cmd[8192];
  int n = snprintf (cmd, sizeof cmd,
                    "printf 'print(1)' | env ASAN_OPTIONS='%s%sdetect_leaks=0' %sstrace -f -qq -e "
                    "trace=clone,clone3,unshare -o '%s' '%s' run --rootfs '%s'",
                    asan ? asan : "", asan && *asan ? ":" : "", who, trace, harness_nsbox_bin (),
                    harness_rootfs ());
  for (size_t i = 0; args[i] && n > 0 && (size_t)n < sizeof cmd - 256; i++)
    n += snprintf (cmd + n, sizeof cmd - (size_t)n, " '%s'", args[i]);
  snprintf (cmd + n, sizeof cmd - (size_t)n, " >/dev/null 2>&1");
  int status = system (cmd);
  size_t len = 0;
  char *text = read_file (trace, &len);
  cr_assert_not_null (text, "strace wrote no trace (%s)", cmd);
  *namespaces = strstr (text, "CLONE_NEWUSER") || strstr (text, "CLONE_NEWPID");
  free (text);
  unlink (trace);
  free (trace);
  drop_dir (dir);
  return WIFEXITED (status) ? WEXITSTATUS (status) : -1;
}

/* Seen from outside the launcher: the admitted run makes the sandbox's
 * namespaces, the refused one makes none. */
Test (quota, a_refused_run_starts_no_sandbox, .timeout = 120)
{
  char *store = user_dir ();
  const char *const args[]
      = { "--store", store, "--session", "no-sandbox", "--quota-runs-per-minute", "1", NULL };
  bool namespaces = false;
  cr_expect_eq (traced_run (args, &namespaces), 0, "the first run must be admitted");
  cr_expect (namespaces, "the admitted run made no namespace: the probe sees nothing");
  cr_expect_eq (traced_run (args, &namespaces), 75, "the second run must be refused");
  cr_expect (!namespaces, "a refused run made a namespace");
  drop_dir (store);
}

/* Without a cgroup, CPU burned by processes the program leaves behind
 * (they die with the namespace, their time in nobody's rusage) still
 * counts: read from /proc while the run lasts. Two detached busy loops
 * spend half of t between them before the program ends (it waits for
 * that, reading their own counters: under load they get the CPU late).
 * The run may last 4t: beside the other lane's busy sandboxes, in CI, the
 * loops got a quarter of a CPU (2.5 s in 11 s) however the harness's time
 * scale was measured; the program ends as soon as they have spent t/2. */
Test (quota, cpu_of_processes_left_behind_counts, .timeout = 120)
{
  char *store = user_dir ();
  double t = harness_scaled (2);
  char timeout[32], quota[32], code[1024];
  snprintf (timeout, sizeof timeout, "%.0fms", t * 1000 * 4);
  /* One run may use 4t x 1 CPU = 4t; the quota is 4.25 t: a second run
   * is admitted only if the first was charged less than a quarter of t,
   * and the loops spend half of it. */
  snprintf (quota, sizeof quota, "%.0fms", t * 1000 * 4.25);
  snprintf (code, sizeof code,
            "import os, subprocess, sys, time\n"
            "kids = [subprocess.Popen([sys.executable, '-c', 'while True: pass'], "
            "start_new_session=True) for i in range(2)]\n"
            "def spent():\n"
            "    s = 0\n"
            "    for k in kids:\n"
            "        f = open('/proc/%%d/stat' %% k.pid).read().rsplit(')', 1)[1].split()\n"
            "        s += int(f[11]) + int(f[12])\n"
            "    return s / os.sysconf('SC_CLK_TCK')\n"
            "end = time.monotonic() + %.3f\n"
            "while spent() < %.3f and time.monotonic() < end:\n"
            "    time.sleep(0.02)\n"
            "print('left them' if spent() >= %.3f else 'starved: %%.2f s' %% spent())\n",
            t * 3.6, t / 2, t / 2);
  const char *const args[]
      = { "--store", store, "--session",        "left-behind", "--timeout", timeout,
          "--cpus",  "1",   "--quota-cpu-time", quota,         NULL };
  struct run_out out;
  run_cli (code, strlen (code), args, &out);
  RUN_ASSERT (&out, ran (&out, "left them"),
              "the first run must be admitted, and its loops spend t/2 (%.2f s) before it ends",
              t / 2);
  run_out_free (&out);
  run_cli ("print('next')\n", 14, args, &out);
  RUN_ASSERT (&out, refused_by (&out, "cpu-time", "next"),
              "the busy processes left behind spent the CPU quota");
  run_out_free (&out);
  drop_dir (store);
}
