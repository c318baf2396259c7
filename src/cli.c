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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "audit.h"
#include "cli.h"
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

/* The options of a command besides the configuration keys. */
static const struct option run_options[] = {
  { "server", required_argument, NULL, OPT_SERVER },
  { "profile", required_argument, NULL, OPT_PROFILE },
  { "token-file", required_argument, NULL, OPT_TOKEN_FILE },
  { "format", required_argument, NULL, OPT_FORMAT },
  { "run-timeout", required_argument, NULL, OPT_RUN_TIMEOUT },
  { "run-max-output-bytes", required_argument, NULL, OPT_RUN_MAX_OUTPUT },
};

static int
resolve_image (nsbox_config *config, struct nsbox_image *image)
{
  cleanup_error struct nsbox_error *err = NULL;
  if (nsbox_image_hold (config->store, config->image, config->pull, image, &err) < 0
      || nsbox_config_set (config, "rootfs", image->rootfs, &err) < 0)
    return cli_fail ("%s", nsbox_error_message (err));
  size_t len = 0;
  while (image->env[len])
    len++;
  if (nsbox_config_set_base_env (config, (const char *const *)image->env, len, &err) < 0
      || nsbox_config_set_image_digest (config, image->digest, &err) < 0)
    return cli_fail ("%s", nsbox_error_message (err));
  return 0;
}

static int
read_code (char **code, size_t *len)
{
  size_t alloc = 65536, used = 0;
  char *buf = malloc (alloc);
  if (!buf)
    return cli_fail ("%s", "out of memory");
  for (;;)
    {
      if (used == alloc)
        {
          /* One spare byte past the cap tells "exactly 64 MiB" from "more". */
          size_t want = alloc >= MAX_CODE_BYTES ? MAX_CODE_BYTES + 1 : alloc * 2;
          if (used > MAX_CODE_BYTES)
            {
              free (buf);
              return cli_fail ("code on stdin exceeds %u MiB", MAX_CODE_BYTES >> 20);
            }
          char *grown = realloc (buf, want);
          if (!grown)
            {
              free (buf);
              return cli_fail ("%s", "out of memory");
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
          return cli_fail ("read code from stdin: %s", strerror (errno));
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
        return cli_fail ("%s", nsbox_error_message (err));
      nsbox_write_all (STDOUT_FILENO, text, strlen (text));
      return exit_status (&v);
    }
  if (cli->json)
    {
      cleanup_error struct nsbox_error *err = NULL;
      cleanup_free char *json = nsbox_result_to_json (res, &err);
      if (!json)
        return cli_fail ("%s", nsbox_error_message (err));
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
  if (cli->streamed)
    v.out_len = v.err_len = 0;
  return show (&v, config);
}

/* ---- nsbox run --server ---- */

/* --format plain|json|text; --json is --format json. */
static int
choose_format (struct cli *cli)
{
  const char *format = cli_extra (cli, OPT_FORMAT);
  if (!format)
    return 0;
  bool json = strcmp (format, "json") == 0, text = strcmp (format, "text") == 0;
  if (!json && !text && strcmp (format, "plain") != 0)
    return cli_fail ("invalid value '%s' for --format: expected plain, json or text", format);
  if (cli->json && !json)
    {
      cli->json = false; /* no format is chosen: nothing goes to stdout */
      return cli_fail ("--json conflicts with --format %s", format);
    }
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
    return cli_fail ("%s", nsbox_error_message (err));
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
  if (cli_extra (cli, OPT_PROFILE))
    json_object_set_new (o, "profile", json_string (cli_extra (cli, OPT_PROFILE)));
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
      return cli_fail ("the server answered %ld with a body that is not a JSON object", status);
    }
  /* 429: a quota refused the run; the body is its result. */
  if (status != 200 && !(status == 429 && json_object_get (o, "quota_refusal")))
    {
      const char *msg = json_string_value (json_object_get (o, "error"));
      int r = cli_fail ("the server refused the run (HTTP %ld): %s", status, msg ? msg : "?");
      json_decref (o);
      return r;
    }
  json_decref (o);
  nsbox_result *res = NULL;
  cleanup_error struct nsbox_error *err = NULL;
  if (nsbox_result_from_json (answer, len, &res, &err) < 0)
    return cli_fail ("the server's result: %s", nsbox_error_message (err));
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

/* A line of a streamed answer: a piece of output goes out at once. */
static void
print_line (void *data, const char *line, size_t len)
{
  (void)data;
  json_t *o = json_loadb (line, len, JSON_ALLOW_NUL, NULL);
  const char *stream = json_string_value (json_object_get (o, "stream"));
  json_t *piece = json_object_get (o, "data");
  if (stream && json_is_string (piece))
    {
      int fd = strcmp (stream, "stderr") == 0 ? STDERR_FILENO : STDOUT_FILENO;
      nsbox_write_all (fd, json_string_value (piece), json_string_length (piece));
    }
  json_decref (o);
}

static int
run_on_server (const struct cli *cli, const char *code, size_t len)
{
  if (cli->command_len > 0)
    return cli_fail ("a command (-- COMMAND) cannot be sent to a server: its profile sets it");
  if (cli->config_file)
    return cli_fail ("--config cannot be sent to a server: its profiles set the configuration");
  const char *session = NULL;
  for (size_t i = 0; i < cli->nsettings; i++)
    if (strcmp (cli->settings[i].key, "inputs") == 0
        || strcmp (cli->settings[i].key, "output-dir") == 0)
      return cli_fail ("--%s cannot be sent to a server: it names files on this machine",
                       strcmp (cli->settings[i].key, "inputs") == 0 ? "input" : "output-dir");
    else if (strcmp (cli->settings[i].key, "session") == 0)
      session = cli->settings[i].value;
  cleanup_free char *token = NULL;
  if (cli_extra (cli, OPT_TOKEN_FILE)
      && read_token_file (cli_extra (cli, OPT_TOKEN_FILE), &token) != 0)
    return EXIT_NSBOX_FAILED;
  cleanup_free char *body = run_request (cli, code, len);
  if (!body)
    return cli_fail ("%s", "out of memory");
  long status = 0;
  cleanup_free char *answer = NULL;
  size_t answer_len = 0;
  char why[512];
  /* Plain output streams: printed as the program writes it. */
  bool stream = !cli->json && !cli->text;
  /* The session goes in a header too (nsbox_client_stream_run takes only a
   * well-formed one; the server refuses any other from the body). */
  if (nsbox_client_stream_run (cli_extra (cli, OPT_SERVER), token, session, body, strlen (body),
                               stream ? print_line : NULL, NULL, &status, &answer, &answer_len, why,
                               sizeof why)
      < 0)
    return cli_fail ("%s", why);
  if (!stream || status != 200)
    return report_answer (cli, status, answer, answer_len);
  /* The last line: {"result": ...}, or {"error": ...}. */
  while (answer_len > 0 && answer[answer_len - 1] == '\n')
    answer_len--;
  const char *last = answer + answer_len;
  while (last > answer && last[-1] != '\n')
    last--;
  json_t *o = json_loadb (last, (size_t)(answer + answer_len - last), JSON_ALLOW_NUL, NULL);
  json_t *result = json_object_get (o, "result");
  const char *error = json_string_value (json_object_get (o, "error"));
  cleanup_free char *text = result ? json_dumps (result, JSON_COMPACT) : NULL;
  json_decref (o);
  if (!text)
    return cli_fail ("the server could not run it: %s",
                     error ? error : "its stream ended without a result");
  struct cli shown = *cli;
  shown.streamed = true;
  return report_answer (&shown, status, text, strlen (text));
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
    return cli_fail ("quotas: no directory for their state: set --store, $NSBOX_STORE or $HOME");
  cleanup_free char *dir = xasprintf ("%s/quota", store);
  cleanup_error struct nsbox_error *err = NULL;
  if (!dir || nsbox_config_set_quota_state (config, dir, &err) < 0)
    return cli_fail ("%s", err ? nsbox_error_message (err) : "out of memory");
  return 0;
}

/* --run-timeout and --run-max-output-bytes: a run's own limits, which may
 * only lower what the file and the flags configure (a caller that passes
 * a model's request on cannot raise the operator's limit). */
static int
lower_limits (const struct cli *cli, nsbox_config *config)
{
  const char *timeout = cli_extra (cli, OPT_RUN_TIMEOUT);
  const char *cap = cli_extra (cli, OPT_RUN_MAX_OUTPUT);
  uint64_t timeout_ms = config->timeout_ms, max_output = config->max_output_bytes;
  cleanup_error struct nsbox_error *err = NULL;
  if (timeout && nsbox_config_set (config, "timeout", timeout, &err) < 0)
    return cli_fail ("--run-timeout: %s", nsbox_error_message (err));
  if (config->timeout_ms > timeout_ms)
    {
      cleanup_free char *was = nsbox_format_duration (timeout_ms);
      return cli_fail ("--run-timeout %s is longer than the configured %s: a run may only "
                       "shorten it",
                       timeout, was ? was : "timeout");
    }
  if (cap && nsbox_config_set (config, "max-output-bytes", cap, &err) < 0)
    return cli_fail ("--run-max-output-bytes: %s", nsbox_error_message (err));
  if (config->max_output_bytes > max_output)
    return cli_fail ("--run-max-output-bytes %s is larger than the configured %" PRIu64
                     ": a run may only lower it",
                     cap, max_output);
  return 0;
}

/* A sandbox this process starts itself: the file and flags, the quotas'
 * shared state, the image resolved (held in *image). */
static int
local_config (const struct cli *cli, nsbox_config **out, struct nsbox_image *image,
              const char **stage)
{
  cleanup_error struct nsbox_error *err = NULL;
  *stage = "run";
  nsbox_config *config = *out = nsbox_config_new (&err);
  if (!config)
    return cli_fail ("%s", nsbox_error_message (err));
  *stage = "input";
  int ret = cli_configure (cli, config);
  if (ret == 0)
    ret = lower_limits (cli, config);
  if (ret != 0)
    return ret;
  /* The host's part: the quotas' state and the image store. */
  *stage = "run";
  ret = share_quotas (config);
  if (ret == 0 && !config->rootfs)
    ret = resolve_image (config, image);
  else if (ret == 0)
    {
      /* A rootfs that is not there is the input's fault, not the run's. */
      struct stat st;
      *stage = "input";
      if (stat (config->rootfs, &st) < 0)
        ret = cli_fail ("rootfs '%s': %s", config->rootfs, strerror (errno));
      else if (!S_ISDIR (st.st_mode))
        ret = cli_fail ("rootfs '%s': not a directory", config->rootfs);
    }
  return ret;
}

/* --json without a result: {"error": MESSAGE, "stage": STAGE} on stdout,
 * STAGE "input" when the input was refused before any sandbox, "run" when
 * one could not be set up or run (nsbox(1), THE JSON RESULT). */
static void
json_error (const char *stage)
{
  json_t *o = json_pack ("{s:s,s:s}", "error", cli_last_failure (), "stage", stage);
  if (!o)
    {
      /* Not UTF-8 (a path's bytes, a cut character): its ASCII only. */
      char ascii[1024];
      snprintf (ascii, sizeof ascii, "%s", cli_last_failure ());
      for (char *c = ascii; *c; c++)
        if ((unsigned char)*c >= 0x80)
          *c = '?';
      o = json_pack ("{s:s,s:s}", "error", ascii, "stage", stage);
    }
  cleanup_free char *text = o ? json_dumps (o, JSON_COMPACT) : NULL;
  json_decref (o);
  if (!text)
    return;
  nsbox_write_all (STDOUT_FILENO, text, strlen (text));
  nsbox_write_all (STDOUT_FILENO, "\n", 1);
}

static int
cmd_run (int argc, char **argv)
{
  struct cli cli = { .extra = run_options, .n_extra = ARRAY_SIZE (run_options) };
  int ret = cli_parse_args (&cli, argc, argv);
  cleanup_free struct setting *settings = cli.settings;
  cleanup_free const char **profiles = cli.profiles;
  if (ret == 0)
    ret = choose_format (&cli);
  if (ret == 0 && !cli_extra (&cli, OPT_SERVER)
      && (cli_extra (&cli, OPT_PROFILE) || cli_extra (&cli, OPT_TOKEN_FILE)))
    ret = cli_fail ("--profile and --token-file go with --server");
  if (ret != 0)
    {
      if (cli.json && !cli_extra (&cli, OPT_SERVER))
        json_error ("input");
      return ret;
    }
  cleanup_error struct nsbox_error *err = NULL;
  if (cli_extra (&cli, OPT_SERVER)
      && (cli_extra (&cli, OPT_RUN_TIMEOUT) || cli_extra (&cli, OPT_RUN_MAX_OUTPUT)))
    return cli_fail ("--run-timeout and --run-max-output-bytes are for local runs: a server's "
                     "--timeout and --max-output-bytes may only lower its profile's already");
  if (cli_extra (&cli, OPT_SERVER))
    {
      cleanup_free char *code = NULL;
      size_t code_len = 0;
      ret = read_code (&code, &code_len);
      return ret != 0 ? ret : run_on_server (&cli, code, code_len);
    }
  nsbox_config *config = NULL;
  /* Held until this process exits. */
  struct nsbox_image image = { .lock_fd = -1 };
  const char *stage = "input";
  ret = local_config (&cli, &config, &image, &stage);
  cleanup_free char *code = NULL;
  size_t code_len = 0;
  if (ret == 0)
    {
      stage = "input";
      ret = read_code (&code, &code_len);
    }
  nsbox_result *res = NULL;
  if (ret == 0 && nsbox_run (config, code, code_len, &res, &err) < 0)
    {
      stage = "run";
      ret = cli_fail ("%s", nsbox_error_message (err));
    }
  if (ret == 0)
    ret = report (&cli, config, res);
  else if (cli.json)
    json_error (stage);
  nsbox_result_free (res);
  nsbox_image_release (&image);
  nsbox_config_free (config);
  return ret;
}

static int
cmd_repl (int argc, char **argv)
{
  struct cli cli = { 0 };
  int ret = cli_parse_args (&cli, argc, argv);
  cleanup_free struct setting *settings = cli.settings;
  cleanup_free const char **profiles = cli.profiles;
  if (ret != 0)
    return ret;
  nsbox_config *config = NULL;
  struct nsbox_image image = { .lock_fd = -1 };
  const char *stage;
  ret = local_config (&cli, &config, &image, &stage);
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
    return cli_fail ("usage: nsbox check-policy FILE");
  struct nsbox_bpf bpf = { 0 };
  cleanup_error struct nsbox_error *err = NULL;
  if (nsbox_seccomp_compile_file (argv[1], &bpf, print_warning, NULL, &err) < 0)
    return cli_fail ("%s", nsbox_error_message (err));
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
  int ret = cli_parse_args (&cli, argc, argv);
  cleanup_free struct setting *settings = cli.settings;
  cleanup_free const char **profiles = cli.profiles;
  if (ret != 0)
    return ret;
  if (cli.command_len > 0)
    return cli_fail ("usage: nsbox doctor [--json] [--config FILE] [--KEY VALUE]...");
  cleanup_error struct nsbox_error *err = NULL;
  cleanup_config nsbox_config *config = nsbox_config_new (&err);
  if (!config)
    return cli_fail ("%s", nsbox_error_message (err));
  if ((ret = cli_configure (&cli, config)) != 0)
    return ret;
  return nsbox_doctor (config, cli.json);
}

/* `nsbox audit verify FILE`: 0 when the chain is intact, 1 naming the
 * first broken record, 125 when the file cannot be read. */
static int
cmd_audit (int argc, char **argv)
{
  if (argc != 3 || strcmp (argv[1], "verify") != 0)
    return cli_fail ("usage: nsbox audit verify FILE");
  size_t records = 0;
  cleanup_error struct nsbox_error *err = NULL;
  if (nsbox_audit_verify (argv[2], &records, &err) < 0)
    {
      int status = cli_fail ("audit log '%s': %s", argv[2], nsbox_error_message (err));
      return nsbox_error_errno (err) == EBADMSG ? 1 : status;
    }
  printf ("%s: %zu records, chain intact\n", argv[2], records);
  return 0;
}

int
main (int argc, char **argv)
{
  if (getuid () != geteuid () || getgid () != getegid ())
    return cli_fail ("refusing to run set-user-ID or set-group-ID; install nsbox without the "
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
      cli_usage (stdout);
      return 0;
    }
  cli_usage (stderr);
  return argc < 2 ? 2 : cli_fail ("unknown command '%s'", argv[1]);
}
