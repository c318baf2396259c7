/* End to end: `nsbox run --image <loopback registry ref>` pulls the Python
 * fixture image (one layer of tests/fixtures/rootfs.sh, pushed with skopeo
 * by build-python-fixture.sh), unpacks it and runs Python in the sandbox
 * with the image's Env. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

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
nsbox_run (const char *store, const char *ref, const char *code, int *status)
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
  const char *out = nsbox_run (
      store, ref, "import ssl, sqlite3, os; print('ok', os.environ.get('LANG'))", &status);
  cr_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0 && strcmp (out, "ok C.UTF-8\n") == 0,
             "nsbox run said '%s' (status %d)", out, status);
  int blob_gets = log_count (proxy.log, "GET", "/blobs/");
  cr_assert_eq (blob_gets, 2, "config and layer: %d blob GETs", blob_gets);
  /* The image is in the store now: running again downloads nothing. */
  out = nsbox_run (store, ref, "print(2)", &status);
  cr_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0 && strcmp (out, "2\n") == 0,
             "second run said '%s' (status %d)", out, status);
  cr_assert_eq (log_count (proxy.log, "GET", "/blobs/"), blob_gets);
}
