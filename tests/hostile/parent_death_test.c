/* Parent death: `kill -9` of the nsbox CLI in the middle of a run leaves
 * nothing running. What the launcher promises: init has PR_SET_PDEATHSIG
 * SIGKILL and is PID 1 of the sandbox's namespace, so its death takes every
 * process of the sandbox (a runsc run's init takes gVisor with it); the
 * run's cgroups, which the dead launcher could not remove, are swept by
 * the next run started from the same cgroup. */
#include "harness.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void
sleep_ms (int ms)
{
  struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
  nanosleep (&ts, NULL);
}

/* Waits until the run's program is up: its processes carry the tag
 * (native), or gVisor's processes name the launcher's work directory. */
static bool
wait_running (pid_t launcher, const char *tag, int want)
{
  char desc[512];
  /* 15 s on the machine the bounds were tuned on, scaled. */
  int polls = (int)harness_scaled (1500);
  for (int i = 0; i < polls; i++)
    {
      int n = harness_is_runsc ()
                  ? count_runsc_processes (launcher, desc, sizeof desc)
                  : count_uid_processes (sandbox_host_uid (), tag, desc, sizeof desc);
      if (n >= want)
        {
          /* gVisor's processes appear before the program inside runs:
           * 1.5 s covers its start, scaled by the machine's speed. */
          if (harness_is_runsc ())
            sleep_ms ((int)harness_scaled (1500));
          return true;
        }
      sleep_ms (10);
    }
  return false;
}

static void
kill_mid_run (const char *code, int want_processes)
{
  char tag[96];
  make_run_tag (tag, sizeof tag);
  const char *const args[] = { "--timeout", "120s", "--env", tag, NULL };
  struct run_job job;
  run_cli_spawn (args, true, &job);
  run_job_feed (&job, code, strlen (code));
  bool up = wait_running (job.pid, tag, want_processes);
  cr_assert (kill (job.pid, SIGKILL) == 0, "kill: %s", strerror (errno));
  int status;
  while (waitpid (job.pid, &status, 0) < 0 && errno == EINTR)
    ;
  close (job.out_fd);
  close (job.err_fd);
  cr_assert (up, "the sandbox never came up (tag %s)", tag);
  cr_assert (WIFSIGNALED (status) && WTERMSIG (status) == SIGKILL,
             "the launcher ended with status 0x%x before it was killed", status);

  char desc[2048];
  int left = wait_uid_processes_gone (sandbox_host_uid (), tag, 5000, desc, sizeof desc);
  cr_assert_eq (left, 0, "%d process(es) of the run outlived its killed launcher: %s", left, desc);
  if (harness_is_runsc ())
    left = wait_runsc_processes (job.pid, 0, 5000, desc, sizeof desc);
  cr_assert_eq (left, 0, "%d gVisor process(es) outlived the killed launcher: %s", left, desc);

  if (!have_cgroups ())
    return;
  /* The next run, from the same cgroup, removes what the dead one left. */
  struct run_out out;
  run_cli ("print('next')\n", 14, NULL, &out);
  assert_prints (&out, "next\n");
  run_out_free (&out);
  left = count_nsbox_cgroups (job.pid, desc, sizeof desc);
  cr_assert_eq (left, 0, "%d cgroup(s) of the killed launcher %d left after the next run: %s", left,
                (int)job.pid, desc);
}

Test (parent_death, kill_9_of_the_cli_during_sleep_leaves_nothing, .timeout = 60)
{
  kill_mid_run ("import time\ntime.sleep(1000)\n", 1);
}

Test (parent_death, kill_9_of_the_cli_during_a_busy_loop_leaves_nothing, .timeout = 60)
{
  kill_mid_run ("while True:\n    pass\n", 1);
}

/* A program that daemonised itself and ignores every catchable signal. */
Test (parent_death, kill_9_of_the_cli_leaves_no_daemon, .timeout = 60)
{
  kill_mid_run ("import os, signal, time\n"
                "if os.fork() == 0:\n"
                "    os.setsid()\n"
                "    if os.fork() == 0:\n"
                "        for s in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):\n"
                "            signal.signal(s, signal.SIG_IGN)\n"
                "        time.sleep(1000)\n"
                "    os._exit(0)\n"
                "os.wait()\n"
                "time.sleep(1000)\n",
                2);
}
