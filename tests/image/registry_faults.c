/* Faults injected by fault_proxy.py between nsbox and a real
 * docker-registry: tampered
 * manifests, indexes, configs and layers never reach the store; cut
 * transfers resume with Range (or restart when the server answers 200);
 * 429 is retried after Retry-After, and a persistent one reports the rate
 * limits; 500 is retried. Stalled transfers (NSBOX_IMAGE_STALL_SECONDS)
 * are retried once with a Range, then fail the pull keeping the bytes for
 * the next one; a slow but steady transfer is left alone. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <jansson.h>

#include "error.h"
#include "harness.h"
#include "pull.h"
#include "image_helpers.h"
#include "servers.h"
#include "store.h"
#include "util.h"

TestSuite (registry_faults, .fini = servers_stop_all);

/* Entries of dir other than dotfiles. */
static int
count_undotted (const char *dir)
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
  cr_assert_eq (count_undotted (ingest), 0, "%s: a rejected download was kept in ingest/", c->mode);
  nsbox_error_free (e);
  free (ref);
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
  const char *layer = first_layer_digest (store, digest);
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
  const char *layer = first_layer_digest (store, digest);
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

/* test_pull, and how long it took in *took. */
static struct nsbox_error *
timed_pull (struct nsbox_store *store, const char *ref, char **digest, double *took)
{
  struct timespec start;
  clock_gettime (CLOCK_MONOTONIC, &start);
  struct nsbox_error *e = test_pull (store, ref, NULL, digest);
  *took = seconds_since (&start);
  return e;
}

Test (registry_faults, rate_limit_is_retried_after_retry_after, .timeout = 60)
{
  struct server reg, proxy;
  registry_start (&reg, fixture_storage_copy (), NULL);
  proxy_start (&proxy, reg.port, "429", 2, 0);
  struct nsbox_store *store = test_store ();
  char *ref = ref_at (proxy.port, "test/img:t");
  double took;
  struct nsbox_error *e = timed_pull (store, ref, NULL, &took);
  cr_assert_null (e, "pull failed: %s", nsbox_error_message (e));
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
  cr_assert_eq (count_undotted (dir), 0, "a tree was left in rootfs/");
  snprintf (dir, sizeof dir, "%s/tmp", nsbox_store_root (store));
  cr_assert_eq (count_undotted (dir), 0, "a temporary tree was left in tmp/");
  nsbox_error_free (e);
  free (digest);
  free (ref);
}

/* ---- stalls: NSBOX_IMAGE_STALL_SECONDS, 2 s here instead of 60 ---- */

#define STALL_SECONDS 2

static void
use_short_stall_window (void)
{
  char value[16];
  snprintf (value, sizeof value, "%d", STALL_SECONDS);
  cr_assert (setenv ("NSBOX_IMAGE_STALL_SECONDS", value, 1) == 0);
}

/* An fx for sh()/sh_ok(): $T is test_dir, $STORE the store test_store opens. */
static struct fx *
cli_fx (void)
{
  static struct fx fx;
  static char store[4096];
  snprintf (store, sizeof store, "%s", test_path ("store"));
  fx.dir = (char *)test_dir ();
  fx.store = store;
  return &fx;
}

static long long
file_size (const char *path)
{
  struct stat st;
  return stat (path, &st) == 0 ? (long long)st.st_size : -1;
}

Test (registry_faults, stalled_blob_is_asked_again_from_where_it_stopped, .timeout = 60)
{
  use_short_stall_window ();
  struct server reg, proxy;
  registry_start (&reg, fixture_storage_copy (), NULL);
  proxy_start (&proxy, reg.port, "stall", 1, 0);
  struct nsbox_store *store = test_store ();
  char *ref = ref_at (proxy.port, "test/big:t");
  char *digest = NULL;
  double took;
  struct nsbox_error *e = timed_pull (store, ref, &digest, &took);
  cr_assert_null (e, "pull failed: %s", nsbox_error_message (e));
  /* The stall lasts the whole window, and not much more: 5 s for the rest
   * of the pull on the machine the bound was tuned on, scaled by this
   * machine's measured speed (harness_time_scale). */
  double slack = harness_scaled (5);
  cr_assert (took >= STALL_SECONDS && took < STALL_SECONDS + slack,
             "the stalled transfer was given up after %.2f s (window %d s, slack %.1f s)", took,
             STALL_SECONDS, slack);
  const char *layer = first_layer_digest (store, digest);
  cr_assert_eq (count_layer_gets (proxy.log, layer, false), 1);
  cr_assert_eq (count_layer_gets (proxy.log, layer, true), 1, "no Range request after the stall");
  cr_assert (nsbox_store_has_blob (store, layer));
  assert_blobs_verified (store);
  free (digest);
  free (ref);
}

/* Through the CLI, as `nsbox run --image` pulls (resolve: pull, then
 * unpack): a layer that stalls again after its retry fails the run with a
 * network error naming the reference, the layer and the stall; nothing
 * unverified is stored and no tree made; the next pull asks only for the
 * rest and gives the tree a clean pull gives. */
Test (registry_faults, blob_that_keeps_stalling_fails_the_pull_and_the_next_pull_resumes,
      .timeout = 120)
{
  struct server reg, stall, pass;
  registry_start (&reg, fixture_storage_copy (), NULL);
  proxy_start (&stall, reg.port, "stall", -1, 0);
  proxy_start (&pass, reg.port, "pass", -1, 0);

  struct nsbox_store *clean = NULL;
  struct nsbox_error *e = NULL;
  cr_assert (nsbox_store_open (test_path ("clean-store"), &clean, &e) >= 0, "%s",
             nsbox_error_message (e));
  char *direct_ref = ref_at (reg.port, "test/big:t");
  char *clean_digest = NULL;
  e = test_pull (clean, direct_ref, NULL, &clean_digest);
  cr_assert_null (e, "clean pull failed: %s", nsbox_error_message (e));
  char layer[80];
  snprintf (layer, sizeof layer, "%s", first_layer_digest (clean, clean_digest));
  char blob[4096];
  snprintf (blob, sizeof blob, "%s/blobs/sha256/%s", nsbox_store_root (clean), layer + 7);
  long long layer_size = file_size (blob);
  char *clean_rootfs = NULL;
  cr_assert (nsbox_store_unpack (clean, clean_digest, &clean_rootfs, NULL, &e) >= 0, "%s",
             nsbox_error_message (e));
  char *want_tree = tree_hash (clean_rootfs);

  struct fx *fx = cli_fx ();
  char *stall_ref = ref_at (stall.port, "test/big:t");
  struct cmd_out out;
  struct timespec start;
  clock_gettime (CLOCK_MONOTONIC, &start);
  sh (fx, &out,
      "NSBOX_IMAGE_STALL_SECONDS=%d \"$IMG\" --store \"$STORE\" resolve --pull missing '%s' "
      ">/dev/null",
      STALL_SECONDS, stall_ref);
  double took = seconds_since (&start);
  cr_assert_eq (out.status, 9, "exit %d, want 9 (network failure); stderr: %s", out.status,
                out.err);
  cr_assert (strstr (out.err, stall_ref) && strstr (out.err, layer) && strstr (out.err, "stalled")
                 && strstr (out.err, "next pull resumes"),
             "the message does not name the reference, the layer and the stall: %s", out.err);
  /* The first try and its retry each stall for the window; 6 s for the
   * rest, scaled as above. */
  double slack = harness_scaled (6);
  cr_assert (took >= 2 * STALL_SECONDS && took < 2 * STALL_SECONDS + slack,
             "the pull failed after %.2f s (window %d s, one retry, slack %.1f s)", took,
             STALL_SECONDS, slack);
  cr_assert_eq (count_layer_gets (stall.log, layer, false), 1);
  cr_assert_eq (count_layer_gets (stall.log, layer, true), 1, "the stall was not retried");

  struct nsbox_store *store = test_store ();
  assert_blobs_verified (store);
  cr_assert (!nsbox_store_has_blob (store, layer), "a stalled layer entered blobs/");
  char *tagged = NULL;
  cr_assert (nsbox_store_resolve (store, stall_ref, &tagged, NULL) < 0, "the failed pull tagged");
  char path[4096];
  snprintf (path, sizeof path, "%s/rootfs", nsbox_store_root (store));
  cr_assert_eq (count_undotted (path), 0, "a tree was left in rootfs/");
  snprintf (path, sizeof path, "%s/tmp", nsbox_store_root (store));
  cr_assert_eq (count_undotted (path), 0, "a work directory was left in tmp/");
  snprintf (path, sizeof path, "%s/ingest/%s.partial", nsbox_store_root (store), layer + 7);
  long long kept = file_size (path);
  cr_assert (kept > 0 && kept < layer_size, "ingest keeps %lld of %lld bytes", kept, layer_size);

  char *pass_ref = ref_at (pass.port, "test/big:t");
  char *rootfs = sh_ok (fx,
                        "\"$IMG\" --store \"$STORE\" pull '%s' >/dev/null && "
                        "\"$IMG\" --store \"$STORE\" rootfs '%s'",
                        pass_ref, pass_ref);
  cr_assert_eq (count_layer_gets (pass.log, layer, true), 1, "the next pull asked for no Range");
  cr_assert_eq (count_layer_gets (pass.log, layer, false), 0,
                "the next pull downloaded the layer from its start");
  assert_blobs_verified (store);
  char *tree = tree_hash (rootfs);
  cr_assert_str_eq (tree, want_tree, "the resumed pull's tree differs from a clean pull's");

  free (tree);
  free (rootfs);
  free (pass_ref);
  cmd_out_free (&out);
  free (stall_ref);
  free (want_tree);
  free (clean_rootfs);
  free (clean_digest);
  free (direct_ref);
  nsbox_store_close (clean);
}

/* Blob bodies trickle in 3 KiB a second, one write a second, for three stall
 * windows (then the rest at once): above the 1 KiB/s floor, with pauses
 * shorter than the window, so nothing may be given up or asked again. */
Test (registry_faults, slow_but_steady_transfer_is_not_taken_for_a_stall, .timeout = 60)
{
  use_short_stall_window ();
  struct server reg, proxy;
  registry_start (&reg, fixture_storage_copy (), NULL);
  char slow_for[16];
  snprintf (slow_for, sizeof slow_for, "%d", 3 * STALL_SECONDS);
  const char *const extra[] = { "--tick", "1", "--slow-for", slow_for, NULL };
  proxy_start_with (&proxy, reg.port, "slow", -1, 3 * 1024, extra);
  struct nsbox_store *store = test_store ();
  char *ref = ref_at (proxy.port, "test/big:t");
  char *digest = NULL;
  double took;
  struct nsbox_error *e = timed_pull (store, ref, &digest, &took);
  cr_assert_null (e, "a slow but steady pull failed: %s", nsbox_error_message (e));
  cr_assert_geq (took, 3 * STALL_SECONDS, "the transfer was not slow (%.2f s)", took);
  const char *layer = first_layer_digest (store, digest);
  cr_assert_eq (count_layer_gets (proxy.log, layer, false), 1);
  cr_assert_eq (count_layer_gets (proxy.log, layer, true), 0,
                "the slow transfer was given up and resumed");
  cr_assert_eq (log_count (proxy.log, "GET", "/blobs/"), 2, "config and layer, once each");
  assert_blobs_verified (store);
  free (digest);
  free (ref);
}

Test (registry_faults, invalid_stall_window_is_a_usage_error_naming_the_variable, .timeout = 30)
{
  static const char *const bad[]
      = { "0", "-5", "abc", "2s", " 2", "+2", "86401", "99999999999999999999" };
  struct fx *fx = cli_fx ();
  for (size_t i = 0; i < ARRAY_SIZE (bad); i++)
    {
      /* Checked before any request: nothing listens on the discard port. */
      struct cmd_out out;
      sh (fx, &out,
          "NSBOX_IMAGE_STALL_SECONDS='%s' \"$IMG\" --store \"$STORE\" pull 127.0.0.1:9/test/img:t",
          bad[i]);
      char quoted[64];
      snprintf (quoted, sizeof quoted, "'%s'", bad[i]);
      cr_expect_eq (out.status, 2, "'%s': exit %d, want 2; stderr: %s", bad[i], out.status,
                    out.err);
      cr_expect (strstr (out.err, "NSBOX_IMAGE_STALL_SECONDS") && strstr (out.err, quoted),
                 "'%s': %s", bad[i], out.err);
      cmd_out_free (&out);
    }
}
