/* Live sandboxes through `nsbox serve` (POST /v1/sandboxes, its runs, GET
 * and DELETE): state kept between runs, a sandbox bound to the client that
 * opened it (the peer's uid on the unix socket, the bearer token on TCP),
 * and what is left on the host after DELETE, the idle timeout and the
 * server's shutdown (looked for in /proc and the cgroup hierarchies, not
 * taken from the server's word). */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <grp.h>
#include <unistd.h>

#include "harness.h"

/* A served sandbox id: NODE.HEX, NUL. */
#define SB_ID 98

/* A uid that is neither root nor the test user nor the sandbox's. */
#define OTHER_UID 54321

static const char *
where (const struct serve_job *s)
{
  return s->socket[0] ? s->socket : s->url;
}

static json_t *
parse (const char *text)
{
  json_error_t e;
  json_t *j = json_loads (text, 0, &e);
  cr_assert_not_null (j, "not JSON (%s): %s", e.text, text);
  return j;
}

/* One request; the status, and the answer in *answer (caller frees). */
static long
call (const struct serve_job *s, const char *auth, const char *method, const char *path,
      const char *body, char **answer)
{
  const char *const headers[] = { auth, NULL };
  return serve_http (where (s), method, path, body, body ? strlen (body) : 0,
                     auth && *auth ? headers : NULL, answer, NULL);
}

/* Under runsc opening is refused, saying so: true then. */
static bool
runsc_refused (const struct serve_job *s, const char *auth)
{
  if (!harness_is_runsc ())
    return false;
  char *answer;
  long st = call (s, auth, "POST", "/v1/sandboxes", "{}", &answer);
  cr_assert_eq (st, 501, "expected 501 under runsc, got %ld: %s", st, answer);
  cr_assert (strstr (answer, "runtime runsc"), "the refusal does not say why: %s", answer);
  free (answer);
  return true;
}

static void
open_sandbox (const struct serve_job *s, const char *auth, const char *body, char id[SB_ID])
{
  char *answer;
  long st = call (s, auth, "POST", "/v1/sandboxes", body, &answer);
  cr_assert_eq (st, 201, "POST /v1/sandboxes: %ld %s", st, answer);
  json_t *j = parse (answer);
  const char *got = json_str_of (j, "id");
  /* NODE.HEX: the node's name (the host's, serve_job gives none), a dot,
   * 128 bits in hex. */
  const char *dot = got ? strchr (got, '.') : NULL;
  cr_assert (dot && dot > got && strlen (dot + 1) == 32
                 && strspn (dot + 1, "0123456789abcdef") == 32,
             "not an id NODE.HEX of 128 bits: %s", answer);
  cr_assert_not_null (json_str_of (j, "expires_at"), "no expires_at: %s", answer);
  snprintf (id, SB_ID, "%s", got);
  json_decref (j);
  free (answer);
}

/* A run in the sandbox; the result, or NULL with *status not 200. */
static json_t *
sandbox_run (const struct serve_job *s, const char *auth, const char *id, const char *code,
             long *status, char **error)
{
  char path[160];
  snprintf (path, sizeof path, "/v1/sandboxes/%s/runs", id);
  json_t *body = json_pack ("{s:s}", "code", code);
  char *text = json_dumps (body, JSON_COMPACT), *answer;
  json_decref (body);
  *status = call (s, auth, "POST", path, text, &answer);
  free (text);
  json_t *j = *status == 200 ? parse (answer) : NULL;
  if (error)
    *error = answer;
  else
    free (answer);
  return j;
}

static json_t *
run_ok (const struct serve_job *s, const char *auth, const char *id, const char *code)
{
  long st;
  char *err;
  json_t *j = sandbox_run (s, auth, id, code, &st, &err);
  cr_assert_eq (st, 200, "run %s: %ld %s", code, st, err);
  free (err);
  cr_assert_str_eq (json_str_of (j, "sandbox_id"), id);
  return j;
}

static long
sandbox_status (const struct serve_job *s, const char *auth, const char *method, const char *id,
                char **answer)
{
  char path[160];
  snprintf (path, sizeof path, "/v1/sandboxes/%s", id);
  return call (s, auth, method, path, NULL, answer);
}

/* A background process in the sandbox whose command line names a fresh
 * marker, seen on the host. */
static void
start_marked (const struct serve_job *s, const char *id, char *marker, size_t size)
{
  static int serial;
  struct timespec ts;
  clock_gettime (CLOCK_REALTIME, &ts);
  snprintf (marker, size, "nsbox-served-%d-%d-%ld", (int)getpid (), serial++, (long)ts.tv_nsec);
  char code[512];
  snprintf (code, sizeof code,
            "import subprocess, sys\n"
            "bg = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', '%s'])\n"
            "bg.pid > 0",
            marker);
  json_decref (run_ok (s, NULL, id, code));
  int seen = host_processes_become (marker, 1, 5);
  cr_assert_eq (seen, 1, "%d host processes name %s", seen, marker);
}

static int
server_cgroups (const struct serve_job *s)
{
  char desc[1024] = "";
  return have_cgroups () ? count_nsbox_cgroups (s->job.pid, desc, sizeof desc) : 0;
}

/* No single-run entries; the default one live sandbox kept ready once a
 * sandbox was opened. */
static const char *const no_pool[] = { "--pool-size", "0", NULL };
/* Nothing started but what a test opens: every cgroup of the server is
 * then one of its sandboxes'. */
static const char *const nothing_pooled[] = { "--pool-size", "0", "--pool-sandboxes", "0", NULL };

Test (serve_sandbox, state_survives_between_runs_and_delete_ends_it, .timeout = 180)
{
  struct serve_job s;
  serve_start (nothing_pooled, &s);
  if (runsc_refused (&s, NULL))
    {
      serve_stop_ok (&s);
      return;
    }
  char id[SB_ID];
  open_sandbox (&s, NULL, "{\"sandbox-idle-timeout\": \"5m\"}", id);
  json_t *a = run_ok (&s, NULL, id, "import json\nx = 41\nopen('/tmp/f', 'w').write('kept')");
  cr_assert_eq (json_int_of (a, "exit_code"), 0, "%s", json_str_of (a, "stderr"));
  cr_assert_eq (json_int_of (a, "sandbox_run"), 1);
  json_t *b = run_ok (&s, NULL, id, "raise ValueError('boom')");
  cr_assert_eq (json_int_of (b, "exit_code"), 1);
  cr_assert (strstr (json_str_of (b, "stderr"), "ValueError: boom"), "%s",
             json_str_of (b, "stderr"));
  json_t *c = run_ok (&s, NULL, id, "json.dumps([x + 1, open('/tmp/f').read()])");
  cr_assert_eq (json_int_of (c, "exit_code"), 0, "%s", json_str_of (c, "stderr"));
  cr_assert_str_eq (json_str_of (c, "value"), "'[42, \"kept\"]'");
  cr_assert_eq (json_int_of (c, "sandbox_run"), 3);
  json_decref (a);
  json_decref (b);
  json_decref (c);

  char *answer;
  cr_assert_eq (sandbox_status (&s, NULL, "GET", id, &answer), 200, "%s", answer);
  json_t *st = parse (answer);
  free (answer);
  cr_assert_eq (json_int_of (st, "runs"), 3);
  cr_assert (json_int_of (st, "memory_bytes") > (1 << 20), "memory_bytes %lld",
             json_int_of (st, "memory_bytes"));
  json_decref (st);

  char marker[96];
  start_marked (&s, id, marker, sizeof marker);
  /* Where the host gives it a memory cgroup, the sandbox has one (so
   * that its absence below proves something). */
  const char *mem = harness_expected_mechanism (RUN_CLI, "memory");
  if (strncmp (mem, "cgroup", 6) == 0)
    cr_assert (server_cgroups (&s) > 0, "the open sandbox has no cgroup (%s)", mem);
  cr_assert_eq (sandbox_status (&s, NULL, "DELETE", id, &answer), 204, "%s", answer);
  free (answer);
  /* 204: everything of it is gone already. */
  cr_assert_eq (host_processes_with (marker), 0, "a process of the sandbox outlived its DELETE");
  cr_assert_eq (server_cgroups (&s), 0, "a cgroup of the sandbox outlived its DELETE");
  cr_assert_eq (sandbox_status (&s, NULL, "GET", id, &answer), 404, "%s", answer);
  free (answer);
  long code;
  cr_assert_null (sandbox_run (&s, NULL, id, "1", &code, NULL));
  cr_assert_eq (code, 404);
  cr_assert_eq (sandbox_status (&s, NULL, "DELETE", id, &answer), 404, "%s", answer);
  free (answer);
  serve_stop_ok (&s);
}

/* The value of the metric line that starts with `name`, or -1. */
static long
metric (const struct serve_job *s, const char *name)
{
  char *answer;
  cr_assert_eq (call (s, NULL, "GET", "/metrics", NULL, &answer), 200);
  const char *at = strstr (answer, name);
  long v = at ? strtol (at + strlen (name), NULL, 10) : -1;
  free (answer);
  return v;
}

static bool
warm (const struct serve_job *s, const char *id)
{
  char *answer;
  cr_assert_eq (sandbox_status (s, NULL, "GET", id, &answer), 200, "%s", answer);
  json_t *st = parse (answer);
  free (answer);
  bool w = json_bool_of (st, "warm");
  json_decref (st);
  return w;
}

/* The PID namespace of the host process that `marker` names. */
static unsigned long
marked_pid_namespace (const char *marker)
{
  pid_t pid = host_process_with (marker);
  cr_assert (pid > 0, "no host process names %s", marker);
  char path[64];
  struct stat st;
  snprintf (path, sizeof path, "/proc/%d/ns/pid", (int)pid);
  cr_assert (stat (path, &st) == 0, "%s: %s", path, strerror (errno));
  return (unsigned long)st.st_ino;
}

/* Sandboxes taken from the pool's live entries: each its own process tree
 * (its own PID namespace, seen on the host) and its own interpreter (its
 * own hash seed), with nothing of another's, and none kept under runsc. */
Test (serve_sandbox, warm_sandboxes_are_each_fresh_and_their_own, .timeout = 180)
{
  static const char *const args[] = { "--pool-size", "0", "--pool-sandboxes", "2", NULL };
  struct serve_job s;
  serve_start (args, &s);
  if (harness_is_runsc ())
    {
      cr_assert_eq (metric (&s, "nsbox_pool_sandboxes_size{profile=\"default\"} "), 0,
                    "a runsc pool keeps live sandboxes it cannot open");
      cr_assert (runsc_refused (&s, NULL));
      serve_stop_ok (&s);
      return;
    }
  cr_assert_eq (metric (&s, "nsbox_pool_sandboxes_size{profile=\"default\"} "), 2);
  /* None is started before the first open. */
  usleep (500000);
  cr_assert_eq (metric (&s, "nsbox_pool_sandboxes_ready{profile=\"default\"} "), 0,
                "live sandboxes were started before any was asked for");
  char first[SB_ID];
  open_sandbox (&s, NULL, "{}", first);
  cr_assert (!warm (&s, first), "the first sandbox cannot have been warm");
  double until = now_seconds () + harness_scaled (30);
  while (metric (&s, "nsbox_pool_sandboxes_ready{profile=\"default\"} ") < 2
         && now_seconds () < until)
    usleep (50000);
  cr_assert_eq (metric (&s, "nsbox_pool_sandboxes_ready{profile=\"default\"} "), 2,
                "the pool did not start its two live sandboxes");
  char ids[2][SB_ID], markers[2][96];
  long hashes[2];
  for (int i = 0; i < 2; i++)
    {
      open_sandbox (&s, NULL, "{}", ids[i]);
      cr_assert (warm (&s, ids[i]), "sandbox %d was not taken from the pool", i);
      char code[96];
      snprintf (code, sizeof code, "mine = %d\nhash('nsbox')", i);
      json_t *j = run_ok (&s, NULL, ids[i], code);
      cr_assert_eq (json_int_of (j, "exit_code"), 0, "%s", json_str_of (j, "stderr"));
      cr_assert_eq (json_int_of (j, "sandbox_run"), 1);
      hashes[i] = strtol (json_str_of (j, "value"), NULL, 10);
      json_decref (j);
      start_marked (&s, ids[i], markers[i], sizeof markers[i]);
    }
  cr_assert_neq (hashes[0], hashes[1], "two warm sandboxes share a hash seed");
  cr_assert_neq (marked_pid_namespace (markers[0]), marked_pid_namespace (markers[1]),
                 "two warm sandboxes share a PID namespace");
  for (int i = 0; i < 2; i++)
    {
      json_t *j = run_ok (&s, NULL, ids[i], "mine");
      char want[16];
      snprintf (want, sizeof want, "%d", i);
      cr_assert_str_eq (json_str_of (j, "value"), want);
      json_decref (j);
    }
  serve_stop_ok (&s);
  for (int i = 0; i < 2; i++)
    cr_assert_eq (host_processes_become (markers[i], 0, 3), 0,
                  "a warm sandbox's process outlived the server");
}

/* A profile whose interpreter cannot run the live driver (a shell): its
 * live entries fail to start, again and again once a sandbox was asked
 * for, and its single runs stay warm all the same (each shelf of the pool
 * backs off on its own). */
Test (serve_sandbox, a_driver_that_cannot_start_does_not_slow_single_runs, .timeout = 180)
{
  char *dir = user_dir (), *path = NULL, profile[300];
  cr_assert (asprintf (&path, "%s/sh.yaml", dir) > 0);
  FILE *f = fopen (path, "we");
  cr_assert_not_null (f, "%s: %s", path, strerror (errno));
  fprintf (f, "rootfs: %s\nruntime: %s\ncommand: [/bin/sh, -s]\n", harness_rootfs (),
           harness_runtime ());
  fclose (f);
  chmod (path, 0644);
  snprintf (profile, sizeof profile, "sh=%s", path);
  free (path);
  free (dir);
  const char *const args[]
      = { "--pool-size", "1", "--pool-sandboxes", "1", "--profile", profile, NULL };
  struct serve_job s;
  serve_start (args, &s);
  if (runsc_refused (&s, NULL))
    {
      serve_stop_ok (&s);
      return;
    }
  /* Whatever the open answers, the live shelf is wanted from now on. */
  char *answer;
  call (&s, NULL, "POST", "/v1/sandboxes", "{\"profile\": \"sh\"}", &answer);
  free (answer);
  int cold = 0;
  for (int i = 0; i < 8; i++)
    {
      usleep ((useconds_t)(harness_scaled (0.6) * 1e6));
      long st = call (&s, NULL, "POST", "/v1/runs", "{\"profile\": \"sh\", \"code\": \"echo hi\"}",
                      &answer);
      cr_assert_eq (st, 200, "%ld %s", st, answer);
      json_t *j = parse (answer);
      free (answer);
      cr_assert_str_eq (json_str_of (j, "stdout"), "hi\n");
      cold += strcmp (json_str_of (j, "served"), "warm") != 0;
      json_decref (j);
    }
  cr_assert_eq (cold, 0, "%d of 8 single runs were served cold behind the failing live starts",
                cold);
  cr_assert (metric (&s, "nsbox_pool_sandboxes_ready{profile=\"sh\"} ") == 0);
  serve_stop_ok (&s);
}

/* A request as another uid: connected after dropping to OTHER_UID (the
 * peer's credentials are taken at connect), with the group that may reach
 * the socket. */
static long
as_other_uid (const struct serve_job *s, const char *method, const char *path, const char *body,
              char *answer, size_t size)
{
  struct stat st;
  cr_assert (stat (s->socket, &st) == 0);
  cr_assert (chmod (s->dir, 0750) == 0);
  int p[2];
  cr_assert (pipe (p) == 0);
  pid_t pid = fork ();
  cr_assert (pid >= 0);
  if (pid == 0)
    {
      close (p[0]);
      if (setgroups (0, NULL) < 0 || setgid (st.st_gid) < 0 || setuid (OTHER_UID) < 0)
        _exit (90);
      char *text = NULL;
      long status
          = serve_http (s->socket, method, path, body, body ? strlen (body) : 0, NULL, &text, NULL);
      dprintf (p[1], "%ld %s", status, text ? text : "");
      _exit (0);
    }
  close (p[1]);
  char buf[4096];
  size_t n = 0;
  ssize_t got;
  while ((got = read (p[0], buf + n, sizeof buf - 1 - n)) > 0)
    n += (size_t)got;
  close (p[0]);
  buf[n] = '\0';
  int ws;
  cr_assert (waitpid (pid, &ws, 0) == pid && WIFEXITED (ws) && WEXITSTATUS (ws) == 0,
             "the other uid's client failed (0x%x)", ws);
  long status = strtol (buf, NULL, 10);
  const char *text = strchr (buf, ' ');
  snprintf (answer, size, "%s", text ? text + 1 : "");
  return status;
}

/* The 404 of an id that never was, with `id` in its place: another
 * client's sandbox must be told apart by nothing. */
static void
expect_unknown (long status, const char *answer, const char *id)
{
  cr_assert_eq (status, 404, "expected 404, got %ld: %s", status, answer);
  char want[256];
  snprintf (want, sizeof want,
            "{\"error\":\"no sandbox %s: it was never opened by this client, or it was "
            "deleted\"}",
            id);
  cr_assert_str_eq (answer, want);
}

Test (serve_sandbox, another_uid_on_the_unix_socket_gets_404, .timeout = 180)
{
  struct serve_job s;
  serve_start (no_pool, &s);
  if (runsc_refused (&s, NULL))
    {
      serve_stop_ok (&s);
      return;
    }
  char id[SB_ID], path[160], answer[4096];
  open_sandbox (&s, NULL, NULL, id);
  json_decref (run_ok (&s, NULL, id, "secret = 'mine'"));
  snprintf (path, sizeof path, "/v1/sandboxes/%s", id);
  expect_unknown (as_other_uid (&s, "GET", path, NULL, answer, sizeof answer), answer, id);
  expect_unknown (as_other_uid (&s, "DELETE", path, NULL, answer, sizeof answer), answer, id);
  snprintf (path, sizeof path, "/v1/sandboxes/%s/runs", id);
  expect_unknown (as_other_uid (&s, "POST", path, "{\"code\": \"secret\"}", answer, sizeof answer),
                  answer, id);
  /* The other uid may open one of its own; the owner's is untouched. */
  long st = as_other_uid (&s, "POST", "/v1/sandboxes", "{}", answer, sizeof answer);
  cr_assert_eq (st, 201, "%s", answer);
  json_t *j = run_ok (&s, NULL, id, "secret");
  cr_assert_str_eq (json_str_of (j, "value"), "'mine'");
  json_decref (j);
  serve_stop_ok (&s);
}

Test (serve_sandbox, another_token_gets_404, .timeout = 180)
{
  struct serve_job s;
  const char *const a = "Authorization: Bearer first-token-0123456789";
  const char *const b = "Authorization: Bearer second-token-987654321";
  serve_start_tcp (no_pool, "first-token-0123456789\nsecond-token-987654321", &s);
  if (runsc_refused (&s, a))
    {
      serve_stop_ok (&s);
      return;
    }
  char id[SB_ID], *answer;
  open_sandbox (&s, a, NULL, id);
  json_decref (run_ok (&s, a, id, "secret = 'first'"));
  long st = sandbox_status (&s, b, "GET", id, &answer);
  expect_unknown (st, answer, id);
  free (answer);
  st = sandbox_status (&s, b, "DELETE", id, &answer);
  expect_unknown (st, answer, id);
  free (answer);
  json_t *r = sandbox_run (&s, b, id, "secret", &st, &answer);
  cr_assert_null (r);
  expect_unknown (st, answer, id);
  free (answer);
  st = sandbox_status (&s, "Authorization: Bearer not-a-token-of-the-file", "GET", id, &answer);
  cr_assert_eq (st, 401, "%s", answer);
  free (answer);
  json_t *j = run_ok (&s, a, id, "secret");
  cr_assert_str_eq (json_str_of (j, "value"), "'first'");
  json_decref (j);
  serve_stop_ok (&s);
}

Test (serve_sandbox, the_idle_timeout_and_the_shutdown_leave_nothing_on_the_host, .timeout = 180)
{
  struct serve_job s;
  serve_start (no_pool, &s);
  if (runsc_refused (&s, NULL))
    {
      serve_stop_ok (&s);
      return;
    }
  char idle[SB_ID], kept[SB_ID], idle_marker[96], kept_marker[96], *answer;
  open_sandbox (&s, NULL, "{\"sandbox-idle-timeout\": \"2s\"}", idle);
  open_sandbox (&s, NULL, "{\"sandbox-idle-timeout\": 600}", kept);
  start_marked (&s, idle, idle_marker, sizeof idle_marker);
  start_marked (&s, kept, kept_marker, sizeof kept_marker);
  int left = host_processes_become (idle_marker, 0, 2 + 4);
  cr_assert_eq (left, 0, "the idle sandbox is still on the host");
  cr_assert_eq (host_processes_with (kept_marker), 1, "the other sandbox went too");
  long st = sandbox_status (&s, NULL, "GET", idle, &answer);
  cr_assert_eq (st, 410, "%ld %s", st, answer);
  cr_assert (strstr (answer, "sandbox-idle-timeout"), "410 does not say why: %s", answer);
  free (answer);
  cr_assert_eq (call (&s, NULL, "GET", "/metrics", NULL, &answer), 200);
  cr_assert (strstr (answer, "nsbox_sandboxes_open 1\n"), "%s", answer);
  cr_assert (strstr (answer, "nsbox_sandboxes_ended_total{reason=\"idle\"} 1\n"), "%s", answer);
  free (answer);
  /* The server's end is every sandbox's. */
  pid_t server = s.job.pid;
  char *log = NULL;
  int status = serve_stop (&s, &log);
  cr_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0, "0x%x: %s", status, log);
  free (log);
  cr_assert_eq (host_processes_become (kept_marker, 0, 3), 0,
                "a sandbox's process outlived the server");
  char desc[1024] = "";
  int cg = have_cgroups () ? count_nsbox_cgroups (server, desc, sizeof desc) : 0;
  cr_assert_eq (cg, 0, "%d cgroup(s) of the server left: %s", cg, desc);
}

struct slow_run
{
  const struct serve_job *s;
  const char *id;
  long status;
};

static void *
slow_run (void *arg)
{
  struct slow_run *r = arg;
  json_t *j = sandbox_run (r->s, NULL, r->id, "import time\ntime.sleep(3)", &r->status, NULL);
  json_decref (j);
  return NULL;
}

Test (serve_sandbox, limits_and_bad_requests_get_clear_answers, .timeout = 180)
{
  static const char *const args[]
      = { "--pool-size", "0", "--max-sandboxes", "2", "--max-sandboxes-per-client", "1", NULL };
  struct serve_job s;
  serve_start (args, &s);
  if (runsc_refused (&s, NULL))
    {
      serve_stop_ok (&s);
      return;
    }
  static const struct
  {
    const char *body, *says;
  } bad[] = {
    { "[1]", "JSON object" },
    { "{\"sandbox-idle-timeout\": \"soon\"}", "sandbox-idle-timeout" },
    { "{\"sandbox-max-runs\": -1}", "sandbox-max-runs" },
    { "{\"profile\": \"nope\"}", "unknown profile" },
    { "{\"memory\": \"1g\"}", "unknown sandbox option 'memory'" },
    { "{\"session\": [1]}", "expected a string" },
    { "{", "malformed JSON" },
    /* Past the profile's (10m): only shorter. */
    { "{\"sandbox-idle-timeout\": \"11m\"}", "may only shorten the profile's (10m)" },
    { "{\"sandbox-max-lifetime\": \"2h\"}", "may only shorten the profile's (1h)" },
  };
  char *answer;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      long st = call (&s, NULL, "POST", "/v1/sandboxes", bad[i].body, &answer);
      cr_assert_eq (st, 400, "%s: %ld %s", bad[i].body, st, answer);
      cr_assert (strstr (answer, bad[i].says), "%s: %s", bad[i].body, answer);
      free (answer);
    }
  char id[SB_ID];
  open_sandbox (&s, NULL, "{\"sandbox-max-runs\": 2}", id);
  long st = call (&s, NULL, "POST", "/v1/sandboxes", "{}", &answer);
  cr_assert_eq (st, 503, "a second sandbox past --max-sandboxes-per-client 1: %ld %s", st, answer);
  cr_assert (strstr (answer, "max-sandboxes-per-client"), "%s", answer);
  free (answer);
  /* Another client has room of its own; then the server is full. */
  char other[4096];
  st = as_other_uid (&s, "POST", "/v1/sandboxes", "{}", other, sizeof other);
  cr_assert_eq (st, 201, "another client's first sandbox: %ld %s", st, other);
  cr_assert (chmod (s.dir, 0700) == 0);
  cr_assert_eq (call (&s, NULL, "GET", "/v1/sandboxes/0123", NULL, &answer), 404);
  free (answer);
  /* A fleet's balancer routes on the session header: a body that names
   * another session is refused, for an open as for a run. */
  cr_assert_eq (
      call (&s, "X-Nsbox-Session: one", "POST", "/v1/sandboxes", "{\"session\": \"two\"}", &answer),
      400);
  cr_assert (strstr (answer, "X-Nsbox-Session header differ"), "%s", answer);
  free (answer);
  cr_assert_eq (call (&s, "X-Nsbox-Session: one", "POST", "/v1/runs",
                      "{\"code\": \"1\", \"session\": \"two\"}", &answer),
                400);
  cr_assert (strstr (answer, "X-Nsbox-Session header differ"), "%s", answer);
  free (answer);
  /* Another node's sandbox is never here: 410, saying where it was. */
  cr_assert_eq (call (&s, NULL, "GET", "/v1/sandboxes/elsewhere-1.0123456789abcdef0123456789abcdef",
                      NULL, &answer),
                410);
  cr_assert (strstr (answer, "on node elsewhere-1, not on this one"), "%s", answer);
  free (answer);
  char path[160];
  snprintf (path, sizeof path, "/v1/sandboxes/%s/runs", id);
  cr_assert_eq (call (&s, NULL, "POST", path, "{\"code\": \"1\", \"profile\": \"x\"}", &answer),
                400);
  free (answer);
  cr_assert_eq (call (&s, NULL, "POST", path, "{\"code\": \"1\", \"inputs\": \"[]\"}", &answer),
                400);
  free (answer);
  /* One run at a time: another while one runs is refused (409). */
  struct slow_run r = { &s, id, 0 };
  pthread_t t;
  cr_assert (pthread_create (&t, NULL, slow_run, &r) == 0);
  /* Once the server says it is busy (its first run began), and long
   * before that run's 3 s are over. */
  double until = now_seconds () + harness_scaled (10);
  bool running = false;
  while (!running && now_seconds () < until)
    {
      cr_assert_eq (sandbox_status (&s, NULL, "GET", id, &answer), 200, "%s", answer);
      running = strstr (answer, "\"busy\":true") != NULL;
      free (answer);
      if (!running)
        usleep (20000);
    }
  cr_assert (running, "the first run never began");
  json_t *busy = sandbox_run (&s, NULL, id, "1", &st, &answer);
  cr_assert_null (busy);
  cr_assert_eq (st, 409, "%ld %s", st, answer);
  free (answer);
  pthread_join (t, NULL);
  cr_assert_eq (r.status, 200);
  /* Its second run was its last (sandbox-max-runs 2): 410 with why. */
  json_decref (run_ok (&s, NULL, id, "2"));
  cr_assert_null (sandbox_run (&s, NULL, id, "3", &st, &answer));
  cr_assert_eq (st, 410, "%ld %s", st, answer);
  cr_assert (strstr (answer, "sandbox-max-runs"), "%s", answer);
  free (answer);
  /* The one ended: room for a new one. */
  open_sandbox (&s, NULL, NULL, id);
  cr_assert_eq (call (&s, NULL, "GET", "/metrics", NULL, &answer), 200);
  cr_assert (strstr (answer, "nsbox_rejected_total{reason=\"max_sandboxes\"} 1\n"), "%s", answer);
  cr_assert (strstr (answer, "nsbox_sandboxes_opened_total 3\n"), "%s", answer);
  cr_assert (strstr (answer, "nsbox_sandboxes_open 2\n"), "%s", answer);
  free (answer);
  serve_stop_ok (&s);
}

/* Load: 50 sandboxes open at once through the server, each doing 5 runs
 * interleaved with the others', every value its own; then the memory of
 * an idle one, as the server reports it and as /proc sums it. */
#define LOAD_SANDBOXES 50
#define LOAD_THREADS 10

struct load
{
  const struct serve_job *s;
  int first;
  char ids[LOAD_SANDBOXES / LOAD_THREADS][SB_ID];
  int wrong;
};

static void *
load_worker (void *arg)
{
  struct load *l = arg;
  int n = LOAD_SANDBOXES / LOAD_THREADS;
  for (int i = 0; i < n; i++)
    open_sandbox (l->s, NULL, NULL, l->ids[i]);
  for (int run = 0; run < 5; run++)
    for (int i = 0; i < n; i++)
      {
        char code[64], want[32];
        if (run == 0)
          snprintf (code, sizeof code, "n = %d", (l->first + i) * 1000);
        else
          snprintf (code, sizeof code, "n = n + 1\nn");
        snprintf (want, sizeof want, "%d", (l->first + i) * 1000 + run);
        json_t *j = run_ok (l->s, NULL, l->ids[i], code);
        const char *value = json_str_of (j, "value");
        if (run > 0 && (!value || strcmp (value, want) != 0))
          l->wrong++;
        json_decref (j);
      }
  return NULL;
}

Test (serve_sandbox, fifty_sandboxes_at_once_each_keep_their_own_state, .timeout = 600)
{
  static const char *const args[]
      = { "--pool-size", "0", "--max-sandboxes", "64", "--max-sandboxes-per-client", "64", NULL };
  struct serve_job s;
  serve_start (args, &s);
  if (runsc_refused (&s, NULL))
    {
      serve_stop_ok (&s);
      return;
    }
  static struct load loads[LOAD_THREADS];
  pthread_t threads[LOAD_THREADS];
  double began = now_seconds ();
  for (int t = 0; t < LOAD_THREADS; t++)
    {
      loads[t] = (struct load){ .s = &s, .first = t * (LOAD_SANDBOXES / LOAD_THREADS) };
      cr_assert (pthread_create (&threads[t], NULL, load_worker, &loads[t]) == 0);
    }
  int wrong = 0;
  for (int t = 0; t < LOAD_THREADS; t++)
    {
      pthread_join (threads[t], NULL);
      wrong += loads[t].wrong;
    }
  double took = now_seconds () - began;
  cr_assert_eq (wrong, 0, "%d runs saw another state than their sandbox's", wrong);
  char *answer;
  cr_assert_eq (call (&s, NULL, "GET", "/metrics", NULL, &answer), 200);
  cr_assert (strstr (answer, "nsbox_sandboxes_open 50\n"), "%s", answer);
  free (answer);
  /* Idle now: the server's figure for each. */
  uint64_t total = 0;
  for (int t = 0; t < LOAD_THREADS; t++)
    for (int i = 0; i < LOAD_SANDBOXES / LOAD_THREADS; i++)
      {
        cr_assert_eq (sandbox_status (&s, NULL, "GET", loads[t].ids[i], &answer), 200);
        json_t *st = parse (answer);
        free (answer);
        total += (uint64_t)json_int_of (st, "memory_bytes");
        cr_assert_eq (json_int_of (st, "runs"), 5);
        json_decref (st);
      }
  fprintf (stderr,
           "serve_sandbox: %d sandboxes x 5 runs through the server in %.2f s; an idle sandbox "
           "holds %.1f MiB (mean PSS of its processes, from GET /v1/sandboxes/ID)\n",
           LOAD_SANDBOXES, took, (double)total / LOAD_SANDBOXES / (1 << 20));
  cr_assert (total > 0);
  serve_stop_ok (&s);
}
