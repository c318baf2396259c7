/* `nsbox serve` for the server tests (harness.h): started as the test user
 * on a unix socket in a directory of that user, driven by the CLI client
 * and by raw HTTP requests through libcurl. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

struct answer
{
  char *buf;
  size_t len;
  bool retry_after;
};

static size_t
collect (char *data, size_t size, size_t n, void *arg)
{
  struct answer *a = arg;
  char *grown = realloc (a->buf, a->len + size * n + 1);
  if (!grown)
    return 0;
  memcpy (grown + a->len, data, size * n);
  a->buf = grown;
  a->len += size * n;
  a->buf[a->len] = '\0';
  return size * n;
}

static size_t
header (char *data, size_t size, size_t n, void *arg)
{
  struct answer *a = arg;
  if (size * n >= 12 && strncasecmp (data, "Retry-After:", 12) == 0)
    a->retry_after = true;
  return size * n;
}

long
serve_http (const char *socket, const char *method, const char *path, const char *body,
            size_t body_len, const char *const *headers, char **answer, bool *retry_after)
{
  CURL *h = curl_easy_init ();
  cr_assert_not_null (h);
  char url[256];
  bool tcp = strncmp (socket, "http://", 7) == 0;
  snprintf (url, sizeof url, "%s%s", tcp ? socket : "http://localhost", path);
  struct curl_slist *list = curl_slist_append (NULL, "Expect:");
  for (size_t i = 0; headers && headers[i]; i++)
    list = curl_slist_append (list, headers[i]);
  struct answer a = { 0 };
  curl_easy_setopt (h, CURLOPT_URL, url);
  if (!tcp)
    curl_easy_setopt (h, CURLOPT_UNIX_SOCKET_PATH, socket);
  curl_easy_setopt (h, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt (h, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt (h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt (h, CURLOPT_TIMEOUT, (long)harness_scaled (120));
  if (body)
    {
      curl_easy_setopt (h, CURLOPT_POSTFIELDS, body);
      curl_easy_setopt (h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    }
  curl_easy_setopt (h, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt (h, CURLOPT_WRITEDATA, &a);
  curl_easy_setopt (h, CURLOPT_HEADERFUNCTION, header);
  curl_easy_setopt (h, CURLOPT_HEADERDATA, &a);
  CURLcode rc = curl_easy_perform (h);
  long status = -1;
  if (rc == CURLE_OK)
    curl_easy_getinfo (h, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all (list);
  curl_easy_cleanup (h);
  if (answer)
    *answer = a.buf ? a.buf : strdup (rc == CURLE_OK ? "" : curl_easy_strerror (rc));
  else
    free (a.buf);
  if (retry_after)
    *retry_after = a.retry_after;
  return status;
}

uint16_t
free_tcp_port (void)
{
  uint16_t port = 0;
  int fd = tcp_listener (&port);
  close (fd);
  return port;
}

/* A new NULL-terminated array: `flag value` then extra_args (free it). */
static const char **
flag_then (const char *flag, const char *value, const char *const *extra_args)
{
  size_t n = 0;
  while (extra_args && extra_args[n])
    n++;
  const char **args = calloc (n + 3, sizeof *args);
  cr_assert_not_null (args);
  args[0] = flag;
  args[1] = value;
  for (size_t i = 0; i < n; i++)
    args[2 + i] = extra_args[i];
  return args;
}

/* Starts `nsbox serve --listen LISTEN EXTRA...` and waits until target
 * (its socket or url) answers /v1/health. */
static void
start_and_wait (struct serve_job *s, const char *listen, const char *const *extra_args,
                const char *target, const char *const *headers)
{
  const char **args = flag_then ("--listen", listen, extra_args);
  run_nsbox_spawn ("serve", true, args, false, &s->job);
  free (args);
  close (s->job.in_fd);
  s->job.in_fd = -1;
  double until = now_seconds () + harness_scaled (30);
  for (;;)
    {
      char *answer = NULL;
      if ((s->url[0] || access (s->socket, F_OK) == 0)
          && serve_http (target, "GET", "/v1/health", NULL, 0, headers, &answer, NULL) == 200)
        {
          free (answer);
          return;
        }
      free (answer);
      int status;
      if (waitpid (s->job.pid, &status, WNOHANG) == s->job.pid)
        {
          char buf[4096] = "";
          ssize_t r = read (s->job.err_fd, buf, sizeof buf - 1);
          buf[r > 0 ? r : 0] = '\0';
          cr_assert_fail ("nsbox serve ended with status 0x%x before it answered: %s", status, buf);
        }
      cr_assert (now_seconds () < until, "nsbox serve did not answer /v1/health within 30 s");
      struct timespec ts = { 0, 10000000 };
      nanosleep (&ts, NULL);
    }
}

void
serve_start (const char *const *extra_args, struct serve_job *s)
{
  memset (s, 0, sizeof *s);
  char *dir = user_dir ();
  snprintf (s->dir, sizeof s->dir, "%s", dir);
  free (dir);
  snprintf (s->socket, sizeof s->socket, "%s/nsbox.sock", s->dir);
  snprintf (s->server_arg, sizeof s->server_arg, "unix:%s", s->socket);
  start_and_wait (s, s->server_arg, extra_args, s->socket, NULL);
}

void
serve_start_tcp (const char *const *extra_args, const char *token, struct serve_job *s)
{
  memset (s, 0, sizeof *s);
  char *dir = user_dir ();
  snprintf (s->dir, sizeof s->dir, "%s", dir);
  free (dir);
  char token_path[128], listen[64];
  snprintf (token_path, sizeof token_path, "%s/token", s->dir);
  FILE *f = fopen (token_path, "we");
  cr_assert_not_null (f, "%s: %s", token_path, strerror (errno));
  fprintf (f, "%s\n", token);
  cr_assert (fclose (f) == 0);
  struct stat st;
  cr_assert (stat (s->dir, &st) == 0 && chmod (token_path, 0600) == 0
             && chown (token_path, st.st_uid, st.st_gid) == 0);
  s->port = free_tcp_port ();
  snprintf (listen, sizeof listen, "tcp:127.0.0.1:%u", (unsigned)s->port);
  snprintf (s->url, sizeof s->url, "http://127.0.0.1:%u", (unsigned)s->port);
  snprintf (s->server_arg, sizeof s->server_arg, "%s", s->url);
  /* A token file of several lines: the client is the first token's. */
  snprintf (s->auth, sizeof s->auth, "Authorization: Bearer %.*s", (int)strcspn (token, "\n"),
            token);
  const char **args = flag_then ("--token-file", token_path, extra_args);
  const char *const headers[] = { s->auth, NULL };
  start_and_wait (s, listen, args, s->url, headers);
  free (args);
}

static char *
read_all (int fd)
{
  size_t len = 0, alloc = 4096;
  char *buf = malloc (alloc);
  cr_assert_not_null (buf);
  fcntl (fd, F_SETFL, O_NONBLOCK);
  for (;;)
    {
      if (len + 1024 > alloc)
        buf = realloc (buf, alloc *= 2);
      cr_assert_not_null (buf);
      ssize_t n = read (fd, buf + len, alloc - len - 1);
      if (n <= 0)
        break;
      len += (size_t)n;
    }
  buf[len] = '\0';
  return buf;
}

int
serve_stop (struct serve_job *s, char **log)
{
  kill (s->job.pid, SIGTERM);
  double until = now_seconds () + harness_scaled (60);
  int status = -1;
  while (waitpid (s->job.pid, &status, WNOHANG) == 0)
    {
      if (now_seconds () > until)
        {
          kill (s->job.pid, SIGKILL);
          waitpid (s->job.pid, &status, 0);
          cr_assert_fail ("nsbox serve did not stop within 60 s of SIGTERM");
        }
      struct timespec ts = { 0, 10000000 };
      nanosleep (&ts, NULL);
    }
  char *text = read_all (s->job.err_fd);
  close (s->job.out_fd);
  close (s->job.err_fd);
  if (log)
    *log = text;
  else
    free (text);
  char token_path[128];
  snprintf (token_path, sizeof token_path, "%s/token", s->dir);
  unlink (token_path); /* serve_start_tcp's */
  rmdir (s->dir);
  return status;
}

void
serve_run (struct serve_job *s, const char *code, const char *const *extra_args,
           struct run_out *out)
{
  size_t n = 0;
  while (extra_args && extra_args[n])
    n++;
  const char **args = calloc (n + 3, sizeof *args);
  cr_assert_not_null (args);
  args[0] = "--server";
  args[1] = s->server_arg;
  for (size_t i = 0; i < n; i++)
    args[2 + i] = extra_args[i];
  struct run_job job;
  run_nsbox_spawn ("run", false, args, true, &job);
  free (args);
  run_cli_wait (&job, code, strlen (code), out);
}

void
serve_stop_ok (struct serve_job *s)
{
  char *log = NULL;
  int status = serve_stop (s, &log);
  cr_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0,
             "nsbox serve ended with status 0x%x after SIGTERM: %s", status, log);
  free (log);
}
