/* The store and the offline inputs: verified ingest with resume, DiffID
 * mismatch (case 8), one tree from every input form and compression (case
 * 13), hostile docker-archives (case 31), gc, concurrent unpacks and the
 * CLI's exit codes. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "error.h"
#include "harness.h"
#include "image_helpers.h"
#include "store.h"
#include "util.h"

FX_TEST_SUITE (store, 120);

#define DIGEST_OF_HELLO "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"

static struct nsbox_store *
open_store (void)
{
  struct nsbox_store *store = NULL;
  struct nsbox_error *err = NULL;
  cr_assert (nsbox_store_open (fx.store, &store, &err) == 0, "%s", nsbox_error_message (err));
  return store;
}

static char *
store_path (const char *rel)
{
  char *p = NULL;
  cr_assert (asprintf (&p, "%s/%s", fx.store, rel) >= 0);
  return p;
}

Test (store, a_new_store_is_a_private_oci_layout)
{
  struct nsbox_store *store = open_store ();
  struct stat st;
  cr_assert (stat (fx.store, &st) == 0);
  cr_assert_eq (st.st_mode & 0777, 0700);
  char *layout = store_path ("oci-layout");
  char *text = read_text (layout);
  cr_assert_str_eq (text, "{\"imageLayoutVersion\":\"1.0.0\"}");
  free (text);
  free (layout);
  nsbox_store_close (store);
}

Test (store, an_interrupted_ingest_resumes_after_rehashing_its_prefix)
{
  struct nsbox_store *store = open_store ();
  struct nsbox_error *err = NULL;
  struct nsbox_ingest *ingest = NULL;
  bool already = true;
  uint64_t offset = 99;
  cr_assert (nsbox_store_ingest_begin (store, DIGEST_OF_HELLO, 5, &ingest, &already, &offset, &err)
             == 0);
  cr_assert (!already);
  cr_assert_eq (offset, 0);
  cr_assert (nsbox_ingest_write (ingest, "hel", 3, &err) == 0);
  nsbox_ingest_abort (ingest, true);
  cr_assert (!nsbox_store_has_blob (store, DIGEST_OF_HELLO));
  cr_assert (nsbox_store_ingest_begin (store, DIGEST_OF_HELLO, 5, &ingest, &already, &offset, &err)
             == 0);
  cr_assert_eq (offset, 3, "the partial download is kept");
  cr_assert (nsbox_ingest_write (ingest, "lo", 2, &err) == 0);
  cr_assert (nsbox_ingest_write (ingest, "!", 1, &err) < 0, "no byte beyond the size");
  nsbox_error_free (err);
  err = NULL;
  cr_assert (nsbox_ingest_commit (ingest, &err) == 0, "%s", nsbox_error_message (err));
  cr_assert (nsbox_store_has_blob (store, DIGEST_OF_HELLO));
  char *blob = store_path (
      "blobs/sha256/2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
  struct stat st;
  cr_assert (stat (blob, &st) == 0);
  cr_assert_eq (st.st_mode & 0777, 0444);
  free (blob);
  cr_assert (nsbox_store_ingest_begin (store, DIGEST_OF_HELLO, 5, &ingest, &already, &offset, &err)
             == 0);
  cr_assert (already && !ingest, "a present blob is not downloaded again");
  nsbox_store_close (store);
}

Test (store, a_blob_with_the_wrong_digest_never_enters_blobs)
{
  struct nsbox_store *store = open_store ();
  struct nsbox_error *err = NULL;
  cr_assert_eq (nsbox_store_put_blob (store, DIGEST_OF_HELLO, "hellO", 5, NULL, &err), -EBADMSG);
  cr_assert (strstr (nsbox_error_message (err), "digest mismatch"));
  nsbox_error_free (err);
  char *blobs = store_path ("blobs/sha256");
  cr_assert_eq (count_entries (blobs), 0);
  free (blobs);
  char *ingest = store_path ("ingest");
  cr_assert_eq (count_entries (ingest), 0);
  free (ingest);
  nsbox_store_close (store);
}

Test (store, a_wrong_diff_id_fails_the_unpack_and_leaves_no_tree)
{
  char *layer = sh_ok (&fx, "mkdir -p l && echo hi > l/f && tar -C l -cf layer.tar f"
                            " && sha256sum layer.tar | cut -d' ' -f1");
  struct nsbox_store *store = open_store ();
  struct nsbox_error *err = NULL;
  char *path = NULL, *data = NULL, *layer_digest = NULL, *config_digest = NULL,
       *manifest_digest = NULL;
  cr_assert (asprintf (&path, "%s/layer.tar", fx.dir) >= 0);
  data = read_text (path);
  struct stat st;
  cr_assert (stat (path, &st) == 0);
  cr_assert (nsbox_store_put_blob (store, NULL, data, (size_t)st.st_size, &layer_digest, &err)
             == 0);
  char *config = NULL;
  cr_assert (asprintf (&config,
                       "{\"architecture\":\"amd64\",\"os\":\"linux\",\"rootfs\":{\"type\":"
                       "\"layers\",\"diff_ids\":[\"%s\"]}}",
                       DIGEST_OF_HELLO)
             >= 0);
  cr_assert (nsbox_store_put_blob (store, NULL, config, strlen (config), &config_digest, &err)
             == 0);
  char *manifest = NULL;
  cr_assert (asprintf (&manifest,
                       "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest."
                       "v1+json\",\"config\":{\"mediaType\":\"application/vnd.oci.image.config."
                       "v1+json\",\"digest\":\"%s\",\"size\":%zu},\"layers\":[{\"mediaType\":"
                       "\"application/vnd.oci.image.layer.v1.tar\",\"digest\":\"%s\",\"size\":%lld}"
                       "]}",
                       config_digest, strlen (config), layer_digest, (long long)st.st_size)
             >= 0);
  cr_assert (nsbox_store_put_blob (store, NULL, manifest, strlen (manifest), &manifest_digest, &err)
             == 0);
  char *rootfs = NULL;
  cr_assert_eq (nsbox_store_unpack (store, manifest_digest, &rootfs, NULL, &err), -EBADMSG);
  cr_assert (strstr (nsbox_error_message (err), "DiffID mismatch"), "%s",
             nsbox_error_message (err));
  nsbox_error_free (err);
  char *dir = store_path ("rootfs");
  cr_assert_eq (count_entries (dir), 0);
  free (dir);
  dir = store_path ("tmp");
  cr_assert_eq (count_entries (dir), 0, "the temp rootfs is removed");
  free (dir);
  assert_victim_unchanged (&fx);
  nsbox_store_close (store);
  free (manifest);
  free (config);
  free (path);
  free (data);
  free (layer);
  free (layer_digest);
  free (config_digest);
  free (manifest_digest);
}

static const char *
fixture_rootfs (void)
{
  const char *env = getenv ("NSBOX_TEST_ROOTFS");
  static char *found;
  if (env && *env)
    return env;
  if (!found)
    found = sh_ok (&fx, "'%s/tests/fixtures/rootfs.sh'", getenv ("PWD") ?: ".");
  return found;
}

/* Unpacks SOURCE into a fresh store named after `label`: returns
 * "<tree-dir-name> <tree-hash>". */
static char *
unpack_from (const char *label, const char *source)
{
  char *out = sh_ok (&fx,
                     "s=\"$T/store-%s\"; ref=$(\"$IMG\" --store \"$s\" import %s | cut -d' ' -f1)"
                     " && \"$IMG\" --store \"$s\" rootfs \"$ref\"",
                     label, source);
  char *hash = tree_hash (out);
  char *slash = strrchr (out, '/');
  *slash = '\0';
  char *tree = strrchr (out, '/') + 1;
  char *result = NULL;
  cr_assert (asprintf (&result, "%s %s", tree, hash) >= 0);
  free (hash);
  free (out);
  return result;
}

Test (store, every_input_form_and_compression_gives_the_same_tree_and_chain_id, .timeout = 600)
{
  const char *rootfs = fixture_rootfs ();
  free (sh_ok (&fx,
               "tar -C '%s' -cf layer.tar . && umoci init --layout oci && umoci new --image oci:t"
               " && umoci raw add-layer --image oci:t layer.tar"
               " && skopeo copy -q oci:oci:t oci-archive:oa.tar:t"
               " && skopeo copy -q oci:oci:t docker-archive:da.tar:test/img:t"
               " && skopeo copy -q --dest-compress-format zstd oci:oci:t oci:zst:t"
               " && cp -a oci plain",
               rootfs));
  /* skopeo compresses whatever it writes into oci:, so the uncompressed
   * variant is rewritten by hand: layer.tar itself becomes the layer. */
  free (sh_ok (&fx, "/usr/bin/python3 - <<'PY'\n"
                    "import hashlib, json, os\n"
                    "def put(data):\n"
                    "    d = hashlib.sha256(data).hexdigest()\n"
                    "    open(f'plain/blobs/sha256/{d}', 'wb').write(data)\n"
                    "    return 'sha256:' + d\n"
                    "index = json.load(open('plain/index.json'))\n"
                    "desc = index['manifests'][0]\n"
                    "m = json.load(open('plain/blobs/sha256/' + desc['digest'][7:]))\n"
                    "tar = open('layer.tar', 'rb').read()\n"
                    "m['layers'] = [{'mediaType': 'application/vnd.oci.image.layer.v1.tar',\n"
                    "                'digest': put(tar), 'size': len(tar)}]\n"
                    "raw = json.dumps(m).encode()\n"
                    "desc['digest'] = put(raw); desc['size'] = len(raw)\n"
                    "json.dump(index, open('plain/index.json', 'w'))\n"
                    "PY"));
  char *media = sh_ok (&fx, "cat zst/blobs/sha256/* plain/blobs/sha256/* | grep -ao "
                            "'layer.v1.tar[+a-z]*' | sort -u | tr '\\n' ' '");
  cr_assert (strstr (media, "layer.v1.tar+zstd") && strstr (media, "layer.v1.tar "),
             "inputs lack zstd or plain layers: %s", media);
  free (media);
  char *want = unpack_from ("oci", "oci:\"$T/oci\":t");
  static const char *const sources[][2] = {
    { "oci-archive", "oci-archive:\"$T/oa.tar\":t" },
    { "docker-archive", "docker-archive:\"$T/da.tar\"" },
    { "zstd", "oci:\"$T/zst\":t" },
    { "plain", "oci:\"$T/plain\":t" },
  };
  for (size_t i = 0; i < ARRAY_SIZE (sources); i++)
    {
      char *got = unpack_from (sources[i][0], sources[i][1]);
      cr_assert_str_eq (got, want, "%s differs from oci", sources[i][0]);
      free (got);
    }
  char *check = sh_ok (&fx,
                       "diff -r --no-dereference '%s' \"$(\"$IMG\" --store \"$T/store-oci\" "
                       "rootfs localhost/import/oci:t)\" | grep -v "
                       "'^Only in .*: \\(proc\\|dev\\|tmp\\)$' || true",
                       rootfs);
  cr_assert_str_empty (check, "the unpacked tree differs from its source: %s", check);
  free (check);
  free (want);
}

Test (store, a_docker_archive_with_hostile_members_writes_nothing_outside_and_rejects_the_blob)
{
  char *token = NULL;
  cr_assert (asprintf (&token, "x-%d", getpid ()) >= 0);
  free (sh_ok (
      &fx,
      "/usr/bin/python3 - <<'PY'\n"
      "import io, tarfile\n"
      "def add(t, name, data):\n"
      "    ti = tarfile.TarInfo(name); ti.size = len(data); t.addfile(ti, io.BytesIO(data))\n"
      "with tarfile.open('evil.tar', 'w') as t:\n"
      "    add(t, '../../%s', b'escaped')\n"
      "    add(t, '/tmp/%s', b'escaped')\n"
      "    add(t, 'blobs/sha256/' + '0' * 64, b'tampered')\n"
      "    add(t, 'manifest.json', b'[]')\n"
      "PY",
      token, token));
  struct cmd_out out;
  sh (&fx, &out, "\"$IMG\" --store \"$STORE\" import docker-archive:\"$T/evil.tar\":a/b:c");
  assert_clean_failure (&fx, &out);
  cr_assert_eq (out.status, 6, "%s", out.err);
  cr_assert (strstr (out.err, "digest mismatch"), "%s", out.err);
  char *p = NULL;
  cr_assert (asprintf (&p, "/tmp/%s", token) >= 0);
  cr_assert (!path_exists (p));
  free (p);
  char *found = sh_ok (&fx, "find / -xdev -name '%s' 2>/dev/null | head -3 || true", token);
  cr_assert_str_empty (found, "a member was written by name: %s", found);
  free (found);
  char *blobs = store_path ("blobs/sha256");
  cr_assert_eq (count_entries (blobs), 0);
  free (blobs);
  cmd_out_free (&out);
  free (token);
}

Test (store, a_docker_25_save_with_an_oci_layout_is_imported_as_a_layout)
{
  build_image (&fx, "l = layer()\nD(l, 'usr'); F(l, 'usr/f', 'data')\n");
  /* docker save >= 25: an OCI layout whose index.json names the image, plus
   * the legacy manifest.json. */
  free (sh_ok (&fx, "cd oci && /usr/bin/python3 - <<'PY'\n"
                    "import json\n"
                    "i = json.load(open('index.json'))\n"
                    "m = i['manifests'][0]\n"
                    "m['annotations']['io.containerd.image.name'] = 'docker.io/library/py:25'\n"
                    "json.dump(i, open('index.json', 'w'))\n"
                    "json.dump([{'Config': 'blobs/sha256/none', 'RepoTags': ['py:25'],\n"
                    "            'Layers': []}], open('manifest.json', 'w'))\n"
                    "PY\n"
                    "tar -cf ../d25.tar oci-layout index.json manifest.json blobs"));
  char *out = sh_ok (&fx, "\"$IMG\" --store \"$STORE\" import docker-archive:\"$T/d25.tar\"");
  cr_assert (strncmp (out, "docker.io/library/py:25 sha256:", 31) == 0, "%s", out);
  free (out);
  out = sh_ok (&fx, "cat \"$(\"$IMG\" --store \"$STORE\" rootfs py:25)/usr/f\"");
  cr_assert_str_eq (out, "data");
  free (out);
}

Test (store, a_legacy_config_that_does_not_match_its_name_is_rejected)
{
  build_image (&fx, "l = layer()\nF(l, 'f', 'data')\n");
  free (sh_ok (&fx, "skopeo copy -q oci:oci:t docker-archive:da.tar:test/img:t && mkdir x && cd x"
                    " && tar xf ../da.tar && c=$(ls *.json | grep -v manifest.json)"
                    " && echo ' ' >> \"$c\" && tar cf ../bad.tar *"));
  struct cmd_out out;
  sh (&fx, &out, "\"$IMG\" --store \"$STORE\" import docker-archive:\"$T/bad.tar\"");
  assert_clean_failure (&fx, &out);
  cr_assert_eq (out.status, 6, "%s", out.err);
  cr_assert (strstr (out.err, "digest mismatch"), "%s", out.err);
  cmd_out_free (&out);
}

Test (store, an_unprivileged_user_unpacks_without_chown_and_gc_removes_its_0700_dirs)
{
  NSBOX_SKIP_UNLESS (geteuid () == 0 && system ("id nsbox-test >/dev/null 2>&1") == 0,
                     "needs root and the test user (tests/fixtures/testuser.sh)");
  build_image (&fx, "l = layer()\nD(l, 'root', mode=0o700); F(l, 'root/.profile', mode=0o600)\n"
                    "D(l, 'ro', mode=0o555); F(l, 'ro/f')\nD(l, 'usr'); D(l, 'usr/bin')\n"
                    "F(l, 'usr/bin/su', mode=0o4755, uid=0)\n"
                    "F(l, 'shadow', mode=0o640, uid=0, gid=42)\n");
  char *out = sh_ok (
      &fx, "chmod 755 \"$T\" && mkdir ustore && chown -R nsbox-test oci ustore && as() { setpriv "
           "--reuid=nsbox-test "
           "--regid=$(id -g nsbox-test) --clear-groups --inh-caps=-all -- \"$@\"; }"
           " && as \"$IMG\" --store \"$T/ustore\" import oci:\"$T/oci\":t >/dev/null"
           " && p=$(as \"$IMG\" --store \"$T/ustore\" rootfs " IMAGE_REF ")"
           " && stat -c '%%U %%a %%n' \"$p/usr/bin/su\" \"$p/root\" \"$p/ro\" | sed \"s|$p/||\""
           " && grep -c . \"$p/../ownership.tsv\""
           " && as \"$IMG\" --store \"$T/ustore\" rm " IMAGE_REF
           " && as \"$IMG\" --store \"$T/ustore\" gc >/dev/null && ls -A \"$T/ustore/rootfs\"");
  cr_assert_str_eq (out, "nsbox-test 755 usr/bin/su\nnsbox-test 700 root\nnsbox-test 555 ro\n9",
                    "%s", out);
  free (out);
}

static void
small_image (void)
{
  build_image (&fx, "l = layer()\nD(l, 'usr'); F(l, 'usr/f', 'data')\n"
                    "l = layer()\nF(l, 'usr/g', 'more')\n");
}

Test (store, two_concurrent_unpacks_of_one_image_give_one_tree)
{
  small_image ();
  free (sh_ok (&fx, "\"$IMG\" --store \"$STORE\" import oci:\"$T/oci\":t"));
  char *out = sh_ok (&fx, "for i in 1 2 3 4; do \"$IMG\" --store \"$STORE\" rootfs " IMAGE_REF
                          " > out$i & done; wait; cat out1 out2 out3 out4 | sort -u");
  cr_assert (!strchr (out, '\n'), "different paths: %s", out);
  char *dir = store_path ("rootfs");
  cr_assert_eq (count_entries (dir), 1);
  free (dir);
  dir = store_path ("tmp");
  cr_assert_eq (count_entries (dir), 0);
  free (dir);
  free (out);
}

Test (store, gc_removes_unreferenced_blobs_trees_stale_downloads_and_unlocked_work_dirs)
{
  small_image ();
  free (sh_ok (&fx, "\"$IMG\" --store \"$STORE\" import oci:\"$T/oci\":t && \"$IMG\" --store "
                    "\"$STORE\" rootfs " IMAGE_REF " >/dev/null"));
  free (sh_ok (&fx, "\"$IMG\" --store \"$STORE\" gc"));
  char *blobs = store_path ("blobs/sha256"), *trees = store_path ("rootfs"),
       *tmp = store_path ("tmp"), *ingest = store_path ("ingest");
  size_t nblobs = count_entries (blobs);
  cr_assert_eq (nblobs, 4, "manifest, config and two layers are kept");
  cr_assert_eq (count_entries (trees), 1, "the referenced tree is kept");
  free (sh_ok (&fx, "mkdir \"$STORE/tmp/stale\" \"$STORE/tmp/busy\" && chmod 0555 "
                    "\"$STORE/tmp/stale\" && echo x > \"$STORE/ingest/old.partial\" && echo y > "
                    "\"$STORE/ingest/new.partial\" && touch -d '2 days ago' "
                    "\"$STORE/ingest/old.partial\""));
  char *busy_path = store_path ("tmp/busy");
  int busy = open (busy_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  cr_assert (busy >= 0 && flock (busy, LOCK_EX) == 0);
  free (sh_ok (&fx, "\"$IMG\" --store \"$STORE\" rm " IMAGE_REF));
  char *out = sh_ok (&fx, "\"$IMG\" --store \"$STORE\" gc");
  cr_assert (strstr (out, "removed 4 blobs, 1 trees, 1 stale downloads, 1 work directories"), "%s",
             out);
  cr_assert_eq (count_entries (blobs), 0);
  cr_assert_eq (count_entries (trees), 0);
  cr_assert (path_exists (busy_path), "a locked work dir survives");
  cr_assert_eq (count_entries (tmp), 1);
  cr_assert_eq (count_entries (ingest), 1, "a recent partial download survives");
  close (busy);
  assert_victim_unchanged (&fx);
  free (out);
  free (busy_path);
  free (blobs);
  free (trees);
  free (tmp);
  free (ingest);
}

Test (store, gc_refuses_while_another_process_uses_the_store)
{
  struct nsbox_store *store = open_store ();
  struct cmd_out out;
  sh (&fx, &out, "\"$IMG\" --store \"$STORE\" gc");
  cr_assert_eq (out.status, 10, "exit %d: %s", out.status, out.err);
  cr_assert (strstr (out.err, "in use by another process"), "%s", out.err);
  cmd_out_free (&out);
  nsbox_store_close (store);
}

Test (store, exit_codes_name_the_failure_class)
{
  struct cmd_out out;
  sh (&fx, &out, "\"$IMG\" --store \"$STORE\" rootfs nothing/here:t");
  cr_assert_eq (out.status, 3, "unknown image: %s", out.err);
  cr_assert (strstr (out.err, "'nothing/here:t' is not in the store"), "%s", out.err);
  cmd_out_free (&out);
  sh (&fx, &out, "\"$IMG\" --store \"$STORE\" frobnicate");
  cr_assert_eq (out.status, 2);
  cmd_out_free (&out);
  sh (&fx, &out, "\"$IMG\" --store \"$STORE\" import tarball:x");
  cr_assert_eq (out.status, 2, "%s", out.err);
  cmd_out_free (&out);
  sh (&fx, &out, "\"$IMG\" --store \"$STORE\" import oci:\"$T/missing\"");
  cr_assert_eq (out.status, 3, "%s", out.err);
  cmd_out_free (&out);
  sh (&fx, &out, "\"$IMG\" --help");
  cr_assert_eq (out.status, 0);
  cr_assert (strstr (out.out, "6 invalid image"), "the usage documents exit codes");
  cmd_out_free (&out);
}

Test (store, image_env_is_returned_for_the_sandbox)
{
  small_image ();
  free (sh_ok (&fx, "umoci config --image oci:t --config.env=LANG=C.UTF-8 "
                    "--config.env=PATH=/usr/local/bin:/usr/bin"));
  free (sh_ok (&fx, "\"$IMG\" --store \"$STORE\" import oci:\"$T/oci\":t"));
  struct nsbox_store *store = open_store ();
  char *digest = NULL, *rootfs = NULL;
  char **env = NULL;
  struct nsbox_error *err = NULL;
  cr_assert (nsbox_store_lookup (store, IMAGE_REF, &digest, &err) == 0);
  cr_assert (nsbox_store_unpack (store, digest, &rootfs, &env, &err) == 0, "%s",
             nsbox_error_message (err));
  cr_assert (env && env[0] && env[1] && !env[2]);
  cr_assert_str_eq (env[0], "LANG=C.UTF-8");
  cr_assert_str_eq (env[1], "PATH=/usr/local/bin:/usr/bin");
  nsbox_strv_free (env);
  free (rootfs);
  free (digest);
  nsbox_store_close (store);
}

/* nsbox reads resolve's answer up to its last NUL: one cut short at an
 * item boundary would parse with Env entries missing, so a failed write
 * must show in the exit status. */
Test (store, resolve_fails_when_its_answer_cannot_be_written)
{
  small_image ();
  free (sh_ok (&fx, "umoci config --image oci:t --config.env=LANG=C.UTF-8"));
  free (sh_ok (&fx, "\"$IMG\" --store \"$STORE\" import oci:\"$T/oci\":t"));
  char *answer = sh_ok (&fx, "\"$IMG\" --store \"$STORE\" resolve --pull never %s | tr '\\0' '\\n'",
                        IMAGE_REF);
  cr_assert (strstr (answer, "LANG=C.UTF-8"), "resolve's answer lacks the image's Env: %s", answer);
  free (answer);
  struct cmd_out out;
  sh (&fx, &out, "\"$IMG\" --store \"$STORE\" resolve --pull never %s >/dev/full", IMAGE_REF);
  cr_assert_neq (out.status, 0, "resolve exited 0 with its answer lost");
  cr_assert (strstr (out.err, "write the answer"), "stderr: %s", out.err);
  cmd_out_free (&out);
}
