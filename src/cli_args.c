/* The nsbox CLI's flags: built from the one key table and the command's
 * own options, parsed into struct cli, and the configuration they make. */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "config.h"
#include "error.h"
#include "nsbox.h"
#include "util.h"

void
cli_usage (FILE *out)
{
  fprintf (
      out,
      "usage: nsbox run [OPTIONS] [-- COMMAND [ARG...]] < code.py\n"
      "       nsbox run --server unix:PATH|http://HOST:PORT [--profile NAME]\n"
      "                 [--token-file FILE] [--timeout T] [--max-output-bytes N] < code.py\n"
      "       nsbox serve [OPTIONS] [--listen unix:PATH|tcp:ADDR:PORT] [--token-file FILE]\n"
      "                 [--profile NAME=CONFIG.yaml]... [--max-concurrent N] [--max-queue N]\n"
      "                 [--max-request-bytes SIZE] [--pool-size N] [--pool-max-age T]\n"
      "                 [--pool-refill N] [--pool-sandboxes N] [--max-connections N]\n"
      "                 [--max-connections-per-peer N]\n"
      "                 [--header-timeout T] [--body-timeout T] [--idle-timeout T]\n"
      "       nsbox mcp [OPTIONS] [--max-concurrent N] [--max-queue N] [--pool-size N]\n"
      "                 [--pool-max-age T] [--pool-refill N] [--pool-sandboxes N]\n"
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
      "                         (--json) or text (the result as text for a model)\n"
      "  --run-timeout T        run: this run's timeout, which may only shorten the\n"
      "                         configured one (as a server's per-run timeout)\n"
      "  --run-max-output-bytes N  run: likewise, this run's output cap\n");
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

/* The last failure's words, for a JSON error (cli_last_failure). */
static char last_failure[1024];

int
cli_fail (const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  va_list copy;
  va_copy (copy, ap);
  vsnprintf (last_failure, sizeof last_failure, fmt, copy);
  va_end (copy);
  nsbox_vprint_message ("nsbox", fmt, ap);
  va_end (ap);
  return EXIT_NSBOX_FAILED;
}

const char *
cli_last_failure (void)
{
  return last_failure;
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

int
cli_parse_args (struct cli *cli, int argc, char **argv)
{
  cleanup_free struct option *opts = build_options (cli);
  cli->settings = calloc ((size_t)argc, sizeof *cli->settings);
  cli->profiles = calloc ((size_t)argc, sizeof *cli->profiles);
  if (!opts || !cli->settings || !cli->profiles)
    return cli_fail ("%s", "out of memory");
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
          cli_usage (stdout);
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
        return cli_fail ("option '%s' needs a value (see nsbox run --help)", argv[optind - 1]);
      else
        return cli_fail ("unknown option '%s' (see nsbox run --help)", argv[optind - 1]);
    }
  cli->command = argv + optind;
  cli->command_len = (size_t)(argc - optind);
  return 0;
}

int
cli_configure (const struct cli *cli, nsbox_config *config)
{
  cleanup_error struct nsbox_error *err = NULL;
  if (cli->config_file && nsbox_config_load_yaml (config, cli->config_file, &err) < 0)
    return cli_fail ("%s", nsbox_error_message (err));
  for (size_t i = 0; i < cli->nsettings; i++)
    if (nsbox_config_set (config, cli->settings[i].key, cli->settings[i].value, &err) < 0)
      return cli_fail ("%s", nsbox_error_message (err));
  if (cli->command_len > 0
      && nsbox_config_set_command (config, cli->command_len, (const char *const *)cli->command,
                                   &err)
             < 0)
    return cli_fail ("%s", nsbox_error_message (err));
  return 0;
}

/* The CLI resolves `image` itself, before it reads the code, and runs the
 * rootfs with the image's Env as base environment. Linked with
 * image_tool.c, it asks nsbox-image, which passes the store's shared lock:
 * `nsbox-image gc` cannot remove the tree before this process exits. */
const char *
cli_extra (const struct cli *cli, int opt)
{
  return cli->extra_value[opt - OPT_SERVER];
}
