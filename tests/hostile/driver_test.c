/* The program against its live sandbox's driver (src/runtime/live.c): it
 * forges answers, closes or floods the answer pipe, kills, replaces and
 * patches the driver, redirects and closes its descriptors, and writes
 * after its run. Each case must end with a correct result for what the
 * program did, or with the sandbox clearly lost (sandbox_lost, and a clear
 * error for the next run), within the run's timeout and its grace.
 *
 * Every case runs beside a neighbour: a second live sandbox of its own
 * launcher, given state before the attack and checked after it (its state
 * kept, its output only its own). After each case no process of either
 * sandbox is left on the host, found by their run tags in /proc, not taken
 * from nsbox's word. Under runsc live sandboxes are refused: each case
 * checks that refusal. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* 1 MiB each: not on the stack. */
static struct repl_job victim, neighbour;

/* The grace after an interrupt at timeout (live.c), and slack. */
#define GRACE_S 2.0
#define SLACK_S 3.0

static void
neighbour_open (void)
{
  repl_start (&neighbour, "10s");
  repl_feed (&neighbour, "secret = 'kept by the neighbour'\nprint('n1')");
  json_t *a = repl_next (&neighbour, 30);
  cr_assert_not_null (a, "the neighbour gave no result");
  cr_assert_eq (json_int_of (a, "exit_code"), 0, "%s", json_str_of (a, "stderr"));
  cr_assert_str_eq (json_str_of (a, "stdout"), "n1\n");
}

/* What the neighbour holds is its own, and nothing of either sandbox is
 * left on the host once both ended. */
static void
neighbour_check_and_end (void)
{
  repl_feed (&neighbour, "print('n2')\nsecret");
  json_t *b = repl_next (&neighbour, 30);
  cr_assert_not_null (b, "the neighbour gave no result after the attack");
  cr_assert_str_eq (json_str_of (b, "stdout"), "n2\n", "the neighbour's output was touched");
  cr_assert_str_eq (json_str_of (b, "stderr"), "");
  cr_assert_str_eq (json_str_of (b, "value"), "'kept by the neighbour'");
  cr_assert_not (json_bool_of (b, "sandbox_lost"));
  cr_assert_eq (json_int_of (b, "sandbox_run"), 2);
  cr_assert_eq (repl_end (&neighbour, NULL), 0);
  const struct repl_job *both[] = { &victim, &neighbour };
  for (size_t i = 0; i < 2; i++)
    {
      char desc[2048];
      int left
          = wait_uid_processes_gone (sandbox_host_uid (), both[i]->tag, 3000, desc, sizeof desc);
      cr_assert_eq (left, 0, "%d process(es) of a sandbox outlived it: %s", left, desc);
    }
}

/* The victim's next run is refused: its sandbox is gone, and says so;
 * then the neighbour is checked. */
static void
expect_gone_next (const char *says)
{
  char *err;
  repl_feed (&victim, "1");
  cr_assert_eq (repl_end (&victim, &err), 125, "stderr: %s", err);
  cr_assert (strstr (err, says), "the next run's error does not say '%s': %s", says, err);
  free (err);
  neighbour_check_and_end ();
}

/* The victim's run timeout, scaled. */
static double victim_timeout_s;

/* Under runsc: checks the refusal, and false. Else true once the neighbour
 * holds its state and the victim started with a timeout of `seconds`
 * (scaled). */
static bool
begin (double seconds)
{
  if (repl_runsc_refused ())
    return false;
  neighbour_open ();
  char timeout[32];
  victim_timeout_s = harness_scaled (seconds);
  repl_start (&victim, harness_scaled_duration (seconds, timeout, sizeof timeout));
  return true;
}

/* A run that must lose the sandbox within its timeout and the grace. */
static json_t *
expect_lost (const char *code)
{
  double timeout_s = victim_timeout_s;
  repl_feed (&victim, code);
  json_t *j = repl_next (&victim, 60);
  double took = now_seconds () - victim.fed_at;
  cr_assert_not_null (j, "no result");
  cr_assert (json_bool_of (j, "sandbox_lost"), "the sandbox was not lost: %s",
             json_str_of (j, "stderr"));
  cr_assert (took < timeout_s + harness_scaled (GRACE_S + SLACK_S),
             "the run took %.1f s: past its timeout (%.1f s) and grace", took, timeout_s);
  return j;
}

/* Forged answers: a frame printed on stdout is output; a frame written on
 * the answer pipe ends that run only; one forged between runs for the next
 * is dropped before that run begins. */
Test (driver, forged_answers_end_only_the_forging_run, .timeout = 180)
{
  if (!begin (5))
    return;
  repl_feed (&victim, "v = 1\nprint('D 1 0 1 3')\nprint('abc')");
  json_t *a = repl_next (&victim, 30);
  cr_assert_str_eq (json_str_of (a, "stdout"), "D 1 0 1 3\nabc\n");
  cr_assert (json_is_null (json_object_get (a, "value")));
  repl_feed (&victim, REPL_FIND_ANSWER_FD "os.write(fd, b'D 2 7 1 4\\nfake')\nimport time\n"
                                          "time.sleep(1)");
  json_t *b = repl_next (&victim, 30);
  cr_assert_eq (json_int_of (b, "sandbox_run"), 2);
  cr_assert_not (json_bool_of (b, "sandbox_lost"));
  /* Run 4's answer, forged between runs 3 and 4: run 4 still gets its
   * own. */
  repl_feed (&victim, REPL_FIND_ANSWER_FD "import threading, time\n"
                                          "def later():\n"
                                          "    time.sleep(0.3)\n"
                                          "    os.write(fd, b'D 4 0 1 6\\n\"fake\"')\n"
                                          "threading.Thread(target=later).start()\n3");
  json_t *c = repl_next (&victim, 30);
  cr_assert_str_eq (json_str_of (c, "value"), "3");
  /* Past the thread's 0.3 s, with room for a loaded machine. */
  usleep ((useconds_t)(harness_scaled (2.0) * 1e6));
  repl_feed (&victim, "v + 1");
  json_t *d = repl_next (&victim, 30);
  cr_assert_eq (json_int_of (d, "sandbox_run"), 4);
  cr_assert_str_eq (json_str_of (d, "value"), "2", "a forged answer stood for a later run");
  cr_assert_not (json_bool_of (d, "sandbox_lost"));
  cr_assert_eq (repl_end (&victim, NULL), 0);
  neighbour_check_and_end ();
}

/* A thread that writes for ever: each run's output is capped, the sandbox
 * still answers; os._exit in the middle of a run then loses it. Each run
 * waits until the writer wrote 256 KiB more during it (four caps): a run
 * that ends at once could see no more than the pipe held. */
#define WAIT_FOR_WRITER                                                                            \
  "start = written[0]\n"                                                                           \
  "while written[0] < start + 262144:\n"                                                           \
  "    time.sleep(0.01)\n"

Test (driver, a_writer_for_ever_then_exit_mid_run, .timeout = 180)
{
  if (!begin (5))
    return;
  repl_feed (&victim, "import threading, sys, os, time\n"
                      "written = [0]\n"
                      "def w():\n"
                      "    while True:\n"
                      "        sys.stdout.write('x' * 4096)\n"
                      "        written[0] += 4096\n"
                      "threading.Thread(target=w, daemon=True).start()\n" WAIT_FOR_WRITER "7");
  json_t *a = repl_next (&victim, 30);
  cr_assert (json_bool_of (a, "stdout_truncated"));
  cr_assert_str_eq (json_str_of (a, "value"), "7");
  repl_feed (&victim, WAIT_FOR_WRITER "8");
  json_t *b = repl_next (&victim, 30);
  cr_assert_str_eq (json_str_of (b, "value"), "8");
  cr_assert (json_bool_of (b, "stdout_truncated"), "the writer's bytes were not capped");
  json_t *c = expect_lost ("os._exit(3)");
  cr_assert_eq (json_int_of (c, "exit_code"), 3);
  expect_gone_next ("is gone (its program ended in run 3");
}

/* Bytes a background process writes after its run are the next run's
 * output (documented), never lost and never the neighbour's. */
Test (driver, output_after_a_run_is_the_next_runs, .timeout = 180)
{
  if (!begin (5))
    return;
  repl_feed (&victim, "import subprocess\n"
                      "bg = subprocess.Popen(['/bin/sh', '-c', 'sleep 0.5; echo late'])\n"
                      "print('now')");
  json_t *a = repl_next (&victim, 30);
  cr_assert_str_eq (json_str_of (a, "stdout"), "now\n");
  /* The late line is written between the runs (bg.wait() only makes sure
   * of it on a machine too loaded for the pause). */
  usleep ((useconds_t)(harness_scaled (1.5) * 1e6));
  repl_feed (&victim, "bg.wait()\nprint('next')");
  json_t *b = repl_next (&victim, 30);
  cr_assert_str_eq (json_str_of (b, "stdout"), "late\nnext\n");
  cr_assert_eq (repl_end (&victim, NULL), 0);
  neighbour_check_and_end ();
}

Test (driver, closing_the_answer_pipe_loses_the_sandbox, .timeout = 180)
{
  if (!begin (5))
    return;
  json_t *a = expect_lost (REPL_FIND_ANSWER_FD "os.close(fd)");
  cr_assert_not (json_bool_of (a, "timed_out"));
  expect_gone_next ("is gone");
}

/* Frames for other runs written on the answer pipe for ever: the run still
 * ends within its timeout and the grace. */
Test (driver, a_flood_of_stale_answers_does_not_hold_the_launcher, .timeout = 180)
{
  if (!begin (2))
    return;
  repl_feed (&victim, REPL_FIND_ANSWER_FD "import threading, time\n"
                                          "def flood():\n"
                                          "    while True:\n"
                                          "        os.write(fd, b'D 999 0 0 0\\n' * 512)\n"
                                          "threading.Thread(target=flood, daemon=True).start()\n"
                                          "time.sleep(600)");
  json_t *a = repl_next (&victim, 60);
  double took = now_seconds () - victim.fed_at;
  cr_assert (json_bool_of (a, "timed_out"), "the run did not time out");
  cr_assert (took < victim_timeout_s + harness_scaled (GRACE_S + 1), "the flooded run took %.2fs",
             took);
  repl_end (&victim, NULL);
  neighbour_check_and_end ();
}

/* The answer pipe carries no fds: an fd the program tries to pass to the
 * launcher on any of its descriptors is refused at the send. */
Test (driver, no_fd_can_be_passed_to_the_launcher, .timeout = 180)
{
  if (!begin (10))
    return;
  repl_feed (&victim, "import os, socket\n"
                      "passed = 0\n"
                      "for f in range(0, 64):\n"
                      "    try:\n"
                      "        s = socket.socket(fileno=os.dup(f))\n"
                      "        socket.send_fds(s, [b'x'], [0])\n"
                      "        passed += 1\n"
                      "    except OSError:\n"
                      "        pass\n"
                      "passed");
  json_t *a = repl_next (&victim, 30);
  cr_assert_eq (json_int_of (a, "exit_code"), 0, "%s", json_str_of (a, "stderr"));
  cr_assert_str_eq (json_str_of (a, "value"), "0", "an fd reached the launcher's side");
  cr_assert_not (json_bool_of (a, "sandbox_lost"));
  cr_assert_eq (repl_end (&victim, NULL), 0);
  neighbour_check_and_end ();
}

/* stdout and stderr dup'ed elsewhere, then every descriptor closed. */
Test (driver, the_program_redirects_and_closes_its_descriptors, .timeout = 180)
{
  if (!begin (5))
    return;
  /* stdout onto stderr: this run's print is stderr's, and the driver's
   * own answers do not depend on it. */
  repl_feed (&victim, "import os, sys\nos.dup2(2, 1)\nprint('to-stderr', flush=True)\n5");
  json_t *a = repl_next (&victim, 30);
  cr_assert_str_eq (json_str_of (a, "value"), "5");
  cr_assert (strstr (json_str_of (a, "stderr"), "to-stderr"), "stderr: %s",
             json_str_of (a, "stderr"));
  cr_assert_str_eq (json_str_of (a, "stdout"), "");
  /* Both onto /dev/null: the output is gone, the run's value is not. */
  repl_feed (&victim, "fd = os.open('/dev/null', os.O_WRONLY)\nos.dup2(fd, 1)\nos.dup2(fd, 2)\n"
                      "print('lost')\n6");
  json_t *b = repl_next (&victim, 30);
  cr_assert_str_eq (json_str_of (b, "value"), "6");
  cr_assert_str_eq (json_str_of (b, "stdout"), "");
  cr_assert_str_eq (json_str_of (b, "stderr"), "");
  cr_assert_not (json_bool_of (b, "sandbox_lost"));
  /* Every descriptor closed: the driver cannot answer; the launcher ends
   * the run on its own channel, and says the sandbox is lost. */
  expect_lost ("os.closerange(0, 4096)\nimport time\ntime.sleep(30)");
  expect_gone_next ("is gone");
}

/* The driver is the program's own process: killed by it, it is lost. */
Test (driver, the_program_kills_its_driver, .timeout = 180)
{
  if (!begin (5))
    return;
  json_t *a = expect_lost ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)");
  cr_assert_str_eq (json_str_of (a, "signal"), "SIGKILL");
  cr_assert_eq (json_int_of (a, "exit_code"), 137);
  expect_gone_next ("is gone");
}

/* Replaced by another program (exec over the driver, its pipes still
 * open): nothing answers, the run times out, and the sandbox is lost. */
Test (driver, the_program_replaces_its_driver, .timeout = 180)
{
  if (!begin (2))
    return;
  json_t *a = expect_lost ("import os, sys, signal\n"
                           "os.execv(sys.executable, [sys.executable, '-c', "
                           "'import signal, time\\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\\n"
                           "while True: time.sleep(1)'])");
  cr_assert (json_bool_of (a, "timed_out"));
  expect_gone_next ("is gone");
}

/* Patched in memory: the driver's own os.write swallows its answers. The
 * launcher does not take the driver's silence for an answer: the run times
 * out and the sandbox is lost. */
Test (driver, the_program_patches_its_driver, .timeout = 180)
{
  if (!begin (2))
    return;
  json_t *a = expect_lost ("import os\nos.write = lambda fd, data: len(data)\n1");
  cr_assert (json_bool_of (a, "timed_out"));
  cr_assert (json_is_null (json_object_get (a, "value")), "a swallowed answer gave a value");
  expect_gone_next ("is gone");
}
