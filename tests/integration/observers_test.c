/* The host-side observers the leak tests rely on ("no process of the
 * sandbox's uid left", "no nsbox-* cgroup left") really see a sandbox while
 * it runs; otherwise those tests would pass vacuously. */
#include <string.h>
#include <time.h>

#include "harness.h"

Test (observers, running_sandbox_is_seen_by_process_and_cgroup_scans, .timeout = 30)
{
  char tag[96];
  make_run_tag (tag, sizeof tag);
  /* Long enough for the sandbox to be seen on a slow machine too. */
  char timeout[32];
  harness_scaled_duration (2.0, timeout, sizeof timeout);
  const char *const args[] = { "--timeout", timeout, "--env", tag, NULL };
  const char *code = "import time\ntime.sleep(60)\n";
  struct run_job job;
  run_cli_spawn (args, true, &job);
  run_job_feed (&job, code, strlen (code));
  char procs[1024], cgroups[2048];
  int nprocs = 0, ncgroups = 0;
  struct timespec start, now;
  clock_gettime (CLOCK_MONOTONIC, &start);
  double window = harness_scaled (2.0);
  do
    {
      /* Under gVisor the program is no host process: its sentry, gofer
       * and runsc are what a host observer sees. */
      nprocs = harness_is_runsc ()
                   ? count_runsc_processes (job.pid, procs, sizeof procs)
                   : count_uid_processes (sandbox_host_uid (), tag, procs, sizeof procs);
      clock_gettime (CLOCK_MONOTONIC, &now);
      if (nprocs == 0)
        nanosleep (&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);
    }
  while (nprocs == 0
         && (double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) / 1e9
                < window);
  ncgroups = count_nsbox_cgroups (job.pid, cgroups, sizeof cgroups);
  struct run_out out;
  run_cli_wait (&job, NULL, 0, &out);
  RUN_ASSERT (&out, run_json_bool (&out, "timed_out"), "expected the sleep to time out");
  RUN_ASSERT (&out, nprocs > 0, "no process of uid %u with %s seen while the sandbox ran",
              (unsigned)sandbox_host_uid (), harness_is_runsc () ? "a runsc work dir" : tag);
  /* Whether the run had cgroups follows from what this host offers, not
   * from what the result says. */
  bool uses_cgroups = false;
  static const char *const limits[] = { "memory", "cpus", "pids" };
  for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++)
    uses_cgroups = uses_cgroups
                   || strncmp (harness_expected_mechanism (RUN_CLI, limits[i]), "cgroup", 6) == 0;
  assert_limit_mechanisms (&out);
  if (uses_cgroups)
    RUN_ASSERT (&out, ncgroups > 0, "the run used cgroups, but no nsbox-%d-* cgroup was seen",
                (int)job.pid);
  else
    RUN_ASSERT (&out, ncgroups == 0, "the run used no cgroup, but found: %s", cgroups);
  run_out_free (&out);
}
