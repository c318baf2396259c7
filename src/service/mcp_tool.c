/* The run_python tool of `nsbox mcp`: its schemas and description, a
 * call's arguments checked into a job, and the result the model reads. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcp-private.h"
#include "units.h"

/* A tool result the model reads as a failure. */
json_t *
nsbox_mcp_tool_error (const char *text)
{
  return json_pack ("{s:[{s:s,s:s}],s:b}", "content", "type", "text", "text", text, "isError",
                    true);
}

static json_t *
input_schema (bool per_session)
{
  return json_pack (
      "{s:s,s:{s:{s:s,s:s},s:{s:s,s:i,s:s},s:{s:s,s:i,s:{s:s,s:{s:{s:s},s:{s:s,s:s}},s:[s,s]},"
      "s:s}},s:[s],s:b}",
      "type", "object", "properties", "code", "type", "string", "description",
      "Python 3 source, run as `python -` (the program reads it from stdin)", "timeout", "type",
      "number", "exclusiveMinimum", 0, "description",
      "seconds the program may run; capped at the server's configured timeout", "files", "type",
      "array", "maxItems", 64, "items", "type", "object", "properties", "name", "type", "string",
      "content", "type", "string", "contentEncoding", "base64", "required", "name", "content",
      "description",
      per_session ? "input files, each {name, content (base64)}, copied into the sandbox as "
                    "/tmp/in/NAME (replacing a file of that name); the files the program leaves "
                    "in /tmp/out are returned after the call (images as images) and removed "
                    "from it"
                  : "input files, each {name, content (base64)}, read-only in the sandbox as "
                    "/mnt/in/NAME; files the program leaves in /tmp/out are returned (images as "
                    "images)",
      "required", "code", "additionalProperties", false);
}

/* The shape of nsbox_result_to_json (README.md, "The JSON result"). */
static json_t *
output_schema (void)
{
  json_t *p = json_object ();
  static const char *const integers[]
      = { "exit_code", "stdout_omitted_bytes", "stderr_omitted_bytes", "duration_ms",
          "cpu_ms",    "memory_peak_bytes",    "timeout_ms",           "memory_limit_bytes" };
  static const char *const booleans[]
      = { "timed_out", "oom_killed", "stdout_truncated", "stderr_truncated" };
  static const char *const strings[] = { "stdout", "stderr", "served" };
  for (size_t i = 0; p && i < ARRAY_SIZE (integers); i++)
    json_object_set_new (p, integers[i], json_pack ("{s:s}", "type", "integer"));
  for (size_t i = 0; p && i < ARRAY_SIZE (booleans); i++)
    json_object_set_new (p, booleans[i], json_pack ("{s:s}", "type", "boolean"));
  for (size_t i = 0; p && i < ARRAY_SIZE (strings); i++)
    json_object_set_new (p, strings[i], json_pack ("{s:s}", "type", "string"));
  if (!p)
    return NULL;
  json_object_set_new (p, "signal", json_pack ("{s:[s,s]}", "type", "string", "null"));
  /* null for a run a quota refused: no runtime ran it. */
  json_object_set_new (p, "runtime", json_pack ("{s:[s,s]}", "type", "string", "null"));
  json_object_set_new (p, "quota_refusal",
                       json_pack ("{s:[s,s],s:{s:{s:s},s:{s:s},s:{s:s}},s:[s,s,s]}", "type",
                                  "object", "null", "properties", "quota", "type", "string",
                                  "limit", "type", "string", "retry_after_ms", "type", "integer",
                                  "required", "quota", "limit", "retry_after_ms"));
  /* mcp-state: per-session: the live sandbox's members. */
  json_object_set_new (p, "value", json_pack ("{s:[s,s]}", "type", "string", "null"));
  json_object_set_new (p, "sandbox_id", json_pack ("{s:s}", "type", "string"));
  json_object_set_new (p, "sandbox_run", json_pack ("{s:s}", "type", "integer"));
  json_object_set_new (p, "sandbox_lost", json_pack ("{s:s}", "type", "boolean"));
  /* network: proxy: the egress report; null otherwise. */
  json_object_set_new (p, "egress", json_pack ("{s:[s,s]}", "type", "object", "null"));
  json_object_set_new (
      p, "limits",
      json_pack ("{s:s,s:{s:s}}", "type", "object", "additionalProperties", "type", "string"));
  json_object_set_new (p, "files",
                       json_pack ("{s:s,s:{s:s,s:{s:{s:s},s:{s:s},s:{s:s}},s:[s,s,s]}}", "type",
                                  "array", "items", "type", "object", "properties", "name", "type",
                                  "string", "size", "type", "integer", "sha256", "type", "string",
                                  "required", "name", "size", "sha256"));
  json_object_set_new (p, "files_refused",
                       json_pack ("{s:s,s:{s:s,s:{s:{s:s},s:{s:s}},s:[s,s]}}", "type", "array",
                                  "items", "type", "object", "properties", "name", "type", "string",
                                  "reason", "type", "string", "required", "name", "reason"));
  json_t *required = json_array ();
  static const char *const always[] = { "exit_code",
                                        "signal",
                                        "timed_out",
                                        "oom_killed",
                                        "stdout",
                                        "stderr",
                                        "stdout_truncated",
                                        "stderr_truncated",
                                        "stdout_omitted_bytes",
                                        "stderr_omitted_bytes",
                                        "duration_ms",
                                        "cpu_ms",
                                        "memory_peak_bytes",
                                        "timeout_ms",
                                        "memory_limit_bytes",
                                        "limits",
                                        "runtime",
                                        "served",
                                        "files",
                                        "files_refused",
                                        "quota_refusal",
                                        "egress" };
  for (size_t i = 0; required && i < ARRAY_SIZE (always); i++)
    json_array_append_new (required, json_string (always[i]));
  return json_pack ("{s:s,s:o,s:o*}", "type", "object", "properties", p, "required", required);
}

json_t *
nsbox_mcp_tool_description (bool structured, bool per_session)
{
  const char *description
      = per_session
            ? "Runs Python 3 code in an isolated sandbox kept for this session and returns its "
              "exit code, stdout, stderr and the value of its last expression, as a Python REPL "
              "shows it (long output keeps its head and tail). State persists between calls: "
              "variables, functions, imports, the working directory and files in /tmp from "
              "earlier calls are still there. Call reset to start over in a fresh sandbox. The "
              "sandbox has a read-only root, a small writable /tmp, limited memory and CPU time, "
              "and no network unless the server allows it."
            : "Runs Python 3 code in a fresh, single-use, isolated sandbox and returns its exit "
              "code, stdout and stderr (long output keeps its head and tail). Nothing persists "
              "between calls. The sandbox has a read-only root, a small writable /tmp, limited "
              "memory and CPU time, and no network unless the server allows it.";
  json_t *tool
      = json_pack ("{s:s,s:s,s:s,s:o,s:{s:b,s:b,s:b,s:b}}", "name", TOOL_NAME, "title",
                   "Run Python", "description", description, "inputSchema",
                   input_schema (per_session), "annotations", "readOnlyHint", false,
                   "destructiveHint", false, "idempotentHint", false, "openWorldHint", false);
  if (tool && structured)
    json_object_set_new (tool, "outputSchema", output_schema ());
  return tool;
}

json_t *
nsbox_mcp_reset_description (void)
{
  return json_pack ("{s:s,s:s,s:s,s:{s:s,s:{},s:b},s:{s:b,s:b,s:b,s:b}}", "name", RESET_TOOL_NAME,
                    "title", "Reset the Python sandbox", "description",
                    "Discards this session's Python sandbox: every variable, import, file and "
                    "process of earlier run_python calls is gone, and the next call starts in a "
                    "fresh sandbox.",
                    "inputSchema", "type", "object", "properties", "additionalProperties", false,
                    "annotations", "readOnlyHint", false, "destructiveHint", true, "idempotentHint",
                    true, "openWorldHint", false);
}

/* Checks a call's arguments into the job: 0; -1 with a reason naming the
 * argument; -2 out of memory; -3 the host failed (logged). */
int
nsbox_mcp_prepare_job (struct mcp *s, struct job *job, json_t *args, char *why, size_t size)
{
  const char *key;
  json_t *value;
  json_object_foreach (args, key, value)
  {
    if (strcmp (key, "code") != 0 && strcmp (key, "timeout") != 0 && strcmp (key, "files") != 0)
      {
        snprintf (why, size, "unknown argument '%.64s' (known: code, timeout, files)", key);
        return -1;
      }
  }
  json_t *code = json_object_get (args, "code");
  if (!code)
    {
      snprintf (why, size, "missing required argument 'code' (the Python source to run)");
      return -1;
    }
  if (!json_is_string (code))
    {
      snprintf (why, size, "argument 'code' must be a string");
      return -1;
    }
  job->code = json_string_value (code);
  job->code_len = json_string_length (code);
  job->timeout_ms = s->timeout_ms;
  json_t *timeout = json_object_get (args, "timeout");
  if (timeout)
    {
      double seconds = json_number_value (timeout);
      /* NaN and infinities cannot come from JSON. */
      if (!json_is_number (timeout) || !(seconds > 0))
        {
          snprintf (why, size, "argument 'timeout' must be a positive number of seconds");
          return -1;
        }
      if (seconds * 1000.0 > (double)s->timeout_ms)
        {
          cleanup_free char *cap = nsbox_format_duration (s->timeout_ms);
          job->note = xasprintf ("timeout: %s (%g s asked for; capped at the server's maximum)",
                                 cap ? cap : "?", seconds);
          if (!job->note)
            return -2;
        }
      else if ((uint64_t)(seconds * 1000.0 + 0.5) < s->timeout_ms)
        {
          uint64_t ms = (uint64_t)(seconds * 1000.0 + 0.5);
          job->timeout_ms = ms > 0 ? ms : 1;
          char text[32];
          snprintf (text, sizeof text, "%" PRIu64 "ms", job->timeout_ms);
          struct nsbox_error *err = NULL;
          if (nsbox_run_options_set (job->options, "timeout", text, &err) < 0)
            {
              snprintf (why, size, "argument 'timeout': %s", nsbox_error_message (err));
              nsbox_error_free (err);
              return -1;
            }
        }
    }
  json_t *files = json_object_get (args, "files");
  if (files && s->runsc)
    {
      snprintf (why, size,
                "argument 'files': files are not available under the runsc runtime (this "
                "server's); run without files");
      return -1;
    }
  int r = nsbox_mcp_files_prepare (files, !s->runsc, job->options, &job->files, why, size);
  if (r == -2)
    {
      nsbox_mcp_log ("%s: %s", TOOL_NAME, why);
      return -3;
    }
  return r;
}

void
nsbox_mcp_job_free (struct job *job)
{
  if (!job)
    return;
  json_decref (job->id);
  json_decref (job->progress_token);
  json_decref (job->args);
  nsbox_run_options_free (job->options);
  if (job->cancel_fd >= 0)
    close (job->cancel_fd);
  if (job->run_fd >= 0)
    close (job->run_fd);
  nsbox_mcp_files_cleanup (&job->files);
  free (job->note);
  free (job);
}

/* The tool result of a run that happened (whatever its outcome). */
json_t *
nsbox_mcp_tool_result (const struct job *job, const nsbox_result *res)
{
  struct nsbox_error *err = NULL;
  cleanup_free char *text = nsbox_result_to_text (res, &err);
  cleanup_free char *json = text ? nsbox_result_to_json (res, &err) : NULL;
  json_t *structured = json ? json_loads (json, JSON_ALLOW_NUL, NULL) : NULL;
  if (!structured)
    {
      nsbox_mcp_log ("%s: rendering the result: %s", TOOL_NAME,
                     err ? nsbox_error_message (err) : "malformed result JSON");
      nsbox_error_free (err);
      return nsbox_mcp_tool_error (INTERNAL_ERROR_TEXT);
    }
  if (job->note)
    {
      char *with_note = xasprintf ("%s\n%s", job->note, text);
      if (with_note)
        {
          free (text);
          text = with_note;
        }
    }
  json_t *files = json_array ();
  int r = files ? nsbox_mcp_files_collect (&job->files, res, files, &text) : -ENOMEM;
  if (r < 0)
    {
      nsbox_mcp_log ("%s: returning the files: %s", TOOL_NAME, strerror (-r));
      char *with_line = xasprintf ("%sfiles not returned: internal error\n", text);
      if (with_line)
        {
          free (text);
          text = with_line;
        }
    }
  /* A quota's refusal ran nothing: an error the model can read and wait
   * out ("refused: ...; retry in 20s"), with its result as for a run. */
  json_t *result = json_pack ("{s:[{s:s,s:s}],s:b}", "content", "type", "text", "text", text,
                              "isError", nsbox_result_quota_refusal (res) != NULL);
  if (result && files)
    json_array_extend (json_object_get (result, "content"), files);
  json_decref (files);
  if (result && job->structured)
    json_object_set (result, "structuredContent", structured);
  json_decref (structured);
  return result;
}
