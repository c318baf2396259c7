/* The nsbox command line. The only place that prints and picks exit codes. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "audit.h"
#include "config.h"
#include "doctor.h"
#include "error.h"
#include "fileio.h"
#include "image.h"
#include "mcp.h"
#include "nsbox.h"
#include "client.h"
#include "pool.h"
#include "quota.h"
#include "repl.h"
#include "result.h"
#include "seccomp.h"
#include "serve.h"
#include "units.h"
#include "util.h"

#define NSBOX_VERSION "0.1.0"
#define EXIT_NSBOX_FAILED 125
#define EXIT_TIMED_OUT 124
#define EXIT_OOM 137
#define EXIT_REFUSED 75 /* EX_TEMPFAIL: a quota refused the run; try later */
/* Code arrives on stdin; beyond this it is refused, not truncated. */
#define MAX_CODE_BYTES (64u << 20)

enum
{
  OPT_CONFIG = 1000,
  OPT_JSON,
  OPT_HELP,
  /* nsbox run */
  OPT_SERVER,
  OPT_PROFILE,
  OPT_TOKEN_FILE,
  OPT_FORMAT,
  /* nsbox serve */
  OPT_LISTEN,
  OPT_PROFILE_FILE,
  OPT_MAX_CONCURRENT,
  OPT_MAX_QUEUE,
  OPT_MAX_REQUEST_BYTES,
  OPT_POOL_SIZE,
  OPT_POOL_MAX_AGE,
  OPT_POOL_REFILL,
  OPT_MAX_CONNECTIONS,
  OPT_MAX_PER_PEER,
  OPT_HEADER_TIMEOUT,
  OPT_BODY_TIMEOUT,
  OPT_IDLE_TIMEOUT,
  OPT_LAST_EXTRA = OPT_IDLE_TIMEOUT,
  OPT_KEY_BASE = 2000,
};

/* The options of a command besides the configuration keys. */
static const struct option run_options[] = {
  { "server", required_argument, NULL, OPT_SERVER },
  { "profile", required_argument, NULL, OPT_PROFILE },
  { "token-file", required_argument, NULL, OPT_TOKEN_FILE },
  { "format", required_argument, NULL, OPT_FORMAT },
};
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
  { "max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS },
  { "max-connections-per-peer", required_argument, NULL, OPT_MAX_PER_PEER },
  { "header-timeout", required_argument, NULL, OPT_HEADER_TIMEOUT },
  { "body-timeout", required_argument, NULL, OPT_BODY_TIMEOUT },
  { "idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT },
};
static const struct option mcp_options[] = {
  { "max-concurrent", required_argument, NULL, OPT_MAX_CONCURRENT },
  { "max-queue", required_argument, NULL, OPT_MAX_QUEUE },
  { "pool-size", required_argument, NULL, OPT_POOL_SIZE },
  { "pool-max-age", required_argument, NULL, OPT_POOL_MAX_AGE },
  { "pool-refill", required_argument, NULL, OPT_POOL_REFILL },
};

struct setting
{
  const char *key;
  const char *value;
};

struct cli
{
  const char *config_file;
  bool json;
  bool text; /* --format text */
  struct setting *settings;
  size_t nsettings;
  char **command;
  size_t command_len;
  const struct option *extra; /* run_options, serve_options or mcp_options */
  size_t n_extra;
  /* The values of the extra options, indexed by option - OPT_SERVER. */
  const char *extra_value[OPT_LAST_EXTRA - OPT_SERVER + 1];
  const char **profiles; /* serve: --profile NAME=FILE, in order */
  size_t n_profiles;
};

static void
usage (FILE *out)
{
  fprintf (
      out,
      "usage: nsbox run [OPTIONS] [-- COMMAND [ARG...]] < code.py\n"
      "       nsbox run --server unix:PATH|http://HOST:PORT [--profile NAME]\n"
      "                 [--token-file FILE] [--timeout T] [--max-output-bytes N] < code.py\n"
      "       nsbox serve [OPTIONS] [--listen unix:PATH|tcp:ADDR:PORT] [--token-file FILE]\n"
      "                 [--profile NAME=CONFIG.yaml]... [--max-concurrent N] [--max-queue N]\n"
      "                 [--max-request-bytes SIZE] [--pool-size N] [--pool-max-age T]\n"
      "                 [--pool-refill N] [--max-connections N] [--max-connections-per-peer N]\n"
      "                 [--header-timeout T] [--body-timeout T] [--idle-timeout T]\n"
      "       nsbox mcp [OPTIONS] [--max-concurrent N] [--max-queue N] [--pool-size N]\n"
      "                 [--pool-max-age T] [--pool-refill N]\n"
      "       nsbox repl [OPTIONS] [--json]   (a live sandbox: each block ends at an empty line)\n"
      "       nsbox check-policy FILE\n"
      "       nsbox audit verify FILE\n"
      "       nsbox doctor [--json] [OPTIONS]\n"
      "       nsbox --version\n\n"
      "Runs the code on stdin in a fresh, single-use sandbox (default command:\n"
      "python -). Precedence: built-in defaults < --config FILE < flags.\n\n"
      "options:\n"
      "  --config FILE          load a YAML configuration (see policies/nsbox.yaml)\n"
      "  --json                 print the result as one JSON object on stdout\n"
      "  --format FORMAT        run: plain (the program's output, the default), json\n"
      "                         (--json) or text (the result as text for a model)\n");
  for (const struct nsbox_key_info *k = nsbox_config_keys (); k->name; k++)
    {
      char flag[64];
      snprintf (flag, sizeof flag, "--%s%s", strcmp (k->name, "inputs") == 0 ? "input" : k->name,
                k->is_boolean ? "" : " VALUE");
      fprintf (out, "  %-22s %s\n", flag, k->help);
    }
  fprintf (out, "\nexit status: the program's own; 124 timed out; 137 killed by the memory "
                "limit;\n125 nsbox could not run it; 75 a quota refused it.\n");
}

static int __attribute__ ((format (printf, 1, 2))) fail (const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  nsbox_vprint_message ("nsbox", fmt, ap);
  va_end (ap);
  return EXIT_NSBOX_FAILED;
}

/* getopt_long options built from the one key table. */
static struct option *
build_options (const struct cli *cli)
{
  size_t n = 0;
  const struct nsbox_key_info *keys = nsbox_config_keys ();
  while (keys[n].name)
    n++;
  struct option *opts = calloc (n + 5 + cli->n_extra, sizeof *opts);
  if (!opts)
    return NULL;
  for (size_t i = 0; i < n; i++)
    opts[i]
        = (struct option){ keys[i].name, keys[i].is_boolean ? optional_argument : required_argument,
                           NULL, OPT_KEY_BASE + (int)i };
  opts[n] = (struct option){ "config", required_argument, NULL, OPT_CONFIG };
  opts[n + 1] = (struct option){ "json", no_argument, NULL, OPT_JSON };
  opts[n + 2] = (struct option){ "help", no_argument, NULL, OPT_HELP };
  for (size_t i = 0; i < cli->n_extra; i++)
    opts[n + 3 + i] = cli->extra[i];
  /* --input PATH[:NAME] adds one entry to `inputs`. */
  for (size_t i = 0; i < n; i++)
    if (strcmp (keys[i].name, "inputs") == 0)
      opts[n + 3 + cli->n_extra]
          = (struct option){ "input", required_argument, NULL, OPT_KEY_BASE + (int)i };
  return opts;
}

static int
parse_args (struct cli *cli, int argc, char **argv)
{
  cleanup_free struct option *opts = build_options (cli);
  cli->settings = calloc ((size_t)argc, sizeof *cli->settings);
  cli->profiles = calloc ((size_t)argc, sizeof *cli->profiles);
  if (!opts || !cli->settings || !cli->profiles)
    return fail ("%s", "out of memory");
  const struct nsbox_key_info *keys = nsbox_config_keys ();
  optind = 1;
  opterr = 0;
  int c;
  while ((c = getopt_long (argc, argv, "+", opts, NULL)) != -1)
    {
      if (c == OPT_CONFIG)
        cli->config_file = optarg;
      else if (c == OPT_JSON)
        cli->json = true;
      else if (c == OPT_HELP)
        {
          usage (stdout);
          exit (0);
        }
      else if (c == OPT_PROFILE_FILE)
        cli->profiles[cli->n_profiles++] = optarg;
      else if (c >= OPT_SERVER && c <= OPT_LAST_EXTRA)
        cli->extra_value[c - OPT_SERVER] = optarg;
      else if (c >= OPT_KEY_BASE)
        {
          const struct nsbox_key_info *k = &keys[c - OPT_KEY_BASE];
          cli->settings[cli->nsettings++]
              = (struct setting){ k->name, optarg ? optarg : (k->is_boolean ? "true" : "") };
        }
      else if (optopt)
        return fail ("option '%s' needs a value (see nsbox run --help)", argv[optind - 1]);
      else
        return fail ("unknown option '%s' (see nsbox run --help)", argv[optind - 1]);
    }
  cli->command = argv + optind;
  cli->command_len = (size_t)(argc - optind);
  return 0;
}

static int
configure (const struct cli *cli, nsbox_config *config)
{
  cleanup_error struct nsbox_error *err = NULL;
  if (cli->config_file && nsbox_config_load_yaml (config, cli->config_file, &err) < 0)
    return fail ("%s", nsbox_error_message (err));
  for (size_t i = 0; i < cli->nsettings; i++)
    if (nsbox_config_set (config, cli->settings[i].key, cli->settings[i].value, &err) < 0)
      return fail ("%s", nsbox_error_message (err));
  if (cli->command_len > 0
      && nsbox_config_set_command (config, cli->command_len, (const char *const *)cli->command,
                                   &err)
             < 0)
    return fail ("%s", nsbox_error_message (err));
  return 0;
}

/* The CLI resolves `image` itself, before it reads the code, and runs the
 * rootfs with the image's Env as base environment. Linked with
 * image_tool.c, it asks nsbox-image, which passes the store's shared lock:
 * `nsbox-image gc` cannot remove the tree before this process exits. */
static int
resolve_image (nsbox_config *config, struct nsbox_image *image)
{
  cleanup_error struct nsbox_error *err = NULL;
  if (nsbox_image_hold (config->store, config->image, config->pull, image, &err) < 0
      || nsbox_config_set (config, "rootfs", image->rootfs, &err) < 0)
    return fail ("%s", nsbox_error_message (err));
  size_t len = 0;
  while (image->env[len])
    len++;
  if (nsbox_config_set_base_env (config, (const char *const *)image->env, len, &err) < 0
      || nsbox_config_set_image_digest (config, image->digest, &err) < 0)
    return fail ("%s", nsbox_error_message (err));
  return 0;
}

static int
read_code (char **code, size_t *len)
{
  size_t alloc = 65536, used = 0;
  char *buf = malloc (alloc);
  if (!buf)
    return fail ("%s", "out of memory");
  for (;;)
    {
      if (used == alloc)
        {
          /* One spare byte past the cap tells "exactly 64 MiB" from "more". */
          size_t want = alloc >= MAX_CODE_BYTES ? MAX_CODE_BYTES + 1 : alloc * 2;
          if (used > MAX_CODE_BYTES)
            {
              free (buf);
              return fail ("code on stdin exceeds %u MiB", MAX_CODE_BYTES >> 20);
            }
          char *grown = realloc (buf, want);
          if (!grown)
            {
              free (buf);
              return fail ("%s", "out of memory");
            }
          buf = grown;
          alloc = want;
        }
      ssize_t n = read (STDIN_FILENO, buf + used, alloc - used);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          free (buf);
          return fail ("read code from stdin: %s", strerror (errno));
        }
      if (n == 0)
        break;
      used += (size_t)n;
    }
  *code = buf;
  *len = used;
  return 0;
}

/* What the CLI shows of a result (a local one, or one rebuilt from the
 * JSON a server answered). */
struct shown
{
  const char *out, *err;
  size_t out_len, err_len;
  bool out_truncated, err_truncated, timed_out, oom_killed;
  uint64_t out_omitted, err_omitted;
  int exit_code;
  const char *refusal; /* the quota that refused the run, or NULL */
};

static struct shown
shown_of_result (const nsbox_result *res)
{
  struct shown v = { 0 };
  v.out = nsbox_result_stdout (res, &v.out_len);
  v.err = nsbox_result_stderr (res, &v.err_len);
  v.out_truncated = nsbox_result_stdout_truncated (res);
  v.err_truncated = nsbox_result_stderr_truncated (res);
  v.out_omitted = nsbox_result_stdout_omitted_bytes (res);
  v.err_omitted = nsbox_result_stderr_omitted_bytes (res);
  v.timed_out = nsbox_result_timed_out (res);
  v.oom_killed = nsbox_result_oom_killed (res);
  v.exit_code = nsbox_result_exit_code (res);
  v.refusal = nsbox_result_quota_refusal (res);
  return v;
}

static int
exit_status (const struct shown *v)
{
  if (v->refusal)
    return EXIT_REFUSED;
  if (v->timed_out)
    return EXIT_TIMED_OUT;
  if (v->oom_killed)
    return EXIT_OOM;
  return v->exit_code;
}

/* The program's output and nsbox's notes. `config` gives the limits named
 * in the notes; NULL when a server's profile set them. */
static int
show (const struct shown *v, const nsbox_config *config)
{
  nsbox_write_all (STDOUT_FILENO, v->out, v->out_len);
  nsbox_write_all (STDERR_FILENO, v->err, v->err_len);
  /* Through a server its profile set the limits: the notes name none. */
  cleanup_free char *cap = config ? nsbox_config_get (config, "max-output-bytes", NULL) : NULL;
  cleanup_free char *t = config ? nsbox_config_get (config, "timeout", NULL) : NULL;
  cleanup_free char *m = config ? nsbox_config_get (config, "memory", NULL) : NULL;
  if (v->out_truncated)
    fprintf (stderr, "nsbox: stdout truncated%s%s%s, %" PRIu64 " bytes omitted\n",
             cap ? " at " : "", cap ? cap : "", cap ? " bytes" : "", v->out_omitted);
  if (v->err_truncated)
    fprintf (stderr, "nsbox: stderr truncated%s%s%s, %" PRIu64 " bytes omitted\n",
             cap ? " at " : "", cap ? cap : "", cap ? " bytes" : "", v->err_omitted);
  if (v->timed_out)
    fprintf (stderr, "nsbox: timed out%s%s\n", t ? " after " : "", t ? t : "");
  else if (v->oom_killed)
    fprintf (stderr, "nsbox: killed by the memory limit%s%s%s\n", m ? " (" : "", m ? m : "",
             m ? ")" : "");
  return exit_status (v);
}

static int
report (const struct cli *cli, const nsbox_config *config, const nsbox_result *res)
{
  struct shown v = shown_of_result (res);
  if (cli->text)
    {
      cleanup_error struct nsbox_error *err = NULL;
      cleanup_free char *text = nsbox_result_to_text (res, &err);
      if (!text)
        return fail ("%s", nsbox_error_message (err));
      nsbox_write_all (STDOUT_FILENO, text, strlen (text));
      return exit_status (&v);
    }
  if (cli->json)
    {
      cleanup_error struct nsbox_error *err = NULL;
      cleanup_free char *json = nsbox_result_to_json (res, &err);
      if (!json)
        return fail ("%s", nsbox_error_message (err));
      nsbox_write_all (STDOUT_FILENO, json, strlen (json));
      nsbox_write_all (STDOUT_FILENO, "\n", 1);
      return exit_status (&v);
    }
  if (v.refusal)
    {
      /* The same words a model reads (nsbox_result_to_text). */
      cleanup_error struct nsbox_error *err = NULL;
      cleanup_free char *text = nsbox_result_to_text (res, &err);
      fprintf (stderr, "nsbox: %s", text ? text : "refused by a quota\n");
      return exit_status (&v);
    }
  /* What /tmp/out held and output-dir did not get; control characters of
   * a name shown as '?' (nsbox_printable). */
  for (size_t i = 0; i < nsbox_result_refused_count (res); i++)
    {
      cleanup_free char *name = nsbox_printable (nsbox_result_refused_name (res, i));
      cleanup_free char *why = nsbox_printable (nsbox_result_refused_reason (res, i));
      fprintf (stderr, "nsbox: not collected: %s (%s)\n", name ? name : "?", why ? why : "?");
    }
  return show (&v, config);
}

/* ---- nsbox run --server ---- */

static const char *
extra (const struct cli *cli, int opt)
{
  return cli->extra_value[opt - OPT_SERVER];
}

/* --format plain|json|text; --json is --format json. */
static int
choose_format (struct cli *cli)
{
  const char *format = extra (cli, OPT_FORMAT);
  if (!format)
    return 0;
  bool json = strcmp (format, "json") == 0, text = strcmp (format, "text") == 0;
  if (!json && !text && strcmp (format, "plain") != 0)
    return fail ("invalid value '%s' for --format: expected plain, json or text", format);
  if (cli->json && !json)
    return fail ("--json conflicts with --format %s", format);
  cli->json = json;
  cli->text = text;
  return 0;
}

static int
read_token_file (const char *path, char **token)
{
  cleanup_free char *data = NULL;
  size_t len = 0;
  cleanup_error struct nsbox_error *err = NULL;
  if (nsbox_read_file (path, 4096, "token file", &data, &len, &err) < 0)
    return fail ("%s", nsbox_error_message (err));
  data[strcspn (data, "\r\n")] = '\0';
  *token = TAKE_PTR (data);
  return 0;
}

/* The request: the code, the profile, and every configuration flag as a
 * key of the one vocabulary (the server refuses what a run cannot change). */
static char *
run_request (const struct cli *cli, const char *code, size_t len)
{
  json_t *o = json_object ();
  if (!o || json_object_set_new (o, "code", json_stringn (code, len)) < 0)
    {
      json_decref (o);
      return NULL;
    }
  if (extra (cli, OPT_PROFILE))
    json_object_set_new (o, "profile", json_string (extra (cli, OPT_PROFILE)));
  for (size_t i = 0; i < cli->nsettings; i++)
    json_object_set_new (o, cli->settings[i].key, json_string (cli->settings[i].value));
  char *text = json_dumps (o, JSON_COMPACT);
  json_decref (o);
  return text;
}

/* A server's answer goes through the same rendering as a local result,
 * rebuilt from its JSON; --json prints the answer as it came. */
static int
report_answer (const struct cli *cli, long status, const char *answer, size_t len)
{
  json_error_t jerr;
  json_t *o = json_loadb (answer, len, JSON_ALLOW_NUL, &jerr);
  if (!o || !json_is_object (o))
    {
      json_decref (o);
      return fail ("the server answered %ld with a body that is not a JSON object", status);
    }
  /* 429: a quota refused the run; the body is its result. */
  if (status != 200 && !(status == 429 && json_object_get (o, "quota_refusal")))
    {
      const char *msg = json_string_value (json_object_get (o, "error"));
      int r = fail ("the server refused the run (HTTP %ld): %s", status, msg ? msg : "?");
      json_decref (o);
      return r;
    }
  json_decref (o);
  nsbox_result *res = NULL;
  cleanup_error struct nsbox_error *err = NULL;
  if (nsbox_result_from_json (answer, len, &res, &err) < 0)
    return fail ("the server's result: %s", nsbox_error_message (err));
  int r;
  if (cli->json)
    {
      struct shown v = shown_of_result (res);
      nsbox_write_all (STDOUT_FILENO, answer, len);
      nsbox_write_all (STDOUT_FILENO, "\n", 1);
      r = exit_status (&v);
    }
  else
    r = report (cli, NULL, res);
  nsbox_result_free (res);
  return r;
}

static int
run_on_server (const struct cli *cli, const char *code, size_t len)
{
  if (cli->command_len > 0)
    return fail ("a command (-- COMMAND) cannot be sent to a server: its profile sets it");
  if (cli->config_file)
    return fail ("--config cannot be sent to a server: its profiles set the configuration");
  for (size_t i = 0; i < cli->nsettings; i++)
    if (strcmp (cli->settings[i].key, "inputs") == 0
        || strcmp (cli->settings[i].key, "output-dir") == 0)
      return fail ("--%s cannot be sent to a server: it names files on this machine",
                   strcmp (cli->settings[i].key, "inputs") == 0 ? "input" : "output-dir");
  cleanup_free char *token = NULL;
  if (extra (cli, OPT_TOKEN_FILE) && read_token_file (extra (cli, OPT_TOKEN_FILE), &token) != 0)
    return EXIT_NSBOX_FAILED;
  cleanup_free char *body = run_request (cli, code, len);
  if (!body)
    return fail ("%s", "out of memory");
  long status = 0;
  cleanup_free char *answer = NULL;
  size_t answer_len = 0;
  char why[512];
  if (nsbox_client_post_run (extra (cli, OPT_SERVER), token, body, strlen (body), &status, &answer,
                             &answer_len, why, sizeof why)
      < 0)
    return fail ("%s", why);
  return report_answer (cli, status, answer, answer_len);
}

/* Separate invocations share a session's quotas through state files under
 * the image store (quota.h). */
static int
share_quotas (nsbox_config *config)
{
  if (!nsbox_quota_configured (config))
    return 0;
  cleanup_free char *store = config->store ? strdup (config->store) : nsbox_default_store ();
  if (!store)
    return fail ("quotas: no directory for their state: set --store, $NSBOX_STORE or $HOME");
  cleanup_free char *dir = xasprintf ("%s/quota", store);
  cleanup_error struct nsbox_error *err = NULL;
  if (!dir || nsbox_config_set_quota_state (config, dir, &err) < 0)
    return fail ("%s", err ? nsbox_error_message (err) : "out of memory");
  return 0;
}

/* A sandbox this process starts itself: the file and flags, the quotas'
 * shared state, the image resolved (held in *image). */
static int
local_config (const struct cli *cli, nsbox_config **out, struct nsbox_image *image)
{
  cleanup_error struct nsbox_error *err = NULL;
  nsbox_config *config = *out = nsbox_config_new (&err);
  if (!config)
    return fail ("%s", nsbox_error_message (err));
  int ret = configure (cli, config);
  if (ret == 0)
    ret = share_quotas (config);
  if (ret == 0 && !config->rootfs)
    ret = resolve_image (config, image);
  return ret;
}

static int
cmd_run (int argc, char **argv)
{
  struct cli cli = { .extra = run_options, .n_extra = ARRAY_SIZE (run_options) };
  int ret = parse_args (&cli, argc, argv);
  cleanup_free struct setting *settings = cli.settings;
  cleanup_free const char **profiles = cli.profiles;
  if (ret == 0)
    ret = choose_format (&cli);
  if (ret != 0)
    return ret;
  if (!extra (&cli, OPT_SERVER) && (extra (&cli, OPT_PROFILE) || extra (&cli, OPT_TOKEN_FILE)))
    return fail ("--profile and --token-file go with --server");
  cleanup_error struct nsbox_error *err = NULL;
  if (extra (&cli, OPT_SERVER))
    {
      cleanup_free char *code = NULL;
      size_t code_len = 0;
      ret = read_code (&code, &code_len);
      return ret != 0 ? ret : run_on_server (&cli, code, code_len);
    }
  nsbox_config *config = NULL;
  /* Held until this process exits. */
  struct nsbox_image image = { .lock_fd = -1 };
  ret = local_config (&cli, &config, &image);
  cleanup_free char *code = NULL;
  size_t code_len = 0;
  if (ret == 0)
    ret = read_code (&code, &code_len);
  nsbox_result *res = NULL;
  if (ret == 0 && nsbox_run (config, code, code_len, &res, &err) < 0)
    ret = fail ("%s", nsbox_error_message (err));
  if (ret == 0)
    ret = report (&cli, config, res);
  nsbox_result_free (res);
  nsbox_image_release (&image);
  nsbox_config_free (config);
  return ret;
}

/* ---- nsbox serve ---- */

static int
set_count (const char *flag, const char *value, uint64_t min, uint64_t max, uint64_t *out)
{
  uint64_t v = 0;
  if (!value || nsbox_parse_count (value, &v) < 0 || v < min || v > max)
    return fail ("invalid value '%s' for --%s: expected a number from %llu to %llu",
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
      return fail ("profile '%s' sets %s: a server does not share the host's files with its "
                   "clients",
                   name, output_dir && *output_dir ? "output-dir" : "inputs");
    }
  if (*n >= NSBOX_SERVE_MAX_PROFILES)
    {
      nsbox_config_free (config);
      return fail ("at most %d profiles", NSBOX_SERVE_MAX_PROFILES);
    }
  for (size_t i = 0; i < *n; i++)
    if (strcmp (profiles[i].name, name) == 0)
      {
        nsbox_config_free (config);
        return fail ("profile '%s' is given twice", name);
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
    return fail ("%s", nsbox_error_message (err));
  if (configure (cli, config) != 0)
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
        return fail ("--profile '%s': expected NAME=CONFIG.yaml (NAME: letters, digits, _ -)",
                     spec);
      char name[64];
      snprintf (name, sizeof name, "%.*s", (int)nl, spec);
      nsbox_config *pc = nsbox_config_new (&err);
      if (!pc || nsbox_config_load_yaml (pc, eq + 1, &err) < 0
          || inherit_audit (config, pc, &err) < 0)
        {
          nsbox_config_free (pc);
          return fail ("profile '%s': %s", name, nsbox_error_message (err));
        }
      if (add_profile (profiles, n, name, pc) != 0)
        return EXIT_NSBOX_FAILED;
    }
  return 0;
}

/* The pool options shared with serve: --pool-size, --pool-max-age,
 * --pool-refill. */
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
                    { OPT_POOL_REFILL, "refill-concurrency" } };
  for (size_t i = 0; i < ARRAY_SIZE (pool_keys); i++)
    if (extra (cli, pool_keys[i].opt)
        && nsbox_pool_options_set (options, pool_keys[i].key, extra (cli, pool_keys[i].opt), &err)
               < 0)
      return fail ("%s", nsbox_error_message (err));
  return 0;
}

static int
serve_settings (const struct cli *cli, struct nsbox_serve_options *o)
{
  long ncpu = sysconf (_SC_NPROCESSORS_ONLN);
  o->listen = extra (cli, OPT_LISTEN);
  o->token_file = extra (cli, OPT_TOKEN_FILE);
  o->max_concurrent = ncpu > 0 ? (uint64_t)ncpu : 2;
  o->max_queue = 64;
  o->max_request_bytes = MAX_CODE_BYTES;
  if ((extra (cli, OPT_MAX_CONCURRENT)
       && set_count ("max-concurrent", extra (cli, OPT_MAX_CONCURRENT), 1, 4096, &o->max_concurrent)
              != 0)
      || (extra (cli, OPT_MAX_QUEUE)
          && set_count ("max-queue", extra (cli, OPT_MAX_QUEUE), 0, 65536, &o->max_queue) != 0))
    return EXIT_NSBOX_FAILED;
  if (extra (cli, OPT_MAX_REQUEST_BYTES))
    {
      uint64_t v = 0;
      if (nsbox_parse_size (extra (cli, OPT_MAX_REQUEST_BYTES), &v) < 0 || v == 0
          || v > MAX_CODE_BYTES)
        return fail ("invalid value '%s' for --max-request-bytes: expected a size up to 64m",
                     extra (cli, OPT_MAX_REQUEST_BYTES));
      o->max_request_bytes = v;
    }
  o->max_connections = 1024;
  o->header_timeout_ms = 10000;
  o->body_timeout_ms = o->idle_timeout_ms = 60000;
  if ((extra (cli, OPT_MAX_CONNECTIONS)
       && set_count ("max-connections", extra (cli, OPT_MAX_CONNECTIONS), 1, 65536,
                     &o->max_connections)
              != 0)
      || (extra (cli, OPT_MAX_PER_PEER)
          && set_count ("max-connections-per-peer", extra (cli, OPT_MAX_PER_PEER), 1, 65536,
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
  for (size_t i = 0; i < ARRAY_SIZE (timeouts); i++)
    {
      const char *value = extra (cli, timeouts[i].opt);
      if (value
          && (nsbox_parse_duration (value, timeouts[i].ms) < 0 || *timeouts[i].ms < 1000
              || *timeouts[i].ms > 3600000))
        return fail ("invalid value '%s' for --%s: expected a duration from 1s to 1h", value,
                     timeouts[i].flag);
    }
  return pool_settings (cli, o->pool_options);
}

static int
cmd_serve (int argc, char **argv)
{
  struct cli cli = { .extra = serve_options, .n_extra = ARRAY_SIZE (serve_options) };
  int ret = parse_args (&cli, argc, argv);
  cleanup_free struct setting *settings = cli.settings;
  cleanup_free const char **profiles_arg = cli.profiles;
  if (ret != 0)
    return ret;
  if (cli.json)
    return fail ("--json is not a serve option: every answer is JSON");
  cleanup_error struct nsbox_error *err = NULL;
  struct nsbox_serve_options o = { .pool_options = nsbox_pool_options_new (&err) };
  if (!o.pool_options)
    return fail ("%s", nsbox_error_message (err));
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

static int
cmd_mcp (int argc, char **argv)
{
  struct cli cli = { .extra = mcp_options, .n_extra = ARRAY_SIZE (mcp_options) };
  int ret = parse_args (&cli, argc, argv);
  cleanup_free struct setting *settings = cli.settings;
  cleanup_free const char **profiles = cli.profiles;
  if (ret != 0)
    return ret;
  if (cli.json)
    return fail ("--json is not an mcp option: every answer is JSON-RPC");
  if (cli.command_len > 0)
    return fail ("nsbox mcp takes no command; set it in the --config file");
  long ncpu = sysconf (_SC_NPROCESSORS_ONLN);
  struct nsbox_mcp_options o = { .version = NSBOX_VERSION,
                                 .max_concurrent = ncpu > 0 ? (uint64_t)ncpu : 2,
                                 .max_queue = 1024 };
  if ((extra (&cli, OPT_MAX_CONCURRENT)
       && set_count ("max-concurrent", extra (&cli, OPT_MAX_CONCURRENT), 1, 256, &o.max_concurrent)
              != 0)
      || (extra (&cli, OPT_MAX_QUEUE)
          && set_count ("max-queue", extra (&cli, OPT_MAX_QUEUE), 0, 65536, &o.max_queue) != 0))
    return EXIT_NSBOX_FAILED;
  cleanup_error struct nsbox_error *err = NULL;
  o.pool_options = nsbox_pool_options_new (&err);
  if (!o.pool_options)
    return fail ("%s", nsbox_error_message (err));
  nsbox_config *config = nsbox_config_new (&err);
  if (!config)
    ret = fail ("%s", nsbox_error_message (err));
  if (ret == 0)
    ret = pool_settings (&cli, o.pool_options);
  if (ret == 0)
    ret = configure (&cli, config);
  if (ret == 0)
    ret = nsbox_mcp (TAKE_PTR (config), &o);
  nsbox_config_free (config);
  nsbox_pool_options_free (o.pool_options);
  return ret;
}

static int
cmd_repl (int argc, char **argv)
{
  struct cli cli = { 0 };
  int ret = parse_args (&cli, argc, argv);
  cleanup_free struct setting *settings = cli.settings;
  cleanup_free const char **profiles = cli.profiles;
  if (ret != 0)
    return ret;
  nsbox_config *config = NULL;
  struct nsbox_image image = { .lock_fd = -1 };
  ret = local_config (&cli, &config, &image);
  if (ret == 0)
    ret = nsbox_repl (TAKE_PTR (config), STDIN_FILENO, cli.json);
  nsbox_config_free (config);
  nsbox_image_release (&image);
  return ret;
}

static void
print_warning (const char *message, void *data)
{
  (void)data;
  fprintf (stderr, "nsbox: warning: %s\n", message);
}

static int
cmd_check_policy (int argc, char **argv)
{
  if (argc != 2)
    return fail ("usage: nsbox check-policy FILE");
  struct nsbox_bpf bpf = { 0 };
  cleanup_error struct nsbox_error *err = NULL;
  if (nsbox_seccomp_compile_file (argv[1], &bpf, print_warning, NULL, &err) < 0)
    return fail ("%s", nsbox_error_message (err));
  printf ("%s: %u BPF instructions\n", argv[1], (unsigned)bpf.len);
  nsbox_bpf_release (&bpf);
  return 0;
}

/* `nsbox doctor [--json] [OPTIONS]`: the configuration as `nsbox run`
 * would use it, checked on this machine. */
static int
cmd_doctor (int argc, char **argv)
{
  struct cli cli = { .extra = NULL, .n_extra = 0 };
  int ret = parse_args (&cli, argc, argv);
  cleanup_free struct setting *settings = cli.settings;
  cleanup_free const char **profiles = cli.profiles;
  if (ret != 0)
    return ret;
  if (cli.command_len > 0)
    return fail ("usage: nsbox doctor [--json] [--config FILE] [--KEY VALUE]...");
  cleanup_error struct nsbox_error *err = NULL;
  cleanup_config nsbox_config *config = nsbox_config_new (&err);
  if (!config)
    return fail ("%s", nsbox_error_message (err));
  if ((ret = configure (&cli, config)) != 0)
    return ret;
  return nsbox_doctor (config, cli.json);
}

/* `nsbox audit verify FILE`: 0 when the chain is intact, 1 naming the
 * first broken record, 125 when the file cannot be read. */
static int
cmd_audit (int argc, char **argv)
{
  if (argc != 3 || strcmp (argv[1], "verify") != 0)
    return fail ("usage: nsbox audit verify FILE");
  size_t records = 0;
  cleanup_error struct nsbox_error *err = NULL;
  if (nsbox_audit_verify (argv[2], &records, &err) < 0)
    {
      int status = fail ("audit log '%s': %s", argv[2], nsbox_error_message (err));
      return nsbox_error_errno (err) == EBADMSG ? 1 : status;
    }
  printf ("%s: %zu records, chain intact\n", argv[2], records);
  return 0;
}

int
main (int argc, char **argv)
{
  if (getuid () != geteuid () || getgid () != getegid ())
    return fail ("refusing to run set-user-ID or set-group-ID; install nsbox without the "
                 "setuid/setgid bit");
  /* Our own stdout may be a closed pipe; write errors are ignored, not
   * fatal. The sandbox resets every disposition before it runs anything. */
  signal (SIGPIPE, SIG_IGN);
  if (argc >= 2 && strcmp (argv[1], "run") == 0)
    return cmd_run (argc - 1, argv + 1);
  if (argc >= 2 && strcmp (argv[1], "serve") == 0)
    return cmd_serve (argc - 1, argv + 1);
  if (argc >= 2 && strcmp (argv[1], "mcp") == 0)
    return cmd_mcp (argc - 1, argv + 1);
  if (argc >= 2 && strcmp (argv[1], "repl") == 0)
    return cmd_repl (argc - 1, argv + 1);
  if (argc >= 2 && strcmp (argv[1], "audit") == 0)
    return cmd_audit (argc - 1, argv + 1);
  if (argc >= 2 && strcmp (argv[1], "doctor") == 0)
    return cmd_doctor (argc - 1, argv + 1);
  if (argc >= 2 && strcmp (argv[1], "check-policy") == 0)
    return cmd_check_policy (argc - 1, argv + 1);
  if (argc >= 2 && strcmp (argv[1], "--version") == 0)
    {
      printf ("nsbox %s\n", NSBOX_VERSION);
      return 0;
    }
  if (argc >= 2 && (strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0))
    {
      usage (stdout);
      return 0;
    }
  usage (stderr);
  return argc < 2 ? 2 : fail ("unknown command '%s'", argv[1]);
}
