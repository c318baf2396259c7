/* The warm pool (nsbox_pool_*), through a launcher that owns one: every run
 * is single-use although its sandbox was started ahead of time, and the
 * protections of a cold run hold in a pooled one. Each case checks that its
 * runs were really served warm, else it would prove nothing about the pool.
 * Under runsc the host sees gVisor's processes, not the program's: what is
 * checked on the host is the entry's init, PID 1 of the namespace that holds
 * all of them. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static void
assert_warm (struct run_out *out)
{
  const char *served = run_json_str (out, "served", NULL);
  RUN_ASSERT (out, served && strcmp (served, "warm") == 0,
              "the run was not served by a pooled sandbox");
}

/* A warm run that printed "started" and whose entry (its init's host pid)
 * held nothing any more when its result came (sandbox_emptied). */
static void
assert_started_and_emptied (struct run_out *out, pid_t entry, bool emptied)
{
  assert_warm (out);
  assert_prints (out, "started\n");
  RUN_ASSERT (out, emptied,
              "the used entry's init (host pid %d), PID 1 of the sandbox, still had a child "
              "when the run's result came",
              (int)entry);
}

static pid_t
the_one_entry (struct pool_job *job)
{
  cr_assert (pool_wait_ready (job, 1), "the pool had no entry ready within 30 s");
  pid_t pids[8];
  int n = pool_entry_pids (job, pids, 8);
  cr_assert (n == 1, "expected one entry's init under the launcher, found %d", n);
  return pids[0];
}

Test (pool, files_in_tmp_and_dev_shm_do_not_reach_the_next_run, .timeout = 120)
{
  struct pool_job job;
  pool_start (NULL, 1, &job);
  struct run_out a, b;
  pool_run (&job,
            "open('/tmp/left-behind', 'w').write('x')\n"
            "open('/dev/shm/left-behind', 'w').write('x')\n"
            "import os\n"
            "print(os.path.exists('/tmp/left-behind'), os.path.exists('/dev/shm/left-behind'))\n",
            NULL, &a);
  assert_warm (&a);
  assert_prints (&a, "True True\n");
  pool_run (&job,
            "import os\n"
            "print(os.path.exists('/tmp/left-behind'), os.path.exists('/dev/shm/left-behind'))\n",
            NULL, &b);
  assert_warm (&b);
  assert_prints (&b, "False False\n");
  run_out_free (&a);
  run_out_free (&b);
  pool_stop (&job);
}

Test (pool, a_background_process_is_gone_before_the_next_run_starts, .timeout = 120)
{
  /* The daemon carries the run's unique tag: the host finds it by that. */
  char tag[96], code[1024];
  daemon_code (code, sizeof code, tag, sizeof tag);
  const char *needle = tag;
  struct pool_job job;
  pool_start (NULL, 1, &job);
  pid_t entry = the_one_entry (&job);
  struct run_out out;
  pool_run (&job, code, NULL, &out);
  /* Checked at once, before any further run. */
  char desc[1024] = "";
  int left = harness_is_runsc ()
                 ? 0
                 : count_uid_processes (sandbox_host_uid (), needle, desc, sizeof desc);
  bool emptied = sandbox_emptied (entry);
  assert_started_and_emptied (&out, entry, emptied);
  RUN_ASSERT (&out, left == 0, "%d process(es) of the run outlived it: %s", left, desc);
  run_out_free (&out);
  pool_stop (&job);
}

/* Whether a process named `comm` lives on the host (dying ones included:
 * its /proc entry stays until it is reaped). */
static bool
comm_lives (const char *comm)
{
  DIR *proc = opendir ("/proc");
  cr_assert_not_null (proc, "opendir /proc: %s", strerror (errno));
  bool found = false;
  struct dirent *d;
  while (!found && (d = readdir (proc)))
    {
      char path[300], buf[64] = "";
      snprintf (path, sizeof path, "/proc/%s/comm", d->d_name);
      FILE *f = fopen (path, "re");
      if (!f)
        continue;
      found = fgets (buf, sizeof buf, f) && strncmp (buf, comm, strlen (comm)) == 0;
      fclose (f);
    }
  closedir (proc);
  return found;
}

/* A run's result may come before its init has finished exiting only when
 * nothing else of the sandbox is left. Here the program leaves a daemon
 * that holds none of its output pipes, so only init's own check (no child
 * left) keeps the result back until the daemon is gone. Its ballast makes
 * its death slow enough to be seen if the result came early (128 MiB was
 * not, without a memory cgroup). */
#define BALLAST_MIB 256

Test (pool, a_daemon_without_the_program_s_pipes_is_gone_when_the_result_comes, .timeout = 180)
{
  char comm[16], code[1024];
  snprintf (comm, sizeof comm, "nsbx%08x",
            (unsigned)(getpid () * 2654435761u ^ (unsigned)time (NULL)));
  snprintf (code, sizeof code,
            "import os, time\n"
            "r, w = os.pipe()\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    null = os.open('/dev/null', os.O_RDWR)\n"
            "    for fd in (0, 1, 2):\n"
            "        os.dup2(null, fd)\n"
            "    ballast = b'x' * (%d << 20)\n"
            "    with open('/proc/self/comm', 'w') as f:\n"
            "        f.write('%s')\n"
            "    os.write(w, b'1')\n"
            "    time.sleep(1000)\n"
            "os.close(w)\n"
            "os.read(r, 1)\n"
            "print('started')\n",
            BALLAST_MIB, comm);
  /* Time and CPU to build the ballast, also in the emulated guest of
   * check-vm; the run ends as soon as it is built. */
  const char *const args[] = { "--memory", "1g", "--cpus", "2", "--timeout", "60s", NULL };
  struct pool_job job;
  pool_start (args, 1, &job);
  pid_t entry = the_one_entry (&job);
  struct run_out out;
  pool_run (&job, code, NULL, &out);
  /* Checked at once, before any further run. */
  bool daemon_lives = !harness_is_runsc () && comm_lives (comm);
  bool emptied = sandbox_emptied (entry);
  assert_started_and_emptied (&out, entry, emptied);
  RUN_ASSERT (&out, !daemon_lives, "the daemon '%s' outlived the run's result", comm);
  run_out_free (&out);
  pool_stop (&job);
}

Test (pool, consecutive_runs_have_their_own_hash_seed_urandom_and_uuid, .timeout = 120)
{
  static const char code[] = "import os, uuid\n"
                             "print(hash('a'), os.urandom(16).hex(), uuid.uuid4())\n";
  struct pool_job job;
  pool_start (NULL, 2, &job);
  struct run_out a, b;
  cr_assert (pool_wait_ready (&job, 2), "the pool did not fill");
  pool_run (&job, code, NULL, &a);
  pool_run (&job, code, NULL, &b);
  assert_warm (&a);
  assert_warm (&b);
  RUN_ASSERT (&a, a.exit_status == 0 && b.exit_status == 0, "both runs must succeed");
  char ha[64], ua[64], ia[64], hb[64], ub[64], ib[64];
  cr_assert (sscanf (run_stdout (&a, NULL), "%63s %63s %63s", ha, ua, ia) == 3);
  cr_assert (sscanf (run_stdout (&b, NULL), "%63s %63s %63s", hb, ub, ib) == 3);
  cr_assert (strcmp (ha, hb) != 0, "hash('a') is %s in both runs: one hash seed", ha);
  cr_assert (strcmp (ua, ub) != 0, "os.urandom(16) repeated: %s", ua);
  cr_assert (strcmp (ia, ib) != 0, "uuid4 repeated: %s", ia);
  run_out_free (&a);
  run_out_free (&b);
  pool_stop (&job);
}

Test (pool, only_fds_0_to_2_are_open_in_a_pooled_program, .timeout = 120)
{
  struct pool_job job;
  pool_start (NULL, 1, &job);
  struct run_out out;
  pool_run (&job,
            "import os\n"
            "fds = []\n"
            "for fd in range(4096):\n"
            "    try:\n"
            "        os.fstat(fd)\n"
            "        fds.append(fd)\n"
            "    except OSError:\n"
            "        pass\n"
            "print(fds)\n",
            NULL, &out);
  assert_warm (&out);
  assert_prints (&out, "[0, 1, 2]\n");
  run_out_free (&out);
  pool_stop (&job);
}

Test (pool, the_timeout_counts_from_dispatch_not_from_the_entry_start, .timeout = 120)
{
  char timeout[32];
  harness_scaled_duration (2, timeout, sizeof timeout);
  const char *const args[] = { "--timeout", timeout, NULL };
  struct pool_job job;
  pool_start (args, 1, &job);
  cr_assert (pool_wait_ready (&job, 1), "the pool had no entry ready");
  /* The entry idles 3 s, longer than the timeout; its run still gets the
   * whole timeout. */
  sleep_seconds (3);
  char code[256];
  snprintf (code, sizeof code, "import time\ntime.sleep(%.3f)\nprint('done')\n",
            harness_scaled (1));
  struct run_out ok, loop;
  pool_run (&job, code, NULL, &ok);
  assert_warm (&ok);
  assert_prints (&ok, "done\n");
  RUN_ASSERT (&ok, run_json_int (&ok, "duration_ms") < 3000 * harness_time_scale (),
              "duration_ms must count from dispatch, not from the entry's start");
  /* And the timeout is there: a loop is killed. */
  pool_run (&job, "while True: pass\n", NULL, &loop);
  assert_warm (&loop);
  RUN_ASSERT (&loop, run_json_bool (&loop, "timed_out") && loop.exit_status == 124,
              "the loop must time out");
  run_out_free (&ok);
  run_out_free (&loop);
  pool_stop (&job);
}

Test (pool, the_seed_behaviours_hold_in_pooled_runs, .timeout = 180)
{
  uint16_t port;
  int listener = tcp_listener (&port);
  char host_path[4096];
  snprintf (host_path, sizeof host_path, "%s/pooled-hacked.txt", harness_rootfs ());
  char timeout[32];
  harness_scaled_duration (1, timeout, sizeof timeout);
  const char *const args[] = { "--timeout", timeout, NULL };
  struct pool_job job;
  pool_start (args, 1, &job);

  struct run_out sum, net, ro, loop, flood;
  pool_run (&job, "print(sum(range(10)))\n", NULL, &sum);
  assert_warm (&sum);
  assert_prints (&sum, "45\n");

  char code[512];
  snprintf (code, sizeof code,
            "import socket\n"
            "s = socket.socket()\n"
            "s.settimeout(2)\n"
            "try:\n"
            "    s.connect(('127.0.0.1', %u))\n"
            "    print('connected')\n"
            "except OSError as e:\n"
            "    print('refused')\n",
            (unsigned)port);
  pool_run (&job, code, NULL, &net);
  assert_warm (&net);
  assert_prints (&net, "refused\n");
  RUN_ASSERT (&net, !listener_was_connected (listener), "the host listener saw a connection");

  pool_run (&job,
            "try:\n"
            "    open('/pooled-hacked.txt', 'w').write('pwned')\n"
            "    print('written')\n"
            "except OSError as e:\n"
            "    print('errno', e.errno)\n",
            NULL, &ro);
  bool appeared = access (host_path, F_OK) == 0;
  if (appeared)
    unlink (host_path);
  assert_warm (&ro);
  assert_prints (&ro, "errno 30\n");
  RUN_ASSERT (&ro, !appeared, "'%s' appeared on the host", host_path);

  pool_run (&job, "while True: pass\n", NULL, &loop);
  assert_warm (&loop);
  RUN_ASSERT (&loop, run_json_bool (&loop, "timed_out") && loop.exit_status == 124,
              "the infinite loop must be killed by the timeout");

  const char *const small[] = { "max-output-bytes", "1000", NULL };
  pool_run (&job, "print('x' * 1000000)\n", small, &flood);
  assert_warm (&flood);
  size_t len = 0;
  run_stdout (&flood, &len);
  /* 1000001 bytes written: 500 kept at each end, the marker between. */
  static const char marker[] = "\n[nsbox: 999001 bytes omitted]\n";
  RUN_ASSERT (&flood, len == 1000 + strlen (marker) && run_json_bool (&flood, "stdout_truncated"),
              "stdout must be capped at the run's 1000 bytes (got %zu)", len);

  run_out_free (&sum);
  run_out_free (&net);
  run_out_free (&ro);
  run_out_free (&loop);
  run_out_free (&flood);
  close (listener);
  pool_stop (&job);
}

Test (pool, memory_and_pids_limits_hold_in_pooled_runs, .timeout = 180)
{
  /* Two pools: under runsc 16 forked interpreters alone exceed 64m. */
  const char *const mem_args[] = { "--memory", "64m", NULL };
  const char *const pids_args[] = { "--pids-limit", "16", NULL };
  struct pool_job job, pids_job;
  pool_start (mem_args, 1, &job);
  pool_start (pids_args, 1, &pids_job);
  struct run_out mem, pids;
  pool_run (&job,
            "b = bytearray(256 * 1024 * 1024)\n"
            "for i in range(0, len(b), 4096):\n"
            "    b[i] = 1\n"
            "print('allocated')\n",
            NULL, &mem);
  assert_warm (&mem);
  size_t len = 0;
  const char *s = run_stdout (&mem, &len);
  RUN_ASSERT (&mem, mem.exit_status != 0 && !strstr (s, "allocated"),
              "256 MiB must not fit in a 64m sandbox");
  pool_run (&pids_job,
            "import os, time\n"
            "n = 0\n"
            "for i in range(40):\n"
            "    try:\n"
            "        if os.fork() == 0:\n"
            "            time.sleep(30)\n"
            "            os._exit(0)\n"
            "        n += 1\n"
            "    except OSError:\n"
            "        break\n"
            "print(n)\n",
            NULL, &pids);
  assert_warm (&pids);
  long forked = strtol (run_stdout (&pids, NULL), NULL, 10);
  RUN_ASSERT (&pids, pids.exit_status == 0 && forked < 16,
              "pids-limit 16 must stop the forks (%ld succeeded)", forked);
  run_out_free (&mem);
  run_out_free (&pids);
  pool_stop (&job);
  pool_stop (&pids_job);
}

Test (pool, an_entry_whose_init_is_killed_from_the_host_is_replaced, .timeout = 120)
{
  struct pool_job job;
  pool_start (NULL, 1, &job);
  pid_t entry = the_one_entry (&job);
  cr_assert (kill (entry, SIGKILL) == 0, "kill %d: %s", (int)entry, strerror (errno));
  /* The sweep notices, discards it, and a new entry takes its place. */
  double waited = 0;
  struct pool_counts c = pool_counts (&job);
  while (c.discarded == 0 && waited < harness_scaled (10))
    {
      sleep_seconds (0.05);
      waited += 0.05;
      c = pool_counts (&job);
    }
  cr_assert (c.discarded >= 1, "the dead entry was not discarded");
  pid_t next = the_one_entry (&job);
  cr_assert (next != entry, "the dead entry is still listed");
  struct run_out out;
  pool_run (&job, "print(sum(range(10)))\n", NULL, &out);
  assert_warm (&out);
  assert_prints (&out, "45\n");
  run_out_free (&out);
  pool_stop (&job);
}

Test (pool, per_run_options_may_only_lower_the_pool_s_limits, .timeout = 120)
{
  struct pool_job job;
  pool_start (NULL, 1, &job);
  struct run_out longer, memory, fine;
  const char *const longer_args[] = { "timeout", "1h", NULL };
  pool_run (&job, "print(1)\n", longer_args, &longer);
  const char *const longer_needles[] = { "timeout", "may only shorten", NULL };
  assert_refused (&longer, longer_needles);
  const char *const memory_args[] = { "memory", "1g", NULL };
  pool_run (&job, "print(1)\n", memory_args, &memory);
  const char *const memory_needles[] = { "memory", "different sandbox", NULL };
  assert_refused (&memory, memory_needles);
  const char *const fine_args[] = { "timeout", "2s", NULL };
  pool_run (&job, "print(1)\n", fine_args, &fine);
  assert_warm (&fine);
  assert_prints (&fine, "1\n");
  run_out_free (&longer);
  run_out_free (&memory);
  run_out_free (&fine);
  pool_stop (&job);
}

Test (pool, freeing_the_pool_leaves_no_entry_or_cgroup, .timeout = 120)
{
  struct pool_job job;
  pool_start (NULL, 2, &job);
  cr_assert (pool_wait_ready (&job, 2), "the pool did not fill");
  pid_t pids[8];
  int n = pool_entry_pids (&job, pids, 8);
  cr_assert (n == 2, "expected two entries, found %d", n);
  pid_t launcher = job.pid;
  char desc[1024] = "";
  int before = have_cgroups () ? count_nsbox_cgroups (launcher, desc, sizeof desc) : 0;
  pool_stop (&job);
  for (int i = 0; i < n; i++)
    cr_assert (process_gone (pids[i]), "entry init %d outlived the pool", (int)pids[i]);
  int after = have_cgroups () ? count_nsbox_cgroups (launcher, desc, sizeof desc) : 0;
  cr_assert (after == 0, "%d cgroup(s) of the pool left (had %d): %s", after, before, desc);
}

Test (pool, many_runs_leave_the_launcher_s_fds_rss_and_cgroups_flat, .timeout = 600)
{
  int n = harness_is_runsc () ? 60 : 300;
  struct pool_job job;
  pool_start (NULL, 2, &job);
  struct run_out out;
  for (int i = 0; i < 20; i++)
    {
      pool_run (&job, "print(1)\n", NULL, &out);
      assert_prints (&out, "1\n");
      run_out_free (&out);
    }
  cr_assert (pool_wait_ready (&job, 2), "the pool did not fill");
  int fds0 = count_fds (job.pid);
  long rss0 = rss_kb (job.pid);
  char desc[1024] = "";
  int cg0 = have_cgroups () ? count_nsbox_cgroups (job.pid, desc, sizeof desc) : 0;
  for (int i = 0; i < n; i++)
    {
      pool_run (&job, "print(1)\n", NULL, &out);
      assert_prints (&out, "1\n");
      run_out_free (&out);
    }
  cr_assert (pool_wait_ready (&job, 2), "the pool did not fill");
  int fds1 = count_fds (job.pid);
  long rss1 = rss_kb (job.pid);
  int cg1 = have_cgroups () ? count_nsbox_cgroups (job.pid, desc, sizeof desc) : 0;
  struct pool_counts c = pool_counts (&job);
  cr_assert (c.warm >= (unsigned long long)n / 2, "only %llu of %d runs were warm", c.warm, n + 20);
  cr_assert (fds1 == fds0, "the launcher's fds went from %d to %d over %d runs", fds0, fds1, n);
#ifndef __SANITIZE_ADDRESS__
  /* Under ASan freed memory stays in its quarantine, so RSS grows with
   * every free; the launcher's leak check at its exit covers that build. */
  cr_assert (rss1 - rss0 < 4096, "the launcher's RSS grew from %ld to %ld kB over %d runs", rss0,
             rss1, n);
#else
  (void)rss0;
  (void)rss1;
#endif
  cr_assert (cg1 == cg0, "the launcher's cgroups went from %d to %d over %d runs: %s", cg0, cg1, n,
             desc);
  pool_stop (&job);
}

Test (pool, a_forked_child_neither_holds_nor_uses_the_parent_s_entries, .timeout = 120)
{
  char timeout[32];
  harness_scaled_duration (5, timeout, sizeof timeout);
  const char *const args[] = { "--timeout", timeout, NULL };
  struct pool_job job;
  pool_start (args, 2, &job);
  cr_assert (pool_wait_ready (&job, 2), "the pool did not fill");
  struct pool_fork_outcome o;
  pool_fork_check (&job, &o);
  cr_assert (o.parent_ok && o.parent_warm,
             "the parent's warm run beside a forked child failed or timed out (ok %d, warm %d): "
             "a copy of its stdin in the child keeps EOF away",
             o.parent_ok, o.parent_warm);
  cr_assert (WIFEXITED (o.child_status) && WEXITSTATUS (o.child_status) == 0,
             "the forked child's run was not a good cold run (status 0x%x)", o.child_status);
  cr_assert (o.after_ok && o.after_warm,
             "after the child freed its copy of the pool the parent's entries failed (ok %d, "
             "warm %d)",
             o.after_ok, o.after_warm);
  pool_stop (&job);
}
