/* Unpack bombs: layers of a few KB that would exhaust nsbox-image's memory,
 * the disk or its inodes. Each case unpacks into a store on a tmpfs of its
 * own (measure.h) and asserts, from outside nsbox-image: the exit status,
 * a message naming the limit, its variable and the layer's digest, the
 * peak RSS (64 MiB), the inodes it created (sampled, and capped by the
 * tmpfs's nr_inodes: creating more would end in ENOSPC, not in the limit)
 * and that no tree or work directory is left. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "measure.h"
#include "store.h"

static struct fx fx;

static void
setup (void)
{
  measure_require_root ();
  fx_setup (&fx);
}

static void
teardown (void)
{
  fx_teardown (&fx);
}

TestSuite (bombs, .init = setup, .fini = teardown, .timeout = 300);

#define EXIT_USAGE 2
#define EXIT_DISK_FULL 8
#define EXIT_LIMIT 11

/* nr_inodes of a tmpfs for a case that lets the unpack create `limit`:
 * room for the store's own files, the work directory and the free-inode
 * reserve (2 %), and not much more. */
#define CEILING(limit) ((limit) + (limit) / 25 + 200)

/* `paths` entries of `depth` one-letter components that part at the
 * second component ("a/A/a/a/...", "a/B/a/..."), so that each creates
 * depth - 1 directories no earlier entry made: the shape that cost the
 * old code a copy of every ancestor (about 4 GB for 1,000 x 2,048). */
static char *
deep_paths_body (unsigned paths, unsigned depth)
{
  char *body = NULL;
  cr_assert (asprintf (&body,
                       "l = layer()\n"
                       "letters = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'\n"
                       "for i in range(%u):\n"
                       "    comps = ['a'] * %u\n"
                       "    comps[0] = letters[i // 52]; comps[1] = letters[i %% 52]\n"
                       "    F(l, '/'.join(comps), b'')\n",
                       paths, depth)
             >= 0);
  return body;
}

static void
needles3 (const char *a, const char *b, const char *c, const char *out[4])
{
  out[0] = a;
  out[1] = b;
  out[2] = c;
  out[3] = NULL;
}

Test (bombs, deep_path_bomb_is_refused_by_the_depth_limit_before_it_creates_anything)
{
  char *body = deep_paths_body (1000, 2048);
  build_image (&fx, body);
  char *digest = layer_digest (&fx, 0);
  struct measure_opts opts = { "64m", 100000, NULL };
  struct measured m;
  measure_unpack (&fx, &opts, &m);
  const char *needles[4];
  needles3 ("NSBOX_MAX_PATH_DEPTH", "limit of 256", digest, needles);
  assert_measured_failure (&m, EXIT_LIMIT, needles);
  cr_assert_leq (m.inodes_peak, 4, "%ld inodes created", m.inodes_peak);
  measured_free (&m);
  free (digest);
  free (body);
}

Test (bombs, deep_paths_under_a_raised_depth_limit_take_memory_linear_in_their_length)
{
  /* NSBOX_MAX_PATH_DEPTH=2048 lets the bomb through the depth check: it
   * must meet the inode limit with the memory of a few MB. */
  char *body = deep_paths_body (1000, 2048);
  build_image (&fx, body);
  char *digest = layer_digest (&fx, 0);
  struct measure_opts opts
      = { "64m", CEILING (40000), "NSBOX_MAX_PATH_DEPTH=2048 NSBOX_MAX_IMAGE_INODES=40000" };
  struct measured m;
  measure_unpack (&fx, &opts, &m);
  const char *needles[4];
  needles3 ("NSBOX_MAX_IMAGE_INODES", "limit of 40000", digest, needles);
  assert_measured_failure (&m, EXIT_LIMIT, needles);
  cr_assert_leq (m.inodes_peak, 40000 + 8, "%ld inodes created", m.inodes_peak);
  cr_assert_geq (m.inodes_peak, 20000, "only %ld inodes seen: the limit was not what stopped it",
                 m.inodes_peak);
  measured_free (&m);
  free (digest);
  free (body);
}

Test (bombs, implicit_parent_directories_count_against_the_inode_limit)
{
  /* 200 files, each 150 directories below a parent no entry names. */
  build_image (&fx, "l = layer()\n"
                    "for i in range(200):\n"
                    "    F(l, f'd{i}/' + 'x/' * 150 + 'f', b'')\n");
  char *digest = layer_digest (&fx, 0);
  struct measure_opts opts = { "64m", CEILING (5000), "NSBOX_MAX_IMAGE_INODES=5000" };
  struct measured m;
  measure_unpack (&fx, &opts, &m);
  const char *needles[4];
  needles3 ("would create 5001 inodes and links", "NSBOX_MAX_IMAGE_INODES", digest, needles);
  assert_measured_failure (&m, EXIT_LIMIT, needles);
  cr_assert_leq (m.inodes_peak, 5000 + 8, "%ld inodes created", m.inodes_peak);
  measured_free (&m);
  free (digest);
}

/* 3,000 entries of one kind against an inode limit of 2,000. */
static void
many_entries_case (const char *make_one)
{
  char *body = NULL;
  cr_assert (asprintf (&body,
                       "l = layer()\nF(l, 'target', b'x')\n"
                       "for i in range(3000):\n"
                       "    %s\n",
                       make_one)
             >= 0);
  build_image (&fx, body);
  char *digest = layer_digest (&fx, 0);
  struct measure_opts opts = { "64m", CEILING (2000), "NSBOX_MAX_IMAGE_INODES=2000" };
  struct measured m;
  measure_unpack (&fx, &opts, &m);
  const char *needles[4];
  needles3 ("more than the limit of 2000 per image", "NSBOX_MAX_IMAGE_INODES", digest, needles);
  assert_measured_failure (&m, EXIT_LIMIT, needles);
  cr_assert_leq (m.inodes_peak, 2000 + 8, "%ld inodes created", m.inodes_peak);
  measured_free (&m);
  free (digest);
  free (body);
}

Test (bombs, many_symlinks_meet_the_inode_limit) { many_entries_case ("S(l, f's{i}', 'target')"); }

Test (bombs, many_hardlinks_meet_the_inode_limit) { many_entries_case ("H(l, f'h{i}', 'target')"); }

Test (bombs, many_fifos_meet_the_inode_limit) { many_entries_case ("P(l, f'p{i}')"); }

Test (bombs, many_directories_meet_the_inode_limit) { many_entries_case ("D(l, f'd{i}')"); }

Test (bombs, the_inode_limit_holds_across_layers)
{
  /* Three layers of 800 files: under the limit each, over it together. */
  build_image (&fx, "for k in range(3):\n"
                    "    l = layer()\n"
                    "    for i in range(800): F(l, f'l{k}/f{i}', b'')\n");
  char *digest = layer_digest (&fx, 2);
  struct measure_opts opts = { "64m", CEILING (2000), "NSBOX_MAX_IMAGE_INODES=2000" };
  struct measured m;
  measure_unpack (&fx, &opts, &m);
  const char *needles[4];
  needles3 ("layer 2 (", digest, "NSBOX_MAX_IMAGE_INODES", needles);
  assert_measured_failure (&m, EXIT_LIMIT, needles);
  measured_free (&m);
  free (digest);
}

Test (bombs, paths_through_symlinks_meet_the_limit_on_remembered_paths)
{
  /* s0..s49 -> . : s3/s7/d names the existing d, creating nothing, but
   * each such path is one to remember. */
  build_image (&fx, "l = layer()\nD(l, 'd')\n"
                    "for i in range(50): S(l, f's{i}', '.')\n"
                    "for i in range(50):\n"
                    "    for j in range(50): D(l, f's{i}/s{j}/d')\n");
  char *digest = layer_digest (&fx, 0);
  struct measure_opts opts = { "64m", 100000, "NSBOX_MAX_IMAGE_INODES=1000" };
  struct measured m;
  measure_unpack (&fx, &opts, &m);
  const char *needles[4];
  needles3 ("distinct paths", "NSBOX_MAX_IMAGE_INODES", digest, needles);
  assert_measured_failure (&m, EXIT_LIMIT, needles);
  /* d and the 50 links (and the work directory). */
  cr_assert_leq (m.inodes_peak, 51 + 4, "%ld inodes created", m.inodes_peak);
  measured_free (&m);
  free (digest);
}

/* Layers ----------------------------------------------------------------- */

Test (bombs, more_layers_than_the_limit_are_refused_before_anything_is_written)
{
  build_image (&fx, "for k in range(6):\n"
                    "    l = layer(); F(l, f'f{k}', b'x')\n");
  char *digest = layer_digest (&fx, 5);
  struct measure_opts opts = { "64m", 100000, "NSBOX_MAX_LAYERS=5" };
  struct measured m;
  measure_unpack (&fx, &opts, &m);
  const char *needles[4];
  needles3 ("6 layers, more than the limit of 5", "NSBOX_MAX_LAYERS", digest, needles);
  assert_measured_failure (&m, EXIT_LIMIT, needles);
  cr_assert_leq (m.inodes_peak, 0, "%ld inodes created", m.inodes_peak);
  measured_free (&m);
  free (digest);
}

/* An OCI layout of `n` one-file layers, written directly (umoci would take
 * a while for each). */
static void
build_many_layers (unsigned n)
{
  free (sh_ok (&fx,
               "/usr/bin/python3 - %u <<'PY'\n"
               "import hashlib, io, json, os, sys, tarfile\n"
               "n = int(sys.argv[1]); os.makedirs('oci/blobs/sha256')\n"
               "def blob(data):\n"
               "    d = hashlib.sha256(data).hexdigest()\n"
               "    open(f'oci/blobs/sha256/{d}', 'wb').write(data)\n"
               "    return 'sha256:' + d, len(data)\n"
               "layers, diffs = [], []\n"
               "for i in range(n):\n"
               "    b = io.BytesIO()\n"
               "    with tarfile.open(fileobj=b, mode='w') as t:\n"
               "        ti = tarfile.TarInfo(f'f{i}'); ti.size = 1; ti.mtime = 1700000000\n"
               "        t.addfile(ti, io.BytesIO(b'x'))\n"
               "    d, size = blob(b.getvalue()); diffs.append(d)\n"
               "    layers.append({'mediaType': 'application/vnd.oci.image.layer.v1.tar',\n"
               "                   'digest': d, 'size': size})\n"
               "cfg = json.dumps({'architecture': 'amd64', 'os': 'linux',\n"
               "                  'rootfs': {'type': 'layers', 'diff_ids': diffs}}).encode()\n"
               "cd, cs = blob(cfg)\n"
               "man = json.dumps({'schemaVersion': 2,\n"
               "    'mediaType': 'application/vnd.oci.image.manifest.v1+json',\n"
               "    'config': {'mediaType': 'application/vnd.oci.image.config.v1+json',\n"
               "               'digest': cd, 'size': cs}, 'layers': layers}).encode()\n"
               "md, ms = blob(man)\n"
               "json.dump({'schemaVersion': 2, 'manifests': [{\n"
               "    'mediaType': 'application/vnd.oci.image.manifest.v1+json', 'digest': md,\n"
               "    'size': ms, 'annotations': {'org.opencontainers.image.ref.name': 't'}}]},\n"
               "    open('oci/index.json', 'w'))\n"
               "open('oci/oci-layout', 'w').write('{\"imageLayoutVersion\": \"1.0.0\"}')\n"
               "PY",
               n));
}

Test (bombs, an_image_of_129_layers_is_refused_by_default_and_128_unpack)
{
  build_many_layers (129);
  char *digest = layer_digest (&fx, 128);
  struct cmd_out out;
  sh (&fx, &out, "\"$IMG\" --store \"$STORE\" import oci:\"$T/oci\":t");
  assert_clean_failure (&fx, &out);
  cr_assert_eq (out.status, EXIT_LIMIT, "%s", out.err);
  cr_assert (strstr (out.err, "129 layers, more than the limit of 128")
                 && strstr (out.err, "NSBOX_MAX_LAYERS") && strstr (out.err, digest),
             "%s", out.err);
  cmd_out_free (&out);
  free (digest);
  free (sh_ok (&fx, "rm -rf oci"));
  build_many_layers (128);
  struct measure_opts opts = { "64m", 100000, NULL };
  struct measured m;
  measure_unpack (&fx, &opts, &m);
  cr_assert_eq (m.status, 0, "%s", m.err);
  measured_free (&m);
}

/* Bytes of every kind ---------------------------------------------------- */

/* 300 entries of one kind (4 KiB each as the limits count them) against a
 * limit of 1 MiB. */
static void
bytes_case (const char *make_one, const char *variable)
{
  char *body = NULL, *env = NULL;
  cr_assert (asprintf (&body,
                       "l = layer()\nF(l, 'target', b'x')\n"
                       "for i in range(300):\n"
                       "    %s\n",
                       make_one)
                 >= 0
             && asprintf (&env, "%s=1048576", variable) >= 0);
  build_image (&fx, body);
  char *digest = layer_digest (&fx, 0);
  struct measure_opts opts = { "64m", 100000, env };
  struct measured m;
  measure_unpack (&fx, &opts, &m);
  const char *needles[4];
  needles3 ("exceeds the limit of 1048576 bytes", variable, digest, needles);
  assert_measured_failure (&m, EXIT_LIMIT, needles);
  cr_assert_leq (m.inodes_peak, 300, "%ld inodes created", m.inodes_peak);
  measured_free (&m);
  free (digest);
  free (env);
  free (body);
}

Test (bombs, directories_count_as_bytes_per_image)
{
  bytes_case ("D(l, f'd{i}')", "NSBOX_MAX_IMAGE_BYTES");
}

Test (bombs, symlinks_count_as_bytes_per_image)
{
  bytes_case ("S(l, f's{i}', 'target')", "NSBOX_MAX_IMAGE_BYTES");
}

Test (bombs, hardlinks_count_as_bytes_per_image)
{
  bytes_case ("H(l, f'h{i}', 'target')", "NSBOX_MAX_IMAGE_BYTES");
}

Test (bombs, fifos_count_as_bytes_per_image)
{
  bytes_case ("P(l, f'p{i}')", "NSBOX_MAX_IMAGE_BYTES");
}

Test (bombs, directories_count_as_bytes_per_layer)
{
  bytes_case ("D(l, f'd{i}')", "NSBOX_MAX_LAYER_BYTES");
}

Test (bombs, extended_attributes_count_as_bytes)
{
  /* 20 empty files with a 60 KiB user.* attribute each. */
  build_image (&fx, "l = layer()\n"
                    "for i in range(20):\n"
                    "    F(l, f'f{i}', b'', pax={'SCHILY.xattr.user.pad': 'p' * 61440})\n");
  char *digest = layer_digest (&fx, 0);
  struct measure_opts opts = { "64m", 100000, "NSBOX_MAX_IMAGE_BYTES=1048576" };
  struct measured m;
  measure_unpack (&fx, &opts, &m);
  const char *needles[4];
  needles3 ("exceeds the limit of 1048576 bytes", "NSBOX_MAX_IMAGE_BYTES", digest, needles);
  assert_measured_failure (&m, EXIT_LIMIT, needles);
  measured_free (&m);
  free (digest);
}

Test (bombs, file_data_counts_per_image_across_layers)
{
  build_image (&fx, "for k in range(3):\n"
                    "    l = layer(); F(l, f'f{k}', b'z' * 400000)\n");
  char *digest = layer_digest (&fx, 2);
  struct measure_opts opts = { "64m", 100000, "NSBOX_MAX_IMAGE_BYTES=1048576" };
  struct measured m;
  measure_unpack (&fx, &opts, &m);
  const char *needles[4];
  needles3 ("layer 2 (", digest, "NSBOX_MAX_IMAGE_BYTES", needles);
  assert_measured_failure (&m, EXIT_LIMIT, needles);
  measured_free (&m);
  free (digest);
}

/* Free space ------------------------------------------------------------- */

Test (bombs, layers_larger_than_the_free_space_are_refused_before_unpacking)
{
  /* Two layers of 5 MiB of random bytes (as large gzipped) on 16 MiB: the
   * blobs fit, the tree they unpack to cannot. */
  build_image (&fx, "import random\nr = random.Random(7)\n"
                    "for k in range(2):\n"
                    "    l = layer(); F(l, f'r{k}', r.randbytes(5 << 20))\n");
  struct measure_opts opts = { "16m", 100000, NULL };
  struct measured m;
  measure_unpack (&fx, &opts, &m);
  const char *needles[4];
  needles3 ("disk full: the image's layers alone are", "bytes free", "NSBOX_MIN_FREE_PERCENT",
            needles);
  assert_measured_failure (&m, EXIT_DISK_FULL, needles);
  cr_assert_leq (m.inodes_peak, 1, "%ld inodes created (only the unpack lock is expected)",
                 m.inodes_peak);
  measured_free (&m);
}

static void
fills_the_disk_case (const char *body)
{
  build_image (&fx, body);
  char *digest = layer_digest (&fx, 0);
  struct measure_opts opts = { "16m", 100000, NULL };
  struct measured m;
  measure_unpack (&fx, &opts, &m);
  const char *needles[4];
  needles3 ("disk full: the store's filesystem has", "NSBOX_MIN_FREE_PERCENT", digest, needles);
  assert_measured_failure (&m, EXIT_DISK_FULL, needles);
  /* Stopped above the reserve: the filesystem was never full. */
  cr_assert_geq (m.min_free, m.reserve / 2,
                 "the filesystem went down to %lld free bytes (the reserve is %lld)", m.min_free,
                 m.reserve);
  measured_free (&m);
  free (digest);
}

Test (bombs, large_files_of_zeros_stop_above_the_free_space_reserve)
{
  /* 24 MiB of zeros, a few KB gzipped, on 16 MiB. */
  fills_the_disk_case ("l = layer()\n"
                       "for i in range(12): F(l, f'z{i}', bytes(2 << 20))\n");
}

Test (bombs, small_files_of_zeros_stop_above_the_free_space_reserve)
{
  /* 24 MiB in 3,000 files of 8 KiB, written by the file thread. */
  fills_the_disk_case ("l = layer()\n"
                       "for i in range(3000): F(l, f'z{i}', bytes(8192))\n");
}

Test (bombs, many_files_stop_above_the_free_inode_reserve)
{
  build_image (&fx, "l = layer()\n"
                    "for i in range(3000): F(l, f'e{i}', b'')\n");
  char *digest = layer_digest (&fx, 0);
  struct measure_opts opts = { "64m", 2000, NULL };
  struct measured m;
  measure_unpack (&fx, &opts, &m);
  const char *needles[4];
  needles3 ("inodes free", "NSBOX_MIN_FREE_PERCENT", digest, needles);
  assert_measured_failure (&m, EXIT_DISK_FULL, needles);
  /* Stopped above the reserve: the filesystem never ran out of inodes. */
  long reserve = (long)(m.fs_files * 2 / 100);
  cr_assert_leq (m.inodes_before + m.inodes_peak, (long)m.fs_files - reserve / 2,
                 "%ld inodes in use at the peak on a tmpfs of %lu (the reserve is %ld)",
                 m.inodes_before + m.inodes_peak, m.fs_files, reserve);
  measured_free (&m);
  free (digest);
}

/* Limit variables -------------------------------------------------------- */

static const char *const limit_variables[] = {
  "NSBOX_MAX_LAYER_BYTES",  "NSBOX_MAX_IMAGE_BYTES", "NSBOX_MAX_LAYER_ENTRIES",
  "NSBOX_MAX_IMAGE_INODES", "NSBOX_MAX_LAYERS",      "NSBOX_MAX_PATH_DEPTH",
  "NSBOX_MIN_FREE_PERCENT",
};

Test (bombs, a_bad_limit_variable_is_a_usage_error_naming_it, .timeout = 120)
{
  static const char *const bad[]
      = { "x", "-1", "12x", " 5", "+5", "1e3", "0x10", "99999999999999999999999" };
  for (size_t v = 0; v < sizeof limit_variables / sizeof *limit_variables; v++)
    {
      const char *var = limit_variables[v];
      bool zero_means_something = strcmp (var, "NSBOX_MIN_FREE_PERCENT") == 0;
      for (size_t b = 0; b <= sizeof bad / sizeof *bad; b++)
        {
          /* "0" is no limit at all, except for the free-space share. */
          const char *value = b < sizeof bad / sizeof *bad ? bad[b]
                              : zero_means_something       ? "91"
                                                           : "0";
          struct cmd_out out;
          sh (&fx, &out, "%s='%s' \"$IMG\" --store \"$STORE\" ls", var, value);
          cr_assert_eq (out.status, EXIT_USAGE, "%s='%s': exit %d: %s", var, value, out.status,
                        out.err);
          char *expect = NULL;
          cr_assert (asprintf (&expect, "invalid %s '%s'", var, value) >= 0);
          cr_assert (strstr (out.err, expect), "%s='%s': %s", var, value, out.err);
          free (expect);
          cmd_out_free (&out);
        }
    }
}

Test (bombs, the_library_refuses_a_bad_limit_variable_with_einval)
{
  /* libnsbox resolves images in process: nsbox_store_open is where a bad
   * value must stop it, before the store is created. */
  cr_assert (setenv ("NSBOX_MAX_IMAGE_INODES", "12x", 1) == 0);
  struct nsbox_store *store = NULL;
  struct nsbox_error *err = NULL;
  int r = nsbox_store_open (fx.store, &store, &err);
  unsetenv ("NSBOX_MAX_IMAGE_INODES");
  cr_assert_eq (r, -EINVAL, "nsbox_store_open returned %d", r);
  cr_assert_null (store);
  cr_assert_eq (nsbox_error_errno (err), EINVAL);
  cr_assert (strstr (nsbox_error_message (err), "invalid NSBOX_MAX_IMAGE_INODES '12x'"), "%s",
             nsbox_error_message (err));
  cr_assert (!path_exists (fx.store), "the store was created");
  nsbox_error_free (err);
}

Test (bombs, limit_variables_accept_whole_numbers_in_range)
{
  free (sh_ok (&fx,
               "NSBOX_MAX_PATH_DEPTH=2048 NSBOX_MAX_LAYERS=65535 NSBOX_MIN_FREE_PERCENT=0 "
               "NSBOX_MAX_IMAGE_INODES=1 NSBOX_MAX_LAYER_BYTES= \"$IMG\" --store \"$STORE\" ls"));
}
