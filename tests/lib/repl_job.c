/* `nsbox repl --json`, fed block by block, for the tests of live
 * sandboxes (the library's nsbox_sandbox_*): tests/integration/sandbox_test.c
 * and the driver attacks of tests/hostile/driver_test.c. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

void
repl_start_with (struct repl_job *r, const char *timeout, const char *key, const char *value)
{
  memset (r, 0, sizeof *r);
  make_run_tag (r->tag, sizeof r->tag);
  const char *const args[] = { "--json", "--timeout", timeout, "--env", r->tag, key, value, NULL };
  run_nsbox_spawn ("repl", true, args, false, &r->job);
}

void
repl_start (struct repl_job *r, const char *timeout)
{
  repl_start_with (r, timeout, NULL, NULL);
}

void
repl_feed (struct repl_job *r, const char *block)
{
  r->fed_at = now_seconds ();
  size_t len = strlen (block);
  cr_assert (write (r->job.in_fd, block, len) == (ssize_t)len, "write: %s", strerror (errno));
  cr_assert (write (r->job.in_fd, "\n\n", 2) == 2);
}

json_t *
repl_next (struct repl_job *r, double seconds)
{
  double deadline = now_seconds () + harness_scaled (seconds);
  for (;;)
    {
      char *nl = memchr (r->buf, '\n', r->len);
      if (nl)
        {
          json_error_t je;
          json_t *j = json_loadb (r->buf, (size_t)(nl - r->buf), 0, &je);
          cr_assert_not_null (j, "not a JSON line: %.*s", (int)(nl - r->buf), r->buf);
          r->len -= (size_t)(nl + 1 - r->buf);
          memmove (r->buf, nl + 1, r->len);
          cr_assert (r->n < REPL_MAX_RESULTS);
          r->results[r->n++] = j;
          return j;
        }
      double left = deadline - now_seconds ();
      cr_assert (left > 0, "no result line within %.1fs", harness_scaled (seconds));
      struct pollfd p = { r->job.out_fd, POLLIN, 0 };
      poll (&p, 1, (int)(left * 1000) + 1);
      ssize_t n = read (r->job.out_fd, r->buf + r->len, sizeof r->buf - r->len);
      if (n == 0)
        return NULL;
      if (n < 0 && errno != EAGAIN && errno != EINTR)
        cr_assert_fail ("read: %s", strerror (errno));
      if (n > 0)
        r->len += (size_t)n;
    }
}

int
repl_end (struct repl_job *r, char **err)
{
  close (r->job.in_fd);
  char tail[4096];
  while (read (r->job.out_fd, tail, sizeof tail) > 0)
    ;
  size_t cap = 65536, len = 0;
  char *e = malloc (cap);
  cr_assert_not_null (e);
  ssize_t n;
  while ((n = read (r->job.err_fd, e + len, cap - len - 1)) > 0)
    len += (size_t)n;
  e[len] = '\0';
  close (r->job.out_fd);
  close (r->job.err_fd);
  int status;
  while (waitpid (r->job.pid, &status, 0) < 0)
    cr_assert (errno == EINTR);
  for (size_t i = 0; i < r->n; i++)
    json_decref (r->results[i]);
  r->n = 0;
  if (err)
    *err = e;
  else
    free (e);
  return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
}

bool
repl_runsc_refused (void)
{
  if (!harness_is_runsc ())
    return false;
  struct repl_job *r = calloc (1, sizeof *r);
  cr_assert_not_null (r);
  repl_start (r, "5s");
  char *err;
  int status = repl_end (r, &err);
  free (r);
  cr_assert (status == 125, "expected exit status 125 under runsc, got %d", status);
  cr_assert (strstr (err, "not available with runtime runsc"), "expected the refusal, got: %s",
             err);
  free (err);
  return true;
}
