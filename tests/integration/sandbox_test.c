/* Live sandboxes through `nsbox repl --json` (the library's
 * nsbox_sandbox_*): state kept between runs, the interrupt at timeout and
 * the sandbox's loss, a driver the program attacks, and what is left on
 * the host afterwards (looked for in /proc, not taken from nsbox). */
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

/* A repl being fed block by block, its JSON lines read as they come. */
struct repl
{
  struct run_job job;
  char buf[1 << 20];
  size_t len;
  json_t *results[32];
  size_t n;
  double fed_at;
};

static void
repl_start_with (struct repl *r, const char *timeout, const char *key, const char *value)
{
  memset (r, 0, sizeof *r);
  const char *const args[] = { "--json", "--timeout", timeout, key, value, NULL };
  run_nsbox_spawn ("repl", true, args, false, &r->job);
}

static void
repl_start (struct repl *r, const char *timeout)
{
  repl_start_with (r, timeout, NULL, NULL);
}

/* One block (an empty line ends it). */
static void
repl_feed (struct repl *r, const char *block)
{
  r->fed_at = now_seconds ();
  size_t len = strlen (block);
  cr_assert (write (r->job.in_fd, block, len) == (ssize_t)len, "write: %s", strerror (errno));
  cr_assert (write (r->job.in_fd, "\n\n", 2) == 2);
}

/* The next result line, within `seconds`; NULL at EOF. */
static json_t *
repl_next (struct repl *r, double seconds)
{
  double deadline = now_seconds () + harness_scaled (seconds);
  for (;;)
    {
      char *nl = memchr (r->buf, '\n', r->len);
      if (nl)
        {
          json_error_t je;
          json_t *j = json_loadb (r->buf, (size_t)(nl - r->buf), 0, &je);
          cr_assert_not_null (j, "not a JSON line: %.*s", (int)(nl - r->buf), r->buf);
          r->len -= (size_t)(nl + 1 - r->buf);
          memmove (r->buf, nl + 1, r->len);
          cr_assert (r->n < 32);
          r->results[r->n++] = j;
          return j;
        }
      double left = deadline - now_seconds ();
      cr_assert (left > 0, "no result line within %.1fs", harness_scaled (seconds));
      struct pollfd p = { r->job.out_fd, POLLIN, 0 };
      poll (&p, 1, (int)(left * 1000) + 1);
      ssize_t n = read (r->job.out_fd, r->buf + r->len, sizeof r->buf - r->len);
      if (n == 0)
        return NULL;
      if (n < 0 && errno != EAGAIN && errno != EINTR)
        cr_assert_fail ("read: %s", strerror (errno));
      if (n > 0)
        r->len += (size_t)n;
    }
}

/* Closes stdin, waits for the repl; its exit status, stderr in *err. */
static int
repl_end (struct repl *r, char **err)
{
  close (r->job.in_fd);
  char tail[4096];
  while (read (r->job.out_fd, tail, sizeof tail) > 0)
    ;
  size_t cap = 65536, len = 0;
  char *e = malloc (cap);
  cr_assert_not_null (e);
  ssize_t n;
  while ((n = read (r->job.err_fd, e + len, cap - len - 1)) > 0)
    len += (size_t)n;
  e[len] = '\0';
  close (r->job.out_fd);
  close (r->job.err_fd);
  int status;
  while (waitpid (r->job.pid, &status, 0) < 0)
    cr_assert (errno == EINTR);
  for (size_t i = 0; i < r->n; i++)
    json_decref (r->results[i]);
  if (err)
    *err = e;
  else
    free (e);
  return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
}

/* A background process whose command line names `marker`. */
static void
start_marked (struct repl *r, char *marker, size_t size)
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

/* Python: the driver's answer pipe, the highest pipe the program has. */
#define FIND_CONTROL_FD                                                                            \
  "import os, stat\n"                                                                              \
  "def is_pipe(f):\n"                                                                              \
  "    try:\n"                                                                                     \
  "        return stat.S_ISFIFO(os.fstat(f).st_mode)\n"                                            \
  "    except OSError:\n"                                                                          \
  "        return False\n"                                                                         \
  "fd = [f for f in range(3, 64) if is_pipe(f)][-1]\n"

static bool
runsc_refused (void)
{
  if (!harness_is_runsc ())
    return false;
  struct repl r;
  repl_start (&r, "5s");
  char *err;
  int status = repl_end (&r, &err);
  cr_assert (status == 125, "expected exit status 125 under runsc, got %d", status);
  cr_assert (strstr (err, "not available with runtime runsc"), "expected the refusal, got: %s",
             err);
  free (err);
  return true;
}

Test (sandbox, state_survives_between_runs, .timeout = 120)
{
  if (runsc_refused ())
    return;
  struct repl r;
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
  if (runsc_refused ())
    return;
  struct repl a, b;
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
  if (runsc_refused ())
    return;
  struct repl r;
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
  if (runsc_refused ())
    return;
  struct repl r;
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
  if (runsc_refused ())
    return;
  struct repl r;
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

/* The program attacks its driver: each case ends with a correct or a
 * clearly failed result for that run. */
Test (sandbox, hostile_fake_answers_and_a_dead_driver, .timeout = 120)
{
  if (runsc_refused ())
    return;
  struct repl r;
  repl_start (&r, "5s");
  /* A frame on stdout is output. */
  repl_feed (&r, "v = 1\nprint('D 1 0 1 3')\nprint('abc')");
  json_t *a = repl_next (&r, 30);
  cr_assert_str_eq (json_str_of (a, "stdout"), "D 1 0 1 3\nabc\n");
  cr_assert (json_is_null (json_object_get (a, "value")));
  /* A forged answer on the control socket ends this run only. */
  repl_feed (&r, FIND_CONTROL_FD "os.write(fd, b'D 2 7 1 4\\nfake')");
  json_t *b = repl_next (&r, 30);
  cr_assert_eq (json_int_of (b, "sandbox_run"), 2);
  repl_feed (&r, "v + 1");
  json_t *c = repl_next (&r, 30);
  cr_assert_str_eq (json_str_of (c, "value"), "2");
  cr_assert_not (json_bool_of (c, "sandbox_lost"));
  /* A thread that writes for ever: capped, the sandbox still answers. */
  repl_feed (&r, "import threading, sys\n"
                 "def w():\n"
                 "    while True:\n"
                 "        sys.stdout.write('x' * 4096)\n"
                 "threading.Thread(target=w, daemon=True).start()\n"
                 "import time\ntime.sleep(0.5)\n7");
  json_t *d = repl_next (&r, 30);
  cr_assert (json_bool_of (d, "stdout_truncated"));
  cr_assert_str_eq (json_str_of (d, "value"), "7");
  /* The driver's end of the socket closed, then os._exit mid-run: lost. */
  repl_feed (&r, "os._exit(3)");
  json_t *e = repl_next (&r, 30);
  cr_assert (json_bool_of (e, "sandbox_lost"));
  cr_assert_eq (json_int_of (e, "exit_code"), 3);
  char *err;
  repl_feed (&r, "v");
  cr_assert_eq (repl_end (&r, &err), 125);
  cr_assert (strstr (err, "is gone (its program ended in run 5"), "stderr: %s", err);
  free (err);
}

Test (sandbox, closing_the_answer_pipe_loses_the_sandbox, .timeout = 120)
{
  if (runsc_refused ())
    return;
  struct repl r;
  repl_start (&r, "5s");
  repl_feed (&r, FIND_CONTROL_FD "os.close(fd)");
  json_t *a = repl_next (&r, 30);
  cr_assert (json_bool_of (a, "sandbox_lost"));
  cr_assert_not (json_bool_of (a, "timed_out"));
  cr_assert (repl_end (&r, NULL) == 0);
}

Test (sandbox, max_runs_ends_the_sandbox_and_the_audit_log_names_it, .timeout = 120)
{
  if (runsc_refused ())
    return;
  char dir[] = "/tmp/nsbox-live-audit-XXXXXX";
  cr_assert_not_null (mkdtemp (dir));
  chmod (dir, 0777);
  char log[96];
  snprintf (log, sizeof log, "%s/audit.log", dir);
  struct repl r;
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
  if (runsc_refused ())
    return;
  struct repl r;
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

/* Frames for other runs written on the control socket for ever: the run
 * still ends within its timeout and the grace. */
Test (sandbox, a_flood_of_stale_answers_does_not_hold_the_launcher, .timeout = 120)
{
  if (runsc_refused ())
    return;
  struct repl r;
  char timeout[32];
  double timeout_s = harness_scaled (2);
  repl_start (&r, harness_scaled_duration (2, timeout, sizeof timeout));
  repl_feed (&r, FIND_CONTROL_FD "import threading, time\n"
                                 "def flood():\n"
                                 "    while True:\n"
                                 "        os.write(fd, b'D 999 0 0 0\\n' * 512)\n"
                                 "threading.Thread(target=flood, daemon=True).start()\n"
                                 "time.sleep(600)");
  json_t *a = repl_next (&r, 60);
  double took = now_seconds () - r.fed_at;
  cr_assert (json_bool_of (a, "timed_out"), "the run did not time out");
  cr_assert (took < timeout_s + 2 + harness_scaled (1), "the flooded run took %.2fs", took);
  repl_end (&r, NULL);
}

/* The control channel carries no fds: an fd the program tries to pass to
 * the launcher on any of its descriptors is refused at the send. */
Test (sandbox, no_fd_can_be_passed_to_the_launcher, .timeout = 120)
{
  if (runsc_refused ())
    return;
  struct repl r;
  repl_start (&r, "10s");
  repl_feed (&r, "import os, socket\n"
                 "passed = 0\n"
                 "for f in range(0, 64):\n"
                 "    try:\n"
                 "        s = socket.socket(fileno=os.dup(f))\n"
                 "        socket.send_fds(s, [b'x'], [0])\n"
                 "        passed += 1\n"
                 "    except OSError:\n"
                 "        pass\n"
                 "passed");
  json_t *a = repl_next (&r, 30);
  cr_assert_eq (json_int_of (a, "exit_code"), 0, "%s", json_str_of (a, "stderr"));
  cr_assert_str_eq (json_str_of (a, "value"), "0", "an fd reached the launcher's side");
  cr_assert_not (json_bool_of (a, "sandbox_lost"));
  cr_assert_eq (repl_end (&r, NULL), 0);
}

/* The program turns its own descriptors against its driver: stdout and
 * stderr dup'ed elsewhere, then every descriptor closed. Each run ends with
 * a result that is correct for what the program did, or the sandbox
 * clearly lost; never a hang, never another run's bytes. */
Test (sandbox, the_program_redirects_and_closes_its_descriptors, .timeout = 120)
{
  if (runsc_refused ())
    return;
  struct repl r;
  repl_start (&r, "5s");
  /* stdout onto stderr: this run's print is stderr's, and the driver's
   * own answers do not depend on it. */
  repl_feed (&r, "import os, sys\nos.dup2(2, 1)\nprint('to-stderr', flush=True)\n5");
  json_t *a = repl_next (&r, 30);
  cr_assert_str_eq (json_str_of (a, "value"), "5");
  cr_assert (strstr (json_str_of (a, "stderr"), "to-stderr"), "stderr: %s",
             json_str_of (a, "stderr"));
  cr_assert_str_eq (json_str_of (a, "stdout"), "");
  /* Both onto /dev/null: the output is gone, the run's value is not. */
  repl_feed (&r, "fd = os.open('/dev/null', os.O_WRONLY)\nos.dup2(fd, 1)\nos.dup2(fd, 2)\n"
                 "print('lost')\n6");
  json_t *b = repl_next (&r, 30);
  cr_assert_str_eq (json_str_of (b, "value"), "6");
  cr_assert_str_eq (json_str_of (b, "stdout"), "");
  cr_assert_str_eq (json_str_of (b, "stderr"), "");
  cr_assert_not (json_bool_of (b, "sandbox_lost"));
  /* Every descriptor closed: the driver cannot answer; the launcher ends
   * the run on its own channel, and says the sandbox is lost. */
  double t0 = now_seconds ();
  repl_feed (&r, "os.closerange(0, 4096)\nimport time\ntime.sleep(30)");
  json_t *c = repl_next (&r, 30);
  cr_assert (json_bool_of (c, "sandbox_lost"), "closing every fd did not lose the sandbox");
  cr_assert (now_seconds () - t0 < harness_scaled (5 + 2 + 3),
             "the run took %.1f s: past its timeout and grace", now_seconds () - t0);
  char *err;
  repl_feed (&r, "1");
  cr_assert_eq (repl_end (&r, &err), 125);
  cr_assert (strstr (err, "is gone"), "stderr: %s", err);
  free (err);
}
