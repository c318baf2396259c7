/* `nsbox run --server`: the HTTP request, through libcurl (client.h). */
#include "client.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "dl.h"

/* An answer larger than this is refused: two streams at the largest
 * max-output-bytes anyone should use, JSON-escaped, and then some. */
#define MAX_ANSWER_BYTES (512u << 20)

static struct
{
  __typeof__ (curl_easy_init) *easy_init;
  __typeof__ (curl_easy_setopt) *easy_setopt;
  __typeof__ (curl_easy_perform) *easy_perform;
  __typeof__ (curl_easy_getinfo) *easy_getinfo;
  __typeof__ (curl_easy_cleanup) *easy_cleanup;
  __typeof__ (curl_easy_strerror) *easy_strerror;
  __typeof__ (curl_slist_append) *slist_append;
  __typeof__ (curl_slist_free_all) *slist_free_all;
} curl;

#define CURL_SYMBOL(field)                                                                         \
  {                                                                                                \
    "curl_" #field, (void **)&curl.field                                                           \
  }
static const struct nsbox_dl_symbol curl_symbols[] = {
  CURL_SYMBOL (easy_init),    CURL_SYMBOL (easy_setopt),    CURL_SYMBOL (easy_perform),
  CURL_SYMBOL (easy_getinfo), CURL_SYMBOL (easy_cleanup),   CURL_SYMBOL (easy_strerror),
  CURL_SYMBOL (slist_append), CURL_SYMBOL (slist_free_all),
};

struct answer
{
  char *buf;
  size_t len, alloc;
  bool too_large;
  void (*on_line) (void *data, const char *line, size_t len);
  void *data;
  size_t lines_end; /* the lines before it were passed on */
};

static size_t
collect (char *data, size_t size, size_t n, void *arg)
{
  struct answer *a = arg;
  size_t bytes = size * n;
  if (a->len + bytes > MAX_ANSWER_BYTES)
    {
      a->too_large = true;
      return 0;
    }
  if (a->len + bytes + 1 > a->alloc)
    {
      size_t want = a->alloc ? a->alloc : 16384;
      while (want < a->len + bytes + 1)
        want *= 2;
      char *grown = realloc (a->buf, want);
      if (!grown)
        return 0;
      a->buf = grown;
      a->alloc = want;
    }
  memcpy (a->buf + a->len, data, bytes);
  a->len += bytes;
  a->buf[a->len] = '\0';
  char *nl;
  while (a->on_line && (nl = memchr (a->buf + a->lines_end, '\n', a->len - a->lines_end)))
    {
      a->on_line (a->data, a->buf + a->lines_end, (size_t)(nl - (a->buf + a->lines_end)));
      a->lines_end = (size_t)(nl - a->buf) + 1;
    }
  return bytes;
}

int
nsbox_client_stream_run (const char *server, const char *token, const char *session,
                         const char *body, size_t body_len,
                         void (*on_line) (void *data, const char *line, size_t len), void *data,
                         long *status, char **out, size_t *out_len, char *why, size_t size)
{
  if (nsbox_dl_load ("libcurl.so.4", curl_symbols, ARRAY_SIZE (curl_symbols), why, size) < 0)
    return -1;
  cleanup_free char *url = NULL;
  const char *socket_path = NULL;
  if (strncmp (server, "unix:", 5) == 0 && server[5] == '/')
    {
      socket_path = server + 5;
      url = strdup ("http://localhost/v1/runs");
    }
  else if (strncmp (server, "http://", 7) == 0 || strncmp (server, "https://", 8) == 0)
    {
      size_t n = strlen (server), scheme = server[4] == 's' ? 8 : 7;
      while (n > scheme && server[n - 1] == '/')
        n--;
      url = xasprintf ("%.*s/v1/runs", (int)n, server);
    }
  else
    {
      snprintf (why, size,
                "--server '%s': expected unix:/PATH, http://HOST:PORT or https://HOST:PORT (a "
                "TLS proxy in front of the server)",
                server);
      return -1;
    }
  CURL *h = curl.easy_init ();
  if (!h || !url)
    {
      if (h)
        curl.easy_cleanup (h);
      snprintf (why, size, "out of memory");
      return -1;
    }
  struct curl_slist *headers = curl.slist_append (NULL, "Content-Type: application/json");
  cleanup_free char *auth = token ? xasprintf ("Authorization: Bearer %s", token) : NULL;
  if (auth)
    headers = curl.slist_append (headers, auth);
  /* A fleet's balancer routes on it (the body says the same). */
  cleanup_free char *session_header = session && nsbox_session_valid (session)
                                          ? xasprintf ("X-Nsbox-Session: %s", session)
                                          : NULL;
  if (session_header)
    headers = curl.slist_append (headers, session_header);
  /* No "Expect: 100-continue" round trip before the body. */
  headers = curl.slist_append (headers, "Expect:");
  if (on_line)
    headers = curl.slist_append (headers, "Accept: application/x-ndjson");
  struct answer a = { .on_line = on_line, .data = data };
  curl.easy_setopt (h, CURLOPT_URL, url);
  if (socket_path)
    curl.easy_setopt (h, CURLOPT_UNIX_SOCKET_PATH, socket_path);
  curl.easy_setopt (h, CURLOPT_HTTPHEADER, headers);
  curl.easy_setopt (h, CURLOPT_POSTFIELDS, body);
  curl.easy_setopt (h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
  curl.easy_setopt (h, CURLOPT_WRITEFUNCTION, collect);
  curl.easy_setopt (h, CURLOPT_WRITEDATA, &a);
  curl.easy_setopt (h, CURLOPT_NOSIGNAL, 1L);
  curl.easy_setopt (h, CURLOPT_PROTOCOLS_STR, "http,https");
  CURLcode rc = curl.easy_perform (h);
  if (rc == CURLE_OK)
    curl.easy_getinfo (h, CURLINFO_RESPONSE_CODE, status);
  else
    snprintf (why, size, "%s: %s", server,
              a.too_large ? "the answer is too large" : curl.easy_strerror (rc));
  curl.slist_free_all (headers);
  curl.easy_cleanup (h);
  if (rc != CURLE_OK)
    {
      free (a.buf);
      return -1;
    }
  *out = a.buf ? a.buf : strdup ("");
  *out_len = a.len;
  return *out ? 0 : -1;
}
