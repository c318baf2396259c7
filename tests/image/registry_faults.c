/* Faults injected by fault_proxy.py between nsbox and a real
 * docker-registry (OCI.md acceptance cases 7, 8, 10 and 11): tampered
 * manifests, indexes, configs and layers never reach the store; cut
 * transfers resume with Range (or restart when the server answers 200);
 * 429 is retried after Retry-After, and a persistent one reports the rate
 * limits; 500 is retried. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "error.h"
#include "image.h"
#include "servers.h"
#include "store.h"
#include "util.h"

TestSuite (registry_faults, .fini = servers_stop_all);

static char *
ref_at (uint16_t port, const char *name)
{
  char *s = NULL;
  cr_assert (asprintf (&s, "127.0.0.1:%u/%s", port, name) > 0);
  return s;
}

static int
count_entries (const char *dir)
{
  DIR *d = opendir (dir);
  int n = 0;
  struct dirent *de;
  while (d && (de = readdir (d)))
    if (de->d_name[0] != '.')
      n++;
  if (d)
    closedir (d);
  return n;
}

/* Inline strings: Criterion passes parameters to a re-executed worker, where
 * pointers into the parent's address space would be meaningless. */
struct tamper_case
{
  char mode[32];
  char image[32];
  char needle[32]; /* in the message */
};

static struct tamper_case tamper_cases[] = {
  { "tamper-manifest", "test/img:t", "Docker-Content-Digest" },
  { "child-size", "test/multi:t", "index says" },
  { "config", "test/img:t", "digest mismatch" },
  { "layer-plus-one", "test/img:t", "descriptor" },
  { "regzip", "test/img:t", "mismatch" },
  { "content-type", "test/img:v2s2", "Content-Type" },
};

ParameterizedTestParameters (registry_faults, tampered_content_is_rejected_and_never_stored)
{
  return cr_make_param_array (struct tamper_case, tamper_cases, ARRAY_SIZE (tamper_cases));
}

ParameterizedTest (struct tamper_case *c, registry_faults,
                   tampered_content_is_rejected_and_never_stored, .timeout = 60)
{
  struct server reg, proxy;
  registry_start (&reg, fixture_storage_copy (), NULL);
  proxy_start (&proxy, reg.port, c->mode, -1, 0);
  struct nsbox_store *store = test_store ();
  char *ref = ref_at (proxy.port, c->image);
  struct nsbox_error *e = test_pull (store, ref, "linux/amd64", NULL);
  cr_assert_not_null (e, "%s: the tampered image was pulled", c->mode);
  const char *m = nsbox_error_message (e);
  cr_assert_eq (nsbox_error_errno (e), EBADMSG, "%s: %s", c->mode, m);
  cr_assert (strstr (m, ref) && strstr (m, c->needle), "%s: message lacks '%s': %s", c->mode,
             c->needle, m);
  char *digest = NULL;
  cr_assert (nsbox_store_resolve (store, ref, &digest, NULL) < 0, "%s: the reference was tagged",
             c->mode);
  assert_blobs_verified (store);
  char ingest[4096];
  snprintf (ingest, sizeof ingest, "%s/ingest", nsbox_store_root (store));
  cr_assert_eq (count_entries (ingest), 0, "%s: a rejected download was kept in ingest/", c->mode);
  nsbox_error_free (e);
  free (ref);
}

/* The single layer of test/big:t, from the store. */
static const char *
first_layer (struct nsbox_store *store, const char *manifest_digest)
{
  static char digest[80];
  char *data = NULL;
  size_t len = 0;
  cr_assert (nsbox_store_read_blob (store, manifest_digest, 1 << 20, &data, &len, NULL) >= 0);
  json_t *m = json_loadb (data, len, 0, NULL);
  free (data);
  snprintf (digest, sizeof digest, "%s",
            json_string_value (
                json_object_get (json_array_get (json_object_get (m, "layers"), 0), "digest")));
  json_decref (m);
  return digest;
}

static int
count_layer_gets (const char *log, const char *layer, bool ranged)
{
  FILE *f = fopen (log, "re");
  char line[8192];
  int n = 0;
  while (f && fgets (line, sizeof line, f))
    if (strstr (line, layer) && strstr (line, "\"GET\"")
        && (strstr (line, "\"range\": \"bytes=") != NULL) == ranged)
      n++;
  if (f)
    fclose (f);
  return n;
}

Test (registry_faults, blob_cut_in_half_resumes_with_range, .timeout = 60)
{
  struct server reg, proxy;
  registry_start (&reg, fixture_storage_copy (), NULL);
  proxy_start (&proxy, reg.port, "cut", -1, 0);
  struct nsbox_store *store = test_store ();
  char *ref = ref_at (proxy.port, "test/big:t");
  char *digest = NULL;
  struct nsbox_error *e = test_pull (store, ref, NULL, &digest);
  cr_assert_null (e, "pull failed: %s", nsbox_error_message (e));
  const char *layer = first_layer (store, digest);
  cr_assert (nsbox_store_has_blob (store, layer));
  cr_assert_eq (count_layer_gets (proxy.log, layer, false), 1);
  cr_assert_eq (count_layer_gets (proxy.log, layer, true), 1, "no Range request after the cut");
  assert_blobs_verified (store);
  free (digest);
  free (ref);
}

Test (registry_faults, server_ignoring_range_restarts_the_blob, .timeout = 60)
{
  struct server reg, proxy;
  registry_start (&reg, fixture_storage_copy (), NULL);
  proxy_start (&proxy, reg.port, "cut-then-200", -1, 0);
  struct nsbox_store *store = test_store ();
  char *ref = ref_at (proxy.port, "test/big:t");
  char *digest = NULL;
  struct nsbox_error *e = test_pull (store, ref, NULL, &digest);
  cr_assert_null (e, "pull failed: %s", nsbox_error_message (e));
  const char *layer = first_layer (store, digest);
  /* asked for a Range, got 200 with everything, started over: verified */
  cr_assert_eq (count_layer_gets (proxy.log, layer, true), 1);
  cr_assert (nsbox_store_has_blob (store, layer));
  assert_blobs_verified (store);
  free (digest);
  free (ref);
}

static double
seconds_since (const struct timespec *start)
{
  struct timespec now;
  clock_gettime (CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - start->tv_sec) + (double)(now.tv_nsec - start->tv_nsec) / 1e9;
}

Test (registry_faults, rate_limit_is_retried_after_retry_after, .timeout = 60)
{
  struct server reg, proxy;
  registry_start (&reg, fixture_storage_copy (), NULL);
  proxy_start (&proxy, reg.port, "429", 2, 0);
  struct nsbox_store *store = test_store ();
  char *ref = ref_at (proxy.port, "test/img:t");
  struct timespec start;
  clock_gettime (CLOCK_MONOTONIC, &start);
  struct nsbox_error *e = test_pull (store, ref, NULL, NULL);
  cr_assert_null (e, "pull failed: %s", nsbox_error_message (e));
  double took = seconds_since (&start);
  cr_assert_geq (took, 1.9, "two Retry-After: 1 were not honoured (%.2fs)", took);
  cr_assert_eq (log_count (proxy.log, NULL, "/manifests/"), 3);
  free (ref);
}

Test (registry_faults, persistent_rate_limit_reports_the_limits, .timeout = 60)
{
  struct server reg, proxy;
  registry_start (&reg, fixture_storage_copy (), NULL);
  proxy_start (&proxy, reg.port, "429", -1, 0);
  struct nsbox_store *store = test_store ();
  char *ref = ref_at (proxy.port, "test/img:t");
  struct nsbox_error *e = test_pull (store, ref, NULL, NULL);
  cr_assert_not_null (e);
  const char *m = nsbox_error_message (e);
  cr_assert_eq (nsbox_error_errno (e), EAGAIN, "%s", m);
  cr_assert (
      strstr (m, ref) && strstr (m, "rate limited") && strstr (m, "ratelimit-limit: 100;w=21600")
          && strstr (m, "ratelimit-remaining: 0;w=21600")
          && strstr (m, "docker-ratelimit-source: 127.0.0.1") && strstr (m, "TOOMANYREQUESTS"),
      "message: %s", m);
  int tries = log_count (proxy.log, NULL, "/manifests/");
  cr_assert_eq (tries, 5, "%d tries, want 5", tries);
  nsbox_error_free (e);
  free (ref);
}

Test (registry_faults, server_errors_are_retried, .timeout = 60)
{
  struct server reg, proxy;
  registry_start (&reg, fixture_storage_copy (), NULL);
  proxy_start (&proxy, reg.port, "500", 2, 0);
  struct nsbox_store *store = test_store ();
  char *ref = ref_at (proxy.port, "test/img:t");
  struct nsbox_error *e = test_pull (store, ref, NULL, NULL);
  cr_assert_null (e, "pull failed: %s", nsbox_error_message (e));
  free (ref);
}

Test (registry_faults, persistent_server_errors_fail_with_the_registry_message, .timeout = 60)
{
  struct server reg, proxy;
  registry_start (&reg, fixture_storage_copy (), NULL);
  proxy_start (&proxy, reg.port, "500", -1, 0);
  struct nsbox_store *store = test_store ();
  char *ref = ref_at (proxy.port, "test/img:t");
  struct nsbox_error *e = test_pull (store, ref, NULL, NULL);
  cr_assert_not_null (e);
  const char *m = nsbox_error_message (e);
  cr_assert_eq (nsbox_error_errno (e), EIO, "%s", m);
  cr_assert (strstr (m, "HTTP 500") && strstr (m, "injected failure"), "message: %s", m);
  nsbox_error_free (e);
  free (ref);
}

Test (registry_faults, wrong_diff_id_fails_the_unpack_and_leaves_no_tree, .timeout = 60)
{
  struct server reg;
  registry_start (&reg, fixture_storage_copy (), NULL);
  struct nsbox_store *store = test_store ();
  char *ref = ref_at (reg.port, "test/baddiff:t");
  char *digest = NULL;
  /* The compressed blobs are intact: the pull verifies and stores them. */
  struct nsbox_error *e = test_pull (store, ref, NULL, &digest);
  cr_assert_null (e, "pull failed: %s", nsbox_error_message (e));
  char *rootfs = NULL;
  int r = nsbox_store_unpack (store, digest, &rootfs, NULL, &e);
  cr_assert (r < 0, "a layer whose diff_id does not match was unpacked to '%s'", rootfs);
  cr_assert_eq (nsbox_error_errno (e), EBADMSG, "%s", nsbox_error_message (e));
  char dir[4096];
  snprintf (dir, sizeof dir, "%s/rootfs", nsbox_store_root (store));
  cr_assert_eq (count_entries (dir), 0, "a tree was left in rootfs/");
  snprintf (dir, sizeof dir, "%s/tmp", nsbox_store_root (store));
  cr_assert_eq (count_entries (dir), 0, "a temporary tree was left in tmp/");
  nsbox_error_free (e);
  free (digest);
  free (ref);
}
