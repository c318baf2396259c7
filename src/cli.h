/* The nsbox CLI's commands (cli.c: run, repl, doctor, audit,
 * check-policy; cli_serve.c: serve and mcp) and what they share: the
 * flags built from the one key table, parsed into struct cli. */
#ifndef NSBOX_CLI_H
#define NSBOX_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "nsbox.h"

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
  OPT_RUN_TIMEOUT,
  OPT_RUN_MAX_OUTPUT,
  /* nsbox serve */
  OPT_LISTEN,
  OPT_PROFILE_FILE,
  OPT_MAX_CONCURRENT,
  OPT_MAX_QUEUE,
  OPT_MAX_REQUEST_BYTES,
  OPT_POOL_SIZE,
  OPT_POOL_MAX_AGE,
  OPT_POOL_REFILL,
  OPT_POOL_SANDBOXES,
  OPT_MAX_CONNECTIONS,
  OPT_MAX_PER_PEER,
  OPT_HEADER_TIMEOUT,
  OPT_BODY_TIMEOUT,
  OPT_IDLE_TIMEOUT,
  OPT_MAX_SANDBOXES,
  OPT_MAX_SANDBOXES_PER_CLIENT,
  OPT_NODE_NAME,
  OPT_DRAIN_GRACE,
  OPT_LAST_EXTRA = OPT_DRAIN_GRACE,
  OPT_KEY_BASE = 2000,
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
  bool text;     /* --format text */
  bool streamed; /* the output was printed as it came (nsbox run --server) */
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

/* nsbox --help. */
void cli_usage (FILE *out);
/* Prints "nsbox: MESSAGE" on stderr; returns EXIT_NSBOX_FAILED. */
int cli_fail (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
/* The message of the last cli_fail ("" before any). */
const char *cli_last_failure (void);
/* Reads argv into cli (its extra options set by the caller). */
int cli_parse_args (struct cli *cli, int argc, char **argv);
/* The --config file, then the flags, then the command, into config. */
int cli_configure (const struct cli *cli, nsbox_config *config);
/* The value given to extra option opt, or NULL. */
const char *cli_extra (const struct cli *cli, int opt);

int cmd_serve (int argc, char **argv);
int cmd_mcp (int argc, char **argv);

#endif
