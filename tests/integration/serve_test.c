/* `nsbox serve` and `nsbox run --server`: a run through the server is the
 * same single-use sandbox with the same protections as through the CLI;
 * bad requests get clear 4xx; a TCP listener needs a token; SIGTERM drains;
 * kill -9, a client hanging up, 200 requests at once and many runs in a row
 * leave nothing behind. The server runs as the pass's user (root or the
 * unprivileged test user) and runtime. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static bool
health_says (struct serve_job *s, const char *needle)
{
  char *answer = NULL;
  long st = serve_http (s->socket, "GET", "/v1/health", NULL, 0, NULL, &answer, NULL);
  bool yes = st == 200 && strstr (answer, needle);
  free (answer);
  return yes;
}

/* Waits until the pool of `profile` has `n` entries ready (from
 * /v1/health). */
static void
wait_profile (struct serve_job *s, const char *profile, int n)
{
  char want[128];
  snprintf (want, sizeof want, "\"%s\":{\"ready\":%d", profile, n);
  for (double waited = 0; !health_says (s, want); waited += 0.02)
    {
      cr_assert (waited < harness_scaled (30),
                 "the server's pool '%s' did not reach %d ready entries", profile, n);
      sleep_seconds (0.02);
    }
}

static void
wait_pool (struct serve_job *s, int n)
{
  wait_profile (s, "default", n);
}

static void
assert_served_warm (struct run_out *out)
{
  const char *served = run_json_str (out, "served", NULL);
  RUN_ASSERT (out, served && strcmp (served, "warm") == 0, "the run was not served warm");
}

static void
stop_cleanly (struct serve_job *s)
{
  serve_stop_ok (s);
  cr_assert (access (s->socket, F_OK) != 0, "the socket %s outlived the server", s->socket);
}

/* A profile file (YAML) with the pass's rootfs and runtime plus `extra`. */
static char *
profile_file (const char *dir, const char *name, const char *extra)
{
  char *path = NULL;
  cr_assert (asprintf (&path, "%s/%s.yaml", dir, name) > 0);
  FILE *f = fopen (path, "we");
  cr_assert_not_null (f, "%s: %s", path, strerror (errno));
  fprintf (f, "rootfs: %s\nruntime: %s\n%s", harness_rootfs (), harness_runtime (), extra);
  fclose (f);
  chmod (path, 0644);
  return path;
}

Test (serve, the_seed_behaviours_and_limits_hold_through_the_server, .timeout = 300)
{
  char timeout[32], profile_mem[300], profile_pids[300];
  harness_scaled_duration (1, timeout, sizeof timeout);
  char *dir = user_dir ();
  /* The profiles test memory and pids: a timeout far away, so that a slow
   * machine (forks under gVisor held to 0.5 CPU) cannot turn them into
   * timeouts. */
  char *mem = profile_file (dir, "mem", "memory: 64m\ntimeout: 60s\n");
  char *pids = profile_file (dir, "pids", "pids-limit: 16\ntimeout: 60s\n");
  snprintf (profile_mem, sizeof profile_mem, "mem=%s", mem);
  snprintf (profile_pids, sizeof profile_pids, "pids=%s", pids);
  const char *const args[] = { "--timeout", timeout,     "--pool-size", "1", "--profile",
                               profile_mem, "--profile", profile_pids,  NULL };
  struct serve_job s;
  serve_start (args, &s);
  uint16_t port;
  int listener = tcp_listener (&port);
  char host_path[4096];
  snprintf (host_path, sizeof host_path, "%s/served-hacked.txt", harness_rootfs ());

  struct run_out sum, net, ro, loop, flood, m, p;
  wait_pool (&s, 1);
  serve_run (&s, "print(sum(range(10)))\n", NULL, &sum);
  assert_prints (&sum, "45\n");
  assert_served_warm (&sum);

  char code[512];
  snprintf (code, sizeof code,
            "import socket\ns = socket.socket()\ns.settimeout(2)\n"
            "try:\n    s.connect(('127.0.0.1', %u))\n    print('connected')\n"
            "except OSError:\n    print('refused')\n",
            (unsigned)port);
  /* Each run waits for a warm entry: a cold start under runsc, slowed by
   * the refills around it, could eat the short timeout the loop needs. */
  wait_pool (&s, 1);
  serve_run (&s, code, NULL, &net);
  assert_prints (&net, "refused\n");
  assert_served_warm (&net);
  RUN_ASSERT (&net, !listener_was_connected (listener), "the host listener saw a connection");

  wait_pool (&s, 1);
  serve_run (&s,
             "try:\n    open('/served-hacked.txt', 'w').write('pwned')\n    print('written')\n"
             "except OSError as e:\n    print('errno', e.errno)\n",
             NULL, &ro);
  bool appeared = access (host_path, F_OK) == 0;
  if (appeared)
    unlink (host_path);
  assert_prints (&ro, "errno 30\n");
  RUN_ASSERT (&ro, !appeared, "'%s' appeared on the host", host_path);
  assert_served_warm (&ro);

  wait_pool (&s, 1);
  serve_run (&s, "while True: pass\n", NULL, &loop);
  assert_served_warm (&loop);
  RUN_ASSERT (&loop, loop.exit_status == 124 && run_json_bool (&loop, "timed_out"),
              "the infinite loop must end in a timeout (exit 124)");

  const char *const small[] = { "--max-output-bytes", "1000", NULL };
  wait_pool (&s, 1);
  serve_run (&s, "print('x' * 1000000)\n", small, &flood);
  assert_served_warm (&flood);
  size_t len = 0;
  run_stdout (&flood, &len);
  /* 1000001 bytes written: 500 kept at each end, the marker between. */
  static const char marker[] = "\n[nsbox: 999001 bytes omitted]\n";
  RUN_ASSERT (&flood,
              flood.exit_status == 0 && len == 1000 + strlen (marker)
                  && run_json_bool (&flood, "stdout_truncated"),
              "stdout must be capped at 1000 bytes (got %zu)", len);

  const char *const mem_profile[] = { "--profile", "mem", NULL };
  wait_profile (&s, "mem", 1);
  serve_run (&s,
             "b = bytearray(256 * 1024 * 1024)\nfor i in range(0, len(b), 4096):\n    b[i] = 1\n"
             "print('allocated')\n",
             mem_profile, &m);
  assert_served_warm (&m);
  RUN_ASSERT (&m, m.exit_status != 0 && !strstr (run_stdout (&m, NULL), "allocated"),
              "256 MiB must not fit in the 64m profile");

  const char *const pids_profile[] = { "--profile", "pids", NULL };
  wait_profile (&s, "pids", 1);
  serve_run (&s,
             "import os, time\nn = 0\nfor i in range(40):\n    try:\n"
             "        if os.fork() == 0:\n            time.sleep(30)\n            os._exit(0)\n"
             "        n += 1\n    except OSError:\n        break\nprint(n)\n",
             pids_profile, &p);
  assert_served_warm (&p);
  long forked = strtol (run_stdout (&p, NULL), NULL, 10);
  RUN_ASSERT (&p, p.exit_status == 0 && forked < 16,
              "pids-limit 16 must stop the forks (%ld succeeded)", forked);

  run_out_free (&sum);
  run_out_free (&net);
  run_out_free (&ro);
  run_out_free (&loop);
  run_out_free (&flood);
  run_out_free (&m);
  run_out_free (&p);
  close (listener);
  stop_cleanly (&s);
  unlink (mem);
  unlink (pids);
  rmdir (dir);
  free (mem);
  free (pids);
  free (dir);
}

Test (serve, each_run_through_the_server_is_single_use, .timeout = 180)
{
  const char *const args[] = { "--pool-size", "2", NULL };
  struct serve_job s;
  serve_start (args, &s);
  wait_pool (&s, 2);
  struct run_out a, b, fds;
  serve_run (&s,
             "import os, uuid\nopen('/tmp/left', 'w').write('x')\n"
             "open('/dev/shm/left', 'w').write('x')\n"
             "print(hash('a'), os.urandom(16).hex(), uuid.uuid4())\n",
             NULL, &a);
  serve_run (&s,
             "import os, uuid\nprint(hash('a'), os.urandom(16).hex(), uuid.uuid4(), "
             "os.path.exists('/tmp/left'), os.path.exists('/dev/shm/left'))\n",
             NULL, &b);
  assert_served_warm (&a);
  assert_served_warm (&b);
  char ha[64], ua[64], ia[64], hb[64], ub[64], ib[64], t[16], d[16];
  cr_assert (sscanf (run_stdout (&a, NULL), "%63s %63s %63s", ha, ua, ia) == 3, "%s",
             run_describe (&a));
  cr_assert (sscanf (run_stdout (&b, NULL), "%63s %63s %63s %15s %15s", hb, ub, ib, t, d) == 5,
             "%s", run_describe (&b));
  cr_assert (strcmp (ha, hb) && strcmp (ua, ub) && strcmp (ia, ib),
             "two runs shared a hash seed, random state or uuid: %s / %s", ha, hb);
  cr_assert (strcmp (t, "False") == 0 && strcmp (d, "False") == 0,
             "a file of the first run reached the second: /tmp %s, /dev/shm %s", t, d);
  serve_run (&s,
             "import os\nfds = []\nfor fd in range(4096):\n    try:\n        os.fstat(fd)\n"
             "        fds.append(fd)\n    except OSError:\n        pass\nprint(fds)\n",
             NULL, &fds);
  assert_prints (&fds, "[0, 1, 2]\n");
  run_out_free (&a);
  run_out_free (&b);
  run_out_free (&fds);
  stop_cleanly (&s);
}

static void
expect_error (struct serve_job *s, const char *method, const char *path, const char *body,
              size_t len, long want, const char *needle)
{
  char *answer = NULL;
  if (body && len == 0)
    len = strlen (body);
  long st = serve_http (s->socket, method, path, body, len, NULL, &answer, NULL);
  cr_assert (st == want, "%s %s: expected %ld, got %ld: %s", method, path, want, st, answer);
  json_error_t jerr;
  json_t *o = json_loads (answer, 0, &jerr);
  const char *msg = o ? json_string_value (json_object_get (o, "error")) : NULL;
  cr_assert (msg && strstr (msg, needle), "%s %s: expected a JSON error naming '%s': %s", method,
             path, needle, answer);
  json_decref (o);
  free (answer);
}

Test (serve, bad_requests_get_a_clear_4xx_and_the_server_keeps_serving, .timeout = 120)
{
  const char *const args[] = { "--pool-size", "1", "--max-request-bytes", "4k", NULL };
  struct serve_job s;
  serve_start (args, &s);
  expect_error (&s, "POST", "/v1/runs", "{\"code\": ", 0, 400, "malformed JSON");
  expect_error (&s, "POST", "/v1/runs", "[1]", 0, 400, "JSON object");
  expect_error (&s, "POST", "/v1/runs", "{}", 0, 400, "missing key 'code'");
  expect_error (&s, "POST", "/v1/runs", "{\"code\": 5}", 0, 400, "'code' must be a string");
  expect_error (&s, "POST", "/v1/runs", "{\"code\": \"1\", \"colour\": \"red\"}", 0, 400,
                "unknown key 'colour'");
  expect_error (&s, "POST", "/v1/runs", "{\"code\": \"1\", \"memory\": \"1g\"}", 0, 400,
                "different sandbox");
  expect_error (&s, "POST", "/v1/runs", "{\"code\": \"1\", \"timeout\": \"99h\"}", 0, 400,
                "may only shorten");
  expect_error (&s, "POST", "/v1/runs", "{\"code\": \"1\", \"profile\": \"x\"}", 0, 400,
                "unknown profile");
  expect_error (&s, "POST", "/v1/runs", "{\"code\":\"1\",\"code\":\"2\"}", 0, 400, "duplicate");
  char *big = malloc (8192);
  memset (big, ' ', 8192);
  expect_error (&s, "POST", "/v1/runs", big, 8192, 413, "exceeds");
  free (big);
  expect_error (&s, "GET", "/v1/runs", NULL, 0, 405, "only POST");
  expect_error (&s, "GET", "/v2/anything", NULL, 0, 404, "no such endpoint");
  struct run_out ok;
  serve_run (&s, "print('still serving')\n", NULL, &ok);
  assert_prints (&ok, "still serving\n");
  run_out_free (&ok);
  stop_cleanly (&s);
}

Test (serve, tcp_needs_a_bearer_token_and_checks_it, .timeout = 120)
{
  char *dir = user_dir ();
  char listen[64], token_path[300], url[64];
  (void)token_path;
  uint16_t port = free_tcp_port ();
  snprintf (listen, sizeof listen, "tcp:127.0.0.1:%u", (unsigned)port);
  snprintf (url, sizeof url, "http://127.0.0.1:%u", (unsigned)port);
  /* Without a token file the server refuses to start. */
  const char *const no_token[] = { "--listen", listen, NULL };
  struct run_job job;
  struct run_out refused;
  run_nsbox_spawn ("serve", true, no_token, false, &job);
  run_cli_wait (&job, "", 0, &refused);
  RUN_ASSERT (&refused, refused.exit_status == 125 && strstr (refused.err, "--token-file"),
              "a TCP listener without a token must be refused");
  run_out_free (&refused);

  static const char token[] = "s3cret-token-of-some-length";
  snprintf (token_path, sizeof token_path, "%s/token", dir);
  FILE *f = fopen (token_path, "we");
  cr_assert_not_null (f);
  fprintf (f, "%s\n", token);
  fclose (f);
  chmod (token_path, 0600);
  struct stat st;
  cr_assert (stat (dir, &st) == 0);
  cr_assert (chown (token_path, st.st_uid, st.st_gid) == 0);
  const char *const args[]
      = { "--listen", listen, "--token-file", token_path, "--pool-size", "1", NULL };
  struct serve_job s;
  memset (&s, 0, sizeof s);
  snprintf (s.dir, sizeof s.dir, "%s", dir);
  run_nsbox_spawn ("serve", true, args, false, &s.job);
  close (s.job.in_fd);
  const char *const auth[] = { "Authorization: Bearer s3cret-token-of-some-length", NULL };
  const char *const bad_auth[] = { "Authorization: Bearer s3cret-token-of-some-lengtX", NULL };
  long code = -1;
  for (double w = 0; code != 200 && w < harness_scaled (30); w += 0.05)
    {
      code = serve_http (url, "GET", "/v1/health", NULL, 0, auth, NULL, NULL);
      if (code != 200)
        sleep_seconds (0.05);
    }
  cr_assert (code == 200, "the TCP server did not answer");
  /* A probe without a token learns whether the node takes work, and
   * nothing else; anything else without it is a 401. */
  char *brief = NULL;
  cr_assert_eq (serve_http (url, "GET", "/v1/health", NULL, 0, NULL, &brief, NULL), 200);
  cr_assert (brief && strstr (brief, "\"status\":\"ok\"") && !strstr (brief, "profiles")
                 && !strstr (brief, "running"),
             "a probe without the token is told more than ready or not: %s", brief);
  free (brief);
  cr_assert_eq (serve_http (url, "GET", "/metrics", NULL, 0, NULL, NULL, NULL), 401,
                "no token must get 401");
  cr_assert_eq (serve_http (url, "GET", "/v1/health", NULL, 0, bad_auth, NULL, NULL), 401,
                "a wrong token must get 401");
  struct run_out none, wrong, good;
  const char *const plain[] = { "--server", url, NULL };
  run_nsbox_spawn ("run", false, plain, true, &job);
  run_cli_wait (&job, "print(1)\n", 9, &none);
  RUN_ASSERT (&none, none.exit_status == 125 && strstr (none.err, "401"),
              "a run without the token must get 401");
  char bad_path[300];
  snprintf (bad_path, sizeof bad_path, "%s/bad", dir);
  f = fopen (bad_path, "we");
  cr_assert_not_null (f);
  fputs ("s3cret-token-of-some-lengtX\n", f);
  fclose (f);
  const char *const with_bad[] = { "--server", url, "--token-file", bad_path, NULL };
  run_nsbox_spawn ("run", false, with_bad, true, &job);
  run_cli_wait (&job, "print(1)\n", 9, &wrong);
  RUN_ASSERT (&wrong, wrong.exit_status == 125 && strstr (wrong.err, "401"),
              "a wrong token must get 401");
  const char *const with_good[] = { "--server", url, "--token-file", token_path, NULL };
  run_nsbox_spawn ("run", false, with_good, true, &job);
  run_cli_wait (&job, "print(1)\n", 9, &good);
  assert_prints (&good, "1\n");
  unlink (token_path);
  unlink (bad_path);
  stop_cleanly (&s);
  free (dir);
  run_out_free (&none);
  run_out_free (&wrong);
  run_out_free (&good);
}

/* A server with two pooled sandboxes ready, and a client whose run is in
 * flight (started half a second ago, scaled). */
static void
serve_with_a_run_in_flight (struct serve_job *s, const char *code, struct run_job *job)
{
  /* The run must end by itself, not by the timeout, however slow the
   * machine is. */
  char timeout[32];
  harness_scaled_duration (30, timeout, sizeof timeout);
  const char *const args[] = { "--pool-size", "2", "--timeout", timeout, NULL };
  serve_start (args, s);
  wait_pool (s, 2);
  const char *const client[] = { "--server", s->server_arg, NULL };
  run_nsbox_spawn ("run", false, client, true, job);
  run_job_feed (job, code, strlen (code));
  sleep_seconds (harness_scaled (0.5));
}

Test (serve, sigterm_finishes_the_runs_in_flight_then_leaves_nothing, .timeout = 180)
{
  /* A run that takes a while, in flight when SIGTERM comes. */
  char code[128];
  snprintf (code, sizeof code, "import time\ntime.sleep(%.2f)\nprint('finished')\n",
            harness_scaled (1.5));
  struct serve_job s;
  struct run_job job;
  serve_with_a_run_in_flight (&s, code, &job);
  pid_t server = s.job.pid;
  pid_t entries[16];
  int n = children_of (server, entries, 16);
  cr_assert (n >= 2, "expected the server's sandboxes under it, found %d", n);
  char *log = NULL;
  int status = serve_stop (&s, &log);
  struct run_out out;
  run_cli_wait (&job, code, strlen (code), &out);
  assert_prints (&out, "finished\n");
  cr_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0, "the server ended with 0x%x: %s",
             status, log);
  cr_assert (strstr (log, "draining"), "the server's log does not say it drained: %s", log);
  cr_assert (access (s.socket, F_OK) != 0, "the socket outlived the server");
  for (int i = 0; i < n; i++)
    cr_assert (process_gone (entries[i]), "pooled sandbox %d outlived the server", (int)entries[i]);
  char desc[1024] = "";
  int left = have_cgroups () ? count_nsbox_cgroups (server, desc, sizeof desc) : 0;
  cr_assert (left == 0, "%d cgroup(s) of the server left: %s", left, desc);
  free (log);
  run_out_free (&out);
}

Test (serve, kill_9_of_the_server_leaves_no_sandbox_and_a_restart_cleans_up, .timeout = 180)
{
  static const char code[] = "import time\ntime.sleep(1000)\n";
  struct serve_job s;
  struct run_job job;
  serve_with_a_run_in_flight (&s, code, &job);
  pid_t server = s.job.pid;
  pid_t sandboxes[16];
  int n = children_of (server, sandboxes, 16);
  cr_assert (n >= 2, "expected sandboxes under the server, found %d", n);
  cr_assert (kill (server, SIGKILL) == 0);
  int status;
  waitpid (server, &status, 0);
  struct run_out out;
  run_cli_wait (&job, code, strlen (code), &out);
  RUN_ASSERT (&out, out.exit_status == 125, "the client must fail when its server dies");
  run_out_free (&out);
  for (int i = 0; i < n; i++)
    {
      for (double w = 0; !process_gone (sandboxes[i]) && w < harness_scaled (10); w += 0.05)
        sleep_seconds (0.05);
      cr_assert (process_gone (sandboxes[i]), "sandbox init %d outlived its killed server",
                 (int)sandboxes[i]);
    }
  close (s.job.out_fd);
  close (s.job.err_fd);
  /* The socket file stays (nothing removes a file on SIGKILL); a new server
   * replaces it, and its runs sweep the dead server's cgroups. */
  struct serve_job again;
  const char *const again_args[] = { "--pool-size", "1", NULL };
  char dir[64];
  snprintf (dir, sizeof dir, "%s", s.dir);
  serve_start (again_args, &again);
  struct run_out ok;
  serve_run (&again, "print('again')\n", NULL, &ok);
  assert_prints (&ok, "again\n");
  run_out_free (&ok);
  char desc[1024] = "";
  int left = have_cgroups () ? count_nsbox_cgroups (server, desc, sizeof desc) : 0;
  cr_assert (left == 0, "%d cgroup(s) of the killed server left: %s", left, desc);
  stop_cleanly (&again);
  unlink (s.socket);
  rmdir (dir);
}

Test (serve, a_client_that_hangs_up_gets_its_sandbox_killed, .timeout = 120)
{
  /* The run must still be going when the client dies, however slow the
   * machine (under ASan beside the runsc lane a trivial run took 11 times
   * the reference: half a second scaled outlasted the default 5 s). */
  char timeout[32];
  harness_scaled_duration (30, timeout, sizeof timeout);
  const char *const args[] = { "--pool-size", "1", "--timeout", timeout, NULL };
  struct serve_job s;
  serve_start (args, &s);
  wait_pool (&s, 1);
  pid_t entry[4];
  cr_assert (children_of (s.job.pid, entry, 4) == 1, "expected one pooled sandbox");
  const char *const client[] = { "--server", s.server_arg, NULL };
  struct run_job job;
  run_nsbox_spawn ("run", false, client, true, &job);
  static const char code[] = "import time\ntime.sleep(1000)\n";
  run_job_feed (&job, code, strlen (code));
  sleep_seconds (harness_scaled (0.5));
  cr_assert (!process_gone (entry[0]), "the sandbox should be running the code");
  kill (job.pid, SIGKILL);
  struct run_out out;
  run_cli_wait (&job, code, strlen (code), &out);
  run_out_free (&out);
  /* Well before the run's own timeout (30 s scaled), which would kill it
   * too: 5 s was once not enough under ASan with both lanes busy. */
  bool gone = false;
  for (double w = 0; !gone && w < harness_scaled (15); w += 0.02)
    {
      gone = process_gone (entry[0]);
      if (!gone)
        sleep_seconds (0.02);
    }
  cr_assert (gone, "the sandbox (init %d) outlived its client", (int)entry[0]);
  /* The server counts the run once its teardown is over (runsc: gVisor's
   * state removed too). */
  char *metrics = NULL;
  bool counted = false;
  for (double w = 0; !counted && w < harness_scaled (10); w += 0.05)
    {
      free (metrics);
      metrics = NULL;
      cr_assert_eq (serve_http (s.socket, "GET", "/metrics", NULL, 0, NULL, &metrics, NULL), 200);
      counted = strstr (metrics, "outcome=\"cancelled\",served=\"warm\"} 1") != NULL;
      if (!counted)
        sleep_seconds (0.05);
    }
  cr_assert (counted, "/metrics does not count the cancelled run: %s", metrics);
  free (metrics);
  stop_cleanly (&s);
}

struct burst
{
  const char *socket;
  long status;
  bool retry_after;
  bool ok_body;
};

static void *
burst_request (void *arg)
{
  struct burst *b = arg;
  static const char body[] = "{\"code\": \"print(6 * 7)\"}";
  char *answer = NULL;
  b->status = serve_http (b->socket, "POST", "/v1/runs", body, strlen (body), NULL, &answer,
                          &b->retry_after);
  b->ok_body = answer && (b->status != 200 || strstr (answer, "\"stdout\":\"42\\n\""));
  free (answer);
  return NULL;
}

Test (serve, two_hundred_requests_at_once_end_as_results_or_clean_503s, .timeout = 300)
{
  const char *const args[]
      = { "--pool-size", "2", "--max-concurrent", "2", "--max-queue", "16", NULL };
  struct serve_job s;
  serve_start (args, &s);
  enum
  {
    N = 200
  };
  struct burst b[N];
  pthread_t t[N];
  for (int i = 0; i < N; i++)
    {
      b[i] = (struct burst){ .socket = s.socket };
      cr_assert (pthread_create (&t[i], NULL, burst_request, &b[i]) == 0);
    }
  int ok = 0, busy = 0;
  for (int i = 0; i < N; i++)
    {
      pthread_join (t[i], NULL);
      cr_assert (b[i].status == 200 || (b[i].status == 503 && b[i].retry_after),
                 "request %d ended with %ld (Retry-After %d)", i, b[i].status,
                 (int)b[i].retry_after);
      cr_assert (b[i].ok_body, "request %d: a 200 without the program's output", i);
      ok += b[i].status == 200;
      busy += b[i].status == 503;
    }
  cr_assert (ok >= 18, "only %d of %d requests ran (at least max-concurrent + max-queue)", ok, N);
  cr_log_info ("200 requests: %d results, %d busy", ok, busy);
  struct run_out after;
  serve_run (&s, "print('after')\n", NULL, &after);
  assert_prints (&after, "after\n");
  run_out_free (&after);
  stop_cleanly (&s);
}

static void
post_runs (struct serve_job *s, int n)
{
  static const char body[] = "{\"code\": \"print(1)\"}";
  for (int i = 0; i < n; i++)
    {
      char *answer = NULL;
      long st
          = serve_http (s->socket, "POST", "/v1/runs", body, strlen (body), NULL, &answer, NULL);
      cr_assert (st == 200 && strstr (answer, "\"stdout\":\"1\\n\""), "run %d: %ld %s", i, st,
                 answer);
      free (answer);
    }
}

Test (serve, a_thousand_runs_leave_fds_rss_and_cgroups_flat, .timeout = 900)
{
  /* A thousand for the RSS bound; a sanitizer build has none (its
   * allocator keeps freed memory), and a leaked fd or cgroup shows in far
   * fewer. */
#ifdef __SANITIZE_ADDRESS__
  int n = harness_is_runsc () ? 100 : 200;
#else
  int n = harness_is_runsc () ? 100 : 1000;
#endif
  const char *const args[] = { "--pool-size", "2", NULL };
  struct serve_job s;
  serve_start (args, &s);
  post_runs (&s, 30);
  wait_pool (&s, 2);
  pid_t server = s.job.pid;
  int fds0 = count_fds (server);
  long rss0 = rss_kb (server);
  char desc[1024] = "";
  int cg0 = have_cgroups () ? count_nsbox_cgroups (server, desc, sizeof desc) : 0;
  post_runs (&s, n);
  wait_pool (&s, 2);
  /* The last connection's socket closes just after its answer. */
  int fds1 = count_fds (server);
  for (double w = 0; fds1 > fds0 && w < harness_scaled (5); w += 0.02)
    {
      sleep_seconds (0.02);
      fds1 = count_fds (server);
    }
  long rss1 = rss_kb (server);
  int cg1 = have_cgroups () ? count_nsbox_cgroups (server, desc, sizeof desc) : 0;
  cr_log_info ("%d runs: fds %d -> %d, RSS %ld -> %ld kB, cgroups %d -> %d", n, fds0, fds1, rss0,
               rss1, cg0, cg1);
  /* Not more than before (the first count may have caught a connection
   * that was closing). */
  cr_assert (fds1 <= fds0, "the server's fds went from %d to %d over %d runs", fds0, fds1, n);
#ifndef __SANITIZE_ADDRESS__
  cr_assert (rss1 - rss0 < 4096, "the server's RSS grew from %ld to %ld kB over %d runs", rss0,
             rss1, n);
#endif
  cr_assert (cg1 == cg0, "the server's cgroups went from %d to %d: %s", cg0, cg1, desc);
  stop_cleanly (&s);
}

Test (serve, socket_activation_takes_the_socket_systemd_passes, .timeout = 120)
{
  char *dir = user_dir ();
  char sock[128], server[160];
  snprintf (sock, sizeof sock, "%s/activated.sock", dir);
  snprintf (server, sizeof server, "unix:%s", sock);
  /* systemd-socket-activate binds the socket, and on the first connection
   * executes the server with it as fd 3 (LISTEN_FDS=1), as a .socket unit
   * does. */
  const char *argv[16];
  int argc = 0;
  argv[argc++] = "systemd-socket-activate";
  argv[argc++] = "-l";
  argv[argc++] = sock;
  argv[argc++] = harness_nsbox_bin ();
  argv[argc++] = "serve";
  argv[argc++] = "--rootfs";
  argv[argc++] = harness_rootfs ();
  argv[argc++] = "--runtime";
  argv[argc++] = harness_runtime ();
  argv[argc] = NULL;
  pid_t pid = harness_fork_launcher ();
  if (pid == 0)
    {
      int null = open ("/dev/null", O_WRONLY | O_CLOEXEC);
      dup2 (null, 1);
      dup2 (null, 2);
      execvp (argv[0], (char *const *)argv);
      _exit (127);
    }
  for (double w = 0; access (sock, F_OK) != 0 && w < harness_scaled (10); w += 0.02)
    sleep_seconds (0.02);
  struct serve_job s;
  memset (&s, 0, sizeof s);
  snprintf (s.socket, sizeof s.socket, "%s", sock);
  snprintf (s.server_arg, sizeof s.server_arg, "%s", server);
  struct run_out out;
  serve_run (&s, "print('activated')\n", NULL, &out);
  assert_prints (&out, "activated\n");
  run_out_free (&out);
  cr_assert (kill (pid, SIGTERM) == 0);
  int status;
  waitpid (pid, &status, 0);
  cr_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0,
             "the activated server ended with 0x%x after SIGTERM", status);
  /* The socket is systemd's: the server leaves it. */
  unlink (sock);
  rmdir (dir);
  free (dir);
}

static void
expect_cli_refusal (const char *command, bool sandbox_args, const char *const *args,
                    const char *needle)
{
  struct run_job job;
  struct run_out out;
  run_nsbox_spawn (command, sandbox_args, args, false, &job);
  run_cli_wait (&job, "print(1)\n", 9, &out);
  RUN_ASSERT (&out, out.exit_status == 125 && strstr (out.err, needle),
              "nsbox %s must refuse with exit 125 and a message naming '%s'", command, needle);
  run_out_free (&out);
}

Test (serve, bad_flags_and_sockets_are_refused_with_a_clear_message, .timeout = 60)
{
  char *dir = user_dir ();
  char file[200], file_arg[220], world[200], tcp[64];
  snprintf (file, sizeof file, "%s/regular", dir);
  snprintf (file_arg, sizeof file_arg, "unix:%s", file);
  snprintf (world, sizeof world, "%s/token", dir);
  snprintf (tcp, sizeof tcp, "tcp:127.0.0.1:%u", (unsigned)free_tcp_port ());
  FILE *f = fopen (file, "we");
  cr_assert_not_null (f);
  fclose (f);
  f = fopen (world, "we");
  cr_assert_not_null (f);
  fputs ("a-token-that-is-long-enough\n", f);
  fclose (f);
  chmod (world, 0644);
  struct stat st;
  cr_assert (stat (dir, &st) == 0 && chown (file, st.st_uid, st.st_gid) == 0
             && chown (world, st.st_uid, st.st_gid) == 0);

  char shared[200], shared_arg[220];
  snprintf (shared, sizeof shared, "%s/shared", dir);
  snprintf (shared_arg, sizeof shared_arg, "unix:%s/s.sock", shared);
  cr_assert (mkdir (shared, 0775) == 0 && chmod (shared, 02775) == 0
             && chown (shared, st.st_uid, st.st_gid) == 0);
  const char *const group_writable[] = { "--listen", shared_arg, NULL };
  expect_cli_refusal ("serve", true, group_writable, "writable by its group");
  rmdir (shared);
  const char *const bogus[] = { "--listen", "bogus", NULL };
  expect_cli_refusal ("serve", true, bogus, "expected unix:PATH or tcp:ADDR:PORT");
  const char *const relative[] = { "--listen", "unix:relative.sock", NULL };
  expect_cli_refusal ("serve", true, relative, "must be absolute");
  const char *const not_socket[] = { "--listen", file_arg, NULL };
  expect_cli_refusal ("serve", true, not_socket, "is not a socket");
  const char *const readable[] = { "--listen", tcp, "--token-file", world, NULL };
  expect_cli_refusal ("serve", true, readable, "readable by its owner only");
  const char *const zero[] = { "--max-concurrent", "0", NULL };
  expect_cli_refusal ("serve", true, zero, "--max-concurrent");
  const char *const huge[] = { "--max-request-bytes", "1g", NULL };
  expect_cli_refusal ("serve", true, huge, "up to 64m");
  const char *const profile[] = { "--profile", "no-equals-sign", NULL };
  expect_cli_refusal ("serve", true, profile, "NAME=CONFIG.yaml");
  const char *const pool[] = { "--pool-size", "5000", NULL };
  expect_cli_refusal ("serve", true, pool, "'size'");
  const char *const lone[] = { "--profile", "x", NULL };
  expect_cli_refusal ("run", true, lone, "go with --server");
  const char *const nowhere[] = { "--server", "unix:/nonexistent/nsbox.sock", NULL };
  expect_cli_refusal ("run", false, nowhere, "/nonexistent/nsbox.sock");
  const char *const scheme[] = { "--server", "ftp://example", NULL };
  expect_cli_refusal ("run", false, scheme, "expected unix:/PATH, http://HOST:PORT or https://");
  unlink (file);
  unlink (world);
  rmdir (dir);
  free (dir);
}

/* A raw HTTP/1.1 request on the unix socket; returns the connected fd. */
static int
raw_request (const char *socket_path, const char *body)
{
  int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  cr_assert (fd >= 0);
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  snprintf (addr.sun_path, sizeof addr.sun_path, "%s", socket_path);
  cr_assert (connect (fd, (struct sockaddr *)&addr, sizeof addr) == 0, "connect: %s",
             strerror (errno));
  char head[256];
  int n = snprintf (head, sizeof head,
                    "POST /v1/runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    "Content-Length: %zu\r\n\r\n",
                    strlen (body));
  cr_assert (write (fd, head, (size_t)n) == n
             && write (fd, body, strlen (body)) == (ssize_t)strlen (body));
  return fd;
}

Test (serve, a_client_that_reads_slowly_holds_no_run_slot, .timeout = 120)
{
  const char *const args[]
      = { "--pool-size", "1", "--max-concurrent", "1", "--max-queue", "0", NULL };
  struct serve_job s;
  serve_start (args, &s);
  /* About 800 KB of answer (the bytes are escaped in JSON), never read. */
  int slow = raw_request (s.socket, "{\"code\": \"import sys\\nsys.stdout.write('\\\\x01' * 65000)"
                                    "\\nsys.stderr.write('\\\\x01' * 65000)\\n\"}");
  bool done = false;
  for (double w = 0; !done && w < harness_scaled (20); w += 0.05)
    {
      sleep_seconds (0.05);
      done = health_says (&s, "\"running\":0");
    }
  cr_assert (done, "the slow client's run never ended");
  struct run_out out;
  serve_run (&s, "print('next')\n", NULL, &out);
  assert_prints (&out, "next\n");
  run_out_free (&out);
  close (slow);
  stop_cleanly (&s);
}

Test (serve, a_client_that_only_half_closes_still_gets_its_result, .timeout = 120)
{
  const char *const args[] = { "--pool-size", "1", NULL };
  struct serve_job s;
  serve_start (args, &s);
  int fd = raw_request (s.socket, "{\"code\": \"import time\\ntime.sleep(0.3)\\nprint(42)\\n\"}");
  cr_assert (shutdown (fd, SHUT_WR) == 0);
  char buf[8192];
  size_t len = 0;
  for (;;)
    {
      ssize_t n = read (fd, buf + len, sizeof buf - 1 - len);
      if (n <= 0)
        break;
      len += (size_t)n;
    }
  buf[len] = '\0';
  close (fd);
  cr_assert (strstr (buf, "HTTP/1.1 200") && strstr (buf, "\"stdout\":\"42\\n\""),
             "a half-closed unix client must still get its result: %s", buf);
  stop_cleanly (&s);
}

Test (serve, a_chunked_body_over_the_cap_gets_413, .timeout = 60)
{
  const char *const args[] = { "--pool-size", "0", "--max-request-bytes", "1k", NULL };
  struct serve_job s;
  serve_start (args, &s);
  char *big = malloc (8192);
  cr_assert_not_null (big);
  memset (big, ' ', 8192);
  const char *const chunked[] = { "Transfer-Encoding: chunked", NULL };
  char *answer = NULL;
  long st = serve_http (s.socket, "POST", "/v1/runs", big, 8192, chunked, &answer, NULL);
  cr_assert (st == 413 && strstr (answer, "exceeds"), "expected 413, got %ld: %s", st, answer);
  free (answer);
  free (big);
  struct run_out out;
  serve_run (&s, "print('still')\n", NULL, &out);
  assert_prints (&out, "still\n");
  run_out_free (&out);
  stop_cleanly (&s);
}

Test (serve, a_background_process_is_gone_before_the_next_run, .timeout = 120)
{
  /* The daemon carries the run's unique tag: the host finds it by that. */
  char tag[96], code[1024];
  daemon_code (code, sizeof code, tag, sizeof tag);
  const char *const args[] = { "--pool-size", "1", NULL };
  struct serve_job s;
  serve_start (args, &s);
  wait_pool (&s, 1);
  pid_t entry[4];
  cr_assert (children_of (s.job.pid, entry, 4) == 1, "expected one pooled sandbox");
  struct run_out out;
  serve_run (&s, code, NULL, &out);
  char desc[1024] = "";
  int left
      = harness_is_runsc () ? 0 : count_uid_processes (sandbox_host_uid (), tag, desc, sizeof desc);
  bool emptied = sandbox_emptied (entry[0]);
  assert_prints (&out, "started\n");
  assert_served_warm (&out);
  RUN_ASSERT (&out, left == 0, "%d process(es) of the run outlived it: %s", left, desc);
  RUN_ASSERT (&out, emptied,
              "the sandbox's init (host pid %d) still had a child when the run's result came",
              (int)entry[0]);
  run_out_free (&out);
  stop_cleanly (&s);
}

Test (serve, the_timeout_counts_from_dispatch_through_the_server, .timeout = 120)
{
  char timeout[32];
  harness_scaled_duration (2, timeout, sizeof timeout);
  const char *const args[] = { "--pool-size", "1", "--timeout", timeout, NULL };
  struct serve_job s;
  serve_start (args, &s);
  wait_pool (&s, 1);
  /* The entry idles 3 s, longer than its timeout. */
  sleep_seconds (3);
  char code[128];
  snprintf (code, sizeof code, "import time\ntime.sleep(%.3f)\nprint('done')\n",
            harness_scaled (1));
  struct run_out out;
  serve_run (&s, code, NULL, &out);
  assert_prints (&out, "done\n");
  assert_served_warm (&out);
  run_out_free (&out);
  stop_cleanly (&s);
}
