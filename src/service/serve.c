/* `nsbox serve`: the server process. One warm pool per profile, a
 * libmicrohttpd daemon with a thread per connection (a run blocks its
 * connection's thread; admission in serve_api.c bounds how many run and
 * wait), the listening socket, and the drain on SIGTERM/SIGINT.
 *
 * The socket: unix:PATH by default (mode 0660; a missing parent directory is
 * created 0750; an existing one must be a real directory owned by us or
 * root and not writable by others; a stale socket is replaced, a live one
 * refused), or tcp:ADDR:PORT, only with --token-file (every request then
 * needs "Authorization: Bearer TOKEN"; TLS is a reverse proxy's job), or
 * the socket systemd passes (LISTEN_FDS, socket activation). */
#include "serve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "error.h"
#include "fileio.h"
#include "mhd.h"
#include "serve_conn.h"
#include "util.h"

/* TCP: connections from one address, unless --max-connections-per-peer
 * says otherwise (a unix socket has no such limit by default). */
#define PER_ADDRESS_LIMIT 64
/* After the last run of a drain, how long its answers may take to be read. */
#define ANSWER_GRACE_SECONDS 10
/* libmicrohttpd's own connection limit sits above ours (serve_conn.c
 * answers past ours), so that it never refuses one itself. */
#define MHD_LIMIT_SLACK 16

static int __attribute__ ((format (printf, 1, 2))) fail (const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  nsbox_vprint_message ("nsbox serve", fmt, ap);
  va_end (ap);
  return -1;
}

/* ---- the listening socket ---- */

struct listener
{
  int fd;
  char *unix_path; /* ours to remove at the end, or NULL */
  bool tcp;
};

static char *
default_socket_path (void)
{
  if (geteuid () == 0)
    return xasprintf ("/run/nsbox/nsbox.sock");
  const char *runtime = getenv ("XDG_RUNTIME_DIR");
  if (runtime && runtime[0] == '/')
    return xasprintf ("%s/nsbox/nsbox.sock", runtime);
  return xasprintf ("/tmp/nsbox-%u/nsbox.sock", (unsigned)geteuid ());
}

/* The socket's directory: created 0750 when missing (its parent must
 * exist); else it must be a directory, not a symlink, owned by us or
 * root, and writable by nobody else. */
static int
check_socket_dir (const char *path)
{
  cleanup_free char *dir = strdup (path);
  if (!dir)
    return fail ("out of memory");
  char *slash = strrchr (dir, '/');
  if (!slash || slash == dir)
    return 0;
  *slash = '\0';
  if (mkdir (dir, 0750) < 0 && errno != EEXIST)
    return fail ("create the socket directory '%s': %s", dir, strerror (errno));
  struct stat st;
  if (lstat (dir, &st) < 0)
    return fail ("socket directory '%s': %s", dir, strerror (errno));
  if (!S_ISDIR (st.st_mode))
    return fail ("socket directory '%s' is not a directory (a symlink is refused)", dir);
  if (st.st_uid != geteuid () && st.st_uid != 0)
    return fail ("socket directory '%s' belongs to uid %u, not to this user or root", dir,
                 (unsigned)st.st_uid);
  /* Whoever may write there may put a socket of their own in our place. */
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return fail ("socket directory '%s' is writable by its group or others (mode %04o)", dir,
                 (unsigned)(st.st_mode & 07777));
  return 0;
}

static int
listen_unix (const char *path, struct listener *l)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  if (path[0] != '/' || strlen (path) >= sizeof addr.sun_path)
    return fail ("unix socket path '%s' must be absolute and shorter than %zu bytes", path,
                 sizeof addr.sun_path);
  if (check_socket_dir (path) < 0)
    return -1;
  memcpy (addr.sun_path, path, strlen (path) + 1);
  int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return fail ("socket: %s", strerror (errno));
  struct stat st;
  if (lstat (path, &st) == 0)
    {
      if (!S_ISSOCK (st.st_mode))
        {
          close (fd);
          return fail ("'%s' exists and is not a socket: refusing to replace it", path);
        }
      /* A live server answers; a stale socket (its server was killed) is
       * replaced. */
      if (connect (fd, (struct sockaddr *)&addr, sizeof addr) == 0)
        {
          close (fd);
          return fail ("another server is listening on '%s'", path);
        }
      unlink (path);
    }
  /* The umask makes it 0660 at creation: no chmod by path afterwards. */
  mode_t old = umask (0117);
  int r = bind (fd, (struct sockaddr *)&addr, sizeof addr);
  umask (old);
  if (r < 0 || listen (fd, 256) < 0)
    {
      int e = errno;
      close (fd);
      return fail ("listen on '%s': %s", path, strerror (e));
    }
  l->fd = fd;
  l->unix_path = strdup (path);
  return l->unix_path ? 0 : fail ("out of memory");
}

static int
listen_tcp (const char *spec, struct listener *l)
{
  /* ADDR:PORT; ADDR may be [v6]. */
  cleanup_free char *copy = strdup (spec);
  if (!copy)
    return fail ("out of memory");
  char *colon = strrchr (copy, ':');
  if (!colon || colon == copy || !colon[1])
    return fail ("--listen tcp:%s: expected tcp:ADDR:PORT", spec);
  *colon = '\0';
  char *host = copy;
  size_t hl = strlen (host);
  if (host[0] == '[' && hl > 2 && host[hl - 1] == ']')
    {
      host[hl - 1] = '\0';
      host++;
    }
  struct addrinfo hints
      = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE, .ai_socktype = SOCK_STREAM };
  struct addrinfo *ai = NULL;
  int g = getaddrinfo (host, colon + 1, &hints, &ai);
  if (g != 0)
    return fail ("--listen tcp:%s: %s (a numeric address and port are expected)", spec,
                 gai_strerror (g));
  int fd = socket (ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  int r = fd < 0 ? -1 : setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (r == 0)
    r = bind (fd, ai->ai_addr, ai->ai_addrlen);
  if (r == 0)
    r = listen (fd, 256);
  int e = errno;
  freeaddrinfo (ai);
  if (r < 0)
    {
      if (fd >= 0)
        close (fd);
      return fail ("listen on tcp:%s: %s", spec, strerror (e));
    }
  l->fd = fd;
  l->tcp = true;
  return 0;
}

/* Socket activation: systemd passed exactly one listening socket as fd 3. */
static bool
activated (struct listener *l)
{
  const char *pid = getenv ("LISTEN_PID"), *fds = getenv ("LISTEN_FDS");
  if (!pid || !fds || strtol (pid, NULL, 10) != (long)getpid () || strcmp (fds, "1") != 0)
    return false;
  unsetenv ("LISTEN_PID");
  unsetenv ("LISTEN_FDS");
  unsetenv ("LISTEN_FDNAMES");
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  if (getsockname (3, (struct sockaddr *)&ss, &len) < 0)
    return false;
  fcntl (3, F_SETFD, FD_CLOEXEC);
  l->fd = 3;
  l->tcp = ss.ss_family == AF_INET || ss.ss_family == AF_INET6;
  return true;
}

/* The token file: not readable by others; one token per line (at most
 * NSBOX_SERVE_MAX_TOKENS, each at least 16 bytes, none twice; empty lines
 * skipped), each a client of its own: a live sandbox opened with one is
 * not another's. Kept NUL-separated in a TOKEN_PAGE mapping of its own
 * (munmap it), found through tokens[]. */
#define TOKEN_PAGE 4096
_Static_assert(NSBOX_SERVE_MAX_TOKENS == 16, "the token file's error message says 16");
static char *
read_tokens (const char *path, const char **tokens, size_t *n_tokens)
{
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  struct stat st;
  if (fd < 0 || fstat (fd, &st) < 0)
    {
      fail ("token file '%s': %s", path, strerror (errno));
      return NULL;
    }
  if (!S_ISREG (st.st_mode) || (st.st_mode & 0077))
    {
      fail ("token file '%s' must be a regular file readable by its owner only (mode %04o)", path,
            (unsigned)(st.st_mode & 07777));
      return NULL;
    }
  if (st.st_size >= TOKEN_PAGE)
    {
      fail ("token file '%s': larger than %d bytes", path, TOKEN_PAGE - 1);
      return NULL;
    }
  /* A page of its own that no clone of this process inherits: pooled
   * sandboxes' inits are clones of the server. */
  char *page = mmap (NULL, TOKEN_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED || madvise (page, TOKEN_PAGE, MADV_WIPEONFORK) < 0)
    {
      fail ("token: %s", strerror (errno));
      if (page != MAP_FAILED)
        munmap (page, TOKEN_PAGE);
      return NULL;
    }
  ssize_t got = nsbox_read_full (fd, page, TOKEN_PAGE - 1);
  const char *why = got < 0 ? strerror (errno) : NULL;
  char more;
  if (!why && got == TOKEN_PAGE - 1 && read (fd, &more, 1) != 0)
    why = "larger than 4095 bytes";
  if (!why && got > 0 && memchr (page, '\0', (size_t)got))
    why = "it holds a NUL byte";
  size_t n = 0;
  for (char *line = page, *end; !why && got >= 0 && *line; line = end)
    {
      end = line + strcspn (line, "\r\n");
      bool last = *end == '\0';
      *end = '\0';
      if (!last)
        end++;
      if (!*line)
        continue;
      if (strlen (line) < 16)
        why = "a token must be at least 16 characters";
      else if (n == NSBOX_SERVE_MAX_TOKENS)
        why = "too many tokens (at most 16)";
      for (size_t i = 0; !why && i < n; i++)
        if (strcmp (tokens[i], line) == 0)
          why = "a token is given twice";
      if (!why)
        tokens[n++] = line;
    }
  if (!why && n == 0)
    why = "no token in it";
  if (why)
    {
      explicit_bzero (page, TOKEN_PAGE);
      munmap (page, TOKEN_PAGE);
      fail ("token file '%s': %s", path, why);
      return NULL;
    }
  *n_tokens = n;
  return page;
}

static int
open_listener (const struct nsbox_serve_options *o, struct listener *l, struct nsbox_server *s)
{
  *l = (struct listener){ .fd = -1 };
  if (!activated (l))
    {
      if (o->listen && strncmp (o->listen, "tcp:", 4) == 0)
        {
          if (!o->token_file)
            return fail ("--listen %s needs --token-file: a TCP listener is refused without a "
                         "bearer token",
                         o->listen);
          s->token_page = read_tokens (o->token_file, s->tokens, &s->n_tokens);
          if (!s->token_page)
            return -1;
          return listen_tcp (o->listen + 4, l);
        }
      if (o->listen && strncmp (o->listen, "unix:", 5) != 0)
        return fail ("--listen '%s': expected unix:PATH or tcp:ADDR:PORT", o->listen);
      cleanup_free char *path = o->listen ? strdup (o->listen + 5) : default_socket_path ();
      if (!path)
        return fail ("out of memory");
      if (o->token_file && !(s->token_page = read_tokens (o->token_file, s->tokens, &s->n_tokens)))
        return -1;
      return listen_unix (path, l);
    }
  if (l->tcp && !o->token_file)
    return fail ("the TCP socket systemd passed needs --token-file");
  if (o->token_file && !(s->token_page = read_tokens (o->token_file, s->tokens, &s->n_tokens)))
    return -1;
  return 0;
}

/* ---- the server ---- */

/* Every connection holds two fds (libmicrohttpd's and serve_conn.c's), and
 * refused ones (as many as max_connections at once) one; with 512 for the
 * rest of the server (pools, runs' pipes, libraries), the soft NOFILE limit
 * is raised for them (up to the hard one: the sandboxes set their own). */
static int
raise_nofile (uint64_t max_connections)
{
  uint64_t need = 3 * max_connections + 512;
  struct rlimit rl;
  if (getrlimit (RLIMIT_NOFILE, &rl) < 0)
    return fail ("getrlimit NOFILE: %s", strerror (errno));
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur >= need)
    return 0;
  if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need)
    return fail ("--max-connections %llu needs %llu open files, above this process's hard limit "
                 "of %llu: lower --max-connections or raise the limit (ulimit -Hn, systemd's "
                 "LimitNOFILE=)",
                 (unsigned long long)max_connections, (unsigned long long)need,
                 (unsigned long long)rl.rlim_max);
  rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 4 * need ? rl.rlim_max : 4 * need;
  if (setrlimit (RLIMIT_NOFILE, &rl) < 0)
    return fail ("setrlimit NOFILE: %s", strerror (errno));
  return 0;
}

static void
free_profiles (struct nsbox_serve_profile *profiles, size_t n)
{
  for (size_t i = 0; i < n; i++)
    {
      nsbox_pool_free (TAKE_PTR (profiles[i].pool));
      nsbox_config_free (TAKE_PTR (profiles[i].config));
    }
}

int
nsbox_serve (struct nsbox_serve_profile *profiles, size_t n_profiles,
             const struct nsbox_serve_options *o)
{
  char why[256];
  if (nsbox_mhd_load (why, sizeof why) < 0)
    {
      free_profiles (profiles, n_profiles);
      fail ("%s (install libmicrohttpd12)", why);
      return 125;
    }
  /* Request JSON holds the client's code: wiped when jansson frees it. */
  json_set_alloc_funcs (malloc, nsbox_zeroing_free);
  struct nsbox_server s = { .n_profiles = n_profiles,
                            .max_concurrent = o->max_concurrent,
                            .max_queue = o->max_queue,
                            .max_request_bytes = o->max_request_bytes };
  memcpy (s.profiles, profiles, n_profiles * sizeof *profiles);
  /* It goes into every answer, raw: only a DNS label. */
  if (o->node_name && !nsbox_serve_node_valid (o->node_name))
    {
      free_profiles (profiles, n_profiles);
      fail ("invalid node name '%s': expected a DNS label", o->node_name);
      return 125;
    }
  nsbox_serve_set_node (o->node_name ? o->node_name : "nsbox");
  pthread_mutex_init (&s.lock, NULL);
  pthread_cond_init (&s.slot_free, NULL);
  pthread_cond_init (&s.idle, NULL);

  /* Signals: SIGTERM and SIGINT are taken by sigwait in this thread; every
   * thread started from here on (pools, connections) inherits the block. */
  sigset_t stop;
  sigemptyset (&stop);
  sigaddset (&stop, SIGTERM);
  sigaddset (&stop, SIGINT);
  sigaddset (&stop, SIGHUP);
  pthread_sigmask (SIG_BLOCK, &stop, NULL);

  struct listener l;
  int status = 125;
  struct MHD_Daemon *daemon = NULL;
  if (open_listener (o, &l, &s) < 0)
    goto out;
  for (size_t i = 0; i < s.n_profiles; i++)
    {
      struct nsbox_error *err = NULL;
      if (nsbox_pool_new (s.profiles[i].config, o->pool_options, &s.profiles[i].pool, &err) < 0)
        {
          fail ("profile '%s': %s", s.profiles[i].name, nsbox_error_message (err));
          nsbox_error_free (err);
          goto out;
        }
    }
  s.tcp = l.tcp;
  s.sandboxes = nsbox_serve_sandboxes_new (o->max_sandboxes, o->max_sandboxes_per_client);
  if (!s.sandboxes)
    {
      fail ("out of memory");
      goto out;
    }
  if (raise_nofile (o->max_connections) < 0)
    goto out;
  struct nsbox_conns_options co = {
    .max_connections = o->max_connections,
    .max_per_peer
    = o->max_connections_per_peer ? o->max_connections_per_peer : (l.tcp ? PER_ADDRESS_LIMIT : 0),
    .header_timeout_ms = o->header_timeout_ms,
    .body_timeout_ms = o->body_timeout_ms,
    .idle_timeout_ms = o->idle_timeout_ms,
    .tcp = l.tcp,
  };
  s.conns = nsbox_conns_new (&co);
  if (!s.conns)
    {
      fail ("out of memory");
      goto out;
    }
  /* Accepting is serve_conn.c's; libmicrohttpd polls (no select, whose fd
   * numbers end at 1024) with a thread per connection. Its inactivity
   * timeout bounds an answer a client reads too slowly. */
  unsigned idle_s = (unsigned)((o->idle_timeout_ms + 999) / 1000);
  daemon = nsbox_mhd.start_daemon (
      MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC | MHD_USE_POLL
          | MHD_USE_NO_LISTEN_SOCKET,
      0, NULL, NULL, nsbox_serve_handle, &s, MHD_OPTION_CONNECTION_LIMIT,
      (unsigned)(o->max_connections + MHD_LIMIT_SLACK), MHD_OPTION_CONNECTION_TIMEOUT, idle_s,
      MHD_OPTION_NOTIFY_COMPLETED, nsbox_serve_completed, &s, MHD_OPTION_NOTIFY_CONNECTION,
      nsbox_conns_notify, s.conns, MHD_OPTION_URI_LOG_CALLBACK, nsbox_conns_request_line, s.conns,
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)NSBOX_SERVE_CONNECTION_MEMORY,
      MHD_OPTION_PER_IP_CONNECTION_LIMIT, 0u, MHD_OPTION_END);
  if (!daemon)
    {
      fail ("libmicrohttpd could not start");
      goto out;
    }
  int cr = nsbox_conns_start (s.conns, daemon, l.fd);
  if (cr < 0)
    {
      fail ("accepting connections: %s", strerror (-cr));
      goto out;
    }
  fprintf (stderr, "nsbox serve: node %s listening on %s%s (%zu profile%s, pid %d)\n",
           nsbox_serve_node (), l.unix_path ? "unix:" : (l.tcp ? "tcp " : "fd 3"),
           l.unix_path ? l.unix_path : "", s.n_profiles, s.n_profiles == 1 ? "" : "s",
           (int)getpid ());

  int sig = 0;
  while (sigwait (&stop, &sig) != 0)
    ;
  uint64_t grace_until = nsbox_now_ms () + o->drain_grace_ms;
  fprintf (stderr, "nsbox serve: %s: draining\n", strsignal (sig));
  /* No new connection; new requests on open ones get 503; wait for the
   * runs in flight and the queue, then (bounded) for their answers to be
   * read. The listening socket is ours (serve_conn.c accepts), closed
   * once its thread no longer listens on it. */
  nsbox_conns_quiesce (s.conns);
  close (TAKE_FD (l.fd));
  pthread_mutex_lock (&s.lock);
  s.draining = true;
  nsbox_serve_set_closing ();
  pthread_cond_broadcast (&s.slot_free);
  /* --drain-grace: a balancer keeps sending on the connections it holds
   * until its health check sees the node gone; each such request is
   * answered (503, Connection: close) instead of meeting a closed
   * connection, which it could not tell from a run that died. Runs in
   * flight go on meanwhile; they are waited for below. */
  pthread_mutex_unlock (&s.lock);
  for (uint64_t now; (now = nsbox_now_ms ()) < grace_until;)
    {
      uint64_t left = grace_until - now;
      struct timespec ts
          = { .tv_sec = (time_t)(left / 1000), .tv_nsec = (long)(left % 1000) * 1000000 };
      nanosleep (&ts, NULL);
    }
  pthread_mutex_lock (&s.lock);
  while (s.running > 0 || s.queued > 0)
    pthread_cond_wait (&s.idle, &s.lock);
  struct timespec until;
  clock_gettime (CLOCK_REALTIME, &until);
  until.tv_sec += ANSWER_GRACE_SECONDS;
  while (s.answering > 0 && pthread_cond_timedwait (&s.idle, &s.lock, &until) == 0)
    ;
  pthread_mutex_unlock (&s.lock);
  status = 0;
out:
  if (daemon)
    nsbox_mhd.stop_daemon (daemon);
  /* No request is left: every live sandbox goes, before the pools. */
  nsbox_serve_sandboxes_free (s.sandboxes);
  nsbox_conns_free (s.conns);
  if (l.fd >= 0)
    close (l.fd);
  if (l.unix_path)
    unlink (l.unix_path);
  free (l.unix_path);
  if (s.token_page)
    {
      explicit_bzero (s.token_page, TOKEN_PAGE);
      munmap (s.token_page, TOKEN_PAGE);
    }
  free_profiles (s.profiles, s.n_profiles);
  pthread_cond_destroy (&s.idle);
  pthread_cond_destroy (&s.slot_free);
  pthread_mutex_destroy (&s.lock);
  if (status == 0)
    fprintf (stderr, "nsbox serve: stopped\n");
  return status;
}
