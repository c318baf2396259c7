/* nsbox repl: one live sandbox (sandbox.c) for the blocks read from a
 * terminal or a pipe. */
#include "repl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "nsbox.h"

#define REPL_FAILED 125
/* The code of one block at most: as for nsbox run's stdin. */
#define BLOCK_MAX (64u << 20)

static void __attribute__ ((format (printf, 1, 2))) say (const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  nsbox_vprint_message ("nsbox", fmt, ap);
  va_end (ap);
}

struct reader
{
  int fd;
  char buf[65536];
  size_t off, len;
  bool eof;
};

/* One line into *line (without its '\n'); false at EOF with nothing read. */
static bool
read_line (struct reader *r, char **line, size_t *line_len, size_t *line_cap)
{
  *line_len = 0;
  for (;;)
    {
      if (r->off == r->len)
        {
          if (r->eof)
            return *line_len > 0;
          ssize_t n = read (r->fd, r->buf, sizeof r->buf);
          if (n < 0 && errno == EINTR)
            continue;
          if (n <= 0)
            {
              r->eof = true;
              continue;
            }
          r->off = 0;
          r->len = (size_t)n;
        }
      char c = r->buf[r->off++];
      if (c == '\n')
        return true;
      if (*line_len + 1 >= *line_cap)
        {
          size_t cap = *line_cap ? *line_cap * 2 : 256;
          char *grown = realloc (*line, cap);
          if (!grown)
            return false;
          *line = grown;
          *line_cap = cap;
        }
      (*line)[(*line_len)++] = c;
    }
}

/* A block: its lines up to an empty one. 1 with a block, 0 at the end,
 * -1 when it is too large or out of memory. */
static int
read_block (struct reader *r, bool prompt, char **block, size_t *len)
{
  size_t cap = 0, line_cap = 0, line_len;
  char *line = NULL;
  *block = NULL;
  *len = 0;
  int ret = 0;
  for (;;)
    {
      if (prompt)
        fputs (*len ? "... " : ">>> ", stderr);
      if (!read_line (r, &line, &line_len, &line_cap))
        break;
      if (line_len == 0)
        {
          if (*len)
            break;
          continue;
        }
      if (*len + line_len + 1 > BLOCK_MAX)
        {
          ret = -1;
          break;
        }
      if (*len + line_len + 2 > cap)
        {
          size_t want = (*len + line_len + 2) * 2;
          char *grown = realloc (*block, want);
          if (!grown)
            {
              ret = -1;
              break;
            }
          *block = grown;
          cap = want;
        }
      memcpy (*block + *len, line, line_len);
      *len += line_len;
      (*block)[(*len)++] = '\n';
    }
  free (line);
  if (ret == 0 && *len)
    ret = 1;
  if (ret <= 0)
    {
      free (*block);
      *block = NULL;
    }
  return ret;
}

static void
write_all (int fd, const char *p, size_t n)
{
  while (n > 0)
    {
      ssize_t w = write (fd, p, n);
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0)
        return;
      p += w;
      n -= (size_t)w;
    }
}

static void
show (const nsbox_result *res, bool json)
{
  struct nsbox_error *err = NULL;
  if (json)
    {
      char *text = nsbox_result_to_json (res, &err);
      if (text)
        {
          printf ("%s\n", text);
          fflush (stdout);
        }
      free (text);
      nsbox_error_free (err);
      return;
    }
  size_t n;
  const char *out = nsbox_result_stdout (res, &n);
  write_all (1, out, n);
  const char *errs = nsbox_result_stderr (res, &n);
  write_all (2, errs, n);
  const char *value = nsbox_result_value (res, &n);
  if (value)
    {
      write_all (1, value, n);
      write_all (1, "\n", 1);
    }
  if (nsbox_result_sandbox_lost (res))
    fprintf (stderr, "nsbox: the sandbox is lost (exit code %d): its state is gone\n",
             nsbox_result_exit_code (res));
  else if (nsbox_result_timed_out (res))
    fprintf (stderr, "nsbox: interrupted at the timeout\n");
}

int
nsbox_repl (nsbox_config *config, int in_fd, bool json)
{
  struct nsbox_error *err = NULL;
  nsbox_pool_options *po = nsbox_pool_options_new (&err);
  nsbox_pool *pool = NULL;
  nsbox_sandbox *sandbox = NULL;
  int status = 0;
  if (!po || nsbox_pool_options_set (po, "size", "0", &err) < 0
      || nsbox_pool_options_set (po, "sandboxes", "0", &err) < 0
      || nsbox_pool_new (config, po, &pool, &err) < 0
      || nsbox_sandbox_open (pool, NULL, &sandbox, &err) < 0)
    {
      say ("%s", nsbox_error_message (err));
      status = REPL_FAILED;
    }
  nsbox_pool_options_free (po);
  nsbox_config_free (config);
  nsbox_error_free (err);
  err = NULL;
  struct reader r = { .fd = in_fd };
  bool prompt = isatty (in_fd) == 1;
  while (status == 0 || sandbox)
    {
      char *code;
      size_t len;
      int got = read_block (&r, prompt, &code, &len);
      if (got < 0)
        {
          say ("a block of code larger than %u MiB, or out of memory", BLOCK_MAX >> 20);
          status = REPL_FAILED;
          break;
        }
      if (got == 0)
        break;
      nsbox_result *res = NULL;
      if (nsbox_sandbox_run (sandbox, code, len, NULL, &res, &err) < 0)
        {
          say ("%s", nsbox_error_message (err));
          nsbox_error_free (err);
          err = NULL;
          status = REPL_FAILED;
        }
      else
        show (res, json);
      nsbox_result_free (res);
      free (code);
    }
  if (prompt)
    fputs ("\n", stderr);
  nsbox_sandbox_close (sandbox);
  nsbox_pool_free (pool);
  return status;
}
