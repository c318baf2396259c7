/* `nsbox serve` and `nsbox mcp`: their flags, profiles and pool settings,
 * read into the options of serve.h and mcp.h. */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "error.h"
#include "mcp.h"
#include "nsbox.h"
#include "pool.h"
#include "serve.h"
#include "units.h"
#include "util.h"

static const struct option serve_options[] = {
  { "listen", required_argument, NULL, OPT_LISTEN },
  { "token-file", required_argument, NULL, OPT_TOKEN_FILE },
  { "profile", required_argument, NULL, OPT_PROFILE_FILE },
  { "max-concurrent", required_argument, NULL, OPT_MAX_CONCURRENT },
  { "max-queue", required_argument, NULL, OPT_MAX_QUEUE },
  { "max-request-bytes", required_argument, NULL, OPT_MAX_REQUEST_BYTES },
  { "pool-size", required_argument, NULL, OPT_POOL_SIZE },
  { "pool-max-age", required_argument, NULL, OPT_POOL_MAX_AGE },
  { "pool-refill", required_argument, NULL, OPT_POOL_REFILL },
  { "pool-sandboxes", required_argument, NULL, OPT_POOL_SANDBOXES },
  { "max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS },
  { "max-connections-per-peer", required_argument, NULL, OPT_MAX_PER_PEER },
  { "header-timeout", required_argument, NULL, OPT_HEADER_TIMEOUT },
  { "body-timeout", required_argument, NULL, OPT_BODY_TIMEOUT },
  { "idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT },
  { "max-sandboxes", required_argument, NULL, OPT_MAX_SANDBOXES },
  { "max-sandboxes-per-client", required_argument, NULL, OPT_MAX_SANDBOXES_PER_CLIENT },
  { "node-name", required_argument, NULL, OPT_NODE_NAME },
  { "drain-grace", required_argument, NULL, OPT_DRAIN_GRACE },
};
static const struct option mcp_options[] = {
  { "max-concurrent", required_argument, NULL, OPT_MAX_CONCURRENT },
  { "max-queue", required_argument, NULL, OPT_MAX_QUEUE },
  { "pool-size", required_argument, NULL, OPT_POOL_SIZE },
  { "pool-max-age", required_argument, NULL, OPT_POOL_MAX_AGE },
  { "pool-refill", required_argument, NULL, OPT_POOL_REFILL },
  { "pool-sandboxes", required_argument, NULL, OPT_POOL_SANDBOXES },
};

/* ---- nsbox serve ---- */

static int
set_count (const char *flag, const char *value, uint64_t min, uint64_t max, uint64_t *out)
{
  uint64_t v = 0;
  if (!value || nsbox_parse_count (value, &v) < 0 || v < min || v > max)
    return cli_fail ("invalid value '%s' for --%s: expected a number from %llu to %llu",
                     value ? value : "", flag, (unsigned long long)min, (unsigned long long)max);
  *out = v;
  return 0;
}

static int
add_profile (struct nsbox_serve_profile *profiles, size_t *n, const char *name,
             nsbox_config *config)
{
  /* Every client's run would read the server's files or write into the
   * server's directory, with no per-client bound. */
  cleanup_free char *inputs = nsbox_config_get (config, "inputs", NULL);
  cleanup_free char *output_dir = nsbox_config_get (config, "output-dir", NULL);
  if ((inputs && strcmp (inputs, "[]") != 0) || (output_dir && *output_dir))
    {
      nsbox_config_free (config);
      return cli_fail ("profile '%s' sets %s: a server does not share the host's files with its "
                       "clients",
                       name, output_dir && *output_dir ? "output-dir" : "inputs");
    }
  if (*n >= NSBOX_SERVE_MAX_PROFILES)
    {
      nsbox_config_free (config);
      return cli_fail ("at most %d profiles", NSBOX_SERVE_MAX_PROFILES);
    }
  for (size_t i = 0; i < *n; i++)
    if (strcmp (profiles[i].name, name) == 0)
      {
        nsbox_config_free (config);
        return cli_fail ("profile '%s' is given twice", name);
      }
  snprintf (profiles[*n].name, sizeof profiles[*n].name, "%s", name);
  profiles[(*n)++].config = config;
  return 0;
}

/* The server's own audit settings (its flags and --config) reach every
 * profile that names no audit log of its own: no profile goes unaudited
 * by accident. */
static int
inherit_audit (const nsbox_config *server, nsbox_config *profile, struct nsbox_error **err)
{
  cleanup_free char *mine = nsbox_config_get (profile, "audit-log", err);
  cleanup_free char *theirs = nsbox_config_get (server, "audit-log", err);
  cleanup_free char *code = nsbox_config_get (server, "audit-code", err);
  if (!mine || !theirs || !code)
    return -ENOMEM;
  if (*mine || !*theirs)
    return 0;
  if (nsbox_config_set (profile, "audit-log", theirs, err) < 0)
    return -EINVAL;
  return nsbox_config_set (profile, "audit-code", code, err);
}

static int
serve_profiles (const struct cli *cli, struct nsbox_serve_profile *profiles, size_t *n)
{
  cleanup_error struct nsbox_error *err = NULL;
  nsbox_config *config = nsbox_config_new (&err);
  if (!config)
    return cli_fail ("%s", nsbox_error_message (err));
  if (cli_configure (cli, config) != 0)
    {
      nsbox_config_free (config);
      return EXIT_NSBOX_FAILED;
    }
  if (add_profile (profiles, n, "default", config) != 0)
    return EXIT_NSBOX_FAILED;
  for (size_t i = 0; i < cli->n_profiles; i++)
    {
      const char *spec = cli->profiles[i], *eq = strchr (spec, '=');
      size_t nl = eq ? (size_t)(eq - spec) : 0;
      if (!eq || nl == 0 || nl >= sizeof profiles[0].name || !eq[1]
          || strspn (spec, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
                 != nl)
        return cli_fail ("--profile '%s': expected NAME=CONFIG.yaml (NAME: letters, digits, _ -)",
                         spec);
      char name[64];
      snprintf (name, sizeof name, "%.*s", (int)nl, spec);
      nsbox_config *pc = nsbox_config_new (&err);
      if (!pc || nsbox_config_load_yaml (pc, eq + 1, &err) < 0
          || inherit_audit (config, pc, &err) < 0)
        {
          nsbox_config_free (pc);
          return cli_fail ("profile '%s': %s", name, nsbox_error_message (err));
        }
      if (add_profile (profiles, n, name, pc) != 0)
        return EXIT_NSBOX_FAILED;
    }
  return 0;
}

/* The pool options shared with serve: --pool-size, --pool-max-age,
 * --pool-refill, --pool-sandboxes. */
static int
pool_settings (const struct cli *cli, nsbox_pool_options *options)
{
  cleanup_error struct nsbox_error *err = NULL;
  static const struct
  {
    int opt;
    const char *key;
  } pool_keys[] = { { OPT_POOL_SIZE, "size" },
                    { OPT_POOL_MAX_AGE, "max-age" },
                    { OPT_POOL_REFILL, "refill-concurrency" },
                    { OPT_POOL_SANDBOXES, "sandboxes" } };
  for (size_t i = 0; i < ARRAY_SIZE (pool_keys); i++)
    if (cli_extra (cli, pool_keys[i].opt)
        && nsbox_pool_options_set (options, pool_keys[i].key, cli_extra (cli, pool_keys[i].opt),
                                   &err)
               < 0)
      return cli_fail ("%s", nsbox_error_message (err));
  return 0;
}

/* --node-name, else the host's name up to its first dot. */
static int
node_name (const char *flag, const char **out)
{
  static char host[256];
  if (flag)
    {
      if (!nsbox_serve_node_valid (flag))
        return cli_fail ("invalid value '%s' for --node-name: expected 1 to %d lowercase letters, "
                         "digits and '-', neither first nor last (a DNS label)",
                         flag, NSBOX_SERVE_NODE_MAX);
      *out = flag;
      return 0;
    }
  if (gethostname (host, sizeof host - 1) < 0)
    return cli_fail ("the host's name: %s: give --node-name", strerror (errno));
  host[sizeof host - 1] = '\0';
  host[strcspn (host, ".")] = '\0';
  for (char *p = host; *p; p++)
    if (*p >= 'A' && *p <= 'Z')
      *p = (char)(*p - 'A' + 'a');
  if (!nsbox_serve_node_valid (host))
    return cli_fail ("the host's name '%s' is not a node name (a DNS label): give --node-name",
                     host);
  *out = host;
  return 0;
}

static int
serve_settings (const struct cli *cli, struct nsbox_serve_options *o)
{
  long ncpu = sysconf (_SC_NPROCESSORS_ONLN);
  o->listen = cli_extra (cli, OPT_LISTEN);
  o->token_file = cli_extra (cli, OPT_TOKEN_FILE);
  if (node_name (cli_extra (cli, OPT_NODE_NAME), &o->node_name) != 0)
    return EXIT_NSBOX_FAILED;
  o->max_concurrent = ncpu > 0 ? (uint64_t)ncpu : 2;
  o->max_queue = 64;
  o->max_sandboxes = 64;
  o->max_sandboxes_per_client = 16;
  o->max_request_bytes = MAX_CODE_BYTES;
  if ((cli_extra (cli, OPT_MAX_CONCURRENT)
       && set_count ("max-concurrent", cli_extra (cli, OPT_MAX_CONCURRENT), 1, 4096,
                     &o->max_concurrent)
              != 0)
      || (cli_extra (cli, OPT_MAX_QUEUE)
          && set_count ("max-queue", cli_extra (cli, OPT_MAX_QUEUE), 0, 65536, &o->max_queue) != 0)
      || (cli_extra (cli, OPT_MAX_SANDBOXES)
          && set_count ("max-sandboxes", cli_extra (cli, OPT_MAX_SANDBOXES), 0, 4096,
                        &o->max_sandboxes)
                 != 0)
      || (cli_extra (cli, OPT_MAX_SANDBOXES_PER_CLIENT)
          && set_count ("max-sandboxes-per-client", cli_extra (cli, OPT_MAX_SANDBOXES_PER_CLIENT),
                        1, 4096, &o->max_sandboxes_per_client)
                 != 0))
    return EXIT_NSBOX_FAILED;
  if (cli_extra (cli, OPT_MAX_REQUEST_BYTES))
    {
      uint64_t v = 0;
      if (nsbox_parse_size (cli_extra (cli, OPT_MAX_REQUEST_BYTES), &v) < 0 || v == 0
          || v > MAX_CODE_BYTES)
        return cli_fail ("invalid value '%s' for --max-request-bytes: expected a size up to 64m",
                         cli_extra (cli, OPT_MAX_REQUEST_BYTES));
      o->max_request_bytes = v;
    }
  o->max_connections = 1024;
  o->header_timeout_ms = 10000;
  o->body_timeout_ms = o->idle_timeout_ms = 60000;
  if ((cli_extra (cli, OPT_MAX_CONNECTIONS)
       && set_count ("max-connections", cli_extra (cli, OPT_MAX_CONNECTIONS), 1, 65536,
                     &o->max_connections)
              != 0)
      || (cli_extra (cli, OPT_MAX_PER_PEER)
          && set_count ("max-connections-per-peer", cli_extra (cli, OPT_MAX_PER_PEER), 1, 65536,
                        &o->max_connections_per_peer)
                 != 0))
    return EXIT_NSBOX_FAILED;
  const struct
  {
    int opt;
    const char *flag;
    uint64_t *ms;
  } timeouts[] = {
    { OPT_HEADER_TIMEOUT, "header-timeout", &o->header_timeout_ms },
    { OPT_BODY_TIMEOUT, "body-timeout", &o->body_timeout_ms },
    { OPT_IDLE_TIMEOUT, "idle-timeout", &o->idle_timeout_ms },
  };
  const char *grace = cli_extra (cli, OPT_DRAIN_GRACE);
  if (grace
      && (nsbox_parse_duration (grace, &o->drain_grace_ms) < 0 || o->drain_grace_ms > 3600000))
    return cli_fail ("invalid value '%s' for --drain-grace: expected a duration up to 1h", grace);
  for (size_t i = 0; i < ARRAY_SIZE (timeouts); i++)
    {
      const char *value = cli_extra (cli, timeouts[i].opt);
      if (value
          && (nsbox_parse_duration (value, timeouts[i].ms) < 0 || *timeouts[i].ms < 1000
              || *timeouts[i].ms > 3600000))
        return cli_fail ("invalid value '%s' for --%s: expected a duration from 1s to 1h", value,
                         timeouts[i].flag);
    }
  return pool_settings (cli, o->pool_options);
}

int
cmd_serve (int argc, char **argv)
{
  struct cli cli = { .extra = serve_options, .n_extra = ARRAY_SIZE (serve_options) };
  int ret = cli_parse_args (&cli, argc, argv);
  cleanup_free struct setting *settings = cli.settings;
  cleanup_free const char **profiles_arg = cli.profiles;
  if (ret != 0)
    return ret;
  if (cli.json)
    return cli_fail ("--json is not a serve option: every answer is JSON");
  cleanup_error struct nsbox_error *err = NULL;
  struct nsbox_serve_options o = { .pool_options = nsbox_pool_options_new (&err) };
  if (!o.pool_options)
    return cli_fail ("%s", nsbox_error_message (err));
  struct nsbox_serve_profile profiles[NSBOX_SERVE_MAX_PROFILES];
  memset (profiles, 0, sizeof profiles);
  size_t n = 0;
  ret = serve_settings (&cli, &o);
  if (ret == 0)
    ret = serve_profiles (&cli, profiles, &n);
  if (ret == 0)
    ret = nsbox_serve (profiles, n, &o);
  else
    for (size_t i = 0; i < n; i++)
      nsbox_config_free (profiles[i].config);
  nsbox_pool_options_free (o.pool_options);
  return ret;
}

/* ---- nsbox mcp ---- */

int
cmd_mcp (int argc, char **argv)
{
  struct cli cli = { .extra = mcp_options, .n_extra = ARRAY_SIZE (mcp_options) };
  int ret = cli_parse_args (&cli, argc, argv);
  cleanup_free struct setting *settings = cli.settings;
  cleanup_free const char **profiles = cli.profiles;
  if (ret != 0)
    return ret;
  if (cli.json)
    return cli_fail ("--json is not an mcp option: every answer is JSON-RPC");
  if (cli.command_len > 0)
    return cli_fail ("nsbox mcp takes no command; set it in the --config file");
  long ncpu = sysconf (_SC_NPROCESSORS_ONLN);
  struct nsbox_mcp_options o = { .version = NSBOX_VERSION,
                                 .max_concurrent = ncpu > 0 ? (uint64_t)ncpu : 2,
                                 .max_queue = 1024 };
  if ((cli_extra (&cli, OPT_MAX_CONCURRENT)
       && set_count ("max-concurrent", cli_extra (&cli, OPT_MAX_CONCURRENT), 1, 256,
                     &o.max_concurrent)
              != 0)
      || (cli_extra (&cli, OPT_MAX_QUEUE)
          && set_count ("max-queue", cli_extra (&cli, OPT_MAX_QUEUE), 0, 65536, &o.max_queue) != 0))
    return EXIT_NSBOX_FAILED;
  cleanup_error struct nsbox_error *err = NULL;
  o.pool_options = nsbox_pool_options_new (&err);
  if (!o.pool_options)
    return cli_fail ("%s", nsbox_error_message (err));
  nsbox_config *config = nsbox_config_new (&err);
  if (!config)
    ret = cli_fail ("%s", nsbox_error_message (err));
  if (ret == 0)
    ret = cli_configure (&cli, config);
  if (ret == 0)
    ret = pool_settings (&cli, o.pool_options);
  if (ret == 0)
    ret = nsbox_mcp (TAKE_PTR (config), &o);
  nsbox_config_free (config);
  nsbox_pool_options_free (o.pool_options);
  return ret;
}
