/* Unit tests of the configuration: parsers, the key table, the setter and
 * getter, and YAML loading with its error positions. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "config_keys.h"
#include "error.h"
#include "util.h"

/* Helpers. */

static nsbox_config *
new_config (void)
{
  struct nsbox_error *err = NULL;
  nsbox_config *config = nsbox_config_new (&err);
  cr_assert_not_null (config, "nsbox_config_new: %s", nsbox_error_message (err));
  return config;
}

/* Asserts that key reads back as expected. */
static void
expect_get (const nsbox_config *config, const char *key, const char *expected)
{
  struct nsbox_error *err = NULL;
  char *value = nsbox_config_get (config, key, &err);
  cr_assert_not_null (value, "get '%s': %s", key, nsbox_error_message (err));
  cr_expect_str_eq (value, expected, "get '%s': '%s' instead of '%s'", key, value, expected);
  free (value);
}

static void
expect_set_ok (nsbox_config *config, const char *key, const char *value)
{
  struct nsbox_error *err = NULL;
  int r = nsbox_config_set (config, key, value, &err);
  cr_assert_eq (r, 0, "set '%s' to '%s': %s", key, value, nsbox_error_message (err));
  cr_assert_null (err);
}

/* Asserts that setting fails with -EINVAL and, when message is non-NULL,
 * exactly that message. */
static void
expect_set_fails (nsbox_config *config, const char *key, const char *value, const char *message)
{
  struct nsbox_error *err = NULL;
  int r = nsbox_config_set (config, key, value, &err);
  cr_assert_eq (r, -EINVAL, "set '%s' to '%s' returned %d", key, value, r);
  cr_assert_not_null (err);
  cr_expect_eq (nsbox_error_errno (err), EINVAL);
  if (message)
    cr_expect_str_eq (nsbox_error_message (err), message);
  nsbox_error_free (err);
}

/* Asserts that every key reads back the same from both configurations. */
static void
expect_same_config (const nsbox_config *a, const nsbox_config *b)
{
  for (const struct nsbox_key_info *key = nsbox_config_keys (); key->name; key++)
    {
      char *value_a = nsbox_config_get (a, key->name, NULL);
      char *value_b = nsbox_config_get (b, key->name, NULL);
      cr_assert_not_null (value_a);
      cr_assert_not_null (value_b);
      cr_expect_str_eq (value_a, value_b, "'%s' differs: '%s' and '%s'", key->name, value_a,
                        value_b);
      free (value_a);
      free (value_b);
    }
}

/* Writes content to a new temporary file; returns its path (caller unlinks
 * and frees). */
static char *
write_temp (const char *content, size_t len)
{
  char *path = strdup ("/tmp/nsbox-config-test-XXXXXX");
  cr_assert_not_null (path);
  int fd = mkstemp (path);
  cr_assert_geq (fd, 0, "mkstemp: %s", strerror (errno));
  cr_assert_eq (write (fd, content, len), (ssize_t)len);
  close (fd);
  return path;
}

static int
load_text (nsbox_config *config, const char *content, char **path, struct nsbox_error **err)
{
  *path = write_temp (content, strlen (content));
  int r = nsbox_config_load_yaml (config, *path, err);
  unlink (*path);
  return r;
}

static void
expect_load_ok (nsbox_config *config, const char *content)
{
  struct nsbox_error *err = NULL;
  char *path = NULL;
  int r = load_text (config, content, &path, &err);
  cr_assert_eq (r, 0, "loading %s failed: %s", content, nsbox_error_message (err));
  free (path);
}

/* Loads content and asserts -EBADMSG with the message "PATH:" + where. */
static void
expect_load_fails (const char *content, const char *where)
{
  nsbox_config *config = new_config ();
  nsbox_config *before = nsbox_config_dup (config, NULL);
  struct nsbox_error *err = NULL;
  char *path = NULL;
  int r = load_text (config, content, &path, &err);
  cr_assert_eq (r, -EBADMSG, "loading \"%s\" returned %d (%s)", content, r,
                nsbox_error_message (err));
  cr_assert_eq (nsbox_error_errno (err), EBADMSG);
  char *expected = NULL;
  cr_assert_geq (asprintf (&expected, "%s:%s", path, where), 0);
  cr_expect_str_eq (nsbox_error_message (err), expected);
  expect_same_config (config, before);
  free (expected);
  free (path);
  nsbox_error_free (err);
  nsbox_config_free (before);
  nsbox_config_free (config);
}

static const char *
source_path (const char *relative)
{
  static char path[4096];
  const char *dir = getenv ("NSBOX_SRCDIR");
  snprintf (path, sizeof path, "%s/%s", dir ? dir : ".", relative);
  return path;
}

/* Sizes. */

struct size_case
{
  const char *text;
  int result;
  uint64_t bytes;
};

Test (config, sizes_parse_with_binary_suffixes, .timeout = 5)
{
  static const struct size_case cases[] = {
    { "64m", 0, 64ULL << 20 },
    { "1g", 0, 1ULL << 30 },
    { "512k", 0, 512ULL << 10 },
    { "1024", 0, 1024 },
    { "2t", 0, 2ULL << 40 },
    { "64M", 0, 64ULL << 20 },
    { "64MiB", 0, 64ULL << 20 },
    { "64mb", 0, 64ULL << 20 },
    { "100b", 0, 100 },
    { "1.5k", 0, 1536 },
    { "18446744073709551615", 0, UINT64_MAX },
  };
  for (size_t i = 0; i < ARRAY_SIZE (cases); i++)
    {
      uint64_t bytes = 0;
      cr_expect_eq (nsbox_parse_size (cases[i].text, &bytes), 0, "'%s'", cases[i].text);
      cr_expect_eq (bytes, cases[i].bytes, "'%s' gave %lu", cases[i].text, (unsigned long)bytes);
    }
}

Test (config, bad_sizes_are_rejected, .timeout = 5)
{
  static const struct size_case cases[] = {
    { "0", -EINVAL, 0 },
    { "0m", -EINVAL, 0 },
    { "-1", -EINVAL, 0 },
    { "10x", -EINVAL, 0 },
    { "", -EINVAL, 0 },
    { " 64m", -EINVAL, 0 },
    { "64 m", -EINVAL, 0 },
    { "64m ", -EINVAL, 0 },
    { "m", -EINVAL, 0 },
    { "1.", -EINVAL, 0 },
    { ".5k", -EINVAL, 0 },
    { "0.3k", -EINVAL, 0 },
    { "64ib", -EINVAL, 0 },
    { "+64m", -EINVAL, 0 },
    { "0x40", -EINVAL, 0 },
    { "16777216t", -ERANGE, 0 },
    { "18446744073709551616", -ERANGE, 0 },
    { "99999999999999999999g", -ERANGE, 0 },
  };
  for (size_t i = 0; i < ARRAY_SIZE (cases); i++)
    {
      uint64_t bytes = 42;
      cr_expect_eq (nsbox_parse_size (cases[i].text, &bytes), cases[i].result, "'%s'",
                    cases[i].text);
      cr_expect_eq (bytes, 42, "'%s' wrote its output on failure", cases[i].text);
    }
}

/* Durations. */

Test (config, durations_parse_to_milliseconds, .timeout = 5)
{
  static const struct size_case cases[] = {
    { "500ms", 0, 500 },
    { "5s", 0, 5000 },
    { "1m", 0, 60000 },
    { "1h", 0, 3600000 },
    { "2.5s", 0, 2500 },
    { "5", 0, 5000 },
    { "0s", 0, 0 },
    { "1.5m", 0, 90000 },
    { "0.001s", 0, 1 },
    { "-1s", -EINVAL, 0 },
    { "5x", -EINVAL, 0 },
    { "", -EINVAL, 0 },
    { "s", -EINVAL, 0 },
    { "0.5ms", -EINVAL, 0 },
    { "5S", -EINVAL, 0 },
    { "5 s", -EINVAL, 0 },
    { "99999999999999999h", -ERANGE, 0 },
  };
  for (size_t i = 0; i < ARRAY_SIZE (cases); i++)
    {
      uint64_t ms = 42;
      cr_expect_eq (nsbox_parse_duration (cases[i].text, &ms), cases[i].result, "'%s'",
                    cases[i].text);
      cr_expect_eq (ms, cases[i].result == 0 ? cases[i].bytes : 42, "'%s' gave %lu", cases[i].text,
                    (unsigned long)ms);
    }
}

/* CPUs. */

Test (config, cpus_parse_to_thousandths, .timeout = 5)
{
  static const struct size_case cases[] = {
    { "0.5", 0, 500 },      { "2", 0, 2000 },     { "0", 0, 0 },         { "1.25", 0, 1250 },
    { "0.500000", 0, 500 }, { "-1", -EINVAL, 0 }, { "abc", -EINVAL, 0 }, { "0.0001", -EINVAL, 0 },
    { "1.", -EINVAL, 0 },   { ".5", -EINVAL, 0 }, { "1e3", -EINVAL, 0 }, { "", -EINVAL, 0 },
  };
  for (size_t i = 0; i < ARRAY_SIZE (cases); i++)
    {
      uint64_t milli = 42;
      cr_expect_eq (nsbox_parse_cpus (cases[i].text, &milli), cases[i].result, "'%s'",
                    cases[i].text);
      cr_expect_eq (milli, cases[i].result == 0 ? cases[i].bytes : 42, "'%s' gave %lu",
                    cases[i].text, (unsigned long)milli);
    }
}

/* The key table. */

Test (config, key_table_lists_the_whole_vocabulary, .timeout = 5)
{
  static const char *const names[] = {
    "image",
    "rootfs",
    "runtime",
    "timeout",
    "memory",
    "cpus",
    "pids-limit",
    "max-output-bytes",
    "output-capture",
    "tmp-size",
    "network",
    "egress-allow",
    "egress-resolve",
    "egress-ports",
    "egress-connections",
    "egress-concurrent",
    "egress-bytes",
    "egress-idle-timeout",
    "user",
    "env",
    "command",
    "inputs",
    "output-dir",
    "strict",
    "seccomp-policy",
    "pull",
    "store",
    "audit-log",
    "audit-code",
    "session",
    "sandbox-idle-timeout",
    "sandbox-max-lifetime",
    "sandbox-max-runs",
    "mcp-state",
    "quota-runs-per-minute",
    "quota-concurrent",
    "quota-cpu-time",
    "quota-wall-time",
    "quota-window",
  };
  const struct nsbox_key_info *keys = nsbox_config_keys ();
  size_t count = 0;
  for (; keys[count].name; count++)
    {
      cr_assert_lt (count, ARRAY_SIZE (names), "key '%s' is not in the list", keys[count].name);
      cr_expect_str_eq (keys[count].name, names[count]);
      cr_expect_not_null (keys[count].help);
      cr_expect_gt (strlen (keys[count].help), 10, "'%s' has no help", keys[count].name);
      bool boolean = strcmp (keys[count].name, "strict") == 0
                     || strcmp (keys[count].name, "audit-code") == 0;
      bool repeatable = strcmp (keys[count].name, "env") == 0
                        || strcmp (keys[count].name, "command") == 0
                        || strcmp (keys[count].name, "inputs") == 0
                        || strcmp (keys[count].name, "egress-allow") == 0
                        || strcmp (keys[count].name, "egress-resolve") == 0
                        || strcmp (keys[count].name, "egress-ports") == 0;
      cr_expect_eq (keys[count].is_boolean, boolean, "'%s'", keys[count].name);
      cr_expect_eq (keys[count].repeatable, repeatable, "'%s'", keys[count].name);
    }
  cr_expect_eq (count, ARRAY_SIZE (names));
}

Test (config, new_config_holds_the_defaults, .timeout = 5)
{
  nsbox_config *config = new_config ();
  expect_get (config, "image", "python:3.12-slim");
  expect_get (config, "rootfs", "");
  expect_get (config, "runtime", "native");
  expect_get (config, "timeout", "5s");
  expect_get (config, "memory", "256m");
  expect_get (config, "cpus", "0.5");
  expect_get (config, "pids-limit", "64");
  expect_get (config, "max-output-bytes", "65536");
  expect_get (config, "output-capture", "head-tail");
  expect_get (config, "tmp-size", "64m");
  expect_get (config, "network", "none");
  expect_get (config, "user", "65534:65534");
  expect_get (config, "env", "[\"HOME=/tmp\"]");
  expect_get (config, "command", "[\"python\", \"-\"]");
  expect_get (config, "strict", "false");
  expect_get (config, "seccomp-policy", "");
  cr_expect_null (config->rootfs);
  cr_expect_null (config->seccomp_policy);
  cr_expect_eq (config->timeout_ms, 5000);
  cr_expect_eq (config->memory_bytes, 256ULL << 20);
  cr_expect_eq (config->cpus_milli, 500);
  cr_expect_eq (config->uid, 65534);
  cr_expect_eq (config->gid, 65534);
  cr_expect_eq (config->command_len, 2);
  cr_expect_null (config->command[2]);
  cr_expect_eq (config->env_len, 1);
  cr_expect_null (config->env[1]);
  nsbox_config_free (config);
}

/* Every key through set and get. */

struct set_case
{
  const char *key;
  const char *value;
  const char *read_back;
};

Test (config, every_key_reads_back_what_was_set, .timeout = 5)
{
  static const struct set_case cases[] = {
    { "image", "docker.io/library/python:3.13", "docker.io/library/python:3.13" },
    { "rootfs", "/srv/rootfs", "/srv/rootfs" },
    { "rootfs", "", "" },
    { "runtime", "runsc", "runsc" },
    { "runtime", "auto", "auto" },
    { "timeout", "500ms", "500ms" },
    { "timeout", "90s", "90s" },
    { "timeout", "2.5s", "2500ms" },
    { "timeout", "24h", "24h" },
    { "timeout", "10", "10s" },
    { "memory", "1g", "1g" },
    { "memory", "1000", "1000" },
    { "memory", "1536m", "1536m" },
    { "cpus", "2", "2" },
    { "cpus", "0.01", "0.01" },
    { "cpus", "1.250", "1.25" },
    { "cpus", "1024", "1024" },
    { "pids-limit", "1", "1" },
    { "pids-limit", "4194304", "4194304" },
    { "max-output-bytes", "0", "0" },
    { "max-output-bytes", "1m", "1048576" },
    { "max-output-bytes", "1g", "1073741824" },
    { "output-capture", "head", "head" },
    { "output-capture", "head-tail", "head-tail" },
    { "tmp-size", "1g", "1g" },
    { "network", "none", "none" },
    { "user", "1000:100", "1000:100" },
    { "user", "1000", "1000:1000" },
    { "user", "0:0", "0:0" },
    { "user", "4294967294:4294967294", "4294967294:4294967294" },
    { "strict", "true", "true" },
    { "strict", "no", "false" },
    { "strict", "YES", "true" },
    { "strict", "0", "false" },
    { "seccomp-policy", "/etc/nsbox/p.yaml", "/etc/nsbox/p.yaml" },
    { "seccomp-policy", "", "" },
    { "audit-log", "/var/log/nsbox/audit.log", "/var/log/nsbox/audit.log" },
    { "audit-log", "fd:3", "fd:3" },
    { "audit-log", "", "" },
    { "audit-code", "yes", "true" },
    { "audit-code", "false", "false" },
    { "session", "agent-7:conv/42@host.example+x=y_z", "agent-7:conv/42@host.example+x=y_z" },
    { "session", "", "" },
    { "quota-runs-per-minute", "20", "20" },
    { "quota-runs-per-minute", "1000000", "1000000" },
    { "quota-runs-per-minute", "", "" },
    { "quota-concurrent", "2", "2" },
    { "quota-concurrent", "1024", "1024" },
    { "quota-concurrent", "", "" },
    { "quota-cpu-time", "10m", "10m" },
    { "quota-cpu-time", "500ms", "500ms" },
    { "quota-cpu-time", "", "" },
    { "quota-wall-time", "1h", "1h" },
    { "quota-wall-time", "8760h", "8760h" },
    { "quota-window", "1s", "1s" },
    { "quota-window", "744h", "744h" },
  };
  nsbox_config *config = new_config ();
  for (size_t i = 0; i < ARRAY_SIZE (cases); i++)
    {
      expect_set_ok (config, cases[i].key, cases[i].value);
      expect_get (config, cases[i].key, cases[i].read_back);
    }
  nsbox_config_free (config);
}

Test (config, bad_values_are_rejected_and_change_nothing, .timeout = 5)
{
  static const struct set_case cases[] = {
    { "image", "", NULL },
    { "image", "python 3", NULL },
    { "runtime", "docker", NULL },
    { "runtime", "", NULL },
    { "timeout", "0s", NULL },
    { "timeout", "0", NULL },
    { "timeout", "-1s", NULL },
    { "timeout", "5x", NULL },
    { "timeout", "24h1ms", NULL },
    { "timeout", "25h", NULL },
    { "memory", "-1", NULL },
    { "memory", "0", NULL },
    { "memory", "99999999999999999999g", NULL },
    { "cpus", "0", NULL },
    { "cpus", "-1", NULL },
    { "cpus", "abc", NULL },
    { "cpus", "0.001", NULL },
    { "cpus", "1025", NULL },
    { "pids-limit", "0", NULL },
    { "pids-limit", "-5", NULL },
    { "pids-limit", "64k", NULL },
    { "pids-limit", "4194305", NULL },
    { "max-output-bytes", "-1", NULL },
    { "max-output-bytes", "2g", NULL },
    { "output-capture", "tail", NULL },
    { "output-capture", "", NULL },
    { "tmp-size", "10x", NULL },
    { "tmp-size", "0", NULL },
    { "network", "host", NULL },
    { "user", "", NULL },
    { "user", "-1", NULL },
    { "user", "4294967295", NULL },
    { "user", "1:", NULL },
    { "user", ":1", NULL },
    { "user", "a:b", NULL },
    { "user", "1:2:3", NULL },
    { "user", "nobody", NULL },
    { "strict", "maybe", NULL },
    { "strict", "", NULL },
    { "env", "NOEQUALS", NULL },
    { "env", "=x", NULL },
    { "env", "1A=x", NULL },
    { "env", "A-B=x", NULL },
    { "env", "", NULL },
    { "env", "\xc3\xa9=x", NULL },
    { "audit-log", "fd:", NULL },
    { "audit-log", "fd:x", NULL },
    { "audit-log", "fd:-1", NULL },
    { "audit-log", "fd:2147483648", NULL },
    { "audit-code", "sometimes", NULL },
    { "quota-runs-per-minute", "0", NULL },
    { "quota-runs-per-minute", "1000001", NULL },
    { "quota-runs-per-minute", "-1", NULL },
    { "quota-runs-per-minute", "2.5", NULL },
    { "quota-concurrent", "0", NULL },
    { "quota-concurrent", "1025", NULL },
    { "quota-cpu-time", "0s", NULL },
    { "quota-cpu-time", "8761h", NULL },
    { "quota-wall-time", "soon", NULL },
    { "quota-window", "", NULL },
    { "quota-window", "999ms", NULL },
    { "quota-window", "745h", NULL },
    { "session", "has space", NULL },
    { "session", "new\nline", NULL },
    { "session", "caf\xc3\xa9", NULL },
    { "session",
      "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
      "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
      NULL },
  };
  nsbox_config *config = new_config ();
  nsbox_config *before = nsbox_config_dup (config, NULL);
  cr_assert_not_null (before);
  for (size_t i = 0; i < ARRAY_SIZE (cases); i++)
    expect_set_fails (config, cases[i].key, cases[i].value, NULL);
  expect_same_config (config, before);
  nsbox_config_free (before);
  nsbox_config_free (config);
}

Test (config, memory_minus_one_is_rejected, .timeout = 5)
{
  nsbox_config *config = new_config ();
  expect_set_ok (config, "memory", "512m");
  expect_set_fails (config, "memory", "-1",
                    "invalid value for 'memory': '-1' (expected a size such as 256m)");
  expect_get (config, "memory", "512m");
  nsbox_config_free (config);
}

Test (config, cpus_zero_is_rejected, .timeout = 5)
{
  nsbox_config *config = new_config ();
  expect_set_fails (config, "cpus", "0",
                    "invalid value for 'cpus': '0' (expected a number of CPUs from 0.01 to 1024 "
                    "such as 0.5)");
  nsbox_config_free (config);
}

Test (config, timeout_zero_is_rejected, .timeout = 5)
{
  nsbox_config *config = new_config ();
  expect_set_fails (config, "timeout", "0s",
                    "invalid value for 'timeout': '0s' (expected a duration such as 5s or 500ms, "
                    "at most 24h)");
  nsbox_config_free (config);
}

Test (config, tmp_size_with_unknown_suffix_is_rejected, .timeout = 5)
{
  nsbox_config *config = new_config ();
  expect_set_fails (config, "tmp-size", "10x",
                    "invalid value for 'tmp-size': '10x' (expected a size such as 64m)");
  nsbox_config_free (config);
}

Test (config, pids_limit_zero_is_rejected, .timeout = 5)
{
  nsbox_config *config = new_config ();
  expect_set_fails (config, "pids-limit", "0",
                    "invalid value for 'pids-limit': '0' (expected a whole number from 1 to "
                    "4194304)");
  nsbox_config_free (config);
}

Test (config, max_output_bytes_zero_captures_nothing, .timeout = 5)
{
  nsbox_config *config = new_config ();
  expect_set_ok (config, "max-output-bytes", "0");
  cr_expect_eq (config->max_output_bytes, 0);
  nsbox_config_free (config);
}

Test (config, network_is_none_or_proxy, .timeout = 5)
{
  nsbox_config *config = new_config ();
  expect_get (config, "network", "none");
  expect_set_fails (config, "network", "host",
                    "invalid value for 'network': 'host' (expected none or proxy)");
  expect_set_ok (config, "network", "proxy");
  expect_get (config, "network", "proxy");
  nsbox_config_free (config);
}

Test (config, egress_keys_are_normalised_and_checked, .timeout = 5)
{
  nsbox_config *config = new_config ();
  expect_get (config, "egress-allow", "[]");
  expect_get (config, "egress-ports", "[80, 443]");
  expect_get (config, "egress-connections", "64");
  expect_get (config, "egress-concurrent", "8");
  expect_get (config, "egress-bytes", "256m");
  expect_get (config, "egress-idle-timeout", "30s");
  expect_set_ok (config, "egress-allow", "PyPI.org.");
  expect_set_ok (config, "egress-allow", "*.Example.com");
  expect_set_ok (config, "egress-allow", "pypi.org");
  expect_get (config, "egress-allow", "[\"pypi.org\", \"*.example.com\"]");
  expect_set_fails (config, "egress-allow", "127.1",
                    "invalid value for 'egress-allow': '127.1': an IP address (list host "
                    "names; pin an address with egress-resolve) (expected a host name such as "
                    "pypi.org or *.example.com, never an IP address)");
  expect_set_fails (config, "egress-allow", "a_b.com",
                    "invalid value for 'egress-allow': 'a_b.com': not a host name or *. and a "
                    "host name (expected a host name such as pypi.org or *.example.com, never an "
                    "IP address)");
  expect_set_ok (config, "egress-resolve", "Mirror.internal=10.1.2.3");
  expect_set_ok (config, "egress-resolve", "v6.internal=[fd00::0001]");
  expect_set_ok (config, "egress-resolve", "mirror.internal=10.9.9.9");
  expect_get (config, "egress-resolve", "[\"mirror.internal=10.9.9.9\", \"v6.internal=fd00::1\"]");
  expect_set_fails (config, "egress-resolve", "mirror.internal=10.1.2",
                    "invalid value for 'egress-resolve': 'mirror.internal=10.1.2': its ADDRESS "
                    "is not an IPv4 or IPv6 address (expected NAME=ADDRESS such as "
                    "mirror.internal=10.1.2.3)");
  expect_set_ok (config, "egress-ports", "8443");
  expect_set_ok (config, "egress-ports", "8443");
  expect_get (config, "egress-ports", "[8443]");
  expect_set_fails (config, "egress-ports", "0",
                    "invalid value for 'egress-ports': '0' (expected a port from 1 to 65535)");
  expect_set_ok (config, "egress-ports", "");
  expect_get (config, "egress-ports", "[80, 443]");
  expect_set_ok (config, "egress-allow", "");
  expect_get (config, "egress-allow", "[]");
  nsbox_config_free (config);
}

Test (config, unknown_key_is_rejected, .timeout = 5)
{
  nsbox_config *config = new_config ();
  expect_set_fails (config, "memroy", "1g", "unknown key 'memroy'");
  struct nsbox_error *err = NULL;
  cr_expect_null (nsbox_config_get (config, "memroy", &err));
  cr_expect_eq (nsbox_error_errno (err), EINVAL);
  cr_expect_str_eq (nsbox_error_message (err), "unknown key 'memroy'");
  nsbox_error_free (err);
  nsbox_config_free (config);
}

Test (config, control_characters_in_messages_are_escaped, .timeout = 5)
{
  nsbox_config *config = new_config ();
  expect_set_fails (config, "memory", "1\n2",
                    "invalid value for 'memory': '1\\x0a2' (expected a size such as 256m)");
  nsbox_config_free (config);
}

Test (config, missing_value_is_rejected, .timeout = 5)
{
  nsbox_config *config = new_config ();
  expect_set_fails (config, "memory", NULL, "missing value for 'memory'");
  nsbox_config_free (config);
}

Test (config, cpus_above_the_host_count_are_allowed, .timeout = 5)
{
  nsbox_config *config = new_config ();
  long online = sysconf (_SC_NPROCESSORS_ONLN);
  char text[32];
  snprintf (text, sizeof text, "%ld", online + 1 > 1024 ? 1024 : online + 1);
  expect_set_ok (config, "cpus", text);
  nsbox_config_free (config);
}

/* env and command. */

Test (config, env_adds_and_replaces_by_name, .timeout = 5)
{
  nsbox_config *config = new_config ();
  expect_set_ok (config, "env", "FOO=bar");
  expect_get (config, "env", "[\"HOME=/tmp\", \"FOO=bar\"]");
  expect_set_ok (config, "env", "HOME=/root");
  expect_get (config, "env", "[\"HOME=/root\", \"FOO=bar\"]");
  expect_set_ok (config, "env", "FO=x=y");
  expect_set_ok (config, "env", "FOO=");
  expect_set_ok (config, "env", "_x1=\"quoted\"\ttab");
  expect_get (config, "env",
              "[\"HOME=/root\", \"FOO=\", \"FO=x=y\", \"_x1=\\\"quoted\\\"\\u0009tab\"]");
  cr_expect_eq (config->env_len, 4);
  cr_expect_null (config->env[4]);
  nsbox_config_free (config);
}

Test (config, env_keeps_at_most_1024_variables, .timeout = 5)
{
  nsbox_config *config = new_config ();
  char entry[32];
  for (int i = 1; i < 1024; i++)
    {
      snprintf (entry, sizeof entry, "V%d=x", i);
      expect_set_ok (config, "env", entry);
    }
  expect_set_fails (config, "env", "ONE_TOO_MANY=x", "too many entries in 'env' (at most 1024)");
  expect_set_ok (config, "env", "V1=replaced");
  nsbox_config_free (config);
}

Test (config, command_is_replaced_whole_and_appended_one_by_one, .timeout = 5)
{
  static const char *const argv[] = { "python3", "-I", "-" };
  nsbox_config *config = new_config ();
  struct nsbox_error *err = NULL;
  cr_assert_eq (nsbox_config_set_command (config, 3, argv, &err), 0);
  expect_get (config, "command", "[\"python3\", \"-I\", \"-\"]");
  expect_set_ok (config, "command", "--flag with space");
  expect_set_ok (config, "command", "");
  expect_get (config, "command", "[\"python3\", \"-I\", \"-\", \"--flag with space\", \"\"]");
  cr_expect_eq (config->command_len, 5);
  cr_expect_null (config->command[5]);
  cr_assert_eq (nsbox_config_set_command (config, 1, argv, &err), 0);
  expect_get (config, "command", "[\"python3\"]");
  nsbox_config_free (config);
}

Test (config, empty_command_is_rejected, .timeout = 5)
{
  static const char *const empty_program[] = { "", "x" };
  nsbox_config *config = new_config ();
  struct nsbox_error *err = NULL;
  cr_expect_eq (nsbox_config_set_command (config, 0, empty_program, &err), -EINVAL);
  cr_expect_str_eq (nsbox_error_message (err), "'command' must have at least one argument");
  nsbox_error_free (err);
  err = NULL;
  cr_expect_eq (nsbox_config_set_command (config, 2, empty_program, &err), -EINVAL);
  cr_expect_str_eq (nsbox_error_message (err), "the program in 'command' must not be empty");
  nsbox_error_free (err);
  expect_get (config, "command", "[\"python\", \"-\"]");
  nsbox_config_free (config);
}

Test (config, dup_is_deep_and_independent, .timeout = 5)
{
  nsbox_config *config = new_config ();
  expect_set_ok (config, "rootfs", "/srv/rootfs");
  expect_set_ok (config, "env", "A=1");
  nsbox_config *copy = nsbox_config_dup (config, NULL);
  cr_assert_not_null (copy);
  expect_same_config (config, copy);
  cr_expect_neq (copy->env, config->env);
  cr_expect_neq (copy->env[0], config->env[0]);
  cr_expect_neq (copy->command, config->command);
  cr_expect_neq (copy->rootfs, config->rootfs);
  expect_set_ok (copy, "env", "A=2");
  expect_get (config, "env", "[\"HOME=/tmp\", \"A=1\"]");
  nsbox_config_free (config);
  nsbox_config_free (copy);
}

Test (config, get_output_parses_back_to_the_same_value, .timeout = 5)
{
  nsbox_config *config = new_config ();
  nsbox_config *other = new_config ();
  expect_set_ok (config, "timeout", "1.5s");
  expect_set_ok (config, "memory", "1.5g");
  expect_set_ok (config, "cpus", "0.125");
  expect_set_ok (config, "tmp-size", "1000001");
  for (const struct nsbox_key_info *key = nsbox_config_keys (); key->name; key++)
    {
      if (key->repeatable)
        continue;
      char *value = nsbox_config_get (config, key->name, NULL);
      cr_assert_not_null (value);
      expect_set_ok (other, key->name, value);
      free (value);
    }
  expect_same_config (config, other);
  cr_expect_eq (other->memory_bytes, 3ULL << 29);
  nsbox_config_free (config);
  nsbox_config_free (other);
}

/* nsbox.yaml(5) is written from the rows: each documents its key (a row
 * without .doc fails the build of the page too), and the rows are the keys
 * the library knows, in the same order. */
Test (config, every_key_of_the_table_has_its_documentation)
{
  const struct nsbox_key_info *infos = nsbox_config_keys ();
  size_t n = 0;
  for (const struct config_key *key; (key = nsbox_config_key_at (n)); n++)
    {
      cr_expect (key->doc && strlen (key->doc) >= 40, "key '%s' has no documentation", key->name);
      cr_expect (key->expected && *key->expected, "key '%s' says nothing of its value", key->name);
      cr_expect_str_eq (infos[n].name, key->name);
    }
  cr_expect_null (infos[n].name, "the CLI lists %zu keys, the table has more", n);
  cr_expect_gt (n, 30);
}

/* YAML. */

Test (config, default_file_loads_to_the_defaults, .timeout = 5)
{
  nsbox_config *defaults = new_config ();
  nsbox_config *config = new_config ();
  /* Changed first so the test sees the file set them back. */
  expect_set_ok (config, "memory", "1g");
  expect_set_ok (config, "runtime", "runsc");
  expect_set_ok (config, "strict", "true");
  expect_set_ok (config, "env", "HOME=/root");
  struct nsbox_error *err = NULL;
  const char *path = source_path ("policies/nsbox.yaml");
  int r = nsbox_config_load_yaml (config, path, &err);
  cr_assert_eq (r, 0, "%s: %s", path, nsbox_error_message (err));
  expect_same_config (config, defaults);
  nsbox_config_free (defaults);
  nsbox_config_free (config);
}

Test (config, yaml_accepts_every_shape_of_value, .timeout = 5)
{
  nsbox_config *config = new_config ();
  expect_load_ok (config, "# all forms\n"
                          "image: 'registry.example/py:3'\n"
                          "rootfs: /srv/rootfs\n"
                          "runtime: auto\n"
                          "timeout: 5\n"
                          "memory: 1073741824\n"
                          "cpus: 2\n"
                          "pids-limit: 128\n"
                          "max-output-bytes: 0\n"
                          "tmp-size: \"128m\"\n"
                          "network: none\n"
                          "user: 1000\n"
                          "env: [\"A=1\", B=2]\n"
                          "command: python3 -I\n"
                          "strict: yes\n"
                          "seccomp-policy: /etc/p.yaml\n");
  expect_get (config, "image", "registry.example/py:3");
  expect_get (config, "rootfs", "/srv/rootfs");
  expect_get (config, "runtime", "auto");
  expect_get (config, "timeout", "5s");
  expect_get (config, "memory", "1g");
  expect_get (config, "cpus", "2");
  expect_get (config, "pids-limit", "128");
  expect_get (config, "max-output-bytes", "0");
  expect_get (config, "tmp-size", "128m");
  expect_get (config, "user", "1000:1000");
  expect_get (config, "env", "[\"HOME=/tmp\", \"A=1\", \"B=2\"]");
  expect_get (config, "command", "[\"python3 -I\"]");
  expect_get (config, "strict", "true");
  expect_get (config, "seccomp-policy", "/etc/p.yaml");
  expect_load_ok (config, "rootfs: ~\nseccomp-policy:\nenv:\n  A: \"x: y\"\n  HOME: /root\n");
  expect_get (config, "rootfs", "");
  expect_get (config, "seccomp-policy", "");
  expect_get (config, "env", "[\"HOME=/root\", \"A=x: y\", \"B=2\"]");
  nsbox_config_free (config);
}

Test (config, yaml_command_list_replaces_the_command, .timeout = 5)
{
  nsbox_config *config = new_config ();
  expect_load_ok (config, "command:\n  - python3\n  - -c\n  - \"\"\n");
  expect_get (config, "command", "[\"python3\", \"-c\", \"\"]");
  nsbox_config_free (config);
}

Test (config, empty_yaml_file_changes_nothing, .timeout = 5)
{
  nsbox_config *defaults = new_config ();
  nsbox_config *config = new_config ();
  expect_load_ok (config, "");
  expect_load_ok (config, "# only a comment\n\n");
  expect_same_config (config, defaults);
  nsbox_config_free (defaults);
  nsbox_config_free (config);
}

Test (config, yaml_unknown_key_names_its_position, .timeout = 5)
{
  expect_load_fails ("memory: 1g\n  \nmemroy: 2g\n", "3:1: unknown key 'memroy'");
}

Test (config, yaml_bad_value_names_key_value_and_position, .timeout = 5)
{
  expect_load_fails ("memory: 1g\ncpus:   0\n",
                     "2:9: invalid value for 'cpus': '0' (expected a number of CPUs from 0.01 "
                     "to 1024 such as 0.5)");
  expect_load_fails ("memory: -1\n",
                     "1:9: invalid value for 'memory': '-1' (expected a size such as 256m)");
  expect_load_fails ("network: host\n",
                     "1:10: invalid value for 'network': 'host' (expected none or proxy)");
}

Test (config, yaml_wrong_types_are_rejected, .timeout = 5)
{
  expect_load_fails ("memory: [1, 2]\n",
                     "1:9: wrong type for 'memory': expected a scalar, found a list");
  expect_load_fails ("memory:\n  a: 1\n",
                     "2:3: wrong type for 'memory': expected a scalar, found a mapping");
  expect_load_fails ("command: {a: b}\n",
                     "1:10: wrong type for 'command': expected a list or a string, found a "
                     "mapping");
  expect_load_fails ("command: [python, [x]]\n",
                     "1:19: wrong type for 'command': expected strings, found a list");
  expect_load_fails ("env: HOME=/\n",
                     "1:6: wrong type for 'env': expected a mapping or a list, found a scalar");
  expect_load_fails ("env: [[A=1]]\n",
                     "1:7: wrong type for 'env': expected NAME=VALUE strings, found a list");
  expect_load_fails ("env: {A: [1]}\n",
                     "1:10: wrong type for 'env': expected a string value, found a list");
  expect_load_fails ("env: {[A]: 1}\n",
                     "1:7: wrong type for 'env': expected variable names, found a list");
  expect_load_fails ("[memory]: 1g\n", "1:1: expected a key, found a list");
}

Test (config, yaml_empty_values_are_rejected, .timeout = 5)
{
  expect_load_fails ("memory:\ncpus: 1\n", "1:8: missing value for 'memory'");
  expect_load_fails ("command: ~\n", "1:10: missing value for 'command'");
  expect_load_fails ("command: []\n", "1:10: 'command' must have at least one argument");
  expect_load_fails ("command: ['', x]\n", "1:10: the program in 'command' must not be empty");
}

Test (config, yaml_duplicate_keys_are_rejected, .timeout = 5)
{
  expect_load_fails ("memory: 1g\ncpus: 1\nmemory: 2g\n", "3:1: duplicate key 'memory'");
  expect_load_fails ("env:\n  A: 1\n  A: 2\n", "3:3: duplicate key 'A' in 'env'");
}

Test (config, yaml_env_names_are_checked, .timeout = 5)
{
  expect_load_fails ("env:\n  1A: x\n",
                     "2:3: invalid variable name in 'env': '1A' (expected letters, digits and "
                     "underscores not starting with a digit)");
  expect_load_fails ("env:\n  'A=B': x\n",
                     "2:3: invalid variable name in 'env': 'A=B' (expected letters, digits and "
                     "underscores not starting with a digit)");
  expect_load_fails ("env:\n  - A=1\n  - NOPE\n",
                     "3:5: invalid value for 'env': 'NOPE' (expected NAME=VALUE with a name of "
                     "letters, digits and underscores not starting with a digit)");
}

Test (config, yaml_anchors_and_aliases_are_rejected, .timeout = 5)
{
  expect_load_fails ("memory: &m 1g\ntmp-size: *m\n", "1:9: anchors are not supported");
  expect_load_fails ("tmp-size: *m\n", "1:11: aliases are not supported");
  expect_load_fails ("memory: !!str 1g\n", "1:9: tags are not supported");
}

Test (config, yaml_multiple_documents_are_rejected, .timeout = 5)
{
  expect_load_fails ("memory: 1g\n---\nmemory: 2g\n", "2:1: multiple documents are not supported");
}

Test (config, yaml_top_level_must_be_a_mapping, .timeout = 5)
{
  expect_load_fails ("- memory\n- 1g\n", "1:1: expected a mapping of keys, found a list");
  expect_load_fails ("memory\n", "1:1: expected a mapping of keys, found a scalar");
  expect_load_fails ("---\n", "2:1: expected a mapping of keys, found a scalar");
}

Test (config, yaml_syntax_errors_name_their_position, .timeout = 5)
{
  expect_load_fails ("command: [python\ncpus: 1\n",
                     "2:5: did not find expected ',' or ']' (while parsing a flow sequence)");
  expect_load_fails ("memory: \"1g\ncpus: 1\n",
                     "3:1: found unexpected end of stream (while scanning a quoted scalar)");
  expect_load_fails ("\tmemory: 1g\n", "1:1: found character that cannot start any token "
                                       "(while scanning for the next token)");
  expect_load_fails ("image: \"a\\0b\"\n", "1:8: values must not contain a NUL character");
  expect_load_fails ("memory: 1g\nimage: \xff\n", "2:8: invalid leading UTF-8 octet");
}

Test (config, yaml_failure_leaves_the_config_unchanged, .timeout = 5)
{
  /* expect_load_fails compares the whole configuration before and after. */
  expect_load_fails ("memory: 1g\nenv: {A: 1}\ncommand: [x]\ncpus: 0\n",
                     "4:7: invalid value for 'cpus': '0' (expected a number of CPUs from 0.01 "
                     "to 1024 such as 0.5)");
}

Test (config, missing_yaml_file_is_enoent, .timeout = 5)
{
  nsbox_config *config = new_config ();
  struct nsbox_error *err = NULL;
  int r = nsbox_config_load_yaml (config, "/nonexistent/nsbox.yaml", &err);
  cr_expect_eq (r, -ENOENT);
  cr_expect_eq (nsbox_error_errno (err), ENOENT);
  cr_expect_str_eq (nsbox_error_message (err),
                    "open config '/nonexistent/nsbox.yaml': No such file or directory");
  nsbox_error_free (err);
  nsbox_config_free (config);
}

Test (config, yaml_file_over_one_mib_is_refused, .timeout = 5)
{
  size_t len = 1024 * 1024 + 1;
  char *content = malloc (len);
  cr_assert_not_null (content);
  memset (content, '#', len);
  char *path = write_temp (content, len);
  nsbox_config *config = new_config ();
  struct nsbox_error *err = NULL;
  cr_expect_eq (nsbox_config_load_yaml (config, path, &err), -EFBIG);
  char *expected = NULL;
  cr_assert_geq (asprintf (&expected, "config '%s' is larger than 1 MiB", path), 0);
  cr_expect_str_eq (nsbox_error_message (err), expected);
  unlink (path);
  free (expected);
  free (path);
  free (content);
  nsbox_error_free (err);
  nsbox_config_free (config);
}

Test (config, yaml_file_of_exactly_one_mib_is_read, .timeout = 5)
{
  size_t len = 1024 * 1024;
  char *content = malloc (len);
  cr_assert_not_null (content);
  memset (content, '#', len);
  memcpy (content, "memory: 1g\n", 11);
  content[len - 1] = '\n';
  char *path = write_temp (content, len);
  nsbox_config *config = new_config ();
  struct nsbox_error *err = NULL;
  cr_expect_eq (nsbox_config_load_yaml (config, path, &err), 0, "%s", nsbox_error_message (err));
  expect_get (config, "memory", "1g");
  unlink (path);
  free (path);
  free (content);
  nsbox_config_free (config);
}

Test (config, pull_accepts_only_missing_always_never, .timeout = 5)
{
  nsbox_config *c = nsbox_config_new (NULL);
  cr_assert_not_null (c);
  struct nsbox_error *err = NULL;
  cr_expect_eq (nsbox_config_set (c, "pull", "always", &err), 0);
  char *v = nsbox_config_get (c, "pull", NULL);
  cr_expect_str_eq (v, "always");
  free (v);
  cr_expect_eq (nsbox_config_set (c, "pull", "sometimes", &err), -EINVAL);
  cr_expect_not_null (strstr (nsbox_error_message (err), "'pull'"));
  nsbox_error_free (err);
  v = nsbox_config_get (c, "pull", NULL);
  cr_expect_str_eq (v, "always", "a failed set leaves the value unchanged");
  free (v);
  nsbox_config_free (c);
}

Test (config, store_is_a_nullable_path, .timeout = 5)
{
  nsbox_config *c = nsbox_config_new (NULL);
  cr_assert_not_null (c);
  char *v = nsbox_config_get (c, "store", NULL);
  cr_expect_str_eq (v, "");
  free (v);
  cr_expect_eq (nsbox_config_set (c, "store", "/var/tmp/store", NULL), 0);
  v = nsbox_config_get (c, "store", NULL);
  cr_expect_str_eq (v, "/var/tmp/store");
  free (v);
  nsbox_config_free (c);
}

/* inputs and output-dir */

Test (config, inputs_add_one_file_each_with_its_name, .timeout = 5)
{
  nsbox_config *config = new_config ();
  expect_get (config, "inputs", "[]");
  expect_set_ok (config, "inputs", "/data/table.csv");
  expect_set_ok (config, "inputs", "/data/a:b/c.txt:renamed.txt");
  expect_set_ok (config, "inputs", "relative.txt:r\xc3\xa9sum\xc3\xa9.txt");
  expect_get (config, "inputs",
              "[\"/data/table.csv:table.csv\", \"/data/a:b/c.txt:renamed.txt\", "
              "\"relative.txt:r\xc3\xa9sum\xc3\xa9.txt\"]");
  expect_set_ok (config, "inputs", "");
  expect_get (config, "inputs", "[]");
  nsbox_config_free (config);
}

Test (config, inputs_names_are_checked, .timeout = 5)
{
  nsbox_config *config = new_config ();
  static const char *const bad[] = {
    "/data/x:",     "/data/x:.",    "/data/x:..", "/data/x:a\nb", "/data/x:a\x7f",
    "/data/x:\xff", "/data/x:\xc3", "/data/dir/", ":name",        "/data/x:\xed\xa0\x80",
  };
  for (size_t i = 0; i < ARRAY_SIZE (bad); i++)
    expect_set_fails (config, "inputs", bad[i], NULL);
  char long_name[300];
  memset (long_name, 'a', sizeof long_name);
  memcpy (long_name, "/x:", 3);
  long_name[sizeof long_name - 1] = '\0';
  expect_set_fails (config, "inputs", long_name, NULL);
  expect_set_ok (config, "inputs", "/data/one:same");
  expect_set_fails (config, "inputs", "/data/two:same",
                    "two inputs are named 'same' (give another as PATH:NAME)");
  expect_get (config, "inputs", "[\"/data/one:same\"]");
  nsbox_config_free (config);
}

Test (config, inputs_are_capped_at_64, .timeout = 5)
{
  nsbox_config *config = new_config ();
  for (int i = 0; i < 64; i++)
    {
      char spec[32];
      snprintf (spec, sizeof spec, "/data/f%d", i);
      expect_set_ok (config, "inputs", spec);
    }
  expect_set_fails (config, "inputs", "/data/f64", "too many entries in 'inputs' (at most 64)");
  nsbox_config_free (config);
}

Test (config, yaml_inputs_list_and_output_dir, .timeout = 5)
{
  nsbox_config *config = new_config ();
  expect_load_ok (config,
                  "inputs:\n  - /data/a.csv\n  - /data/b.txt:b2.txt\noutput-dir: /srv/out\n");
  expect_get (config, "inputs", "[\"/data/a.csv:a.csv\", \"/data/b.txt:b2.txt\"]");
  expect_get (config, "output-dir", "/srv/out");
  nsbox_config *copy = nsbox_config_dup (config, NULL);
  cr_assert_not_null (copy);
  expect_get (copy, "inputs", "[\"/data/a.csv:a.csv\", \"/data/b.txt:b2.txt\"]");
  nsbox_config_free (copy);
  expect_load_ok (config, "inputs: ~\noutput-dir: ~\n");
  expect_get (config, "inputs", "[]");
  expect_get (config, "output-dir", "");
  nsbox_config_free (config);
  expect_load_fails ("inputs:\n  - /data/a.csv:../x\n",
                     "2:5: input '/data/a.csv:../x': name '../x' is not allowed in /mnt/in: it "
                     "holds a '/' or ':' (give one as PATH:NAME)");
  expect_load_fails ("inputs:\n  - \"\"\n", "2:5: empty entry in 'inputs'");
  expect_load_fails ("inputs:\n  a: b\n", "2:3: wrong type for 'inputs': expected a list of "
                                          "strings, found a mapping");
}
