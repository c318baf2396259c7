/* Authentication against a real docker-registry: the silly Bearer flow through token_server.py,
 * real token auth with an RS256 JWT signed by openssl, htpasswd with credentials from DOCKER_CONFIG
 * (auths and a credential helper), and blobs redirected by the storage middleware, fetched without
 * the registry's Authorization. */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "auth.h"
#include "error.h"
#include "pull.h"
#include "servers.h"
#include "store.h"

TestSuite (registry_auth, .fini = servers_stop_all);

static void
pull_ok (const char *ref)
{
  struct nsbox_error *e = test_pull (test_store (), ref, "linux/amd64", NULL);
  cr_assert_null (e, "pull '%s' failed: %s", ref, nsbox_error_message (e));
}

/* The nth logged token request's query parameter `key` (first value). */
static const char *
token_query (const char *log, int nth, const char *key)
{
  static char value[512];
  FILE *f = fopen (log, "re");
  char line[8192];
  int i = 0;
  value[0] = '\0';
  while (f && fgets (line, sizeof line, f))
    if (i++ == nth)
      {
        json_t *j = json_loads (line, 0, NULL);
        const char *v = json_string_value (
            json_array_get (json_object_get (json_object_get (j, "query"), key), 0));
        snprintf (value, sizeof value, "%s", v ? v : "");
        json_decref (j);
      }
  if (f)
    fclose (f);
  return value;
}

static void
start_silly (struct server *reg, struct server *tokens, const char *field)
{
  const char *args[] = { "--mode", "silly", "--field", field, NULL };
  token_server_start (tokens, args);
  char yaml[8192];
  snprintf (yaml, sizeof yaml,
            "auth:\n  silly:\n    realm: http://127.0.0.1:%u/token\n    service: test\n",
            tokens->port);
  registry_start (reg, fixture_storage_copy (), yaml);
}

Test (registry_auth, silly_bearer_flow_sends_service_and_scope, .timeout = 60)
{
  struct server reg, tokens;
  start_silly (&reg, &tokens, "access_token");
  char *ref = ref_at (reg.port, "test/img:t");
  pull_ok (ref);
  cr_assert_eq (log_count (tokens.log, "GET", "/token"), 1, "token requests: %d",
                log_count (tokens.log, "GET", "/token"));
  cr_assert_str_eq (token_query (tokens.log, 0, "service"), "test");
  cr_assert_str_eq (token_query (tokens.log, 0, "scope"), "repository:test/img:pull");
  free (ref);
}

Test (registry_auth, token_is_reused_until_it_expires, .timeout = 60)
{
  struct server reg, tokens;
  start_silly (&reg, &tokens, "access_token");
  char *ref = ref_at (reg.port, "test/img:t");
  char *other = ref_at (reg.port, "test/img:v2s2");
  pull_ok (ref);
  pull_ok (other);
  /* manifest, config, two layers, twice: one token (expires_in 60) */
  cr_assert_eq (log_count (tokens.log, NULL, NULL), 1, "token requests: %d",
                log_count (tokens.log, NULL, NULL));
  free (ref);
  free (other);
}

Test (registry_auth, token_field_named_token_is_accepted, .timeout = 60)
{
  struct server reg, tokens;
  start_silly (&reg, &tokens, "token");
  char *ref = ref_at (reg.port, "test/img:t");
  pull_ok (ref);
  free (ref);
}

/* A key and a self-signed certificate for the token issuer. */
static void
make_issuer_cert (const char **key, const char **cert)
{
  static char key_path[4096], cert_path[4096];
  snprintf (key_path, sizeof key_path, "%s", test_path ("issuer.key"));
  snprintf (cert_path, sizeof cert_path, "%s", test_path ("issuer.pem"));
  *key = key_path;
  *cert = cert_path;
  const char *genkey[]
      = { "openssl", "genpkey", "-quiet", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
          "-out",    *key,      NULL };
  cr_assert_eq (run_command (genkey), 0, "openssl genpkey failed");
  const char *req[] = { "openssl", "req", "-new",  "-x509", "-key",  *key,
                        "-out",    *cert, "-days", "2",     "-subj", "/CN=nsbox-test-issuer",
                        NULL };
  cr_assert_eq (run_command (req), 0, "openssl req failed");
}

static void
start_jwt (struct server *reg, struct server *tokens, const char *audience)
{
  const char *key, *cert;
  make_issuer_cert (&key, &cert);
  const char *args[]
      = { "--mode",     "jwt",    "--key", key, "--cert", cert, "--issuer", "nsbox-test-issuer",
          "--audience", audience, NULL };
  token_server_start (tokens, args);
  char yaml[8192];
  snprintf (yaml, sizeof yaml,
            "auth:\n  token:\n    realm: http://127.0.0.1:%u/token\n    service: nsbox-test\n"
            "    issuer: nsbox-test-issuer\n    rootcertbundle: %s\n",
            tokens->port, cert);
  registry_start (reg, fixture_storage_copy (), yaml);
}

Test (registry_auth, signed_jwt_token_auth_works_end_to_end, .timeout = 60)
{
  struct server reg, tokens;
  start_jwt (&reg, &tokens, "nsbox-test");
  char *ref = ref_at (reg.port, "test/multi:t");
  pull_ok (ref);
  cr_assert_str_eq (token_query (tokens.log, 0, "service"), "nsbox-test");
  cr_assert_str_eq (token_query (tokens.log, 0, "scope"), "repository:test/multi:pull");
  free (ref);
}

Test (registry_auth, jwt_for_the_wrong_audience_is_an_auth_error, .timeout = 60)
{
  struct server reg, tokens;
  start_jwt (&reg, &tokens, "someone-else");
  char *ref = ref_at (reg.port, "test/img:t");
  struct nsbox_error *e = test_pull (test_store (), ref, NULL, NULL);
  cr_assert_not_null (e, "a token for another audience was accepted");
  const char *m = nsbox_error_message (e);
  cr_assert_eq (nsbox_error_errno (e), EACCES, "%s", m);
  cr_assert (strstr (m, ref) && strstr (m, "unauthorized"), "message: %s", m);
  /* one fresh token was tried, not a loop */
  cr_assert_leq (log_count (tokens.log, NULL, NULL), 2);
  nsbox_error_free (e);
  free (ref);
}

static void
start_htpasswd (struct server *reg)
{
  const char *path = test_path ("htpasswd");
  char code[1024];
  snprintf (code, sizeof code,
            "import crypt, warnings; warnings.simplefilter('ignore');"
            "open('%s','w').write('user:' + crypt.crypt('secret pw', "
            "crypt.mksalt(crypt.METHOD_BLOWFISH)) + '\\n')",
            path);
  const char *argv[] = { "/usr/bin/python3", "-W", "ignore", "-c", code, NULL };
  cr_assert_eq (run_command (argv), 0, "write the htpasswd file");
  char yaml[8192];
  snprintf (yaml, sizeof yaml, "auth:\n  htpasswd:\n    realm: nsbox-test\n    path: %s\n", path);
  registry_start (reg, fixture_storage_copy (), yaml);
}

static void
docker_config (const char *json)
{
  char dir[4096];
  snprintf (dir, sizeof dir, "%s", test_path ("docker"));
  mkdir (dir, 0700);
  char name[64];
  snprintf (name, sizeof name, "docker/config.json");
  write_test_file (name, json);
  setenv ("DOCKER_CONFIG", dir, 1);
}

Test (registry_auth, htpasswd_registry_without_credentials_is_unauthorized, .timeout = 60)
{
  struct server reg;
  start_htpasswd (&reg);
  docker_config ("{}");
  char *ref = ref_at (reg.port, "test/img:t");
  struct nsbox_error *e = test_pull (test_store (), ref, NULL, NULL);
  cr_assert_not_null (e);
  cr_assert_eq (nsbox_error_errno (e), EACCES, "%s", nsbox_error_message (e));
  nsbox_error_free (e);
  free (ref);
}

Test (registry_auth, htpasswd_registry_uses_docker_config_auths, .timeout = 60)
{
  struct server reg;
  start_htpasswd (&reg);
  char json[512];
  /* base64("user:secret pw"), under a key with scheme and path */
  snprintf (json, sizeof json,
            "{\"auths\":{\"http://127.0.0.1:%u/v2/\":{\"auth\":\"dXNlcjpzZWNyZXQgcHc=\"}}}",
            reg.port);
  docker_config (json);
  char *ref = ref_at (reg.port, "test/img:t");
  pull_ok (ref);
  free (ref);
}

Test (registry_auth, credential_helper_gets_the_registry_on_stdin, .timeout = 60)
{
  struct server reg;
  start_htpasswd (&reg);
  char bin[4096], helper[4200], script[8192];
  snprintf (bin, sizeof bin, "%s", test_path ("bin"));
  mkdir (bin, 0755);
  snprintf (helper, sizeof helper, "%s/docker-credential-nsboxtest", bin);
  snprintf (script, sizeof script,
            "#!/bin/sh\n"
            "cat > '%s'\n"
            "[ \"$1\" = get ] || exit 3\n"
            "echo '{\"ServerURL\":\"x\",\"Username\":\"user\",\"Secret\":\"secret pw\"}'\n",
            test_path ("helper-stdin"));
  FILE *f = fopen (helper, "we");
  cr_assert (f);
  fputs (script, f);
  fclose (f);
  chmod (helper, 0755);
  char path[8192];
  snprintf (path, sizeof path, "%s:%s", bin, getenv ("PATH") ? getenv ("PATH") : "/usr/bin:/bin");
  setenv ("PATH", path, 1);
  char json[512];
  snprintf (json, sizeof json, "{\"credHelpers\":{\"127.0.0.1:%u\":\"nsboxtest\"}}", reg.port);
  docker_config (json);
  char *ref = ref_at (reg.port, "test/img:t");
  pull_ok (ref);
  f = fopen (test_path ("helper-stdin"), "re");
  cr_assert (f, "the helper did not run");
  char got[256] = "";
  got[fread (got, 1, sizeof got - 1, f)] = '\0';
  fclose (f);
  char want[64];
  snprintf (want, sizeof want, "127.0.0.1:%u", reg.port);
  cr_assert_str_eq (got, want);
  free (ref);
}

Test (registry_auth, redirected_blobs_are_fetched_without_authorization, .timeout = 60)
{
  struct server reg, tokens, blobs;
  const char *storage = fixture_storage_copy ();
  blob_server_start (&blobs, storage);
  const char *args[] = { "--mode", "silly", NULL };
  token_server_start (&tokens, args);
  char yaml[8192];
  snprintf (yaml, sizeof yaml,
            "auth:\n  silly:\n    realm: http://127.0.0.1:%u/token\n    service: test\n"
            "middleware:\n  storage:\n    - name: redirect\n      options:\n"
            "        baseurl: http://127.0.0.1:%u\n",
            tokens.port, blobs.port);
  registry_start (&reg, storage, yaml);
  char *ref = ref_at (reg.port, "test/img:t");
  pull_ok (ref);
  /* config + two layers came from the blob server */
  int gets = log_count (blobs.log, "GET", "/docker/registry/v2/blobs/sha256/");
  cr_assert_eq (gets, 3, "blob server saw %d GETs", gets);
  cr_assert (!log_any_authorization (blobs.log),
             "the registry's Authorization header reached the blob server");
  free (ref);
}

/* The nth logged request's field `section` ("query" or "form") `key`. */
static const char *
token_field (const char *log, int nth, const char *section, const char *key)
{
  static char value[512];
  FILE *f = fopen (log, "re");
  char line[16384];
  int i = 0;
  value[0] = '\0';
  while (f && fgets (line, sizeof line, f))
    if (i++ == nth)
      {
        json_t *j = json_loads (line, 0, NULL);
        json_t *v = json_object_get (j, section);
        const char *s = json_is_object (v)
                            ? json_string_value (json_array_get (json_object_get (v, key), 0))
                            : json_string_value (json_object_get (j, key));
        snprintf (value, sizeof value, "%s", s ? s : "");
        json_decref (j);
      }
  if (f)
    fclose (f);
  return value;
}

Test (registry_auth, credentials_reach_the_token_realm_as_basic_auth_with_account, .timeout = 60)
{
  struct server reg, tokens;
  const char *args[] = { "--mode", "silly", "--user", "user", "--password", "secret pw", NULL };
  token_server_start (&tokens, args);
  char yaml[8192];
  snprintf (yaml, sizeof yaml,
            "auth:\n  silly:\n    realm: http://127.0.0.1:%u/token\n    service: test\n",
            tokens.port);
  registry_start (&reg, fixture_storage_copy (), yaml);
  char json[512];
  snprintf (json, sizeof json, "{\"auths\":{\"127.0.0.1:%u\":{\"auth\":\"dXNlcjpzZWNyZXQgcHc=\"}}}",
            reg.port);
  docker_config (json);
  char *ref = ref_at (reg.port, "test/img:t");
  pull_ok (ref);
  cr_assert_str_eq (token_field (tokens.log, 0, "query", "account"), "user");
  cr_assert_str_eq (token_field (tokens.log, 0, NULL, "authorization"),
                    "Basic dXNlcjpzZWNyZXQgcHc=");
  free (ref);
}

Test (registry_auth, identity_token_is_exchanged_by_refresh_token_grant, .timeout = 60)
{
  struct server reg, tokens;
  start_silly (&reg, &tokens, "access_token");
  char json[512];
  snprintf (json, sizeof json, "{\"auths\":{\"127.0.0.1:%u\":{\"identitytoken\":\"refresh-123\"}}}",
            reg.port);
  docker_config (json);
  char *ref = ref_at (reg.port, "test/img:t");
  pull_ok (ref);
  cr_assert_eq (log_count (tokens.log, "POST", "/token"), 1);
  cr_assert_str_eq (token_field (tokens.log, 0, "form", "grant_type"), "refresh_token");
  cr_assert_str_eq (token_field (tokens.log, 0, "form", "refresh_token"), "refresh-123");
  cr_assert_str_eq (token_field (tokens.log, 0, "form", "scope"), "repository:test/img:pull");
  cr_assert_str_eq (token_field (tokens.log, 0, "form", "service"), "test");
  free (ref);
}

/* A docker-credential-NAME in test_dir/bin, first on PATH. */
static void
install_helper (const char *name, const char *body)
{
  char bin[4096], helper[4400];
  snprintf (bin, sizeof bin, "%s", test_path ("bin"));
  mkdir (bin, 0755);
  snprintf (helper, sizeof helper, "%s/docker-credential-%s", bin, name);
  FILE *f = fopen (helper, "we");
  cr_assert (f);
  fprintf (f, "#!/bin/sh\n%s", body);
  fclose (f);
  chmod (helper, 0755);
  char path[8192];
  snprintf (path, sizeof path, "%s:%s", bin, getenv ("PATH") ? getenv ("PATH") : "/usr/bin:/bin");
  setenv ("PATH", path, 1);
}

Test (registry_auth, helper_without_credentials_means_anonymous, .timeout = 30)
{
  install_helper ("empty", "echo 'credentials not found in native keychain'\nexit 1\n");
  docker_config ("{\"credsStore\":\"empty\"}");
  struct nsbox_credentials c = { 0 };
  struct nsbox_error *e = NULL;
  cr_assert_eq (nsbox_credentials_lookup ("127.0.0.1:5000", &c, &e), 0, "%s",
                nsbox_error_message (e));
}

Test (registry_auth, failing_helper_that_never_reads_is_an_error_not_a_sigpipe, .timeout = 30)
{
  install_helper ("broken", "exec 0<&-\necho 'helper exploded'\nexit 5\n");
  docker_config ("{\"credHelpers\":{\"registry.example\":\"broken\"}}");
  struct nsbox_credentials c = { 0 };
  struct nsbox_error *e = NULL;
  int r = nsbox_credentials_lookup ("registry.example", &c, &e);
  cr_assert_eq (r, -EACCES);
  cr_assert (strstr (nsbox_error_message (e), "helper exploded")
                 && strstr (nsbox_error_message (e), "exit 5"),
             "%s", nsbox_error_message (e));
  nsbox_error_free (e);
}

Test (registry_auth, creds_store_token_username_is_an_identity_token, .timeout = 30)
{
  install_helper ("store",
                  "cat >/dev/null\n"
                  "echo '{\"ServerURL\":\"\",\"Username\":\"<token>\",\"Secret\":\"rt\"}'\n");
  docker_config ("{\"credsStore\":\"store\",\"auths\":{\"docker.io\":{\"auth\":\"eDp5\"}}}");
  struct nsbox_credentials c = { 0 };
  cr_assert_eq (nsbox_credentials_lookup ("docker.io", &c, NULL), 1);
  cr_assert_null (c.username);
  cr_assert_str_eq (c.identity_token, "rt");
  nsbox_credentials_clear (&c);
}

Test (registry_auth, docker_hub_auths_entry_is_found_under_its_v1_url, .timeout = 30)
{
  docker_config ("{\"auths\":{\"https://index.docker.io/v1/\":{\"auth\":\"dXNlcjpwdw==\"}}}");
  struct nsbox_credentials c = { 0 };
  cr_assert_eq (nsbox_credentials_lookup ("docker.io", &c, NULL), 1);
  cr_assert_str_eq (c.username, "user");
  cr_assert_str_eq (c.secret, "pw");
  nsbox_credentials_clear (&c);
}

Test (registry_auth, insufficient_scope_is_retried_with_the_challenge_scope, .timeout = 60)
{
  struct server reg, tokens, proxy;
  start_silly (&reg, &tokens, "access_token");
  char realm[128];
  snprintf (realm, sizeof realm, "http://127.0.0.1:%u/token", tokens.port);
  const char *extra[] = { "--realm", realm, NULL };
  proxy_start_with (&proxy, reg.port, "insufficient-scope", 1, 0, extra);
  char *ref = ref_at (proxy.port, "test/img:t");
  pull_ok (ref);
  cr_assert_eq (log_count (tokens.log, NULL, NULL), 2, "token requests: %d",
                log_count (tokens.log, NULL, NULL));
  cr_assert_str_eq (token_query (tokens.log, 0, "scope"), "repository:test/img:pull");
  cr_assert_str_eq (token_query (tokens.log, 1, "scope"), "repository:test/img:pull,push");
  free (ref);
}
