/* The warm pool's benchmark (make bench, as root): request->result latency
 * of `print(sum(range(10)))` through nsbox_pool_run, against two baselines
 * measured in the same run, interleaved request by request:
 *   cold      `chroot ROOTFS python3 -`, fork to reaped (no isolation at all)
 *   prestart  the physical floor of any pool: the same python3 started ahead
 *             in the chroot, blocked on its stdin; timed from writing the code
 *             to reaping it; once at once, once after idling 25 ms as a
 *             pooled entry does
 *   pool      nsbox_pool_run with an entry ready (size 2), call to return
 * then the sustained throughput at concurrency 2 (pool runs back to back in
 * two threads, against cold chroot runs in two processes, and against the
 * same python3 under tests/bench/floor: the namespaces alone, the ceiling of
 * any pool that builds a fresh sandbox per run), the pre-started floor by
 * how long it idled, and the memory of an idle entry (size 8, full): RSS of
 * its processes and its cgroup's usage. Then the live sandbox rows: a run
 * on an open sandbox against a pooled run and the pre-started floor,
 * nsbox_sandbox_open (alone, and with its first run) against a pooled run,
 * and the memory of an idle sandbox after one run.
 * With NSBOX_BIN as fourth argument, the same request through `nsbox serve`
 * on a unix socket (libcurl, one connection kept open), and the server's
 * throughput at concurrency 2. With `runsc` as second argument: pooled
 * runsc latency against a cold runsc nsbox_run.
 *
 * Usage: pool ROOTFS [native|runsc] [N] [NSBOX_BIN] */
#include <curl/curl.h>
#include <dirent.h>
#include <signal.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nsbox.h"
#include "pool.h"

static const char code[] = "print(sum(range(10)))\n";
/* How long the idled floor waits: less than any entry of the pool waits in
 * the latency loop below, where one turn (a pooled run, a cold start and
 * two pre-started runs) takes longer than that. */
#define IDLED_US 25000
static const char *rootfs;

static double
now (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
die (const char *what, struct nsbox_error *err)
{
  fprintf (stderr, "bench pool: %s: %s\n", what, err ? nsbox_error_message (err) : strerror (errno));
  exit (1);
}

/* tests/bench/floor beside this binary: the namespaces alone, no nsbox. */
static char floor_bin[4096];

/* python3 - in the chroot, stdin a pipe whose write end is returned; or,
 * in_namespaces, the same python3 under tests/bench/floor. */
static pid_t
start_python (int *in_fd, int *out_fd, bool in_namespaces)
{
  int in[2], out[2];
  if (pipe2 (in, O_CLOEXEC) < 0 || pipe2 (out, O_CLOEXEC) < 0)
    die ("pipe", NULL);
  pid_t pid = fork ();
  if (pid == 0)
    {
      dup2 (in[0], 0);
      dup2 (out[1], 1);
      if (in_namespaces)
        {
          execl (floor_bin, "floor", rootfs, (char *)NULL);
          _exit (127);
        }
      if (chroot (rootfs) < 0 || chdir ("/") < 0)
        _exit (126);
      static const char *const argv[] = { "python3", "-", NULL };
      static const char *const envp[] = { "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", NULL };
      execve ("/usr/bin/python3", (char *const *)argv, (char *const *)envp);
      _exit (127);
    }
  close (in[0]);
  close (out[1]);
  *in_fd = in[1];
  *out_fd = out[0];
  return pid;
}

static void
finish_python (pid_t pid, int in_fd, int out_fd)
{
  if (write (in_fd, code, sizeof code - 1) != (ssize_t)(sizeof code - 1))
    die ("write", NULL);
  close (in_fd);
  char buf[64];
  ssize_t n = read (out_fd, buf, sizeof buf);
  close (out_fd);
  int status;
  waitpid (pid, &status, 0);
  if (n != 3 || memcmp (buf, "45\n", 3) != 0 || status != 0)
    {
      fprintf (stderr, "bench pool: chroot python failed (status 0x%x)\n", status);
      exit (1);
    }
}

/* Whether pid blocks in read(0, ...). */
static bool
blocked_on_stdin (pid_t pid)
{
  char path[64], buf[128];
  snprintf (path, sizeof path, "/proc/%d/syscall", (int)pid);
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  ssize_t n = read (fd, buf, sizeof buf - 1);
  close (fd);
  buf[n > 0 ? n : 0] = '\0';
  return strncmp (buf, "0 0x0 ", 6) == 0;
}

static double
cold_once_in (bool in_namespaces)
{
  double t0 = now ();
  int in, out;
  pid_t pid = start_python (&in, &out, in_namespaces);
  finish_python (pid, in, out);
  return now () - t0;
}

static double
cold_once (void)
{
  return cold_once_in (false);
}

/* idle_us: how long the python waits blocked on its stdin before the code
 * comes. A pooled entry always has: its caches and its CPU's have gone cold
 * meanwhile, and that alone makes CPython's run slower. */
static double
prestart_once (useconds_t idle_us)
{
  int in, out;
  pid_t pid = start_python (&in, &out, false);
  while (!blocked_on_stdin (pid))
    usleep (500);
  if (idle_us)
    usleep (idle_us);
  double t0 = now ();
  finish_python (pid, in, out);
  return now () - t0;
}

static void
wait_ready (nsbox_pool *pool, size_t n)
{
  double until = now () + 60;
  while (nsbox_pool_ready (pool) < n)
    {
      if (now () > until)
        die ("the pool did not fill within 60 s", NULL);
      usleep (500);
    }
}

/* The default pool's size (nsbox_pool_new without options). */
static void
pool_full (void *pool)
{
  wait_ready (pool, 2);
}

static double
pool_once (nsbox_pool *pool, bool *warm)
{
  wait_ready (pool, 1);
  struct nsbox_error *err = NULL;
  nsbox_result *res = NULL;
  double t0 = now ();
  if (nsbox_pool_run (pool, code, sizeof code - 1, NULL, &res, &err) < 0)
    die ("nsbox_pool_run", err);
  double t = now () - t0;
  size_t len;
  const char *out = nsbox_result_stdout (res, &len);
  if (len != 3 || memcmp (out, "45\n", 3) != 0)
    die ("a pooled run printed something else", NULL);
  *warm = nsbox_result_warm (res);
  nsbox_result_free (res);
  return t;
}

static double
lib_cold_once (const nsbox_config *config)
{
  struct nsbox_error *err = NULL;
  nsbox_result *res = NULL;
  double t0 = now ();
  if (nsbox_run (config, code, sizeof code - 1, &res, &err) < 0)
    die ("nsbox_run", err);
  double t = now () - t0;
  nsbox_result_free (res);
  return t;
}

static int
cmp (const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double
pct (double *v, int n, double p)
{
  qsort (v, (size_t)n, sizeof *v, cmp);
  int i = (int)(p * (n - 1) + 0.5);
  return v[i];
}

struct tp_arg
{
  nsbox_pool *pool;
  double until;
  int runs;
};

static void *
tp_pool_thread (void *arg)
{
  struct tp_arg *a = arg;
  while (now () < a->until)
    {
      struct nsbox_error *err = NULL;
      nsbox_result *res = NULL;
      if (nsbox_pool_run (a->pool, code, sizeof code - 1, NULL, &res, &err) < 0)
        die ("nsbox_pool_run", err);
      nsbox_result_free (res);
      a->runs++;
    }
  return NULL;
}

static void *
cold_loop (struct tp_arg *a, bool in_namespaces)
{
  while (now () < a->until)
    {
      cold_once_in (in_namespaces);
      a->runs++;
    }
  return NULL;
}

static void *
tp_cold_thread (void *arg)
{
  return cold_loop (arg, false);
}

static void *
tp_floor_thread (void *arg)
{
  return cold_loop (arg, true);
}

static double
throughput (void *(*fn) (void *), nsbox_pool *pool, double seconds)
{
  struct tp_arg a[2] = { { pool, now () + seconds, 0 }, { pool, now () + seconds, 0 } };
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    pthread_create (&t[i], NULL, fn, &a[i]);
  for (int i = 0; i < 2; i++)
    pthread_join (t[i], NULL);
  return (a[0].runs + a[1].runs) / seconds;
}

/* The pre-started floor by how long its python idled before the code
 * came, interleaved: where the penalty of waiting sets in. */
static void
idle_curve (int n)
{
  static const useconds_t idle_ms[] = { 0, 1, 3, 10, 25, 100 };
  enum
  {
    K = sizeof idle_ms / sizeof *idle_ms
  };
  double *v = calloc ((size_t)n * K, sizeof *v);
  if (!v)
    die ("calloc", NULL);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < K; j++)
      v[j * n + i] = prestart_once (idle_ms[j] * 1000);
  printf ("  the pre-started floor by idle time (%d runs each, p50):", n);
  for (int j = 0; j < K; j++)
    printf ("%s %u ms %.2f", j ? "," : "", (unsigned)idle_ms[j], pct (v + j * n, n, 0.5) * 1e3);
  printf (" ms\n");
  free (v);
}

/* Throughput rows, interleaved: ROUNDS windows of WINDOW_S seconds each for
 * the pool, the bare chroot and the namespaces alone, in turn, so that the
 * machine's drift falls on all three. Each window starts with the pool full
 * (refilling it would otherwise take CPU from the next window). The ceiling
 * of any pool that builds a fresh sandbox per run is the namespaces alone:
 * the same python3 under tests/bench/floor (seven new namespaces,
 * pivot_root, a PID 1 that waits; no seccomp, no cgroup, no supervision),
 * which pays one execve more per run than the bare chroot. */
#define ROUNDS 4
#define WINDOW_S 1.5

struct rates
{
  double pool, bare, floor; /* runs/s; floor 0 when not built */
};

/* full (arg) returns once the pool under test is full. */
static struct rates
throughput_rows (void *(*pool_fn) (void *), nsbox_pool *pool, void (*full) (void *), void *arg)
{
  struct rates r = { 0 };
  bool have_floor = access (floor_bin, X_OK) == 0;
  for (int i = 0; i < ROUNDS; i++)
    {
      full (arg);
      r.pool += throughput (pool_fn, pool, WINDOW_S) / ROUNDS;
      full (arg);
      r.bare += throughput (tp_cold_thread, NULL, WINDOW_S) / ROUNDS;
      if (have_floor)
        r.floor += throughput (tp_floor_thread, NULL, WINDOW_S) / ROUNDS;
    }
  return r;
}

static void
print_floor (const struct rates *r, const char *what)
{
  if (r->floor <= 0)
    {
      printf ("  (no namespaces floor: %s is not built; make bench builds it)\n", floor_bin);
      return;
    }
  printf ("  the namespaces alone (tests/bench/floor) %.1f runs/s: %.2f of bare; %s / namespaces "
          "alone: %.2f\n",
          r->floor, r->floor / r->bare, what, r->pool / r->floor);
}

/* RSS (kB) of the process tree under pid. */
static long
tree_rss_kb (pid_t pid)
{
  char path[64], buf[4096];
  snprintf (path, sizeof path, "/proc/%d/status", (int)pid);
  long rss = 0;
  FILE *f = fopen (path, "re");
  if (f)
    {
      while (fgets (buf, sizeof buf, f))
        if (strncmp (buf, "VmRSS:", 6) == 0)
          rss = strtol (buf + 6, NULL, 10);
      fclose (f);
    }
  snprintf (path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
  f = fopen (path, "re");
  if (!f)
    return rss;
  size_t n = fread (buf, 1, sizeof buf - 1, f);
  fclose (f);
  buf[n] = '\0';
  char *save = NULL;
  for (char *tok = strtok_r (buf, " \n", &save); tok; tok = strtok_r (NULL, " \n", &save))
    rss += tree_rss_kb ((pid_t)strtol (tok, NULL, 10));
  return rss;
}

/* memory.usage_in_bytes (v1) or memory.current (v2) of the cgroup of pid. */
static long
cgroup_memory_kb (pid_t pid)
{
  char path[64], line[1024];
  snprintf (path, sizeof path, "/proc/%d/cgroup", (int)pid);
  FILE *f = fopen (path, "re");
  if (!f)
    return -1;
  long kb = -1;
  while (fgets (line, sizeof line, f) && kb < 0)
    {
      line[strcspn (line, "\n")] = '\0';
      char *c1 = strchr (line, ':'), *c2 = c1 ? strchr (c1 + 1, ':') : NULL;
      if (!c2)
        continue;
      char file[1400];
      if (strstr (c1, ":memory:"))
        snprintf (file, sizeof file, "/sys/fs/cgroup/memory%s/memory.usage_in_bytes", c2 + 1);
      else if (line[0] == '0' && line[1] == ':' && line[2] == ':')
        snprintf (file, sizeof file, "/sys/fs/cgroup%s/memory.current", c2 + 1);
      else
        continue;
      FILE *m = fopen (file, "re");
      if (m)
        {
          long long v;
          if (fscanf (m, "%lld", &v) == 1)
            kb = (long)(v / 1024);
          fclose (m);
        }
    }
  fclose (f);
  return kb;
}

/* ---- through nsbox serve ---- */

static const char *server_socket;

static size_t
sink (char *data, size_t size, size_t n, void *arg)
{
  struct
  {
    char buf[4096];
    size_t len;
  } *a = arg;
  size_t bytes = size * n, room = sizeof a->buf - 1 - a->len;
  memcpy (a->buf + a->len, data, bytes < room ? bytes : room);
  a->len += bytes < room ? bytes : room;
  a->buf[a->len] = '\0';
  return bytes;
}

static CURL *
server_handle (void)
{
  CURL *h = curl_easy_init ();
  static const char body[] = "{\"code\": \"print(sum(range(10)))\\n\"}";
  curl_easy_setopt (h, CURLOPT_URL, "http://localhost/v1/runs");
  curl_easy_setopt (h, CURLOPT_UNIX_SOCKET_PATH, server_socket);
  curl_easy_setopt (h, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt (h, CURLOPT_WRITEFUNCTION, sink);
  curl_easy_setopt (h, CURLOPT_NOSIGNAL, 1L);
  return h;
}

static double
server_once (CURL *h, bool *warm)
{
  struct
  {
    char buf[4096];
    size_t len;
  } a = { .len = 0 };
  curl_easy_setopt (h, CURLOPT_WRITEDATA, &a);
  double t0 = now ();
  CURLcode rc = curl_easy_perform (h);
  double t = now () - t0;
  long status = 0;
  curl_easy_getinfo (h, CURLINFO_RESPONSE_CODE, &status);
  if (rc != CURLE_OK || status != 200 || !strstr (a.buf, "\"stdout\":\"45\\n\""))
    {
      fprintf (stderr, "bench pool: the server answered %ld: %s\n", status, a.buf);
      exit (1);
    }
  *warm = strstr (a.buf, "\"served\":\"warm\"") != NULL;
  return t;
}

static void
wait_server_ready (CURL *health)
{
  double until = now () + 60;
  for (;;)
    {
      struct
      {
        char buf[4096];
        size_t len;
      } a = { .len = 0 };
      curl_easy_setopt (health, CURLOPT_WRITEDATA, &a);
      if (curl_easy_perform (health) == CURLE_OK && strstr (a.buf, "\"ready\":2"))
        return;
      if (now () > until)
        die ("the server's pool did not fill within 60 s", NULL);
      usleep (500);
    }
}

static void
server_full (void *health)
{
  wait_server_ready (health);
}

static void *
tp_server_thread (void *arg)
{
  struct tp_arg *a = arg;
  CURL *h = server_handle ();
  bool warm;
  while (now () < a->until)
    {
      server_once (h, &warm);
      a->runs++;
    }
  curl_easy_cleanup (h);
  return NULL;
}

static void
server_rows (const char *nsbox, int n)
{
  char dir[] = "/tmp/nsbox-bench-XXXXXX";
  if (!mkdtemp (dir))
    die ("mkdtemp", NULL);
  static char sock[64];
  snprintf (sock, sizeof sock, "%s/s.sock", dir);
  server_socket = sock;
  char listen[80];
  snprintf (listen, sizeof listen, "unix:%s", sock);
  pid_t pid = fork ();
  if (pid == 0)
    {
      int null = open ("/dev/null", O_WRONLY);
      dup2 (null, 2);
      execl (nsbox, "nsbox", "serve", "--rootfs", rootfs, "--listen", listen, "--pool-size", "2",
             (char *)NULL);
      _exit (127);
    }
  CURL *health = curl_easy_init ();
  curl_easy_setopt (health, CURLOPT_URL, "http://localhost/v1/health");
  curl_easy_setopt (health, CURLOPT_UNIX_SOCKET_PATH, sock);
  curl_easy_setopt (health, CURLOPT_WRITEFUNCTION, sink);
  double *srv = calloc ((size_t)n, sizeof *srv), *cold = calloc ((size_t)n, sizeof *cold);
  CURL *h = server_handle ();
  int cold_served = 0;
  for (int i = 0; i < n; i++)
    {
      wait_server_ready (health);
      bool warm;
      srv[i] = server_once (h, &warm);
      cold_served += !warm;
      cold[i] = cold_once ();
    }
  double s50 = pct (srv, n, 0.5), s99 = pct (srv, n, 0.99), c50 = pct (cold, n, 0.5);
  printf ("through nsbox serve (unix socket, libcurl, connection kept):\n");
  printf ("  request->result             p50 %7.2f ms  p99 %7.2f ms  (%d of %d served cold)\n",
          s50 * 1e3, s99 * 1e3, cold_served, n);
  printf ("  server p50 / cold chroot python3 p50 (%.2f ms): %.3f (target <= 0.25)\n", c50 * 1e3,
          s50 / c50);
  struct rates r = throughput_rows (tp_server_thread, NULL, server_full, health);
  printf ("throughput at concurrency 2: through the server %.1f runs/s, bare chroot python3 "
          "%.1f runs/s: %.2f (target >= 0.9)\n",
          r.pool, r.bare, r.pool / r.bare);
  print_floor (&r, "through the server");
  curl_easy_cleanup (h);
  curl_easy_cleanup (health);
  kill (pid, SIGTERM);
  waitpid (pid, NULL, 0);
  rmdir (dir);
  free (srv);
  free (cold);
}

/* The memory of this process's sandboxes: each child's process tree and
 * its cgroup's usage. */
struct children_memory
{
  long rss, cg;
  int n, ncg;
};

static struct children_memory
children_memory (void)
{
  struct children_memory m = { 0 };
  char path[64], buf[4096];
  snprintf (path, sizeof path, "/proc/%d/task", (int)getpid ());
  DIR *d = opendir (path);
  struct dirent *e;
  while (d && (e = readdir (d)))
    {
      if (e->d_name[0] == '.')
        continue;
      snprintf (buf, sizeof buf, "/proc/%d/task/%s/children", (int)getpid (), e->d_name);
      FILE *f = fopen (buf, "re");
      if (!f)
        continue;
      char list[4096];
      size_t len = fread (list, 1, sizeof list - 1, f);
      fclose (f);
      list[len] = '\0';
      char *save = NULL;
      for (char *tok = strtok_r (list, " \n", &save); tok; tok = strtok_r (NULL, " \n", &save))
        {
          pid_t pid = (pid_t)strtol (tok, NULL, 10);
          m.rss += tree_rss_kb (pid);
          long kb = cgroup_memory_kb (pid);
          if (kb >= 0)
            {
              m.cg += kb;
              m.ncg++;
            }
          m.n++;
        }
    }
  if (d)
    closedir (d);
  return m;
}

static void
print_memory (const char *what, const struct children_memory *m)
{
  printf ("idle %s memory: %d of them; RSS of one's processes %.2f MiB; its cgroup's "
          "memory %s%.2f MiB (target <= 12 MiB)\n",
          what, m->n, m->n ? m->rss / 1024.0 / m->n : 0, m->ncg ? "" : "(no memory cgroup) ",
          m->ncg ? m->cg / 1024.0 / m->ncg : 0);
}

static void
idle_memory (nsbox_config *config)
{
  struct nsbox_error *err = NULL;
  nsbox_pool_options *po = nsbox_pool_options_new (&err);
  nsbox_pool *pool;
  if (nsbox_pool_options_set (po, "size", "8", &err) < 0
      || nsbox_pool_new (config, po, &pool, &err) < 0)
    die ("pool", err);
  wait_ready (pool, 8);
  usleep (200000);
  struct children_memory m = children_memory ();
  print_memory ("pool entry", &m);
  nsbox_pool_free (pool);
  nsbox_pool_options_free (po);
}

/* ---- live sandboxes ---- */

static double
sandbox_once (nsbox_sandbox *sandbox)
{
  struct nsbox_error *err = NULL;
  nsbox_result *res = NULL;
  double t0 = now ();
  if (nsbox_sandbox_run (sandbox, code, sizeof code - 1, NULL, &res, &err) < 0)
    die ("nsbox_sandbox_run", err);
  double t = now () - t0;
  size_t len;
  const char *out = nsbox_result_stdout (res, &len);
  if (len != 3 || memcmp (out, "45\n", 3) != 0)
    die ("a sandbox run printed something else", NULL);
  nsbox_result_free (res);
  return t;
}

static nsbox_sandbox *
sandbox_open (nsbox_pool *pool, double *took)
{
  struct nsbox_error *err = NULL;
  nsbox_sandbox *sandbox;
  double t0 = now ();
  if (nsbox_sandbox_open (pool, NULL, &sandbox, &err) < 0)
    die ("nsbox_sandbox_open", err);
  if (took)
    *took = now () - t0;
  return sandbox;
}

static void
wait_sandboxes_ready (nsbox_pool *pool)
{
  double until = now () + 60;
  for (;;)
    {
      struct nsbox_pool_stats st;
      nsbox_pool_get_stats (pool, &st);
      if (st.sandboxes_ready >= 1)
        return;
      if (now () > until)
        die ("the pool started no live sandbox within 60 s", NULL);
      usleep (2000);
    }
}

/* A run on an open sandbox against a pooled single run and the pre-started
 * floor, interleaved; then nsbox_sandbox_open from a warm pool (pool option
 * sandboxes 1: it takes a sandbox whose driver is ready), alone and with
 * its first run, and a cold open (the pool has no live entry: it returns
 * once the sandbox is built and its driver started; the interpreter's
 * start-up is paid by the first run), each against a pooled run. */
static void
sandbox_rows (nsbox_pool *pool, nsbox_config *config, int n)
{
  double *s = calloc ((size_t)n, sizeof *s), *p = calloc ((size_t)n, sizeof *p),
         *f = calloc ((size_t)n, sizeof *f), *o = calloc ((size_t)n, sizeof *o),
         *q = calloc ((size_t)n, sizeof *q), *w = calloc ((size_t)n, sizeof *w),
         *w1 = calloc ((size_t)n, sizeof *w1);
  struct nsbox_error *err = NULL;
  nsbox_pool_options *po = nsbox_pool_options_new (&err);
  nsbox_pool *live;
  if (!po || nsbox_pool_options_set (po, "size", "0", &err) < 0
      || nsbox_pool_options_set (po, "sandboxes", "1", &err) < 0
      || nsbox_pool_new (config, po, &live, &err) < 0)
    die ("the live sandboxes' pool", err);
  /* The first open starts the filling of its live entries. */
  nsbox_sandbox_close (sandbox_open (live, NULL));
  nsbox_sandbox *sandbox = sandbox_open (pool, NULL);
  sandbox_once (sandbox); /* the driver's first run imports its modules */
  for (int i = 0; i < n; i++)
    {
      bool warm;
      s[i] = sandbox_once (sandbox);
      p[i] = pool_once (pool, &warm);
      f[i] = prestart_once (0);
    }
  nsbox_sandbox_close (sandbox);
  double *o1 = calloc ((size_t)n, sizeof *o1);
  for (int i = 0; i < n; i++)
    {
      bool warm;
      sandbox = sandbox_open (pool, &o[i]);
      o1[i] = o[i] + sandbox_once (sandbox);
      nsbox_sandbox_close (sandbox);
      q[i] = pool_once (pool, &warm);
      wait_sandboxes_ready (live);
      sandbox = sandbox_open (live, &w[i]);
      w1[i] = w[i] + sandbox_once (sandbox);
      nsbox_sandbox_close (sandbox);
    }
  struct nsbox_pool_stats st;
  nsbox_pool_get_stats (live, &st);
  if (st.sandboxes_warm != (uint64_t)n)
    die ("an open from the warm pool was served cold", NULL);
  nsbox_pool_free (live);
  nsbox_pool_options_free (po);
  double s50 = pct (s, n, 0.5), s99 = pct (s, n, 0.99), p50 = pct (p, n, 0.5),
         f50 = pct (f, n, 0.5), o50 = pct (o, n, 0.5), q50 = pct (q, n, 0.5),
         o150 = pct (o1, n, 0.5), w50 = pct (w, n, 0.5), w150 = pct (w1, n, 0.5);
  printf ("live sandbox, %d runs each, interleaved:\n", n);
  printf ("  run on an open sandbox     p50 %7.2f ms  p99 %7.2f ms\n", s50 * 1e3, s99 * 1e3);
  printf ("  pooled single run          p50 %7.2f ms\n", p50 * 1e3);
  printf ("  pre-started python3 floor  p50 %7.2f ms\n", f50 * 1e3);
  printf ("  sandbox run / pooled run: %.2f (target <= 0.8); / pre-started floor: %.2f (target "
          "<= 1.3)\n",
          s50 / p50, s50 / f50);
  printf ("  nsbox_sandbox_open, warm pool p50 %7.2f ms; with its first run p50 %7.2f ms\n",
          w50 * 1e3, w150 * 1e3);
  printf ("  nsbox_sandbox_open, cold      p50 %7.2f ms (driver started, not yet ready); with "
          "its first run p50 %7.2f ms\n",
          o50 * 1e3, o150 * 1e3);
  printf ("  pooled single run p50 %.2f ms: warm open / pooled run %.2f (target <= 1.0), with "
          "its first run %.2f; cold open %.2f, with its first run %.2f\n",
          q50 * 1e3, w50 / q50, w150 / q50, o50 / q50, o150 / q50);
  free (w);
  free (w1);
  free (o1);
  free (s);
  free (p);
  free (f);
  free (o);
  free (q);
}

/* Idle live sandboxes, each after one run, in a pool of size 0: called with
 * no other pool alive, so only they are this process's children. */
static void
idle_sandbox_memory (nsbox_config *config)
{
  struct nsbox_error *err = NULL;
  nsbox_pool_options *po = nsbox_pool_options_new (&err);
  nsbox_pool *empty;
  if (nsbox_pool_options_set (po, "size", "0", &err) < 0
      || nsbox_pool_options_set (po, "sandboxes", "0", &err) < 0
      || nsbox_pool_new (config, po, &empty, &err) < 0)
    die ("pool", err);
  nsbox_sandbox *open[8];
  for (int i = 0; i < 8; i++)
    {
      open[i] = sandbox_open (empty, NULL);
      sandbox_once (open[i]);
    }
  usleep (200000);
  struct children_memory m = children_memory ();
  print_memory ("live sandbox (after one run)", &m);
  for (int i = 0; i < 8; i++)
    nsbox_sandbox_close (open[i]);
  nsbox_pool_free (empty);
  nsbox_pool_options_free (po);
}

int
main (int argc, char **argv)
{
  if (argc < 2)
    {
      fprintf (stderr, "usage: pool ROOTFS [native|runsc] [N]\n");
      return 2;
    }
  rootfs = argv[1];
  ssize_t self = readlink ("/proc/self/exe", floor_bin, sizeof floor_bin - sizeof "/floor");
  char *slash = self > 0 ? memrchr (floor_bin, '/', (size_t)self) : NULL;
  if (slash)
    strcpy (slash, "/floor");
  else
    floor_bin[0] = '\0';
  bool runsc = argc > 2 && strcmp (argv[2], "runsc") == 0;
  int n = argc > 3 ? atoi (argv[3]) : 30;
  if (n < 2)
    n = 2;
  struct nsbox_error *err = NULL;
  nsbox_config *config = nsbox_config_new (&err);
  if (!config || nsbox_config_set (config, "rootfs", rootfs, &err) < 0
      || nsbox_config_set (config, "runtime", runsc ? "runsc" : "native", &err) < 0)
    die ("config", err);
  nsbox_pool *pool;
  if (nsbox_pool_new (config, NULL, &pool, &err) < 0)
    die ("pool", err);
  double *a = calloc ((size_t)n, sizeof *a), *b = calloc ((size_t)n, sizeof *b),
         *c = calloc ((size_t)n, sizeof *c), *d = calloc ((size_t)n, sizeof *d);
  int cold_served = 0;
  for (int i = 0; i < n; i++)
    {
      bool warm;
      c[i] = pool_once (pool, &warm);
      cold_served += !warm;
      if (runsc)
        a[i] = lib_cold_once (config);
      else
        {
          a[i] = cold_once ();
          b[i] = prestart_once (0);
          d[i] = prestart_once (IDLED_US);
        }
    }
  double pool50 = pct (c, n, 0.5), pool99 = pct (c, n, 0.99), cold50 = pct (a, n, 0.5);
  if (runsc)
    {
      printf ("runsc, %d runs each, interleaved:\n", n);
      printf ("  cold nsbox_run (runsc)   p50 %7.2f ms\n", cold50 * 1e3);
      printf ("  pooled (runsc)           p50 %7.2f ms  p99 %7.2f ms  (%d of %d served cold)\n",
              pool50 * 1e3, pool99 * 1e3, cold_served, n);
      printf ("  pooled / cold: %.3f (target <= 0.1)\n", pool50 / cold50);
    }
  else
    {
      double pre50 = pct (b, n, 0.5);
      printf ("native, %d runs each, interleaved:\n", n);
      printf ("  cold chroot python3 -      p50 %7.2f ms\n", cold50 * 1e3);
      printf ("  pre-started python3 floor  p50 %7.2f ms  (%.2fx the cold start)\n", pre50 * 1e3,
              pre50 / cold50);
      printf ("  library pool               p50 %7.2f ms  p99 %7.2f ms  (%d of %d served cold)\n",
              pool50 * 1e3, pool99 * 1e3, cold_served, n);
      printf ("  pool p50 / pre-started floor: %.2f (target <= 1.1)\n", pool50 / pre50);
      double idled50 = pct (d, n, 0.5);
      printf ("  the same floor, idled %d ms p50 %7.2f ms; pool p50 / idled floor: %.2f\n",
              IDLED_US / 1000, idled50 * 1e3, pool50 / idled50);
      printf ("  pool p50 / cold start:        %.3f (the idled floor alone: %.3f)\n",
              pool50 / cold50, idled50 / cold50);
      struct rates r = throughput_rows (tp_pool_thread, pool, pool_full, pool);
      printf ("throughput at concurrency 2: library pool %.1f runs/s, bare chroot python3 %.1f "
              "runs/s: %.2f (target >= 0.9)\n",
              r.pool, r.bare, r.pool / r.bare);
      print_floor (&r, "library pool");
      idle_curve (n / 3 > 10 ? n / 3 : 10);
      sandbox_rows (pool, config, n);
    }
  nsbox_pool_free (pool);
  if (!runsc)
    {
      idle_memory (config);
      idle_sandbox_memory (config);
    }
  if (!runsc && argc > 4)
    server_rows (argv[4], n);
  nsbox_config_free (config);
  free (a);
  free (b);
  free (c);
  free (d);
  return 0;
}
