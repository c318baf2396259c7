/* The model-facing plain-text form of a result (nsbox_result_to_text). The
 * format is a stable interface, documented in README.md. */
#include "result.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "error.h"
#include "units.h"
#include "util.h"

/* What stopped the program, in words; nothing for a normal exit. */
static int
write_stop_reason (FILE *f, const nsbox_result *r)
{
  if (r->timed_out)
    {
      cleanup_free char *t = r->timeout_ms ? nsbox_format_duration (r->timeout_ms) : NULL;
      if (r->timeout_ms && !t)
        return -ENOMEM;
      fprintf (f, "timed out%s%s\n", t ? " after " : "", t ? t : "");
    }
  else if (r->oom_killed)
    {
      cleanup_free char *m
          = r->memory_limit_bytes ? nsbox_format_size (r->memory_limit_bytes) : NULL;
      if (r->memory_limit_bytes && !m)
        return -ENOMEM;
      fprintf (f, "killed: memory limit %s%sexceeded\n", m ? m : "", m ? " " : "");
    }
  else if (r->signal)
    {
      char name[32];
      nsbox_signal_name (r->signal, name, sizeof name);
      fprintf (f, "killed by signal %d (%s)\n", r->signal, name);
    }
  return 0;
}

/* One stream under its header: valid UTF-8, NUL bytes as U+FFFD (the text
 * is a C string), a final newline added when missing. */
static int
write_stream (FILE *f, const char *name, const char *bytes, size_t len)
{
  fprintf (f, "--- %s ---\n", name);
  if (len == 0)
    {
      fputs ("(empty)\n", f);
      return 0;
    }
  cleanup_free char *text = NULL;
  size_t text_len = 0;
  if (nsbox_utf8_sanitize (bytes, len, &text, &text_len) < 0)
    return -ENOMEM;
  for (const char *p = text, *end = text + text_len; p < end;)
    {
      const char *nul = memchr (p, '\0', (size_t)(end - p));
      size_t run = nul ? (size_t)(nul - p) : (size_t)(end - p);
      fwrite (p, 1, run, f);
      if (nul)
        fputs ("\xef\xbf\xbd", f);
      p += run + (nul ? 1 : 0);
    }
  if (text[text_len - 1] != '\n')
    fputc ('\n', f);
  /* A pooled sandbox's init is a copy of this process (nsbox_result_free). */
  explicit_bzero (text, text_len);
  return 0;
}

char *
nsbox_printable (const char *text)
{
  char *out = NULL;
  size_t len = 0;
  if (nsbox_utf8_sanitize (text, strlen (text), &out, &len) < 0)
    return NULL;
  size_t j = 0;
  for (size_t i = 0; i < len; i++)
    {
      unsigned char c = (unsigned char)out[i];
      /* C1 controls are U+0080..U+009F: 0xc2 0x80..0x9f in UTF-8. */
      if (c == 0xc2 && i + 1 < len && (unsigned char)out[i + 1] <= 0x9f)
        {
          out[j++] = '?';
          i++;
        }
      else
        out[j++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
  out[j] = '\0';
  return out;
}

/* A name from /tmp/out on one line (a refused name may hold a newline). */
static int
write_name (FILE *f, const char *name)
{
  cleanup_free char *text = nsbox_printable (name);
  if (!text)
    return -ENOMEM;
  fputs (text, f);
  return 0;
}

/* The files collected from /tmp/out, then what was not and why. */
static int
write_files (FILE *f, const nsbox_result *r)
{
  for (size_t i = 0; i < r->n_files; i++)
    {
      fputs ("file: /tmp/out/", f);
      if (write_name (f, r->files[i].name) < 0)
        return -ENOMEM;
      fprintf (f, " (%" PRIu64 " bytes)\n", r->files[i].size);
    }
  for (size_t i = 0; i < r->n_refused; i++)
    {
      const char *name = r->refused[i].name;
      fputs (name[0] == '/' ? "file not collected: " : "file not collected: /tmp/out/", f);
      if (write_name (f, name) < 0)
        return -ENOMEM;
      fputs (" (", f);
      if (write_name (f, r->refused[i].reason) < 0)
        return -ENOMEM;
      fputs (")\n", f);
    }
  return 0;
}

/* network: proxy: how many connections, each refusal (the first few) and
 * the limit reached. The host names are the proxy's normalised ones. */
#define EGRESS_REFUSALS_SHOWN 5

static void
write_egress (FILE *f, const nsbox_result *r)
{
  if (!r->egress)
    return;
  json_int_t connections = json_integer_value (json_object_get (r->egress, "connections"));
  json_int_t refused = json_integer_value (json_object_get (r->egress, "refused"));
  fprintf (f, "egress: %" JSON_INTEGER_FORMAT " connection%s, %" JSON_INTEGER_FORMAT " refused\n",
           connections, connections == 1 ? "" : "s", refused);
  json_t *log = json_object_get (r->egress, "log"), *rec;
  size_t i, shown = 0;
  json_array_foreach (log, i, rec)
  {
    const char *decision = json_string_value (json_object_get (rec, "decision"));
    const char *reason = json_string_value (json_object_get (rec, "reason"));
    if (!decision || strcmp (decision, "refused") != 0 || !reason)
      continue;
    if (shown++ == EGRESS_REFUSALS_SHOWN)
      {
        fputs ("egress refused: (more)\n", f);
        break;
      }
    cleanup_free char *line = nsbox_printable (reason);
    fprintf (f, "egress refused: %s\n", line ? line : "?");
  }
  const char *limit = json_string_value (json_object_get (r->egress, "limit"));
  if (limit)
    {
      cleanup_free char *line = nsbox_printable (limit);
      fprintf (f, "egress limit reached: %s\n", line ? line : "?");
    }
}

/* A run a quota refused: what and until when, and that nothing ran. */
static int
write_refusal (FILE *f, const nsbox_result *r)
{
  /* Whole seconds, rounded up, past a second. */
  uint64_t wait = r->retry_after_ms ? r->retry_after_ms : 1;
  if (wait >= 1000)
    wait = (wait + 999) / 1000 * 1000;
  cleanup_free char *retry = nsbox_format_duration (wait);
  if (!retry)
    return -ENOMEM;
  fprintf (f,
           "refused: this session's quota %s (%s) is used up; retry in %s\n"
           "the code did not run (no sandbox was started)\n",
           r->quota_refusal, r->quota_limit, retry);
  return 0;
}

static int
write_text (FILE *f, const nsbox_result *r)
{
  if (r->quota_refusal)
    return write_refusal (f, r);
  size_t out_len = 0, err_len = 0;
  const char *out = nsbox_result_stdout (r, &out_len);
  const char *errs = nsbox_result_stderr (r, &err_len);
  fprintf (f, "exit code: %d\n", r->exit_code);
  int ret = write_stop_reason (f, r);
  if (ret < 0)
    return ret;
  if (r->sandbox_lost)
    fputs ("sandbox lost: its variables, files and processes are gone\n", f);
  if (r->stdout_truncated)
    fprintf (f, "output truncated: %" PRIu64 " bytes omitted from stdout\n", r->stdout_omitted);
  if (r->stderr_truncated)
    fprintf (f, "output truncated: %" PRIu64 " bytes omitted from stderr\n", r->stderr_omitted);
  if ((ret = write_files (f, r)) < 0)
    return ret;
  write_egress (f, r);
  if ((ret = write_stream (f, "stdout", out, out_len)) < 0)
    return ret;
  if ((ret = write_stream (f, "stderr", errs, err_len)) < 0)
    return ret;
  /* A live sandbox's run whose code ended in an expression. */
  return r->value ? write_stream (f, "value", r->value, r->value_len) : 0;
}

char *
nsbox_result_to_text (const nsbox_result *result, struct nsbox_error **err)
{
  if (!result)
    {
      nsbox_error_set (err, EINVAL, "render result as text: no result");
      return NULL;
    }
  char *text = NULL;
  size_t len = 0;
  cleanup_fclose FILE *f = open_memstream (&text, &len);
  if (!f)
    {
      nsbox_error_sys (err, ENOMEM, "render result as text");
      return NULL;
    }
  int r = write_text (f, result);
  bool failed = ferror (f) != 0;
  if (fclose (TAKE_PTR (f)) != 0 || failed || r < 0)
    {
      free (text);
      nsbox_error_sys (err, ENOMEM, "render result as text");
      return NULL;
    }
  return text;
}
