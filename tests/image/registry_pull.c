/* Pulling from a real docker-registry 2.8 on loopback: OCI manifests, Docker schema 2, OCI indexes
 * with an attestation entry, Docker manifest lists, platform selection, and what a second or
 * concurrent pull costs. */
#include <criterion/criterion.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <pty.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "error.h"
#include "image_helpers.h"
#include "pull.h"
#include "servers.h"
#include "registry.h"
#include "store.h"

TestSuite (registry_pull, .fini = servers_stop_all);

static void
pull_ok (struct nsbox_store *store, const char *ref, const char *platform, char **digest)
{
  struct nsbox_error *e = test_pull (store, ref, platform, digest);
  cr_assert_null (e, "pull '%s' failed: %s", ref, nsbox_error_message (e));
}

/* The image config's "architecture" for a manifest in the store. */
static char *
config_architecture (struct nsbox_store *store, const char *manifest_digest)
{
  char *data = NULL;
  size_t len = 0;
  cr_assert (nsbox_store_read_blob (store, manifest_digest, 1 << 20, &data, &len, NULL) >= 0);
  json_t *m = json_loadb (data, len, 0, NULL);
  free (data);
  const char *config
      = json_string_value (json_object_get (json_object_get (m, "config"), "digest"));
  cr_assert (config && nsbox_store_has_blob (store, config), "config of %s not stored",
             manifest_digest);
  cr_assert (nsbox_store_read_blob (store, config, 1 << 20, &data, &len, NULL) >= 0);
  json_t *c = json_loadb (data, len, 0, NULL);
  free (data);
  char *arch = strdup (json_string_value (json_object_get (c, "architecture")));
  json_decref (c);
  json_decref (m);
  return arch;
}

static void
assert_layers_stored (struct nsbox_store *store, const char *manifest_digest, size_t want)
{
  char *data = NULL;
  size_t len = 0;
  cr_assert (nsbox_store_read_blob (store, manifest_digest, 1 << 20, &data, &len, NULL) >= 0);
  json_t *m = json_loadb (data, len, 0, NULL);
  free (data);
  json_t *layers = json_object_get (m, "layers");
  cr_assert_eq (json_array_size (layers), want);
  size_t i;
  json_t *l;
  json_array_foreach (layers, i, l)
  {
    const char *d = json_string_value (json_object_get (l, "digest"));
    cr_assert (nsbox_store_has_blob (store, d), "layer %s not in the store", d);
  }
  json_decref (m);
}

Test (registry_pull, oci_image_is_pulled_verified_and_tagged, .timeout = 60)
{
  struct server reg;
  registry_start (&reg, fixture_storage_copy (), NULL);
  struct nsbox_store *store = test_store ();
  char *ref = ref_at (reg.port, "test/img:t");
  char *digest = NULL;
  pull_ok (store, ref, NULL, &digest);
  assert_layers_stored (store, digest, 2);
  char *resolved = NULL;
  cr_assert (nsbox_store_resolve (store, ref, &resolved, NULL) >= 0, "'%s' not tagged", ref);
  cr_assert_str_eq (resolved, digest);
  cr_assert_geq (assert_blobs_verified (store), 4);
  free (resolved);
  free (digest);
  free (ref);
}

Test (registry_pull, docker_schema2_image_is_pulled, .timeout = 60)
{
  struct server reg;
  registry_start (&reg, fixture_storage_copy (), NULL);
  struct nsbox_store *store = test_store ();
  char *ref = ref_at (reg.port, "test/img:v2s2");
  char *digest = NULL;
  pull_ok (store, ref, "linux/amd64", &digest);
  assert_layers_stored (store, digest, 2);
  assert_blobs_verified (store);
  free (digest);
  free (ref);
}

Test (registry_pull, oci_index_gives_amd64_by_default_and_arm64_on_request, .timeout = 60)
{
  struct server reg;
  registry_start (&reg, fixture_storage_copy (), NULL);
  struct nsbox_store *store = test_store ();
  char *ref = ref_at (reg.port, "test/multi:t");
  char *d_default = NULL, *d_amd = NULL, *d_arm = NULL, *d_armv8 = NULL;
  pull_ok (store, ref, "linux/amd64", &d_amd);
  char *arch = config_architecture (store, d_amd);
  cr_assert_str_eq (arch, "amd64");
  free (arch);
#if defined(__x86_64__)
  pull_ok (store, ref, NULL, &d_default);
  cr_assert_str_eq (d_default, d_amd, "the default platform of an x86_64 host is linux/amd64");
#endif
  pull_ok (store, ref, "linux/arm64", &d_arm);
  pull_ok (store, ref, "linux/arm64/v8", &d_armv8);
  cr_assert_str_eq (d_arm, d_armv8);
  cr_assert_str_neq (d_arm, d_amd);
  arch = config_architecture (store, d_arm);
  cr_assert_str_eq (arch, "arm64");
  free (arch);
  assert_blobs_verified (store);
  free (d_default);
  free (d_amd);
  free (d_arm);
  free (d_armv8);
  free (ref);
}

Test (registry_pull, missing_platform_error_lists_the_available_ones, .timeout = 60)
{
  struct server reg;
  registry_start (&reg, fixture_storage_copy (), NULL);
  struct nsbox_store *store = test_store ();
  char *ref = ref_at (reg.port, "test/multi:t");
  struct nsbox_error *e = test_pull (store, ref, "linux/s390x", NULL);
  cr_assert_not_null (e, "s390x pulled from an index without it");
  const char *m = nsbox_error_message (e);
  cr_assert_eq (nsbox_error_errno (e), ENOEXEC, "%s", m);
  cr_assert (strstr (m, ref) && strstr (m, "linux/s390x") && strstr (m, "linux/amd64, linux/arm64")
                 && !strstr (m, "unknown"),
             "message: %s", m);
  nsbox_error_free (e);
  /* The attestation entry is no platform to pick either. */
  e = test_pull (store, ref, "unknown/unknown", NULL);
  cr_assert_not_null (e, "the attestation manifest was chosen");
  cr_assert_eq (nsbox_error_errno (e), ENOEXEC);
  nsbox_error_free (e);
  cr_assert (nsbox_store_resolve (store, ref, &(char *){ NULL }, NULL) < 0);
  free (ref);
}

Test (registry_pull, docker_manifest_list_is_pulled_per_platform, .timeout = 60)
{
  struct server reg;
  registry_start (&reg, fixture_storage_copy (), NULL);
  struct nsbox_store *store = test_store ();
  char *ref = ref_at (reg.port, "test/list:t");
  char *d_amd = NULL, *d_arm = NULL;
  pull_ok (store, ref, "linux/amd64", &d_amd);
  pull_ok (store, ref, "linux/aarch64", &d_arm);
  char *arch = config_architecture (store, d_arm);
  cr_assert_str_eq (arch, "arm64");
  free (arch);
  cr_assert_str_neq (d_amd, d_arm);
  free (d_amd);
  free (d_arm);
  free (ref);
}

Test (registry_pull, unknown_image_names_the_reference, .timeout = 60)
{
  struct server reg;
  registry_start (&reg, fixture_storage_copy (), NULL);
  struct nsbox_store *store = test_store ();
  char *ref = ref_at (reg.port, "test/img:nope");
  struct nsbox_error *e = test_pull (store, ref, NULL, NULL);
  cr_assert_not_null (e);
  cr_assert_eq (nsbox_error_errno (e), ENOENT, "%s", nsbox_error_message (e));
  cr_assert (strstr (nsbox_error_message (e), ref)
                 && strstr (nsbox_error_message (e), "MANIFEST_UNKNOWN"),
             "message: %s", nsbox_error_message (e));
  nsbox_error_free (e);
  free (ref);
}

Test (registry_pull, unreachable_registry_is_a_network_failure, .timeout = 60)
{
  struct nsbox_store *store = test_store ();
  char *ref = ref_at (free_port (), "test/img:t");
  struct nsbox_error *e = test_pull (store, ref, NULL, NULL);
  cr_assert_not_null (e);
  cr_assert_eq (nsbox_error_errno (e), ENETUNREACH, "%s", nsbox_error_message (e));
  cr_assert (strstr (nsbox_error_message (e), "network failure"), "%s", nsbox_error_message (e));
  nsbox_error_free (e);
  free (ref);
}

Test (registry_pull, plain_http_is_allowed_only_for_loopback_or_listed_hosts, .timeout = 10)
{
  cr_assert (registry_host_insecure_ok ("127.0.0.1:5000", NULL));
  cr_assert (registry_host_insecure_ok ("localhost:5000", NULL));
  cr_assert (registry_host_insecure_ok ("[::1]:5000", NULL));
  cr_assert (!registry_host_insecure_ok ("192.0.2.1:5000", NULL));
  cr_assert (!registry_host_insecure_ok ("registry-1.docker.io", NULL));
  const char *insecure[] = { "192.0.2.1:5000", NULL };
  cr_assert (registry_host_insecure_ok ("192.0.2.1:5000", insecure));
  cr_assert (!registry_host_insecure_ok ("192.0.2.2:5000", insecure));
}

/* ---- case 12: what a second pull costs ---- */

Test (registry_pull, second_pull_by_tag_is_one_head_request, .timeout = 60)
{
  struct server reg, proxy;
  registry_start (&reg, fixture_storage_copy (), NULL);
  proxy_start (&proxy, reg.port, "pass", -1, 0);
  struct nsbox_store *store = test_store ();
  char *ref = ref_at (proxy.port, "test/multi:t");
  char *d1 = NULL, *d2 = NULL;
  pull_ok (store, ref, "linux/amd64", &d1);
  int first = log_count (proxy.log, NULL, NULL);
  cr_assert_geq (first, 4, "the first pull made %d requests", first);
  pull_ok (store, ref, "linux/amd64", &d2);
  cr_assert_str_eq (d1, d2);
  int total = log_count (proxy.log, NULL, NULL);
  cr_assert_eq (total - first, 1, "the second pull made %d requests, want 1", total - first);
  cr_assert_eq (log_count (proxy.log, "HEAD", "/manifests/t"), 1);
  /* config + one layer, all during the first pull */
  int blob_gets = log_count (proxy.log, "GET", "/blobs/");
  cr_assert_eq (blob_gets, 2, "blob GETs: %d, want 2 (config, layer) and none the second time",
                blob_gets);
  free (d1);
  free (d2);
  free (ref);
}

Test (registry_pull, second_pull_by_digest_makes_no_request, .timeout = 60)
{
  struct server reg, proxy;
  registry_start (&reg, fixture_storage_copy (), NULL);
  proxy_start (&proxy, reg.port, "pass", -1, 0);
  struct nsbox_store *store = test_store ();
  char *ref = ref_at (proxy.port, "test/img:t");
  char *digest = NULL;
  pull_ok (store, ref, NULL, &digest);
  char *by_digest = NULL;
  cr_assert (asprintf (&by_digest, "127.0.0.1:%u/test/img@%s", proxy.port, digest) > 0);
  int before = log_count (proxy.log, NULL, NULL);
  char *again = NULL;
  pull_ok (store, by_digest, NULL, &again);
  cr_assert_str_eq (again, digest);
  int after = log_count (proxy.log, NULL, NULL);
  cr_assert_eq (after, before, "a pull by a stored digest made %d requests", after - before);
  char *resolved = NULL;
  cr_assert (nsbox_store_resolve (store, by_digest, &resolved, NULL) >= 0);
  cr_assert_str_eq (resolved, digest);
  free (resolved);
  free (again);
  free (by_digest);
  free (digest);
  free (ref);
}

Test (registry_pull, concurrent_pulls_download_each_blob_once, .timeout = 90)
{
  struct server reg, proxy;
  registry_start (&reg, fixture_storage_copy (), NULL);
  proxy_start (&proxy, reg.port, "slow", -1, 1 << 20);
  char *ref = ref_at (proxy.port, "test/big:t");
  const char *root = test_path ("store");
  pid_t pids[2];
  for (int i = 0; i < 2; i++)
    {
      pids[i] = fork ();
      cr_assert (pids[i] >= 0);
      if (pids[i] == 0)
        {
          struct nsbox_store *s = NULL;
          struct nsbox_error *e = NULL;
          char *d = NULL;
          struct nsbox_pull_options o = { 0 };
          int r = nsbox_store_open (root, &s, &e);
          if (r >= 0)
            r = nsbox_image_pull (s, ref, &o, &d, &e);
          if (r < 0)
            fprintf (stderr, "concurrent pull %d: %s\n", i, nsbox_error_message (e));
          _exit (r < 0 ? 1 : 0);
        }
    }
  for (int i = 0; i < 2; i++)
    {
      int status;
      cr_assert_eq (waitpid (pids[i], &status, 0), pids[i]);
      cr_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0, "pull %d failed", i);
    }
  struct nsbox_store *store = test_store ();
  char *digest = NULL;
  cr_assert (nsbox_store_resolve (store, ref, &digest, NULL) >= 0);
  const char *layer = first_layer_digest (store, digest);
  int gets = log_count (proxy.log, "GET", layer);
  cr_assert_eq (gets, 1, "the layer was downloaded %d times", gets);
  assert_blobs_verified (store);
  free (digest);
  free (ref);
}

static off_t
partial_size (const char *root)
{
  char path[4096];
  snprintf (path, sizeof path, "%s/ingest", root);
  char cmd[4200];
  snprintf (cmd, sizeof cmd,
            "find '%s' -name '*.partial' -printf '%%s\\n' 2>/dev/null | sort -n | tail -1", path);
  FILE *p = popen (cmd, "re");
  long long n = 0;
  if (p)
    {
      if (fscanf (p, "%lld", &n) != 1)
        n = 0;
      pclose (p);
    }
  return (off_t)n;
}

Test (registry_pull, killed_pull_resumes_with_a_range_request, .timeout = 90)
{
  struct server reg, slow, pass;
  registry_start (&reg, fixture_storage_copy (), NULL);
  proxy_start (&slow, reg.port, "slow", -1, 256 * 1024);
  proxy_start (&pass, reg.port, "pass", -1, 0);
  const char *root = test_path ("store");
  char *slow_ref = ref_at (slow.port, "test/big:t");
  pid_t pid = fork ();
  cr_assert (pid >= 0);
  if (pid == 0)
    {
      struct nsbox_store *s = NULL;
      struct nsbox_pull_options o = { 0 };
      if (nsbox_store_open (root, &s, NULL) < 0)
        _exit (2);
      nsbox_image_pull (s, slow_ref, &o, NULL, NULL);
      _exit (0);
    }
  struct timespec start;
  clock_gettime (CLOCK_MONOTONIC, &start);
  for (;;)
    {
      if (partial_size (root) >= 512 * 1024)
        break;
      struct timespec now;
      clock_gettime (CLOCK_MONOTONIC, &now);
      cr_assert (now.tv_sec - start.tv_sec < 30, "no partial download appeared");
      usleep (50 * 1000);
    }
  kill (pid, SIGKILL);
  waitpid (pid, NULL, 0);
  off_t kept = partial_size (root);
  cr_assert_gt (kept, 0);

  char *ref = ref_at (pass.port, "test/big:t");
  struct nsbox_store *store = test_store ();
  char *digest = NULL;
  pull_ok (store, ref, NULL, &digest);
  const char *layer = first_layer_digest (store, digest);
  cr_assert (nsbox_store_has_blob (store, layer));
  /* One GET of the layer, for the rest only. */
  FILE *f = fopen (pass.log, "re");
  char line[8192];
  int ranged = 0, full = 0;
  while (f && fgets (line, sizeof line, f))
    if (strstr (line, layer) && strstr (line, "\"GET\""))
      {
        if (strstr (line, "\"range\": \"bytes="))
          ranged++;
        else
          full++;
      }
  if (f)
    fclose (f);
  cr_assert_eq (ranged, 1, "the resumed pull did not ask for a Range (ranged %d, full %d)", ranged,
                full);
  cr_assert_eq (full, 0);
  assert_blobs_verified (store);
  free (digest);
  free (ref);
  free (slow_ref);
}

/* Everything pid writes on the terminal whose master is `master`, until
 * it hangs up, NUL-terminated in out; returns pid's wait status. */
static int
read_pty_to_end (int master, pid_t pid, char *out, size_t size)
{
  size_t len = 0;
  for (;;)
    {
      ssize_t n = read (master, out + len, size - 1 - len);
      if (n <= 0)
        break;
      len += (size_t)n;
    }
  out[len] = '\0';
  int status;
  waitpid (pid, &status, 0);
  close (master);
  return status;
}

/* nsbox-image draws the bar, from the library's progress reports. */
Test (registry_pull, progress_bar_is_drawn_on_a_terminal, .timeout = 60)
{
  struct server reg;
  registry_start (&reg, fixture_storage_copy (), NULL);
  char *ref = ref_at (reg.port, "test/big:t");
  const char *root = test_path ("store");
  int master = -1;
  pid_t pid = forkpty (&master, NULL, NULL, NULL);
  cr_assert (pid >= 0, "forkpty: %s", strerror (errno));
  if (pid == 0)
    {
      execl (image_bin (), "nsbox-image", "--store", root, "pull", ref, (char *)NULL);
      _exit (127);
    }
  char out[65536];
  int status = read_pty_to_end (master, pid, out, sizeof out);
  cr_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0, "pull failed: %s", out);
  cr_assert (strstr (out, ref) && strstr (out, "MB") && strstr (out, "[#####"),
             "no progress bar in: %s", out);
  free (ref);
}

struct progress_seen
{
  uint64_t calls, done, total, finals;
  bool backwards;
};

static void
note_progress (void *data, const char *ref, uint64_t done, uint64_t total, bool final)
{
  (void)ref;
  struct progress_seen *seen = data;
  seen->backwards |= done < seen->done;
  seen->calls++;
  seen->done = done;
  seen->total = total;
  seen->finals += final;
}

/* The library reports progress through the caller's function, up to all
 * of it, and never writes to stderr itself, a terminal or not. */
Test (registry_pull, progress_is_reported_never_printed, .timeout = 60)
{
  struct server reg;
  registry_start (&reg, fixture_storage_copy (), NULL);
  char *ref = ref_at (reg.port, "test/big:t");
  int master = -1;
  pid_t pid = forkpty (&master, NULL, NULL, NULL);
  cr_assert (pid >= 0, "forkpty: %s", strerror (errno));
  if (pid == 0)
    {
      struct nsbox_store *s = NULL;
      struct progress_seen seen = { 0 };
      struct nsbox_pull_options o = { .progress = note_progress, .progress_data = &seen };
      if (nsbox_store_open (test_path ("store"), &s, NULL) < 0)
        _exit (2);
      int r = nsbox_image_pull (s, ref, &o, NULL, NULL);
      /* Reported after the pull, on the terminal: the only output. */
      dprintf (STDOUT_FILENO, "calls %llu done %llu total %llu finals %llu backwards %d\n",
               (unsigned long long)seen.calls, (unsigned long long)seen.done,
               (unsigned long long)seen.total, (unsigned long long)seen.finals, seen.backwards);
      _exit (r < 0 ? 1 : 0);
    }
  char out[65536];
  int status = read_pty_to_end (master, pid, out, sizeof out);
  cr_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0, "pull failed: %s", out);
  unsigned long long calls = 0, done = 0, total = 0, finals = 0;
  int backwards = 1;
  cr_assert (strncmp (out, "calls ", 6) == 0
                 && sscanf (out, "calls %llu done %llu total %llu finals %llu backwards %d", &calls,
                            &done, &total, &finals, &backwards)
                        == 5,
             "the library wrote to the terminal before the report: %s", out);
  cr_assert (calls >= 2 && total > 0 && done == total && finals == 1 && !backwards,
             "progress reports: %s", out);
  free (ref);
}

static void
collect_log (void *data, const char *message)
{
  char *buf = data;
  size_t used = strlen (buf);
  snprintf (buf + used, 8192 - used, "%s\n", message);
}

Test (registry_pull, registry_warnings_299_are_logged_once, .timeout = 60)
{
  struct server reg, proxy;
  registry_start (&reg, fixture_storage_copy (), NULL);
  proxy_start (&proxy, reg.port, "warning", -1, 0);
  struct nsbox_store *store = test_store ();
  static char logged[8192];
  nsbox_store_set_log (store, collect_log, logged);
  char *ref = ref_at (proxy.port, "test/multi:t");
  pull_ok (store, ref, "linux/amd64", NULL);
  nsbox_store_set_log (store, NULL, NULL);
  const char *first = strstr (logged, "warns: this repository is deprecated\n");
  cr_assert (first, "no warning logged: '%s'", logged);
  cr_assert_null (strstr (first + 1, "warns: this repository"), "logged twice: '%s'", logged);
  cr_assert_null (strstr (logged, "not for users"), "a 199 warning was shown: '%s'", logged);
  free (ref);
}

Test (registry_pull, single_platform_image_for_another_platform_is_refused, .timeout = 60)
{
  struct server reg;
  registry_start (&reg, fixture_storage_copy (), NULL);
  struct nsbox_store *store = test_store ();
  char *ref = ref_at (reg.port, "test/img:t");
  struct nsbox_error *e = test_pull (store, ref, "linux/arm64", NULL);
  cr_assert_not_null (e, "an amd64 image was accepted for linux/arm64");
  cr_assert_eq (nsbox_error_errno (e), ENOEXEC, "%s", nsbox_error_message (e));
  cr_assert (strstr (nsbox_error_message (e), "'linux/amd64', not 'linux/arm64'"), "%s",
             nsbox_error_message (e));
  char *digest = NULL;
  cr_assert (nsbox_store_resolve (store, ref, &digest, NULL) < 0, "the reference was tagged");
  nsbox_error_free (e);
  free (ref);
}
