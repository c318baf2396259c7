/* The real python:3.12-slim from Docker Hub.
 *
 * Network-gated by an explicit opt-in: it runs only with
 * NSBOX_TEST_DOCKERHUB=1 and when Docker Hub answers. NSBOX_TEST_MUST_WORK
 * deliberately does not turn this skip into a failure (the harness's
 * NSBOX_SKIP_UNLESS is not used): a green CI without the opt-in means the
 * offline suite ran, not that Docker Hub was reachable. Digests change
 * with every rebuild of the image, so none is pinned. */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "error.h"
#include "pull.h"
#include "servers.h"
#include "store.h"

TestSuite (registry_dockerhub, .fini = servers_stop_all);

/* Counts non-directories with S_ISUID or S_ISGID under dir (not following
 * symlinks). */
static int
count_setid (const char *dir)
{
  DIR *d = opendir (dir);
  int n = 0;
  struct dirent *de;
  while (d && (de = readdir (d)))
    {
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      char path[4096];
      struct stat st;
      snprintf (path, sizeof path, "%s/%s", dir, de->d_name);
      if (lstat (path, &st) < 0)
        continue;
      if (S_ISDIR (st.st_mode))
        n += count_setid (path);
      else if (!S_ISLNK (st.st_mode) && (st.st_mode & (S_ISUID | S_ISGID)))
        n++;
    }
  if (d)
    closedir (d);
  return n;
}

static json_t *
stored_json (struct nsbox_store *store, const char *digest)
{
  char *data = NULL;
  size_t len = 0;
  cr_assert (nsbox_store_read_blob (store, digest, 4 << 20, &data, &len, NULL) >= 0);
  json_t *j = json_loadb (data, len, 0, NULL);
  free (data);
  cr_assert_not_null (j);
  return j;
}

Test (registry_dockerhub, python_3_12_slim_pulls_verifies_and_runs, .timeout = 900)
{
  if (!getenv ("NSBOX_TEST_DOCKERHUB") || strcmp (getenv ("NSBOX_TEST_DOCKERHUB"), "1") != 0)
    cr_skip_test ("Docker Hub test: opt in with NSBOX_TEST_DOCKERHUB=1 (NSBOX_TEST_MUST_WORK "
                  "does not apply to this network-gated test)");
  struct nsbox_store *store = test_store ();
  char *digest = NULL;
  struct nsbox_error *e = test_pull (store, "python:3.12-slim", "linux/amd64", &digest);
  if (e && nsbox_error_errno (e) == ENETUNREACH)
    cr_skip_test ("Docker Hub does not answer: %s", nsbox_error_message (e));
  cr_assert_null (e, "pull failed: %s", nsbox_error_message (e));

  json_t *manifest = stored_json (store, digest);
  cr_assert_eq (json_array_size (json_object_get (manifest, "layers")), 4);
  json_t *config = stored_json (
      store, json_string_value (json_object_get (json_object_get (manifest, "config"), "digest")));
  json_t *cfg = json_object_get (config, "config");
  json_t *cmd = json_object_get (cfg, "Cmd");
  cr_assert (json_array_size (cmd) == 1
             && strcmp (json_string_value (json_array_get (cmd, 0)), "python3") == 0);
  const char *user = json_string_value (json_object_get (cfg, "User"));
  cr_assert (!user || !*user, "User is '%s'", user);

  char *rootfs = NULL;
  char **env = NULL;
  int r = nsbox_store_unpack (store, digest, &rootfs, &env, &e);
  cr_assert (r >= 0, "unpack failed: %s", nsbox_error_message (e));
  char path[4096], link[256];
  snprintf (path, sizeof path, "%s/bin", rootfs);
  ssize_t n = readlink (path, link, sizeof link - 1);
  cr_assert (n > 0);
  link[n] = '\0';
  cr_assert_str_eq (link, "usr/bin");
  snprintf (path, sizeof path, "%s/usr/local/bin/python3.12", rootfs);
  cr_assert (access (path, X_OK) == 0, "no python3.12 in the rootfs");
  struct stat st;
  snprintf (path, sizeof path, "%s/tmp", rootfs);
  cr_assert (stat (path, &st) == 0 && (st.st_mode & 07777) == 01777);
  cr_assert_eq (count_setid (rootfs), 0, "set-id files in the unpacked tree");

  /* In the sandbox, through the CLI, from the store. */
  char cmd_line[8192];
  const char *bin = getenv ("NSBOX_BIN") ? getenv ("NSBOX_BIN") : "build/nsbox";
  snprintf (cmd_line, sizeof cmd_line,
            "'%s' run --store '%s' --image python:3.12-slim --pull never --timeout 30s "
            "-- python3.12 -c 'import ssl, sqlite3; print(\"ok\")' </dev/null",
            bin, nsbox_store_root (store));
  FILE *p = popen (cmd_line, "re");
  cr_assert (p);
  char out[256] = "";
  if (!fgets (out, sizeof out, p))
    out[0] = '\0';
  int status = pclose (p);
  cr_assert (status == 0 && strcmp (out, "ok\n") == 0, "sandboxed python said '%s' (status %d)",
             out, status);
  nsbox_strv_free (env);
  free (rootfs);
  json_decref (config);
  json_decref (manifest);
  free (digest);
}
