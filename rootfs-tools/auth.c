/* Registry authentication: challenges, credentials, the token cache; see
 * auth.h. */
#include <ctype.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include <jansson.h>

#include "auth.h"
#include "error.h"
#include "fileio.h"
#include "util.h"

#define CONFIG_MAX_BYTES (4 << 20)
#define HELPER_OUTPUT_MAX (1 << 20)
#define HELPER_TIMEOUT_MS 30000
#define TOKEN_CACHE_SIZE 32

extern char **environ;

/* ---- challenges ---- */

static const char *
skip_space (const char *p)
{
  while (*p == ' ' || *p == '\t')
    p++;
  return p;
}

static bool
is_tchar (char c)
{
  return isalnum ((unsigned char)c) || (c && strchr ("!#$%&'*+-.^_`|~", c));
}

/* A token or a quoted string at p; returns the end, or NULL on a bad
 * quoted string. */
static const char *
parse_value (const char *p, char **out)
{
  if (*p == '"')
    {
      char *buf = malloc (strlen (p) + 1);
      size_t n = 0;
      if (!buf)
        return NULL;
      for (p++; *p && *p != '"'; p++)
        {
          if (*p == '\\' && p[1])
            p++;
          buf[n++] = *p;
        }
      if (*p != '"')
        {
          free (buf);
          return NULL;
        }
      buf[n] = '\0';
      *out = buf;
      return p + 1;
    }
  const char *start = p;
  while (is_tchar (*p) || *p == '/' || *p == '=')
    p++;
  *out = strndup (start, (size_t)(p - start));
  return *out ? p : NULL;
}

static void
challenge_set (struct nsbox_challenge *c, const char *name, size_t name_len, char *value)
{
  char **slot = NULL;
  if (name_len == 5 && strncasecmp (name, "realm", 5) == 0)
    slot = &c->realm;
  else if (name_len == 7 && strncasecmp (name, "service", 7) == 0)
    slot = &c->service;
  else if (name_len == 5 && strncasecmp (name, "scope", 5) == 0)
    slot = &c->scope;
  else if (name_len == 5 && strncasecmp (name, "error", 5) == 0)
    slot = &c->error;
  if (slot && !*slot)
    *slot = value;
  else
    free (value);
}

void
nsbox_challenges_free (struct nsbox_challenge *challenges, size_t n)
{
  for (size_t i = 0; challenges && i < n; i++)
    {
      free (challenges[i].scheme);
      free (challenges[i].realm);
      free (challenges[i].service);
      free (challenges[i].scope);
      free (challenges[i].error);
    }
  free (challenges);
}

static int
parse_one_header (const char *h, struct nsbox_challenge **list, size_t *n, struct nsbox_error **err)
{
  const char *p = h;
  for (;;)
    {
      while (*p == ' ' || *p == '\t' || *p == ',')
        p++;
      if (!*p)
        return 0;
      const char *tok = p;
      while (is_tchar (*p))
        p++;
      size_t tok_len = (size_t)(p - tok);
      if (tok_len == 0)
        return nsbox_error_set (err, EBADMSG, "malformed WWW-Authenticate header '%s'", h);
      const char *after = skip_space (p);
      if (*after == '=' && *n > 0 && after[1] != '=')
        {
          /* auth-param of the current challenge */
          char *value = NULL;
          p = parse_value (skip_space (after + 1), &value);
          if (!p)
            return nsbox_error_set (err, EBADMSG, "malformed WWW-Authenticate header '%s'", h);
          challenge_set (&(*list)[*n - 1], tok, tok_len, value);
          continue;
        }
      /* a new scheme */
      struct nsbox_challenge *grown = realloc (*list, (*n + 1) * sizeof **list);
      if (!grown)
        return nsbox_error_oom (err);
      *list = grown;
      memset (&grown[*n], 0, sizeof grown[*n]);
      grown[*n].scheme = strndup (tok, tok_len);
      if (!grown[*n].scheme)
        return nsbox_error_oom (err);
      for (char *c = grown[*n].scheme; *c; c++)
        *c = (char)tolower ((unsigned char)*c);
      (*n)++;
      p = after;
      /* token68 (Basic's "credentials" form is not used in challenges) */
      if (is_tchar (*p))
        {
          const char *q = p;
          while (is_tchar (*q) || *q == '/')
            q++;
          const char *r = skip_space (q);
          if (*r != '=')
            p = q;
        }
    }
}

int
nsbox_challenges_parse (const char *const *headers, size_t n_headers, struct nsbox_challenge **out,
                        struct nsbox_error **err)
{
  struct nsbox_challenge *list = NULL;
  size_t n = 0;
  for (size_t i = 0; i < n_headers; i++)
    {
      int r = parse_one_header (headers[i], &list, &n, err);
      if (r < 0)
        {
          nsbox_challenges_free (list, n);
          return r;
        }
    }
  *out = list;
  return (int)n;
}

/* ---- base64 ---- */

static const char b64_alphabet[]
    = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *
nsbox_base64_encode (const void *data, size_t len)
{
  const unsigned char *in = data;
  char *out = malloc (4 * ((len + 2) / 3) + 1);
  size_t o = 0;
  if (!out)
    return NULL;
  for (size_t i = 0; i < len; i += 3)
    {
      unsigned v = (unsigned)in[i] << 16;
      if (i + 1 < len)
        v |= (unsigned)in[i + 1] << 8;
      if (i + 2 < len)
        v |= in[i + 2];
      out[o++] = b64_alphabet[(v >> 18) & 63];
      out[o++] = b64_alphabet[(v >> 12) & 63];
      out[o++] = i + 1 < len ? b64_alphabet[(v >> 6) & 63] : '=';
      out[o++] = i + 2 < len ? b64_alphabet[v & 63] : '=';
    }
  out[o] = '\0';
  return out;
}

char *
nsbox_base64_decode (const char *text, size_t *len)
{
  size_t n = strlen (text);
  char *out = malloc (n / 4 * 3 + 4);
  size_t o = 0;
  unsigned v = 0;
  int bits = 0;
  bool padding = false;
  if (!out)
    return NULL;
  for (size_t i = 0; i < n; i++)
    {
      const char *pos;
      if (text[i] == '=')
        {
          padding = true;
          continue;
        }
      if (padding || !text[i] || !(pos = strchr (b64_alphabet, text[i])))
        {
          free (out);
          return NULL;
        }
      v = (v << 6) | (unsigned)(pos - b64_alphabet);
      bits += 6;
      if (bits >= 8)
        {
          bits -= 8;
          out[o++] = (char)((v >> bits) & 0xff);
        }
    }
  out[o] = '\0';
  if (len)
    *len = o;
  return out;
}

/* ---- credentials ---- */

void
nsbox_credentials_clear (struct nsbox_credentials *c)
{
  if (c->secret)
    explicit_bzero (c->secret, strlen (c->secret));
  if (c->identity_token)
    explicit_bzero (c->identity_token, strlen (c->identity_token));
  free (c->username);
  free (c->secret);
  free (c->identity_token);
  c->username = c->secret = c->identity_token = NULL;
}

char *
nsbox_credentials_key (const char *registry)
{
  const char *p = registry;
  if (strncmp (p, "https://", 8) == 0)
    p += 8;
  else if (strncmp (p, "http://", 7) == 0)
    p += 7;
  size_t len = strcspn (p, "/");
  if ((len == 9 && strncmp (p, "docker.io", 9) == 0)
      || (len == 20 && strncmp (p, "registry-1.docker.io", 20) == 0)
      || (len == 15 && strncmp (p, "index.docker.io", 15) == 0))
    return strdup ("index.docker.io");
  return strndup (p, len);
}

static char *
config_path (void)
{
  const char *dir = getenv ("DOCKER_CONFIG");
  char *path = NULL;
  if (dir && *dir)
    {
      if (!(path = xasprintf ("%s/config.json", dir)))
        return NULL;
      return path;
    }
  const char *home = getenv ("HOME");
  if (!home || !*home)
    return NULL;
  if (!(path = xasprintf ("%s/.docker/config.json", home)))
    return NULL;
  return path;
}

/* The value of object[key] where key normalises to `want`. */
static json_t *
lookup_normalized (json_t *object, const char *want)
{
  const char *key;
  json_t *value;
  json_object_foreach (object, key, value)
  {
    cleanup_free char *k = nsbox_credentials_key (key);
    if (k && strcmp (k, want) == 0)
      return value;
  }
  return NULL;
}

static int
set_credentials (struct nsbox_credentials *out, const char *user, const char *secret)
{
  struct nsbox_credentials c = { 0 };
  if (strcmp (user, "<token>") == 0)
    c.identity_token = strdup (secret);
  else
    {
      c.username = strdup (user);
      c.secret = strdup (secret);
    }
  if ((!c.identity_token && (!c.username || !c.secret)))
    {
      nsbox_credentials_clear (&c);
      return -ENOMEM;
    }
  *out = c;
  return 1;
}

/* Reads fd until EOF, at most max bytes, waiting at most HELPER_TIMEOUT_MS. */
static int
read_all_bounded (int fd, char **out, size_t *out_len, size_t max)
{
  size_t cap = 4096, len = 0;
  char *buf = malloc (cap + 1);
  struct timespec start;
  clock_gettime (CLOCK_MONOTONIC, &start);
  if (!buf)
    return -ENOMEM;
  for (;;)
    {
      struct timespec now;
      clock_gettime (CLOCK_MONOTONIC, &now);
      long elapsed = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
      struct pollfd pfd = { .fd = fd, .events = POLLIN };
      if (elapsed >= HELPER_TIMEOUT_MS)
        {
          free (buf);
          return -ETIMEDOUT;
        }
      int pr = poll (&pfd, 1, (int)(HELPER_TIMEOUT_MS - elapsed));
      if (pr < 0 && errno == EINTR)
        continue;
      if (pr <= 0)
        {
          free (buf);
          return pr == 0 ? -ETIMEDOUT : -errno;
        }
      if (len == cap)
        {
          if (cap >= max)
            {
              free (buf);
              return -EFBIG;
            }
          char *grown = realloc (buf, cap * 2 + 1);
          if (!grown)
            {
              free (buf);
              return -ENOMEM;
            }
          buf = grown;
          cap *= 2;
        }
      ssize_t n = read (fd, buf + len, cap - len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          int e = errno;
          free (buf);
          return -e;
        }
      if (n == 0)
        break;
      len += (size_t)n;
    }
  buf[len] = '\0';
  *out = buf;
  *out_len = len;
  return 0;
}

/* Runs `docker-credential-<helper> get` with server_url on stdin. */
static int
run_helper (const char *helper, const char *server_url, char **output, int *status,
            struct nsbox_error **err)
{
  cleanup_free char *program = NULL;
  int in_pipe[2] = { -1, -1 }, out_pipe[2] = { -1, -1 };
  for (const char *c = helper; *c; c++)
    if (!isalnum ((unsigned char)*c) && *c != '-' && *c != '_' && *c != '.')
      return nsbox_error_set (err, EINVAL, "invalid credential helper name '%s'", helper);
  if (!(program = xasprintf ("docker-credential-%s", helper)))
    return nsbox_error_oom (err);
  if (pipe2 (in_pipe, O_CLOEXEC) < 0)
    return nsbox_error_sys (err, errno, "pipe for '%s'", program);
  if (pipe2 (out_pipe, O_CLOEXEC) < 0)
    {
      int e = errno;
      close (in_pipe[0]);
      close (in_pipe[1]);
      return nsbox_error_sys (err, e, "pipe for '%s'", program);
    }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init (&actions);
  posix_spawn_file_actions_adddup2 (&actions, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2 (&actions, out_pipe[1], 1);
  char *argv[] = { program, (char *)"get", NULL };
  pid_t pid;
  int r = posix_spawnp (&pid, program, &actions, NULL, argv, environ);
  posix_spawn_file_actions_destroy (&actions);
  close (in_pipe[0]);
  close (out_pipe[1]);
  if (r != 0)
    {
      close (in_pipe[1]);
      close (out_pipe[0]);
      return nsbox_error_sys (err, r, "run credential helper '%s'", program);
    }
  /* The URL is tiny: it fits in the pipe buffer, so this cannot block. */
  /* A helper that exits without reading must not kill us with SIGPIPE:
   * block it, and swallow one we caused before unblocking. */
  sigset_t block, old, pending;
  sigemptyset (&block);
  sigaddset (&block, SIGPIPE);
  pthread_sigmask (SIG_BLOCK, &block, &old);
  sigpending (&pending);
  bool was_pending = sigismember (&pending, SIGPIPE);
  size_t url_len = strlen (server_url);
  ssize_t w = write (in_pipe[1], server_url, url_len);
  if (w < 0 && errno == EPIPE && !was_pending)
    {
      struct timespec zero = { 0, 0 };
      sigtimedwait (&block, NULL, &zero);
    }
  close (in_pipe[1]);
  pthread_sigmask (SIG_SETMASK, &old, NULL);
  size_t len = 0;
  r = read_all_bounded (out_pipe[0], output, &len, HELPER_OUTPUT_MAX);
  close (out_pipe[0]);
  if (r < 0)
    kill (pid, SIGKILL);
  int wstatus = 0;
  while (waitpid (pid, &wstatus, 0) < 0 && errno == EINTR)
    ;
  if (r < 0)
    return nsbox_error_sys (err, -r, "read the output of credential helper '%s'", program);
  *status = WIFEXITED (wstatus) ? WEXITSTATUS (wstatus) : 128 + WTERMSIG (wstatus);
  return 0;
}

static int
credentials_from_helper (const char *helper, const char *key, struct nsbox_credentials *out,
                         struct nsbox_error **err)
{
  /* Docker Hub's entry is the legacy v1 URL; others are the bare host. */
  const char *server_url
      = strcmp (key, "index.docker.io") == 0 ? "https://index.docker.io/v1/" : key;
  cleanup_free char *output = NULL;
  int status = 0;
  int r = run_helper (helper, server_url, &output, &status, err);
  if (r < 0)
    return r;
  if (status != 0)
    {
      /* "credentials not found in native keychain": anonymous access. */
      if (strstr (output, "not found"))
        return 0;
      output[strcspn (output, "\n")] = '\0';
      return nsbox_error_set (err, EACCES,
                              "credential helper 'docker-credential-%s' failed (exit %d): %s",
                              helper, status, output);
    }
  json_error_t jerr;
  json_t *doc = json_loads (output, 0, &jerr);
  const char *user = json_string_value (json_object_get (doc, "Username"));
  const char *secret = json_string_value (json_object_get (doc, "Secret"));
  if (!user || !secret)
    {
      json_decref (doc);
      explicit_bzero (output, strlen (output));
      return nsbox_error_set (err, EBADMSG,
                              "credential helper 'docker-credential-%s' printed no "
                              "Username/Secret JSON",
                              helper);
    }
  r = set_credentials (out, user, secret);
  json_decref (doc);
  explicit_bzero (output, strlen (output));
  return r < 0 ? nsbox_error_oom (err) : r;
}

static int
credentials_from_auths (json_t *entry, const char *path, const char *key,
                        struct nsbox_credentials *out, struct nsbox_error **err)
{
  const char *auth = json_string_value (json_object_get (entry, "auth"));
  const char *identity = json_string_value (json_object_get (entry, "identitytoken"));
  if (identity && *identity)
    return set_credentials (out, "<token>", identity) < 0 ? nsbox_error_oom (err) : 1;
  if (!auth || !*auth)
    return 0;
  size_t len = 0;
  cleanup_free char *decoded = nsbox_base64_decode (auth, &len);
  char *colon = decoded ? memchr (decoded, ':', len) : NULL;
  if (!colon)
    {
      if (decoded)
        explicit_bzero (decoded, len);
      return nsbox_error_set (
          err, EBADMSG, "'%s': auths entry for '%s' is not base64 of user:password", path, key);
    }
  *colon = '\0';
  int r = set_credentials (out, decoded, colon + 1);
  explicit_bzero (decoded, len);
  return r < 0 ? nsbox_error_oom (err) : r;
}

int
nsbox_credentials_lookup (const char *registry, struct nsbox_credentials *out,
                          struct nsbox_error **err)
{
  cleanup_free char *path = config_path ();
  cleanup_free char *key = nsbox_credentials_key (registry);
  if (!key)
    return nsbox_error_oom (err);
  if (!path)
    return 0;
  cleanup_free char *text = NULL;
  size_t len = 0;
  cleanup_error struct nsbox_error *read_err = NULL;
  int r = nsbox_read_file (path, CONFIG_MAX_BYTES, "Docker client configuration", &text, &len,
                           &read_err);
  if (r == -ENOENT || r == -ENOTDIR)
    return 0;
  if (r < 0)
    {
      if (err && !*err)
        *err = TAKE_PTR (read_err);
      return r;
    }
  json_error_t jerr;
  json_t *config = json_loadb (text, len, 0, &jerr);
  explicit_bzero (text, len); /* it may hold credentials */
  if (!config)
    return nsbox_error_set (err, EBADMSG, "'%s':%d:%d: %s", path, jerr.line, jerr.column,
                            jerr.text);
  const char *helper
      = json_string_value (lookup_normalized (json_object_get (config, "credHelpers"), key));
  if (!helper)
    helper = json_string_value (json_object_get (config, "credsStore"));
  if (helper && *helper)
    r = credentials_from_helper (helper, key, out, err);
  if (r == 0)
    {
      json_t *entry = lookup_normalized (json_object_get (config, "auths"), key);
      if (entry)
        r = credentials_from_auths (entry, path, key, out, err);
    }
  json_decref (config);
  return r;
}

/* ---- token cache ---- */

static struct token_entry
{
  char *registry;
  char *scope;
  char *token;
  time_t expires; /* CLOCK_MONOTONIC seconds */
} token_cache[TOKEN_CACHE_SIZE];
static pthread_mutex_t token_cache_lock = PTHREAD_MUTEX_INITIALIZER;

static time_t
monotonic_seconds (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec;
}

static void
token_entry_clear (struct token_entry *e)
{
  if (e->token)
    explicit_bzero (e->token, strlen (e->token));
  free (e->registry);
  free (e->scope);
  free (e->token);
  memset (e, 0, sizeof *e);
}

static struct token_entry *
token_find (const char *registry, const char *scope)
{
  for (size_t i = 0; i < TOKEN_CACHE_SIZE; i++)
    if (token_cache[i].token && strcmp (token_cache[i].registry, registry) == 0
        && strcmp (token_cache[i].scope, scope) == 0)
      return &token_cache[i];
  return NULL;
}

char *
nsbox_token_cache_get (const char *registry, const char *scope)
{
  char *token = NULL;
  pthread_mutex_lock (&token_cache_lock);
  struct token_entry *e = token_find (registry, scope);
  /* A few seconds of margin so a token does not expire in flight. */
  if (e && e->expires > monotonic_seconds () + 5)
    token = strdup (e->token);
  else if (e)
    token_entry_clear (e);
  pthread_mutex_unlock (&token_cache_lock);
  return token;
}

void
nsbox_token_cache_put (const char *registry, const char *scope, const char *token,
                       long expires_in_seconds)
{
  pthread_mutex_lock (&token_cache_lock);
  struct token_entry *e = token_find (registry, scope);
  if (!e)
    {
      /* a free slot, else the one expiring first */
      e = &token_cache[0];
      for (size_t i = 0; i < TOKEN_CACHE_SIZE; i++)
        {
          if (!token_cache[i].token)
            {
              e = &token_cache[i];
              break;
            }
          if (token_cache[i].expires < e->expires)
            e = &token_cache[i];
        }
    }
  token_entry_clear (e);
  e->registry = strdup (registry);
  e->scope = strdup (scope);
  e->token = strdup (token);
  e->expires = monotonic_seconds () + expires_in_seconds;
  if (!e->registry || !e->scope || !e->token)
    token_entry_clear (e);
  pthread_mutex_unlock (&token_cache_lock);
}

void
nsbox_token_cache_drop (const char *registry, const char *scope)
{
  pthread_mutex_lock (&token_cache_lock);
  struct token_entry *e = token_find (registry, scope);
  if (e)
    token_entry_clear (e);
  pthread_mutex_unlock (&token_cache_lock);
}
