/* References, platforms (the selection half), WWW-Authenticate challenges and credential keys: no
 * servers. */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "platform.h"
#include "reference.h"

static char *
normalised (const char *text)
{
  struct nsbox_reference *ref = NULL;
  struct nsbox_error *e = NULL;
  int r = nsbox_reference_parse (text, &ref, &e);
  cr_assert (r == 0, "'%s' rejected: %s", text, nsbox_error_message (e));
  char *s = nsbox_reference_string (ref);
  nsbox_reference_free (ref);
  return s;
}

static void
assert_normalises (const char *text, const char *want)
{
  char *s = normalised (text);
  cr_assert_str_eq (s, want, "'%s' normalised to '%s', want '%s'", text, s, want);
  free (s);
}

static void
assert_rejected (const char *text, const char *needle)
{
  struct nsbox_reference *ref = NULL;
  struct nsbox_error *e = NULL;
  int r = nsbox_reference_parse (text, &ref, &e);
  cr_assert (r == -EINVAL, "'%s' accepted (%d)", text, r);
  cr_assert (ref == NULL, "output written on failure");
  cr_assert (strstr (nsbox_error_message (e), needle), "'%s': message '%s' lacks '%s'", text,
             nsbox_error_message (e), needle);
  nsbox_error_free (e);
}

Test (reference, short_names_go_to_docker_hub_library, .timeout = 10)
{
  assert_normalises ("python:3.12-slim", "docker.io/library/python:3.12-slim");
  assert_normalises ("python", "docker.io/library/python:latest");
  assert_normalises ("docker.io/python", "docker.io/library/python:latest");
  assert_normalises ("index.docker.io/library/python", "docker.io/library/python:latest");
  assert_normalises ("index.docker.io/python:3", "docker.io/library/python:3");
  assert_normalises ("someone/tool:1", "docker.io/someone/tool:1");
}

Test (reference, registries_are_recognised_by_dot_colon_or_localhost, .timeout = 10)
{
  assert_normalises ("127.0.0.1:5000/a/b:t", "127.0.0.1:5000/a/b:t");
  assert_normalises ("localhost/a", "localhost/a:latest");
  assert_normalises ("ghcr.io/o/r:v1.2", "ghcr.io/o/r:v1.2");
  assert_normalises ("Registry/a", "Registry/a:latest");
}

Test (reference, digest_wins_over_tag, .timeout = 10)
{
  const char *digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  char text[256], want[256];
  snprintf (text, sizeof text, "127.0.0.1:5000/a/b:t@%s", digest);
  snprintf (want, sizeof want, "127.0.0.1:5000/a/b@%s", digest);
  assert_normalises (text, want);
  struct nsbox_reference *ref = NULL;
  cr_assert (nsbox_reference_parse (text, &ref, NULL) == 0);
  cr_assert_null (ref->tag);
  cr_assert_str_eq (ref->digest, digest);
  cr_assert_str_eq (ref->path, "a/b");
  cr_assert_str_eq (ref->domain, "127.0.0.1:5000");
  nsbox_reference_free (ref);
}

Test (reference, uppercase_long_tags_and_bad_digests_are_rejected, .timeout = 10)
{
  char tag129[200] = "python:";
  memset (tag129 + 7, 'a', 129);
  tag129[7 + 129] = '\0';
  assert_rejected ("docker.io/Library/python", "lowercase");
  assert_rejected ("localhost/Upper", "lowercase");
  assert_rejected (tag129, "bad tag");
  assert_rejected ("python@sha256:1234", "bad digest");
  assert_rejected ("python@md5:0123456789abcdef0123456789abcdef", "bad digest");
  assert_rejected ("python:-dash", "bad tag");
  assert_rejected ("a//b", "component");
  assert_rejected ("a/b_-c", "component");
  assert_rejected ("", "empty");
  char tag128[200] = "python:";
  memset (tag128 + 7, 'a', 128);
  tag128[7 + 128] = '\0';
  free (normalised (tag128));
}

Test (reference, docker_hub_is_served_by_registry_1, .timeout = 10)
{
  struct nsbox_reference *ref = NULL;
  cr_assert (nsbox_reference_parse ("python", &ref, NULL) == 0);
  cr_assert_str_eq (nsbox_reference_registry_host (ref), "registry-1.docker.io");
  nsbox_reference_free (ref);
  cr_assert (nsbox_reference_parse ("127.0.0.1:5000/x", &ref, NULL) == 0);
  cr_assert_str_eq (nsbox_reference_registry_host (ref), "127.0.0.1:5000");
  nsbox_reference_free (ref);
}

static void
assert_platform (const char *text, const char *want)
{
  struct nsbox_platform p;
  struct nsbox_error *e = NULL;
  cr_assert (nsbox_platform_parse (text, &p, &e) == 0, "'%s': %s", text, nsbox_error_message (e));
  char buf[96];
  nsbox_platform_format (&p, buf, sizeof buf);
  cr_assert_str_eq (buf, want, "'%s' normalised to '%s', want '%s'", text, buf, want);
}

Test (platform, architectures_normalise_like_containerd, .timeout = 10)
{
  assert_platform ("linux/x86_64", "linux/amd64");
  assert_platform ("linux/amd64/v1", "linux/amd64");
  assert_platform ("linux/aarch64", "linux/arm64");
  assert_platform ("linux/arm64/v8", "linux/arm64");
  assert_platform ("linux/armhf", "linux/arm/v7");
  assert_platform ("linux/armel", "linux/arm/v6");
  assert_platform ("linux/arm", "linux/arm/v7");
  assert_platform ("linux/i386", "linux/386");
  assert_platform ("Linux/AMD64", "linux/amd64");
  struct nsbox_platform p;
  struct nsbox_error *e = NULL;
  cr_assert (nsbox_platform_parse ("linux", &p, &e) == -EINVAL);
  nsbox_error_free (e);
  e = NULL;
  cr_assert (nsbox_platform_parse ("linux/amd64/v2/x", &p, &e) == -EINVAL);
  nsbox_error_free (e);
}

Test (platform, host_is_normalised, .timeout = 10)
{
  struct nsbox_platform p;
  nsbox_platform_host (&p);
  cr_assert_str_eq (p.os, "linux");
  cr_assert (strcmp (p.architecture, "x86_64") != 0 && strcmp (p.architecture, "aarch64") != 0);
}

static const char index_json[]
    = "{\"schemaVersion\":2,\"manifests\":["
      "{\"digest\":\"sha256:att\",\"platform\":{\"os\":\"unknown\",\"architecture\":\"unknown\"}},"
      "{\"digest\":\"sha256:noplat\"},"
      "{\"digest\":\"sha256:amd\",\"platform\":{\"os\":\"linux\",\"architecture\":\"amd64\"}},"
      "{\"digest\":\"sha256:armv8\",\"platform\":{\"os\":\"linux\",\"architecture\":\"arm64\","
      "\"variant\":\"v8\"}},"
      "{\"digest\":\"sha256:annotated\",\"platform\":{\"os\":\"linux\",\"architecture\":\"386\"},"
      "\"annotations\":{\"vnd.docker.reference.type\":\"attestation-manifest\"}}]}";

static const char *
select_digest (const char *platform, struct nsbox_error **e)
{
  static char out[64];
  json_t *index = json_loads (index_json, 0, NULL);
  struct nsbox_platform want;
  cr_assert (nsbox_platform_parse (platform, &want, NULL) == 0);
  json_t *chosen = NULL;
  int r = nsbox_platform_select (index, &want, "test/img", &chosen, e);
  out[0] = '\0';
  if (r == 0)
    snprintf (out, sizeof out, "%s", json_string_value (json_object_get (chosen, "digest")));
  json_decref (index);
  return r == 0 ? out : NULL;
}

Test (platform, selection_matches_normalised_variants, .timeout = 10)
{
  cr_assert_str_eq (select_digest ("linux/amd64", NULL), "sha256:amd");
  cr_assert_str_eq (select_digest ("linux/arm64", NULL), "sha256:armv8");
  cr_assert_str_eq (select_digest ("linux/arm64/v8", NULL), "sha256:armv8");
  cr_assert_str_eq (select_digest ("linux/aarch64", NULL), "sha256:armv8");
}

Test (platform, attestations_are_never_chosen_and_a_miss_lists_platforms, .timeout = 10)
{
  struct nsbox_error *e = NULL;
  cr_assert_null (select_digest ("unknown/unknown", &e));
  nsbox_error_free (e);
  e = NULL;
  cr_assert_null (select_digest ("linux/386", &e));
  nsbox_error_free (e);
  e = NULL;
  cr_assert_null (select_digest ("linux/s390x", &e));
  cr_assert_eq (nsbox_error_errno (e), ENOEXEC);
  const char *m = nsbox_error_message (e);
  cr_assert (strstr (m, "'linux/s390x'") && strstr (m, "linux/amd64, linux/arm64")
                 && !strstr (m, "unknown") && !strstr (m, "386"),
             "message: %s", m);
  nsbox_error_free (e);
}

static struct nsbox_challenge *
parse_challenges (const char *header, int *n)
{
  struct nsbox_challenge *c = NULL;
  const char *headers[] = { header };
  *n = nsbox_challenges_parse (headers, 1, &c, NULL);
  cr_assert (*n >= 0, "'%s' not parsed", header);
  return c;
}

Test (auth, bearer_challenges_give_realm_service_scope_and_error, .timeout = 10)
{
  int n;
  struct nsbox_challenge *c = parse_challenges (
      "Bearer realm=\"https://auth.docker.io/token\",service=\"registry.docker.io\","
      "scope=\"repository:library/python:pull,push\",error=\"insufficient_scope\"",
      &n);
  cr_assert_eq (n, 1);
  cr_assert_str_eq (c[0].scheme, "bearer");
  cr_assert_str_eq (c[0].realm, "https://auth.docker.io/token");
  cr_assert_str_eq (c[0].service, "registry.docker.io");
  cr_assert_str_eq (c[0].scope, "repository:library/python:pull,push");
  cr_assert_str_eq (c[0].error, "insufficient_scope");
  nsbox_challenges_free (c, (size_t)n);
}

Test (auth, several_challenges_and_escapes_in_one_header_are_split, .timeout = 10)
{
  int n;
  struct nsbox_challenge *c = parse_challenges (
      "Basic realm=\"a \\\"quoted\\\" realm\", Bearer realm=\"http://127.0.0.1:1/t\", "
      "service=svc",
      &n);
  cr_assert_eq (n, 2);
  cr_assert_str_eq (c[0].scheme, "basic");
  cr_assert_str_eq (c[0].realm, "a \"quoted\" realm");
  cr_assert_str_eq (c[1].scheme, "bearer");
  cr_assert_str_eq (c[1].realm, "http://127.0.0.1:1/t");
  cr_assert_str_eq (c[1].service, "svc");
  nsbox_challenges_free (c, (size_t)n);
}

Test (auth, credential_keys_fold_docker_hub_spellings, .timeout = 10)
{
  const char *hub[]
      = { "https://index.docker.io/v1/", "docker.io", "registry-1.docker.io", "index.docker.io" };
  for (size_t i = 0; i < 4; i++)
    {
      char *k = nsbox_credentials_key (hub[i]);
      cr_assert_str_eq (k, "index.docker.io", "'%s' -> '%s'", hub[i], k);
      free (k);
    }
  char *k = nsbox_credentials_key ("http://127.0.0.1:5000/v2/");
  cr_assert_str_eq (k, "127.0.0.1:5000");
  free (k);
}

Test (auth, base64_round_trips, .timeout = 10)
{
  const char *texts[] = { "", "a", "ab", "abc", "user:pass word" };
  for (size_t i = 0; i < 5; i++)
    {
      char *enc = nsbox_base64_encode (texts[i], strlen (texts[i]));
      size_t len = 0;
      char *dec = nsbox_base64_decode (enc, &len);
      cr_assert (dec && len == strlen (texts[i]) && memcmp (dec, texts[i], len) == 0);
      free (enc);
      free (dec);
    }
  char *enc = nsbox_base64_encode ("user:pw", 7);
  cr_assert_str_eq (enc, "dXNlcjpwdw==");
  free (enc);
  cr_assert_null (nsbox_base64_decode ("dXN!cjpwdw==", NULL));
}
