/* The nsbox command line. The only place that prints and picks exit codes. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
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

#include "config.h"
#include "error.h"
#include "image.h"
#include "nsbox.h"
#include "seccomp.h"
#include "util.h"

#define NSBOX_VERSION "0.1.0"
#define EXIT_NSBOX_FAILED 125
#define EXIT_TIMED_OUT 124
#define EXIT_OOM 137
/* Code arrives on stdin; beyond this it is refused, not truncated. */
#define MAX_CODE_BYTES (64u << 20)

enum
{
  OPT_CONFIG = 1000,
  OPT_JSON,
  OPT_HELP,
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
  struct setting *settings;
  size_t nsettings;
  char **command;
  size_t command_len;
};

static void
usage (FILE *out)
{
  fprintf (out, "usage: nsbox run [OPTIONS] [-- COMMAND [ARG...]] < code.py\n"
                "       nsbox check-policy FILE\n"
                "       nsbox --version\n\n"
                "Runs the code on stdin in a fresh, single-use sandbox (default command:\n"
                "python -). Precedence: built-in defaults < --config FILE < flags.\n\n"
                "options:\n"
                "  --config FILE          load a YAML configuration (see policies/nsbox.yaml)\n"
                "  --json                 print the result as one JSON object on stdout\n");
  for (const struct nsbox_key_info *k = nsbox_config_keys (); k->name; k++)
    {
      char flag[64];
      snprintf (flag, sizeof flag, "--%s%s", k->name, k->is_boolean ? "" : " VALUE");
      fprintf (out, "  %-22s %s\n", flag, k->help);
    }
  fprintf (out, "\nexit status: the program's own; 124 timed out; 137 killed by the memory "
                "limit;\n125 nsbox could not run it.\n");
}

static int __attribute__ ((format (printf, 1, 2))) fail (const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  fputs ("nsbox: ", stderr);
  vfprintf (stderr, fmt, ap);
  fputc ('\n', stderr);
  va_end (ap);
  return EXIT_NSBOX_FAILED;
}

/* getopt_long options built from the one key table. */
static struct option *
build_options (void)
{
  size_t n = 0;
  const struct nsbox_key_info *keys = nsbox_config_keys ();
  while (keys[n].name)
    n++;
  struct option *opts = calloc (n + 4, sizeof *opts);
  if (!opts)
    return NULL;
  for (size_t i = 0; i < n; i++)
    opts[i]
        = (struct option){ keys[i].name, keys[i].is_boolean ? optional_argument : required_argument,
                           NULL, OPT_KEY_BASE + (int)i };
  opts[n] = (struct option){ "config", required_argument, NULL, OPT_CONFIG };
  opts[n + 1] = (struct option){ "json", no_argument, NULL, OPT_JSON };
  opts[n + 2] = (struct option){ "help", no_argument, NULL, OPT_HELP };
  return opts;
}

static int
parse_args (struct cli *cli, int argc, char **argv)
{
  cleanup_free struct option *opts = build_options ();
  cli->settings = calloc ((size_t)argc, sizeof *cli->settings);
  if (!opts || !cli->settings)
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
  if (nsbox_config_set_base_env (config, (const char *const *)image->env, len, &err) < 0)
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

static int
exit_status (const nsbox_result *res)
{
  if (nsbox_result_timed_out (res))
    return EXIT_TIMED_OUT;
  if (nsbox_result_oom_killed (res))
    return EXIT_OOM;
  return nsbox_result_exit_code (res);
}

static int
report (const struct cli *cli, const nsbox_config *config, const nsbox_result *res)
{
  if (cli->json)
    {
      cleanup_error struct nsbox_error *err = NULL;
      cleanup_free char *json = nsbox_result_to_json (res, &err);
      if (!json)
        return fail ("%s", nsbox_error_message (err));
      nsbox_write_all (STDOUT_FILENO, json, strlen (json));
      nsbox_write_all (STDOUT_FILENO, "\n", 1);
      return exit_status (res);
    }
  size_t len;
  const char *out = nsbox_result_stdout (res, &len);
  nsbox_write_all (STDOUT_FILENO, out, len);
  out = nsbox_result_stderr (res, &len);
  nsbox_write_all (STDERR_FILENO, out, len);
  cleanup_free char *cap = nsbox_config_get (config, "max-output-bytes", NULL);
  if (nsbox_result_stdout_truncated (res))
    fprintf (stderr, "nsbox: stdout truncated at %s bytes\n", cap ? cap : "?");
  if (nsbox_result_stderr_truncated (res))
    fprintf (stderr, "nsbox: stderr truncated at %s bytes\n", cap ? cap : "?");
  if (nsbox_result_timed_out (res))
    {
      cleanup_free char *t = nsbox_config_get (config, "timeout", NULL);
      fprintf (stderr, "nsbox: timed out after %s\n", t ? t : "the timeout");
    }
  else if (nsbox_result_oom_killed (res))
    {
      cleanup_free char *m = nsbox_config_get (config, "memory", NULL);
      fprintf (stderr, "nsbox: killed by the memory limit (%s)\n", m ? m : "?");
    }
  return exit_status (res);
}

static int
cmd_run (int argc, char **argv)
{
  struct cli cli = { 0 };
  int ret = parse_args (&cli, argc, argv);
  cleanup_free struct setting *settings = cli.settings;
  if (ret != 0)
    return ret;
  cleanup_error struct nsbox_error *err = NULL;
  nsbox_config *config = nsbox_config_new (&err);
  if (!config)
    return fail ("%s", nsbox_error_message (err));
  ret = configure (&cli, config);
  /* Held until this process exits. */
  struct nsbox_image image = { .lock_fd = -1 };
  if (ret == 0 && !config->rootfs)
    ret = resolve_image (config, &image);
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
