/* End to end: `nsbox run --image <loopback registry ref>` pulls the Python
 * fixture image (one layer of tests/fixtures/rootfs.sh, pushed with skopeo
 * by build-python-fixture.sh), unpacks it and runs Python in the sandbox
 * with the image's Env. */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "image_helpers.h"
#include "nsbox.h"
#include "servers.h"

TestSuite (registry_run, .fini = servers_stop_all);

static const char *
python_storage (void)
{
  static char path[4096];
  FILE *p = popen (image_test_script ("build-python-fixture.sh"), "re");
  cr_assert (p);
  if (!fgets (path, sizeof path, p))
    path[0] = '\0';
  int status = pclose (p);
  path[strcspn (path, "\n")] = '\0';
  cr_assert (status == 0 && path[0], "build-python-fixture.sh failed (%d)", status);
  return path;
}

/* Runs nsbox with `code` on stdin; returns its stdout (static). */
static const char *
cli_run (const char *store, const char *ref, const char *code, int *status)
{
  static char out[4096];
  char cmd[8192];
  const char *bin = getenv ("NSBOX_BIN") ? getenv ("NSBOX_BIN") : "build/nsbox";
  snprintf (cmd, sizeof cmd,
            "printf '%%s' \"%s\" | '%s' run --store '%s' --image '%s' --timeout 60s", code, bin,
            store, ref);
  FILE *p = popen (cmd, "re");
  cr_assert (p);
  size_t n = fread (out, 1, sizeof out - 1, p);
  out[n] = '\0';
  *status = pclose (p);
  return out;
}

Test (registry_run, nsbox_runs_python_from_an_image_pulled_off_a_local_registry, .timeout = 300)
{
  struct server reg, proxy;
  registry_start (&reg, python_storage (), NULL);
  proxy_start (&proxy, reg.port, "pass", -1, 0);
  char ref[128];
  snprintf (ref, sizeof ref, "127.0.0.1:%u/test/python:bookworm", proxy.port);
  const char *store = test_path ("store");
  int status;
  const char *out = cli_run (
      store, ref, "import ssl, sqlite3, os; print('ok', os.environ.get('LANG'))", &status);
  cr_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0 && strcmp (out, "ok C.UTF-8\n") == 0,
             "nsbox run said '%s' (status %d)", out, status);
  int blob_gets = log_count (proxy.log, "GET", "/blobs/");
  cr_assert_eq (blob_gets, 2, "config and layer: %d blob GETs", blob_gets);
  /* The image is in the store now: running again downloads nothing. */
  out = cli_run (store, ref, "print(2)", &status);
  cr_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0 && strcmp (out, "2\n") == 0,
             "second run said '%s' (status %d)", out, status);
  cr_assert_eq (log_count (proxy.log, "GET", "/blobs/"), blob_gets);
}

static void
sleep_ms (int ms)
{
  struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
  nanosleep (&ts, NULL);
}

/* `nsbox-image --store STORE ARGS...` (no shell); returns its exit status. */
static int
image_tool (const char *store, const char *a, const char *b)
{
  const char *const argv[] = { image_bin (), "--store", store, a, b, NULL };
  return run_command (argv);
}

/* The run holds the store's lock from the moment nsbox-image resolved the
 * image: the nsbox-image beside this nsbox is a wrapper that, once the real
 * one has resolved and exited, waits while the test untags the image and
 * runs gc - the moment the CLI used to take its lock only after. gc must
 * find the store busy, and the run must work. */
Test (registry_run, gc_cannot_remove_the_tree_between_resolve_and_run, .timeout = 300)
{
  struct server reg;
  registry_start (&reg, python_storage (), NULL);
  char ref[128];
  snprintf (ref, sizeof ref, "127.0.0.1:%u/test/python:bookworm", reg.port);
  const char *store = test_path ("store");
  cr_assert_eq (image_tool (store, "pull", ref), 0, "pull %s", ref);

  char dir[1024], cmd[16384];
  snprintf (dir, sizeof dir, "%s", test_path ("bin"));
  cr_assert (mkdir (dir, 0755) == 0);
  char mark[1100], done[1100];
  snprintf (mark, sizeof mark, "%s/resolved", dir);
  snprintf (done, sizeof done, "%s/gc-done", dir);
  snprintf (cmd, sizeof cmd,
            "cp '%s' '%s/nsbox' && cat > '%s/nsbox-image' <<'EOF'\n"
            "#!/bin/sh\n"
            "'%s' \"$@\"\n"
            "rc=$?\n"
            ": > '%s'\n"
            "while [ ! -e '%s' ]; do sleep 0.02; done\n"
            "exit $rc\n"
            "EOF\n"
            "chmod 755 '%s/nsbox-image'",
            harness_nsbox_bin (), dir, dir, image_bin (), mark, done, dir);
  cr_assert_eq (system (cmd), 0);

  snprintf (cmd, sizeof cmd,
            "printf 'print(7)' | '%s/nsbox' run --store '%s' --image '%s' --pull never "
            "--timeout 60s",
            dir, store, ref);
  FILE *run = popen (cmd, "re");
  cr_assert (run);
  int waited = 0;
  while (access (mark, F_OK) < 0 && waited < 120000)
    {
      sleep_ms (20);
      waited += 20;
    }
  cr_assert (access (mark, F_OK) == 0, "the wrapped nsbox-image never resolved");
  int rm = image_tool (store, "rm", ref);
  const char *const gc_argv[] = { image_bin (), "--store", store, "gc", NULL };
  int gc = run_command (gc_argv);
  cr_assert (fclose (fopen (done, "we")) == 0);
  char out[256];
  size_t n = fread (out, 1, sizeof out - 1, run);
  out[n] = '\0';
  int status = pclose (run);
  cr_assert_eq (rm, 0, "rm %s", ref);
  cr_assert_eq (gc, 10, "gc exited %d, not 10 (store busy): the run did not hold the store", gc);
  cr_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0 && strcmp (out, "7\n") == 0,
             "the run said '%s' (status %d)", out, status);
}

/* The same race left to chance: a loop untags the image and runs gc as
 * fast as it can while runs resolve it (pulling it again when needed).
 * Every gc either finds the store busy or removes only what no run uses:
 * no run fails. */
Test (registry_run, gc_in_a_loop_beside_runs_fails_no_run, .timeout = 600)
{
  struct server reg;
  registry_start (&reg, python_storage (), NULL);
  char ref[128];
  snprintf (ref, sizeof ref, "127.0.0.1:%u/test/python:bookworm", reg.port);
  const char *store = test_path ("store");
  cr_assert_eq (image_tool (store, "pull", ref), 0, "pull %s", ref);
  pid_t looper = fork ();
  cr_assert (looper >= 0);
  if (looper == 0)
    {
      int out = open ("/dev/null", O_WRONLY | O_CLOEXEC);
      dup2 (out, 1);
      dup2 (out, 2);
      for (;;)
        {
          image_tool (store, "rm", ref);
          const char *const gc_argv[] = { image_bin (), "--store", store, "gc", NULL };
          run_command (gc_argv);
          sleep_ms (5);
        }
    }
  int failed = 0;
  char first[512] = "";
  for (int i = 0; i < 10; i++)
    {
      int status;
      const char *out = cli_run (store, ref, "print(3)", &status);
      if (!WIFEXITED (status) || WEXITSTATUS (status) != 0 || strcmp (out, "3\n") != 0)
        {
          if (!failed++)
            snprintf (first, sizeof first, "run %d: '%s' (status %d)", i, out, status);
        }
    }
  kill (looper, SIGKILL);
  waitpid (looper, NULL, 0);
  cr_assert_eq (failed, 0, "%d of 10 runs failed beside gc; first: %s", failed, first);
}

/* libnsbox resolves `image` in process (image.c): it pulls the image and
 * holds the store's lock while the sandbox runs, so a gc in the middle
 * finds the store busy; after the run the lock is gone and gc works. The
 * run is in a forked child (Criterion's threads cannot unshare); the test
 * sees the sandbox's python by the tag in its environment. */
Test (registry_run, the_library_pulls_runs_and_holds_the_image, .timeout = 300)
{
  struct server reg;
  registry_start (&reg, python_storage (), NULL);
  char ref[128], tag[96];
  snprintf (ref, sizeof ref, "127.0.0.1:%u/test/python:bookworm", reg.port);
  make_run_tag (tag, sizeof tag);
  const char *store = test_path ("store");
  /* Before the fork: the child must not talk to Criterion. */
  char code[256];
  snprintf (code, sizeof code, "import time\ntime.sleep(%.1f)\nprint(7)\n", harness_scaled (3.0));
  uid_t sandbox_uid = sandbox_host_uid ();
  int pipefd[2];
  cr_assert (pipe2 (pipefd, O_CLOEXEC) == 0);
  pid_t child = fork ();
  cr_assert (child >= 0);
  if (child == 0)
    {
      struct nsbox_error *err = NULL;
      nsbox_result *res = NULL;
      nsbox_config *config = nsbox_config_new (&err);
      int r = config ? 0 : -1;
      if (r == 0
          && (nsbox_config_set (config, "image", ref, &err) < 0
              || nsbox_config_set (config, "store", store, &err) < 0
              || nsbox_config_set (config, "env", tag, &err) < 0
              || nsbox_config_set (config, "timeout", "120s", &err) < 0
              || nsbox_run (config, code, strlen (code), &res, &err) < 0))
        r = -1;
      size_t len = 0;
      const char *out = r == 0 ? nsbox_result_stdout (res, &len) : nsbox_error_message (err);
      dprintf (pipefd[1], "%d %.*s", r, (int)(r == 0 ? len : strlen (out)), out);
      _exit (0);
    }
  close (pipefd[1]);
  int busy = -1;
  char desc[512];
  bool reaped = false;
  for (int waited = 0; busy < 0 && waited < 240000; waited += 20)
    {
      if (count_uid_processes (sandbox_uid, tag, desc, sizeof desc) > 0)
        {
          const char *const gc_argv[] = { image_bin (), "--store", store, "gc", NULL };
          busy = run_command (gc_argv);
        }
      else if ((reaped = waitpid (child, NULL, WNOHANG) == child))
        break;
      else
        sleep_ms (20);
    }
  char out[4096];
  ssize_t n = read (pipefd[0], out, sizeof out - 1);
  out[n > 0 ? n : 0] = '\0';
  close (pipefd[0]);
  if (!reaped)
    waitpid (child, NULL, 0);
  cr_assert (strcmp (out, "0 7\n") == 0, "the library run said '%s'", out);
  cr_assert_eq (busy, 10, "gc during the run exited %d, not 10 (store busy)", busy);
  const char *const gc_argv[] = { image_bin (), "--store", store, "gc", NULL };
  cr_assert_eq (run_command (gc_argv), 0, "gc after the run: the lock outlived it");
}

/* The manifest digest of ref, as the registry serves it (skopeo, not
 * nsbox). */
static void
registry_digest (const char *ref, char *digest, size_t size)
{
  char cmd[512];
  snprintf (cmd, sizeof cmd,
            "skopeo inspect --tls-verify=false --format '{{.Digest}}' 'docker://%s' 2>&1", ref);
  FILE *p = popen (cmd, "re");
  cr_assert (p);
  if (!fgets (digest, (int)size, p))
    digest[0] = '\0';
  int status = pclose (p);
  digest[strcspn (digest, "\n")] = '\0';
  cr_assert (status == 0 && strncmp (digest, "sha256:", 7) == 0, "skopeo inspect: %s", digest);
}

/* The audit record of an image's run names the image and its manifest
 * digest, through the CLI (which resolves the image itself) and through
 * the library. */
Test (registry_run, the_audit_record_names_the_image_and_its_digest, .timeout = 300)
{
  struct server reg;
  registry_start (&reg, python_storage (), NULL);
  char ref[128], want[128];
  snprintf (ref, sizeof ref, "127.0.0.1:%u/test/python:bookworm", reg.port);
  registry_digest (ref, want, sizeof want);
  const char *store = test_path ("store");
  char log[4200], cmd[8192];
  snprintf (log, sizeof log, "%s/audit.log", test_path ("audit"));
  mkdir (test_path ("audit"), 0700);
  snprintf (cmd, sizeof cmd,
            "printf 'print(1)' | '%s' run --store '%s' --image '%s' --audit-log '%s' >/dev/null",
            getenv ("NSBOX_BIN") ? getenv ("NSBOX_BIN") : "build/nsbox", store, ref, log);
  cr_assert_eq (system (cmd), 0, "%s", cmd);
  nsbox_config *c = nsbox_config_new (NULL);
  cr_assert_not_null (c);
  cr_assert (nsbox_config_set (c, "store", store, NULL) == 0
             && nsbox_config_set (c, "image", ref, NULL) == 0
             && nsbox_config_set (c, "audit-log", log, NULL) == 0);
  /* In a child: the library forks the sandbox, Criterion's worker has threads. */
  pid_t pid = fork ();
  cr_assert (pid >= 0);
  if (pid == 0)
    {
      nsbox_result *res = NULL;
      _exit (nsbox_run (c, "print(2)", 8, &res, NULL) == 0 && nsbox_result_exit_code (res) == 0
                 ? 0
                 : 1);
    }
  int status = 0;
  waitpid (pid, &status, 0);
  cr_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0, "the library run failed");
  nsbox_config_free (c);
  size_t len = 0;
  char *text = read_file (log, &len);
  cr_assert_not_null (text);
  int records = 0;
  for (char *line = strtok (text, "\n"); line; line = strtok (NULL, "\n"), records++)
    {
      json_error_t jerr;
      json_t *r = json_loads (line, 0, &jerr);
      cr_assert (json_is_object (r), "%s", line);
      json_t *image = json_object_get (r, "image");
      cr_expect_str_eq (json_string_value (json_object_get (image, "reference")), ref, "record %d",
                        records + 1);
      const char *digest = json_string_value (json_object_get (image, "digest"));
      cr_expect (digest && strcmp (digest, want) == 0, "record %d: digest %s, the registry's %s",
                 records + 1, digest ? digest : "null", want);
      json_decref (r);
    }
  cr_expect_eq (records, 2);
  free (text);
}
