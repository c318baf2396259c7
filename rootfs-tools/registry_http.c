/* The registry client's HTTP exchange: one libcurl request with retries,
 * stall detection, the response headers, blob sinks into the store, the
 * token flow; see registry.h. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "registry.h"
#include "store-private.h"
#include "util.h"

#define USER_AGENT "nsbox-image/0.1"
#define MAX_RATE_LIMIT_TRIES 5
#define MAX_SERVER_RETRIES 3
#define MAX_AUTH_ROUNDS 3
#define MAX_STALL_RETRIES 1
#define RATE_LIMIT_BACKOFF_MAX_S 60.0

void
registry_response_clear (struct registry_response *resp)
{
  size_t body_max = resp->body_max;
  free (resp->content_type);
  free (resp->docker_digest);
  for (size_t i = 0; i < resp->n_www_authenticate; i++)
    free (resp->www_authenticate[i]);
  free (resp->retry_after);
  free (resp->ratelimit_limit);
  free (resp->ratelimit_remaining);
  free (resp->ratelimit_source);
  free (resp->content_range);
  free (resp->warning);
  free (resp->body);
  memset (resp, 0, sizeof *resp);
  resp->content_length = -1;
  resp->body_max = body_max;
}

/* ---- loopback and insecure hosts ---- */

static char *
host_without_port (const char *host)
{
  if (host[0] == '[')
    {
      const char *close = strchr (host, ']');
      return close ? strndup (host + 1, (size_t)(close - host - 1)) : strdup (host);
    }
  return strndup (host, strcspn (host, ":"));
}

bool
registry_host_insecure_ok (const char *host, const char *const *insecure)
{
  cleanup_free char *name = host_without_port (host);
  if (!name)
    return false;
  if (strcmp (name, "localhost") == 0 || strcmp (name, "::1") == 0
      || strncmp (name, "127.", 4) == 0)
    return true;
  for (size_t i = 0; insecure && insecure[i]; i++)
    {
      cleanup_free char *listed = nsbox_credentials_key (insecure[i]);
      if (listed && (strcmp (listed, host) == 0 || strcmp (listed, name) == 0))
        return true;
    }
  return false;
}

/* The host[:port] of an absolute http(s) URL, or NULL. */
static char *
url_host (const char *url, bool *https)
{
  const char *p;
  if (strncmp (url, "https://", 8) == 0)
    {
      p = url + 8;
      *https = true;
    }
  else if (strncmp (url, "http://", 7) == 0)
    {
      p = url + 7;
      *https = false;
    }
  else
    return NULL;
  const char *at = NULL;
  size_t len = strcspn (p, "/?#");
  at = memchr (p, '@', len);
  if (at)
    {
      len -= (size_t)(at + 1 - p);
      p = at + 1;
    }
  return strndup (p, len);
}

/* ---- callbacks ---- */

static char *
trimmed_dup (const char *s, size_t len)
{
  while (len && (*s == ' ' || *s == '\t'))
    s++, len--;
  while (len && (s[len - 1] == '\r' || s[len - 1] == '\n' || s[len - 1] == ' '))
    len--;
  return strndup (s, len);
}

struct exchange
{
  struct registry *reg;
  struct registry_response *resp;
  struct registry_blob_sink *sink;
  uint64_t range_from;
  /* stall detection (on_progress) */
  double checkpoint_time;
  curl_off_t checkpoint_bytes;
  bool stalled;
};

static void
set_header (char **slot, const char *value, size_t len)
{
  free (*slot);
  *slot = trimmed_dup (value, len);
}

static size_t
on_header (char *data, size_t size, size_t nmemb, void *userdata)
{
  struct exchange *x = userdata;
  struct registry_response *resp = x->resp;
  size_t len = size * nmemb;
  if (len >= 5 && strncmp (data, "HTTP/", 5) == 0)
    {
      /* A new response (after a redirect or a 100): forget the last one. */
      registry_response_clear (resp);
      return len;
    }
  const char *colon = memchr (data, ':', len);
  if (!colon)
    return len;
  size_t name_len = (size_t)(colon - data);
  const char *value = colon + 1;
  size_t value_len = len - name_len - 1;
#define IS(name) (name_len == strlen (name) && strncasecmp (data, name, name_len) == 0)
  if (IS ("content-type"))
    {
      set_header (&resp->content_type, value, value_len);
      if (resp->content_type)
        resp->content_type[strcspn (resp->content_type, "; \t")] = '\0';
    }
  else if (IS ("docker-content-digest"))
    set_header (&resp->docker_digest, value, value_len);
  else if (IS ("www-authenticate") && resp->n_www_authenticate < REGISTRY_MAX_CHALLENGES)
    resp->www_authenticate[resp->n_www_authenticate++] = trimmed_dup (value, value_len);
  else if (IS ("retry-after"))
    set_header (&resp->retry_after, value, value_len);
  else if (IS ("ratelimit-limit"))
    set_header (&resp->ratelimit_limit, value, value_len);
  else if (IS ("ratelimit-remaining"))
    set_header (&resp->ratelimit_remaining, value, value_len);
  else if (IS ("docker-ratelimit-source"))
    set_header (&resp->ratelimit_source, value, value_len);
  else if (IS ("content-range"))
    set_header (&resp->content_range, value, value_len);
  else if (IS ("warning") && !resp->warning)
    {
      /* 299 - "text" (DS "Warnings"); other codes are not ours to show. */
      cleanup_free char *v = trimmed_dup (value, value_len);
      const char *open_quote = v ? strchr (v, '"') : NULL;
      const char *close_quote = open_quote ? strrchr (open_quote + 1, '"') : NULL;
      if (v && strncmp (v, "299 ", 4) == 0 && close_quote)
        resp->warning = strndup (open_quote + 1, (size_t)(close_quote - open_quote - 1));
    }
  else if (IS ("content-length"))
    {
      cleanup_free char *v = trimmed_dup (value, value_len);
      char *end = NULL;
      long long n = v ? strtoll (v, &end, 10) : -1;
      resp->content_length = (v && *v && end && !*end && n >= 0) ? n : -1;
    }
#undef IS
  return len;
}

static int sink_fail (struct registry_blob_sink *sink, int code, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

static int
sink_fail (struct registry_blob_sink *sink, int code, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  free (sink->error_text);
  sink->error_text = vxasprintf (fmt, ap);
  va_end (ap);
  sink->error = -code;
  return -code;
}

/* First body byte of a blob response: check what the server sends against
 * what we asked for. */
static int
sink_start (struct exchange *x, long status)
{
  struct registry_blob_sink *sink = x->sink;
  struct registry_response *resp = x->resp;
  uint64_t have = nsbox_ingest_offset (sink->ingest);
  sink->started = true;
  if (status == 200)
    {
      if (resp->content_length >= 0 && sink->size >= 0 && resp->content_length != sink->size)
        return sink_fail (sink, EBADMSG,
                          "size mismatch: the registry sends %lld bytes, the "
                          "descriptor says %lld",
                          (long long)resp->content_length, (long long)sink->size);
      if (have > 0)
        {
          /* The server ignored our Range: start over. */
          struct nsbox_error *e = NULL;
          int r = nsbox_ingest_restart (sink->ingest, &e);
          if (r < 0)
            {
              sink_fail (sink, -r, "%s", nsbox_error_message (e));
              nsbox_error_free (e);
              return r;
            }
        }
      return 0;
    }
  /* 206: "bytes N-(size-1)/size" exactly. */
  unsigned long long first = 0, last = 0, total = 0;
  int consumed = 0;
  if (!resp->content_range
      || sscanf (resp->content_range, "bytes %llu-%llu/%llu%n", &first, &last, &total, &consumed)
             != 3
      || resp->content_range[consumed] != '\0' || first != have
      || (sink->size >= 0 && (total != (unsigned long long)sink->size || last + 1 != total)))
    return sink_fail (sink, EBADMSG, "bad Content-Range '%s' for a request from byte %llu of %lld",
                      resp->content_range ? resp->content_range : "(none)",
                      (unsigned long long)have, (long long)sink->size);
  return 0;
}

static size_t
on_body (char *data, size_t size, size_t nmemb, void *userdata)
{
  struct exchange *x = userdata;
  struct registry_response *resp = x->resp;
  size_t len = size * nmemb;
  long status = 0;
  curl_easy_getinfo (x->reg->curl, CURLINFO_RESPONSE_CODE, &status);
  resp->status = status;
  struct registry_blob_sink *sink = x->sink;
  if (sink && (status == 200 || (status == 206 && x->range_from > 0)))
    {
      if (!sink->started && sink_start (x, status) < 0)
        return 0;
      uint64_t offset = nsbox_ingest_offset (sink->ingest);
      if (sink->size >= 0 && offset + len > (uint64_t)sink->size)
        {
          sink_fail (sink, EBADMSG, "the registry sends more than the %lld bytes of the descriptor",
                     (long long)sink->size);
          return 0;
        }
      struct nsbox_error *e = NULL;
      int r = nsbox_ingest_write (sink->ingest, data, len, &e);
      if (r < 0)
        {
          sink_fail (sink, -r, "%s", nsbox_error_message (e));
          nsbox_error_free (e);
          return 0;
        }
      sink->written += len;
      if (sink->counted)
        x->reg->progress_current = offset + len;
      return len;
    }
  size_t max = resp->body_max ? resp->body_max : REGISTRY_MAX_SMALL_BYTES;
  if (resp->body_len + len > max)
    {
      resp->body_too_large = true;
      return 0;
    }
  char *grown = realloc (resp->body, resp->body_len + len + 1);
  if (!grown)
    return 0;
  memcpy (grown + resp->body_len, data, len);
  resp->body = grown;
  resp->body_len += len;
  resp->body[resp->body_len] = '\0';
  return len;
}

void
registry_progress_report (struct registry *reg, bool final)
{
  if (!reg->progress || reg->progress_total == 0)
    return;
  uint64_t done = reg->progress_done + reg->progress_current;
  reg->progress (reg->progress_data, reg->ref_string,
                 done < reg->progress_total ? done : reg->progress_total, reg->progress_total,
                 final);
}

/* Called at least once a second, also while nothing arrives. A transfer
 * stalls when fewer than REGISTRY_STALL_MIN_RATE * window bytes arrive in
 * the window after a checkpoint; enough bytes move the checkpoint. So any
 * steady rate of REGISTRY_STALL_MIN_RATE or more never stalls, and a dead
 * connection is given up one window after its last burst. (libcurl's
 * LOW_SPEED_* options would add up to 5 s of averaging and report the
 * CURLE_OPERATION_TIMEDOUT of every other timeout.) */
static int
on_progress (void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
             curl_off_t ulnow)
{
  (void)dltotal, (void)ultotal, (void)ulnow;
  struct exchange *x = userdata;
  unsigned window = x->reg->stall_seconds;
  double now = nsbox_now_seconds ();
  /* dlnow starts again at 0 after a redirect. */
  if (dlnow < x->checkpoint_bytes
      || dlnow - x->checkpoint_bytes >= (curl_off_t)REGISTRY_STALL_MIN_RATE * window)
    {
      x->checkpoint_bytes = dlnow;
      x->checkpoint_time = now;
    }
  else if (now - x->checkpoint_time >= window)
    {
      x->stalled = true;
      return 1;
    }
  if (x->sink)
    registry_progress_report (x->reg, false);
  return 0;
}

/* ---- one exchange ---- */

static CURLcode
perform (struct registry *reg, enum registry_method method, const char *url,
         const char *authorization, const char *accept, uint64_t range_from,
         struct registry_blob_sink *sink, struct registry_response *resp, const char *post_fields,
         bool *protocol_refused)
{
  CURL *c = reg->curl;
  struct exchange x = { reg, resp, sink, range_from, nsbox_now_seconds (), 0, false };
  struct curl_slist *headers = NULL, *tmp;
  char range[64];
  bool https = false;
  cleanup_free char *host = url_host (url, &https);
  *protocol_refused = false;
  if (!host || (!https && !registry_host_insecure_ok (host, reg->insecure)))
    {
      *protocol_refused = true;
      return CURLE_UNSUPPORTED_PROTOCOL;
    }
  registry_response_clear (resp);
  if (sink)
    {
      sink->started = false;
      sink->written = 0;
    }
  curl_easy_reset (c);
  /* The URL's own scheme was checked above. Redirects may use plain HTTP
   * only when the registry itself may (loopback or --insecure-registry). */
  const char *redirect_protocols = reg->plain_http ? "http,https" : "https";
  curl_easy_setopt (c, CURLOPT_URL, url);
  curl_easy_setopt (c, CURLOPT_PROTOCOLS_STR, https ? redirect_protocols : "http,https");
  curl_easy_setopt (c, CURLOPT_REDIR_PROTOCOLS_STR, redirect_protocols);
  curl_easy_setopt (c, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt (c, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt (c, CURLOPT_UNRESTRICTED_AUTH, 0L);
  curl_easy_setopt (c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt (c, CURLOPT_CONNECTTIMEOUT, 30L);
  curl_easy_setopt (c, CURLOPT_USERAGENT, USER_AGENT);
  curl_easy_setopt (c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt (c, CURLOPT_HEADERDATA, &x);
  curl_easy_setopt (c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt (c, CURLOPT_WRITEDATA, &x);
  curl_easy_setopt (c, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt (c, CURLOPT_XFERINFODATA, &x);
  curl_easy_setopt (c, CURLOPT_NOPROGRESS, 0L);
  if (method == REGISTRY_HEAD)
    curl_easy_setopt (c, CURLOPT_NOBODY, 1L);
  if (post_fields)
    curl_easy_setopt (c, CURLOPT_POSTFIELDS, post_fields);
  if (accept && (tmp = curl_slist_append (headers, accept)))
    headers = tmp;
  /* The registry's credentials go only to the registry: curl drops a
   * custom Authorization header when a redirect changes host, port or
   * scheme (UNRESTRICTED_AUTH off). */
  if (authorization && (tmp = curl_slist_append (headers, authorization)))
    headers = tmp;
  if (range_from > 0)
    {
      snprintf (range, sizeof range, "Range: bytes=%llu-", (unsigned long long)range_from);
      if ((tmp = curl_slist_append (headers, range)))
        headers = tmp;
    }
  curl_easy_setopt (c, CURLOPT_HTTPHEADER, headers);
  CURLcode rc = curl_easy_perform (c);
  long status = 0;
  curl_easy_getinfo (c, CURLINFO_RESPONSE_CODE, &status);
  resp->status = status;
  resp->stalled = x.stalled;
  curl_easy_setopt (c, CURLOPT_HTTPHEADER, NULL);
  curl_slist_free_all (headers);
  return rc;
}

/* ---- registry error documents ---- */

/* "CODE: message (detail)" for the errors array of a registry reply. */
static char *
describe_error_body (const struct registry_response *resp)
{
  if (!resp->body || resp->body_len == 0)
    return NULL;
  json_error_t jerr;
  json_t *doc = json_loadb (resp->body, resp->body_len, 0, &jerr);
  json_t *errors = json_object_get (doc, "errors");
  char *text = NULL;
  size_t text_len = 0;
  FILE *f = json_is_array (errors) && json_array_size (errors) > 0
                ? open_memstream (&text, &text_len)
                : NULL;
  size_t i;
  json_t *e;
  if (f)
    {
      json_array_foreach (errors, i, e)
      {
        if (i >= 3)
          break;
        const char *code = json_string_value (json_object_get (e, "code"));
        const char *message = json_string_value (json_object_get (e, "message"));
        fprintf (f, "%s%s%s%s", i ? "; " : "", code ? code : "UNKNOWN", message ? ": " : "",
                 message ? message : "");
      }
      fclose (f);
    }
  json_decref (doc);
  return text;
}

static void
describe_rate_limit (const struct registry_response *resp, char *buf, size_t size)
{
  snprintf (buf, size, "ratelimit-limit: %s, ratelimit-remaining: %s%s%s",
            resp->ratelimit_limit ? resp->ratelimit_limit : "(not reported)",
            resp->ratelimit_remaining ? resp->ratelimit_remaining : "(not reported)",
            resp->ratelimit_source ? ", docker-ratelimit-source: " : "",
            resp->ratelimit_source ? resp->ratelimit_source : "");
}

int
registry_status_error (struct registry *reg, const struct registry_response *resp, const char *what,
                       struct nsbox_error **err)
{
  cleanup_free char *detail = describe_error_body (resp);
  char said[600] = "";
  if (detail)
    snprintf (said, sizeof said, " (registry said: %.500s)", detail);
  switch (resp->status)
    {
    case 401:
      return nsbox_error_set (err, EACCES,
                              "%s: unauthorized: pull access denied for '%s', the repository "
                              "does not exist or needs 'docker login'%s",
                              what, reg->ref_string, said);
    case 403:
      return nsbox_error_set (err, EACCES, "%s: access to '%s' denied%s", what, reg->ref_string,
                              said);
    case 404:
      return nsbox_error_set (err, ENOENT, "%s: unknown image '%s': not found in the registry%s",
                              what, reg->ref_string, said);
    case 429:
      {
        char limits[400];
        describe_rate_limit (resp, limits, sizeof limits);
        return nsbox_error_set (err, EAGAIN, "%s: rate limited by '%s' (%s)%s", what, reg->host,
                                limits, said);
      }
    default:
      return nsbox_error_set (err, EIO, "%s: the registry answered HTTP %ld%s", what, resp->status,
                              said);
    }
}

/* ---- authentication ---- */

static void
load_credentials (struct registry *reg)
{
  if (reg->credentials_loaded)
    return;
  reg->credentials_loaded = true;
  /* A broken configuration or helper is not fatal for public images; the
   * 401 that follows tells the user. */
  struct nsbox_error *e = NULL;
  reg->have_credentials = nsbox_credentials_lookup (reg->ref->domain, &reg->credentials, &e) > 0;
  nsbox_error_free (e);
}

static char *
basic_header (const struct nsbox_credentials *c)
{
  cleanup_free char *pair = NULL;
  char *header = NULL;
  if (!(pair = xasprintf ("%s:%s", c->username, c->secret)))
    return NULL;
  cleanup_free char *encoded = nsbox_base64_encode (pair, strlen (pair));
  explicit_bzero (pair, strlen (pair));
  if (!encoded || !(header = xasprintf ("Authorization: Basic %s", encoded)))
    return NULL;
  explicit_bzero (encoded, strlen (encoded));
  return header;
}

static char *
escape (CURL *c, const char *s)
{
  char *e = curl_easy_escape (c, s, 0);
  char *copy = e ? strdup (e) : NULL;
  curl_free (e);
  return copy;
}

static char *
token_url (struct registry *reg, const struct nsbox_challenge *ch, const char *scope)
{
  cleanup_free char *service = ch->service ? escape (reg->curl, ch->service) : strdup ("");
  cleanup_free char *scope_e = escape (reg->curl, scope);
  cleanup_free char *account = NULL;
  char *url = NULL;
  if (!service || !scope_e)
    return NULL;
  if (reg->have_credentials && reg->credentials.username
      && !(account = escape (reg->curl, reg->credentials.username)))
    return NULL;
  if (!(url
        = xasprintf ("%s%cservice=%s&scope=%s%s%s", ch->realm, strchr (ch->realm, '?') ? '&' : '?',
                     service, scope_e, account ? "&account=" : "", account ? account : "")))
    return NULL;
  return url;
}

/* GET (or, with an identity token, POST) the realm for a token. */
static int
fetch_token (struct registry *reg, const struct nsbox_challenge *ch, const char *scope,
             char **token_out, struct nsbox_error **err)
{
  cleanup_free char *url = token_url (reg, ch, scope);
  cleanup_free char *basic = NULL;
  cleanup_free char *form = NULL;
  struct registry_response resp = { .body_max = REGISTRY_MAX_SMALL_BYTES, .content_length = -1 };
  bool refused = false;
  if (!url)
    return nsbox_error_oom (err);
  if (reg->have_credentials && reg->credentials.username)
    basic = basic_header (&reg->credentials);
  reg->token_requests++;
  CURLcode rc;
  if (reg->have_credentials && reg->credentials.identity_token)
    {
      /* OAuth2 refresh-token grant. */
      cleanup_free char *service = escape (reg->curl, ch->service ? ch->service : "");
      cleanup_free char *scope_e = escape (reg->curl, scope);
      cleanup_free char *refresh = escape (reg->curl, reg->credentials.identity_token);
      if (!service || !scope_e || !refresh
          || !(form = xasprintf ("grant_type=refresh_token&client_id=nsbox&service=%s&scope=%s&"
                                 "refresh_token=%s",
                                 service, scope_e, refresh)))
        return nsbox_error_oom (err);
      rc = perform (reg, REGISTRY_GET, ch->realm, NULL, NULL, 0, NULL, &resp, form, &refused);
      explicit_bzero (form, strlen (form));
    }
  else
    rc = perform (reg, REGISTRY_GET, url, basic, NULL, 0, NULL, &resp, NULL, &refused);
  if (basic)
    explicit_bzero (basic, strlen (basic));
  int r = 0;
  if (refused)
    r = nsbox_error_set (err, EPROTO,
                         "token endpoint '%s' is not https (plain HTTP only for loopback or "
                         "--insecure-registry)",
                         ch->realm);
  else if (rc != CURLE_OK)
    r = nsbox_error_set (err, ENETUNREACH, "get a token from '%s': network failure: %s", ch->realm,
                         curl_easy_strerror (rc));
  else if (resp.status == 401 || resp.status == 403)
    r = nsbox_error_set (err, EACCES,
                         "get a token from '%s': unauthorized (HTTP %ld): wrong credentials?",
                         ch->realm, resp.status);
  else if (resp.status != 200)
    r = nsbox_error_set (err, EIO, "get a token from '%s': HTTP %ld", ch->realm, resp.status);
  if (r < 0)
    {
      registry_response_clear (&resp);
      return r;
    }
  json_error_t jerr;
  json_t *doc = json_loadb (resp.body ? resp.body : "", resp.body_len, 0, &jerr);
  const char *token = json_string_value (json_object_get (doc, "token"));
  if (!token || !*token)
    token = json_string_value (json_object_get (doc, "access_token"));
  json_t *expires = json_object_get (doc, "expires_in");
  long expires_in = json_is_integer (expires) ? (long)json_integer_value (expires) : 60;
  if (expires_in < 60)
    expires_in = 60;
  if (!token || !*token)
    r = nsbox_error_set (err, EBADMSG, "token from '%s': no token or access_token in the reply",
                         ch->realm);
  else
    {
      nsbox_token_cache_put (reg->host, scope, token, expires_in);
      *token_out = strdup (token);
      if (!*token_out)
        r = nsbox_error_oom (err);
    }
  json_decref (doc);
  if (resp.body)
    explicit_bzero (resp.body, resp.body_len);
  registry_response_clear (&resp);
  return r;
}

static int
set_bearer (struct registry *reg, const char *token, const char *scope)
{
  free (reg->authorization);
  free (reg->token_scope);
  reg->authorization = NULL;
  reg->token_scope = strdup (scope);
  if (!reg->token_scope || !(reg->authorization = xasprintf ("Authorization: Bearer %s", token)))
    {
      reg->authorization = NULL;
      return -ENOMEM;
    }
  return 0;
}

/* After a 401: pick up a Bearer token or Basic credentials. Returns 1 to
 * retry, 0 when there is nothing more to try. */
static int
handle_unauthorized (struct registry *reg, const struct registry_response *resp, bool *tried_fresh,
                     struct nsbox_error **err)
{
  struct nsbox_challenge *challenges = NULL;
  int n = nsbox_challenges_parse ((const char *const *)resp->www_authenticate,
                                  resp->n_www_authenticate, &challenges, err);
  if (n < 0)
    return n;
  int r = 0;
  for (int i = 0; i < n && r == 0; i++)
    {
      const struct nsbox_challenge *ch = &challenges[i];
      if (strcmp (ch->scheme, "bearer") == 0 && ch->realm)
        {
          load_credentials (reg);
          /* insufficient_scope: the challenge names the scope needed. */
          const char *scope = ch->scope ? ch->scope : reg->default_scope;
          cleanup_free char *token = NULL;
          if (reg->authorization && reg->token_scope && strcmp (reg->token_scope, scope) == 0)
            {
              /* The token we sent was refused: never reuse it. */
              nsbox_token_cache_drop (reg->host, scope);
              if (*tried_fresh)
                break;
            }
          else
            token = nsbox_token_cache_get (reg->host, scope);
          if (!token)
            {
              *tried_fresh = true;
              r = fetch_token (reg, ch, scope, &token, err);
              if (r < 0)
                break;
            }
          r = set_bearer (reg, token, scope) < 0 ? nsbox_error_oom (err) : 1;
          explicit_bzero (token, strlen (token));
        }
      else if (strcmp (ch->scheme, "basic") == 0)
        {
          load_credentials (reg);
          if (!reg->have_credentials || !reg->credentials.username || *tried_fresh)
            continue;
          *tried_fresh = true;
          free (reg->authorization);
          reg->authorization = basic_header (&reg->credentials);
          r = reg->authorization ? 1 : nsbox_error_oom (err);
        }
    }
  nsbox_challenges_free (challenges, (size_t)(n > 0 ? n : 0));
  return r;
}

/* A 401 without a challenge: GET /v2/ has the one that applies. */
static int
handle_unauthorized_by_ping (struct registry *reg, bool *tried_fresh, struct nsbox_error **err)
{
  cleanup_free char *url = NULL;
  struct registry_response ping = { .body_max = REGISTRY_MAX_SMALL_BYTES, .content_length = -1 };
  bool refused = false;
  if (!(url = xasprintf ("%s/v2/", reg->base_url)))
    return nsbox_error_oom (err);
  CURLcode rc = perform (reg, REGISTRY_GET, url, NULL, NULL, 0, NULL, &ping, NULL, &refused);
  int r = 0;
  if (rc == CURLE_OK && ping.status == 401 && ping.n_www_authenticate > 0)
    r = handle_unauthorized (reg, &ping, tried_fresh, err);
  registry_response_clear (&ping);
  return r;
}

/* ---- retries ---- */

static void
sleep_seconds (double s)
{
  struct timespec ts = { (time_t)s, (long)((s - floor (s)) * 1e9) };
  while (nanosleep (&ts, &ts) < 0 && errno == EINTR)
    ;
}

/* Retry-After: delta seconds or an HTTP-date; else `fallback`. */
static double
retry_delay (const struct registry_response *resp, double fallback)
{
  if (resp->retry_after && *resp->retry_after)
    {
      char *end = NULL;
      long s = strtol (resp->retry_after, &end, 10);
      if (end && !*end && s >= 0)
        return s > RATE_LIMIT_BACKOFF_MAX_S ? RATE_LIMIT_BACKOFF_MAX_S : (double)s;
      time_t when = curl_getdate (resp->retry_after, NULL);
      if (when > 0)
        {
          double d = difftime (when, time (NULL));
          return d < 0 ? 0 : d > RATE_LIMIT_BACKOFF_MAX_S ? RATE_LIMIT_BACKOFF_MAX_S : d;
        }
    }
  return fallback;
}

/* Failures worth another try: the connection, not the request, went wrong. */
static const CURLcode transient_curl_errors[] = {
  CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_OPERATION_TIMEDOUT, CURLE_PARTIAL_FILE,
  CURLE_RECV_ERROR,      CURLE_SEND_ERROR,           CURLE_GOT_NOTHING,        CURLE_HTTP2,
  CURLE_HTTP2_STREAM,    CURLE_SSL_CONNECT_ERROR,
};

static bool
transient_curl_error (CURLcode rc)
{
  for (size_t i = 0; i < ARRAY_SIZE (transient_curl_errors); i++)
    if (transient_curl_errors[i] == rc)
      return true;
  return false;
}

static int
stall_error (struct registry *reg, const struct registry_blob_sink *sink, unsigned attempts,
             const char *what, struct nsbox_error **err)
{
  char kept[160] = "";
  uint64_t have = sink ? nsbox_ingest_offset (sink->ingest) : 0;
  if (have > 0)
    snprintf (kept, sizeof kept, "; %llu of %lld bytes kept, the next pull resumes there",
              (unsigned long long)have, (long long)sink->size);
  return nsbox_error_set (err, ENETUNREACH,
                          "%s: network failure: the transfer from '%s' stalled: less than %d "
                          "bytes/s for %u s, on each of %u tries%s",
                          what, reg->host, REGISTRY_STALL_MIN_RATE, reg->stall_seconds, attempts,
                          kept);
}

int
registry_request (struct registry *reg, enum registry_method method, const char *url,
                  const char *accept, uint64_t range_from, struct registry_blob_sink *sink,
                  struct registry_response *resp, const char *what, struct nsbox_error **err)
{
  unsigned rate_limited = 0, server_errors = 0, auth_rounds = 0, stalls = 0;
  double backoff = 2.0, server_backoff = 0.5;
  bool tried_fresh = false;
  if (!reg->authorization)
    {
      /* A token cached by an earlier pull saves the 401 round trip. */
      cleanup_free char *token = nsbox_token_cache_get (reg->host, reg->default_scope);
      if (token && set_bearer (reg, token, reg->default_scope) < 0)
        return nsbox_error_oom (err);
    }
  for (;;)
    {
      bool refused = false;
      uint64_t from = sink ? nsbox_ingest_offset (sink->ingest) : range_from;
      CURLcode rc = perform (reg, method, url, reg->authorization, accept, from, sink, resp, NULL,
                             &refused);
      if (resp->warning && (!reg->last_warning || strcmp (reg->last_warning, resp->warning) != 0))
        {
          rt_store_warn (reg->store, "registry '%s' warns: %s", reg->host, resp->warning);
          free (reg->last_warning);
          reg->last_warning = strdup (resp->warning);
        }
      if (refused)
        return nsbox_error_set (err, EPROTO,
                                "%s: refusing plain HTTP to '%s' (only loopback or "
                                "--insecure-registry)",
                                what, url);
      if (sink && sink->error < 0)
        return nsbox_error_set (err, -sink->error, "%s: %s", what,
                                sink->error_text ? sink->error_text : "transfer aborted");
      if (resp->stalled)
        {
          /* Once more, a blob from where it stopped: one hung connection
           * is common and cheap to replace; a second stall in a row is the
           * network, and the user hears of it after two windows. */
          if (stalls++ < MAX_STALL_RETRIES)
            continue;
          return stall_error (reg, sink, stalls, what, err);
        }
      if (rc != CURLE_OK)
        {
          if (resp->body_too_large)
            return nsbox_error_set (err, EFBIG, "%s: the reply is larger than %zu bytes", what,
                                    resp->body_max);
          if (sink && sink->written > 0)
            return -EPIPE;
          if (transient_curl_error (rc) && server_errors < MAX_SERVER_RETRIES)
            {
              server_errors++;
              sleep_seconds (server_backoff);
              server_backoff *= 2;
              continue;
            }
          return nsbox_error_set (err, ENETUNREACH, "%s: network failure talking to '%s': %s", what,
                                  reg->host, curl_easy_strerror (rc));
        }
      if (resp->status == 401 && auth_rounds < MAX_AUTH_ROUNDS)
        {
          auth_rounds++;
          int r = resp->n_www_authenticate > 0
                      ? handle_unauthorized (reg, resp, &tried_fresh, err)
                      : handle_unauthorized_by_ping (reg, &tried_fresh, err);
          if (r < 0)
            return nsbox_error_prefix (err, "%s: authenticate to '%s'", what, reg->host);
          if (r > 0)
            continue;
        }
      if (resp->status == 429)
        {
          rate_limited++;
          if (rate_limited >= MAX_RATE_LIMIT_TRIES)
            return registry_status_error (reg, resp, what, err);
          sleep_seconds (retry_delay (resp, backoff));
          backoff = backoff * 2 > RATE_LIMIT_BACKOFF_MAX_S ? RATE_LIMIT_BACKOFF_MAX_S : backoff * 2;
          continue;
        }
      if (resp->status >= 500 && server_errors < MAX_SERVER_RETRIES)
        {
          server_errors++;
          sleep_seconds (server_backoff);
          server_backoff *= 2;
          continue;
        }
      return 0;
    }
}
