/* Streamed runs through `nsbox serve` (Accept: application/x-ndjson) and
 * `nsbox run --server`: each line timed as it reaches the client, the cap
 * on what is streamed, and a client that hangs up mid-stream (its run's
 * processes looked for on the host). */
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

struct line
{
  double at;
  json_t *json;
};

struct stream_client
{
  char buf[1 << 20];
  size_t len;
  struct line lines[256];
  size_t n;
  size_t stop_after; /* hang up once this many lines came (0: never) */
};

static size_t
take (char *data, size_t size, size_t nmemb, void *arg)
{
  struct stream_client *sc = arg;
  size_t n = size * nmemb;
  cr_assert (sc->len + n < sizeof sc->buf, "the stream is larger than the test's buffer");
  memcpy (sc->buf + sc->len, data, n);
  sc->len += n;
  char *nl;
  size_t start = 0;
  while ((nl = memchr (sc->buf + start, '\n', sc->len - start)))
    {
      json_error_t e;
      json_t *j = json_loadb (sc->buf + start, (size_t)(nl - sc->buf - start), 0, &e);
      cr_assert_not_null (j, "a line that is not JSON (%s): %.*s", e.text,
                          (int)(nl - sc->buf - start), sc->buf + start);
      cr_assert (sc->n < 256);
      sc->lines[sc->n++] = (struct line){ now_seconds (), j };
      start = (size_t)(nl - sc->buf) + 1;
    }
  memmove (sc->buf, sc->buf + start, sc->len - start);
  sc->len -= start;
  if (sc->stop_after && sc->n >= sc->stop_after)
    return 0; /* curl hangs up */
  return n;
}

/* POSTs body to path asking for a stream; the status. */
static long
stream_post (const struct serve_job *s, const char *path, const char *body,
             struct stream_client *sc)
{
  CURL *h = curl_easy_init ();
  cr_assert_not_null (h);
  char url[256];
  snprintf (url, sizeof url, "http://localhost%s", path);
  struct curl_slist *hs = curl_slist_append (NULL, "Accept: application/x-ndjson");
  hs = curl_slist_append (hs, "Expect:");
  curl_easy_setopt (h, CURLOPT_URL, url);
  curl_easy_setopt (h, CURLOPT_UNIX_SOCKET_PATH, s->socket);
  curl_easy_setopt (h, CURLOPT_HTTPHEADER, hs);
  curl_easy_setopt (h, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt (h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt (h, CURLOPT_TIMEOUT, (long)harness_scaled (120));
  curl_easy_setopt (h, CURLOPT_WRITEFUNCTION, take);
  curl_easy_setopt (h, CURLOPT_WRITEDATA, sc);
  CURLcode rc = curl_easy_perform (h);
  long status = -1;
  curl_easy_getinfo (h, CURLINFO_RESPONSE_CODE, &status);
  cr_assert (rc == CURLE_OK || (sc->stop_after && rc == CURLE_WRITE_ERROR), "curl: %s",
             curl_easy_strerror (rc));
  curl_slist_free_all (hs);
  curl_easy_cleanup (h);
  return status;
}

static void
stream_free (struct stream_client *sc)
{
  for (size_t i = 0; i < sc->n; i++)
    json_decref (sc->lines[i].json);
}

static const char *
line_stream (const struct line *l)
{
  return json_string_value (json_object_get (l->json, "stream"));
}

static const char *
line_data (const struct line *l)
{
  return json_string_value (json_object_get (l->json, "data"));
}

static json_t *
last_result (const struct stream_client *sc)
{
  cr_assert (sc->n > 0, "an empty stream");
  json_t *r = json_object_get (sc->lines[sc->n - 1].json, "result");
  cr_assert_not_null (r, "the last line is not the result: %s",
                      json_dumps (sc->lines[sc->n - 1].json, 0));
  return r;
}

static const char *const no_pool[] = { "--pool-size", "0", NULL };

#define A_PAUSE_B "import time\\nprint('a', flush=True)\\ntime.sleep(1)\\nprint('b')"

/* The `a` line reaches the client at least 0.7 s before the result. */
static void
expect_a_before_b (const struct stream_client *sc)
{
  /* The program may write 'a' and its newline apart: the time the
   * stream's stdout first holds "a\n". */
  double a_at = -1;
  char out[64] = "";
  for (size_t i = 0; i < sc->n && a_at < 0; i++)
    if (line_stream (&sc->lines[i]) && strcmp (line_stream (&sc->lines[i]), "stdout") == 0)
      {
        size_t used = strlen (out);
        snprintf (out + used, sizeof out - used, "%s", line_data (&sc->lines[i]));
        if (strcmp (out, "a\n") == 0)
          a_at = sc->lines[i].at;
      }
  if (a_at <= 0)
    {
      char seen[4096] = "";
      for (size_t i = 0; i < sc->n; i++)
        {
          char *line = json_dumps (sc->lines[i].json, JSON_COMPACT);
          size_t used = strlen (seen);
          snprintf (seen + used, sizeof seen - used, "%.300s\n", line ? line : "?");
          free (line);
        }
      cr_assert_fail ("no line carried 'a'; the stream:\n%s", seen);
    }
  double gap = sc->lines[sc->n - 1].at - a_at;
  cr_assert (gap >= 0.7, "'a' came only %.3f s before the result: it was not streamed", gap);
  json_t *r = last_result (sc);
  cr_assert_str_eq (json_string_value (json_object_get (r, "stdout")), "a\nb\n");
}

Test (serve_stream, output_reaches_the_client_as_it_is_written, .timeout = 120)
{
  struct serve_job s;
  serve_start (no_pool, &s);
  static struct stream_client sc;
  memset (&sc, 0, sizeof sc);
  long st = stream_post (&s, "/v1/runs", "{\"code\": \"" A_PAUSE_B "\"}", &sc);
  cr_assert_eq (st, 200);
  expect_a_before_b (&sc);
  stream_free (&sc);

  /* The same in a live sandbox, whose result says its value. */
  if (!harness_is_runsc ())
    {
      char *answer;
      cr_assert_eq (serve_http (s.socket, "POST", "/v1/sandboxes", "{}", 2, NULL, &answer, NULL),
                    201, "%s", answer);
      json_t *o = json_loads (answer, 0, NULL);
      char path[160];
      snprintf (path, sizeof path, "/v1/sandboxes/%s/runs",
                json_string_value (json_object_get (o, "id")));
      json_decref (o);
      free (answer);
      memset (&sc, 0, sizeof sc);
      cr_assert_eq (stream_post (&s, path, "{\"code\": \"" A_PAUSE_B "\\n6 * 7\"}", &sc), 200);
      expect_a_before_b (&sc);
      cr_assert_str_eq (json_string_value (json_object_get (last_result (&sc), "value")), "42");
      stream_free (&sc);
    }
  serve_stop_ok (&s);
}

Test (serve_stream, a_flood_is_capped_in_the_stream_as_in_the_result, .timeout = 120)
{
  struct serve_job s;
  serve_start (no_pool, &s);
  static struct stream_client sc;
  memset (&sc, 0, sizeof sc);
  long st = stream_post (&s, "/v1/runs",
                         "{\"code\": \"import sys\\nfor i in range(2000): sys.stdout.write('x' * "
                         "1000); sys.stderr.write('y' * 1000)\", \"max-output-bytes\": \"4k\"}",
                         &sc);
  cr_assert_eq (st, 200);
  size_t out = 0, err = 0;
  for (size_t i = 0; i + 1 < sc.n; i++)
    {
      const char *stream = line_stream (&sc.lines[i]);
      cr_assert_not_null (stream, "a line before the result that is no output");
      size_t n = strlen (line_data (&sc.lines[i]));
      *(strcmp (stream, "stdout") == 0 ? &out : &err) += n;
    }
  cr_assert (out == 4096 && err == 4096, "streamed %zu bytes of stdout and %zu of stderr, cap 4096",
             out, err);
  json_t *r = last_result (&sc);
  cr_assert (json_integer_value (json_object_get (r, "stdout_omitted_bytes")) > 1000000,
             "the result does not count what was not streamed");
  stream_free (&sc);
  serve_stop_ok (&s);
}

Test (serve_stream, a_client_that_hangs_up_mid_stream_gets_its_run_killed, .timeout = 120)
{
  struct serve_job s;
  /* A timeout long enough that only the hang-up can end it in time. */
  static const char *const args[] = { "--pool-size", "0", "--timeout", "60s", NULL };
  serve_start (args, &s);
  char marker[64], body[512];
  snprintf (marker, sizeof marker, "nsbox-stream-%d-%ld", (int)getpid (), (long)time (NULL));
  snprintf (body, sizeof body,
            "{\"code\": \"import subprocess, sys\\n"
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', '%s'])\\n"
            "print('started', flush=True)\\np.wait()\"}",
            marker);
  static struct stream_client sc;
  memset (&sc, 0, sizeof sc);
  sc.stop_after = 1;
  stream_post (&s, "/v1/runs", body, &sc);
  cr_assert_eq (sc.n, 1);
  cr_assert_str_eq (line_data (&sc.lines[0]), "started\n");
  stream_free (&sc);
  /* Gone well before its 60 s timeout. */
  double until = now_seconds () + harness_scaled (10);
  while (host_processes_with (marker) > 0 && now_seconds () < until)
    usleep (50000);
  cr_assert_eq (host_processes_with (marker), 0, "the run outlived its client");
  char *answer;
  until = now_seconds () + harness_scaled (5);
  bool counted = false;
  while (!counted && now_seconds () < until)
    {
      cr_assert_eq (serve_http (s.socket, "GET", "/metrics", NULL, 0, NULL, &answer, NULL), 200);
      counted = strstr (answer, "outcome=\"cancelled\",served=\"cold\"} 1\n") != NULL;
      free (answer);
      usleep (50000);
    }
  cr_assert (counted, "the run is not counted as cancelled");
  serve_stop_ok (&s);
}

/* `nsbox run --server` prints `a` as it comes: timed at its stdout. */
Test (serve_stream, nsbox_run_server_prints_output_as_it_comes, .timeout = 120)
{
  struct serve_job s;
  serve_start (no_pool, &s);
  int in[2], out[2];
  cr_assert (pipe (in) == 0 && pipe (out) == 0);
  pid_t pid = fork ();
  cr_assert (pid >= 0);
  if (pid == 0)
    {
      dup2 (in[0], 0);
      dup2 (out[1], 1);
      close (in[1]);
      close (out[0]);
      execl (harness_nsbox_bin (), "nsbox", "run", "--server", s.server_arg, (char *)NULL);
      _exit (127);
    }
  close (in[0]);
  close (out[1]);
  const char *code = "import time\nprint('a', flush=True)\ntime.sleep(1)\nprint('b')\n";
  cr_assert (write (in[1], code, strlen (code)) == (ssize_t)strlen (code));
  close (in[1]);
  char buf[64];
  size_t n = 0;
  double a_at = 0, end_at = 0;
  ssize_t got;
  while ((got = read (out[0], buf + n, sizeof buf - 1 - n)) > 0)
    {
      n += (size_t)got;
      buf[n] = '\0';
      if (!a_at && strchr (buf, 'a'))
        a_at = now_seconds ();
    }
  end_at = now_seconds ();
  close (out[0]);
  int ws;
  cr_assert (waitpid (pid, &ws, 0) == pid && WIFEXITED (ws) && WEXITSTATUS (ws) == 0, "0x%x", ws);
  cr_assert_str_eq (buf, "a\nb\n");
  cr_assert (end_at - a_at >= 0.7, "'a' came only %.3f s before the end", end_at - a_at);
  serve_stop_ok (&s);
}
