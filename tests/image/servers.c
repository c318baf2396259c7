#include "servers.h"

#include "error.h"
#include "pull.h"
#include "store.h"

#include <criterion/criterion.h>

#include <dirent.h>
#include <openssl/evp.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SERVERS 16
/* Hang guards, not bounds under test: no verdict depends on how fast a
 * server starts or stops (a slow stop ends in SIGKILL). */
#define START_TIMEOUT_MS 15000
#define STOP_TIMEOUT_MS 5000

static struct server *running[MAX_SERVERS];
static char dir_path[256];

static const char *
python (void)
{
  return access ("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

const char *
image_test_script (const char *name)
{
  static char paths[4][4096];
  static int next;
  const char *src = getenv ("NSBOX_SOURCE_DIR");
  char *p = paths[next++ % 4];
  snprintf (p, sizeof paths[0], "%s/tests/image/%s", src ? src : ".", name);
  if (!src && access (p, R_OK) != 0)
    {
      /* Not run from the source tree: BUILD/tests/image sits two levels
       * below it in the usual layout. */
      char exe[4096];
      ssize_t n = readlink ("/proc/self/exe", exe, sizeof exe - 1);
      if (n > 0)
        {
          exe[n] = '\0';
          snprintf (p, sizeof paths[0], "%s/../../tests/image/%s", dirname (exe), name);
        }
    }
  cr_assert (access (p, R_OK) == 0,
             "'%s' not found: run the tests from the source tree or set NSBOX_SOURCE_DIR", p);
  return p;
}

const char *
test_dir (void)
{
  if (!dir_path[0])
    {
      snprintf (dir_path, sizeof dir_path, "%s/nsbox-regtest-XXXXXX",
                getenv ("TMPDIR") ? getenv ("TMPDIR") : "/tmp");
      cr_assert (mkdtemp (dir_path), "mkdtemp: %s", strerror (errno));
    }
  return dir_path;
}

const char *
test_path (const char *name)
{
  static char paths[8][4096];
  static int next;
  char *p = paths[next++ % 8];
  snprintf (p, sizeof paths[0], "%s/%s", test_dir (), name);
  return p;
}

const char *
write_test_file (const char *name, const char *content)
{
  const char *path = test_path (name);
  FILE *f = fopen (path, "we");
  cr_assert (f, "create '%s': %s", path, strerror (errno));
  fputs (content, f);
  fclose (f);
  return path;
}

uint16_t
free_port (void)
{
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  socklen_t len = sizeof a;
  cr_assert (fd >= 0 && bind (fd, (struct sockaddr *)&a, sizeof a) == 0
             && getsockname (fd, (struct sockaddr *)&a, &len) == 0);
  close (fd);
  return ntohs (a.sin_port);
}

static bool
port_accepts (uint16_t port)
{
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = { .sin_family = AF_INET,
                           .sin_port = htons (port),
                           .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  bool ok = fd >= 0 && connect (fd, (struct sockaddr *)&a, sizeof a) == 0;
  if (fd >= 0)
    close (fd);
  return ok;
}

static long
now_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static pid_t
spawn (const char *const *argv, const char *output)
{
  pid_t parent = getpid ();
  pid_t pid = fork ();
  cr_assert (pid >= 0, "fork: %s", strerror (errno));
  if (pid == 0)
    {
      prctl (PR_SET_PDEATHSIG, SIGKILL);
      if (getppid () != parent)
        _exit (127);
      int fd = open (output ? output : "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0600);
      if (fd >= 0)
        {
          dup2 (fd, 1);
          dup2 (fd, 2);
        }
      int devnull = open ("/dev/null", O_RDONLY);
      if (devnull >= 0)
        dup2 (devnull, 0);
      execvp (argv[0], (char *const *)argv);
      _exit (127);
    }
  return pid;
}

static void
server_run (struct server *s, const char *const *argv, const char *output)
{
  s->pid = spawn (argv, output);
  for (size_t i = 0; i < MAX_SERVERS; i++)
    if (!running[i])
      {
        running[i] = s;
        break;
      }
  long deadline = now_ms () + START_TIMEOUT_MS;
  while (!port_accepts (s->port))
    {
      int status;
      if (waitpid (s->pid, &status, WNOHANG) == s->pid)
        {
          s->pid = 0;
          FILE *f = output ? fopen (output, "re") : NULL;
          char buf[2048] = "";
          if (f)
            {
              buf[fread (buf, 1, sizeof buf - 1, f)] = '\0';
              fclose (f);
            }
          cr_assert_fail ("'%s' exited before listening on port %u: %s", argv[0], s->port, buf);
        }
      cr_assert (now_ms () < deadline, "'%s' did not listen on port %u within %d ms", argv[0],
                 s->port, START_TIMEOUT_MS);
      usleep (20 * 1000);
    }
}

void
registry_start (struct server *s, const char *storage, const char *extra_yaml)
{
  char name[64], config[8192];
  memset (s, 0, sizeof *s);
  s->port = free_port ();
  snprintf (config, sizeof config,
            "version: 0.1\n"
            "log: {level: warn}\n"
            "storage:\n"
            "  filesystem: {rootdirectory: %s}\n"
            "  delete: {enabled: true}\n"
            "http: {addr: 127.0.0.1:%u}\n"
            "%s",
            storage, s->port, extra_yaml ? extra_yaml : "");
  snprintf (name, sizeof name, "registry-%u.yml", s->port);
  const char *path = write_test_file (name, config);
  char cfg[4096], out[4096];
  snprintf (cfg, sizeof cfg, "%s", path);
  snprintf (out, sizeof out, "%s.log", path);
  const char *argv[] = { "docker-registry", "serve", cfg, NULL };
  server_run (s, argv, out);
}

void
token_server_start (struct server *s, const char *const *extra_args)
{
  char port[16];
  const char *argv[32]
      = { python (), image_test_script ("token_server.py"), "--port", port, "--log", NULL };
  memset (s, 0, sizeof *s);
  s->port = free_port ();
  snprintf (port, sizeof port, "%u", s->port);
  snprintf (s->log, sizeof s->log, "%s/token-%u.log", test_dir (), s->port);
  argv[5] = s->log;
  size_t n = 6;
  for (size_t i = 0; extra_args && extra_args[i] && n < 31; i++)
    argv[n++] = extra_args[i];
  argv[n] = NULL;
  server_run (s, argv, test_path ("token-server.out"));
}

void
proxy_start_with (struct server *s, uint16_t upstream_port, const char *mode, int count, int rate,
                  const char *const *extra_args)
{
  char port[16], upstream[64], count_s[16], rate_s[16];
  memset (s, 0, sizeof *s);
  s->port = free_port ();
  snprintf (port, sizeof port, "%u", s->port);
  snprintf (upstream, sizeof upstream, "127.0.0.1:%u", upstream_port);
  snprintf (count_s, sizeof count_s, "%d", count);
  snprintf (rate_s, sizeof rate_s, "%d", rate);
  snprintf (s->log, sizeof s->log, "%s/proxy-%u.log", test_dir (), s->port);
  const char *argv[32] = { python (),    image_test_script ("fault_proxy.py"),
                           "--port",     port,
                           "--upstream", upstream,
                           "--log",      s->log,
                           "--mode",     mode,
                           "--count",    count_s,
                           "--rate",     rate_s,
                           NULL };
  size_t n = 14;
  for (size_t i = 0; extra_args && extra_args[i] && n < 31; i++)
    argv[n++] = extra_args[i];
  argv[n] = NULL;
  server_run (s, argv, test_path ("proxy.out"));
}

void
proxy_start (struct server *s, uint16_t upstream_port, const char *mode, int count, int rate)
{
  proxy_start_with (s, upstream_port, mode, count, rate, NULL);
}

void
blob_server_start (struct server *s, const char *dir)
{
  char port[16];
  memset (s, 0, sizeof *s);
  s->port = free_port ();
  snprintf (port, sizeof port, "%u", s->port);
  snprintf (s->log, sizeof s->log, "%s/blobs-%u.log", test_dir (), s->port);
  const char *argv[] = {
    python (), image_test_script ("blob_server.py"), "--port", port, "--dir", dir, "--log", s->log,
    NULL
  };
  server_run (s, argv, test_path ("blob-server.out"));
}

void
server_stop (struct server *s)
{
  if (!s || s->pid <= 0)
    return;
  kill (s->pid, SIGTERM);
  long deadline = now_ms () + STOP_TIMEOUT_MS;
  int status;
  while (waitpid (s->pid, &status, WNOHANG) == 0)
    {
      if (now_ms () > deadline)
        {
          kill (s->pid, SIGKILL);
          waitpid (s->pid, &status, 0);
          break;
        }
      usleep (10 * 1000);
    }
  s->pid = 0;
  for (size_t i = 0; i < MAX_SERVERS; i++)
    if (running[i] == s)
      running[i] = NULL;
}

static struct nsbox_store *opened_store;

void
servers_stop_all (void)
{
  if (opened_store)
    {
      nsbox_store_close (opened_store);
      opened_store = NULL;
    }
  for (size_t i = 0; i < MAX_SERVERS; i++)
    if (running[i])
      server_stop (running[i]);
  if (dir_path[0] && !getenv ("NSBOX_TEST_KEEP"))
    {
      const char *argv[] = { "rm", "-rf", dir_path, NULL };
      run_command (argv);
      dir_path[0] = '\0';
    }
}

int
run_command (const char *const *argv)
{
  pid_t pid = fork ();
  cr_assert (pid >= 0);
  if (pid == 0)
    {
      dup2 (2, 1);
      execvp (argv[0], (char *const *)argv);
      _exit (127);
    }
  int status;
  while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
    ;
  return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
}

const char *
fixture_storage_copy (void)
{
  char built[4096] = "";
  char cmd[4096];
  snprintf (cmd, sizeof cmd, "%s", image_test_script ("build-fixtures.sh"));
  FILE *p = popen (cmd, "re");
  cr_assert (p, "popen: %s", strerror (errno));
  if (!fgets (built, sizeof built, p))
    built[0] = '\0';
  int status = pclose (p);
  built[strcspn (built, "\n")] = '\0';
  cr_assert (status == 0 && built[0], "build-fixtures.sh failed (status %d)", status);
  const char *copy = test_path ("storage");
  const char *argv[] = { "cp", "-a", built, copy, NULL };
  cr_assert (run_command (argv) == 0, "copy the fixture storage");
  return copy;
}

int
log_count (const char *log, const char *method, const char *path_part)
{
  FILE *f = fopen (log, "re");
  if (!f)
    return 0;
  char line[16384];
  int n = 0;
  while (fgets (line, sizeof line, f))
    {
      json_t *j = json_loads (line, 0, NULL);
      const char *m = json_string_value (json_object_get (j, "method"));
      const char *path = json_string_value (json_object_get (j, "path"));
      if (m && path && (!method || strcmp (m, method) == 0)
          && (!path_part || strstr (path, path_part)))
        n++;
      json_decref (j);
    }
  fclose (f);
  return n;
}

bool
log_any_authorization (const char *log)
{
  FILE *f = fopen (log, "re");
  if (!f)
    return false;
  char line[16384];
  bool any = false;
  while (fgets (line, sizeof line, f))
    {
      json_t *j = json_loads (line, 0, NULL);
      if (json_string_value (json_object_get (j, "authorization")))
        any = true;
      json_decref (j);
    }
  fclose (f);
  return any;
}

struct nsbox_store *
test_store (void)
{
  if (!opened_store)
    {
      struct nsbox_error *e = NULL;
      int r = nsbox_store_open (test_path ("store"), &opened_store, &e);
      cr_assert (r >= 0, "open the store: %s", nsbox_error_message (e));
    }
  return opened_store;
}

struct nsbox_error *
test_pull (struct nsbox_store *store, const char *ref, const char *platform, char **digest)
{
  struct nsbox_pull_options options = { .platform = platform };
  struct nsbox_error *e = NULL;
  char *d = NULL;
  int r = nsbox_image_pull (store, ref, &options, &d, &e);
  if (r >= 0)
    {
      cr_assert (e == NULL, "a successful pull left an error");
      cr_assert (d && strncmp (d, "sha256:", 7) == 0, "no manifest digest returned");
      if (digest)
        *digest = d;
      else
        free (d);
      return NULL;
    }
  cr_assert (e != NULL, "a failed pull (%d) gave no error", r);
  cr_assert (nsbox_error_errno (e) == -r, "error code %d differs from the return %d",
             nsbox_error_errno (e), r);
  return e;
}

int
assert_blobs_verified (struct nsbox_store *store)
{
  char path[4096];
  snprintf (path, sizeof path, "%s/blobs/sha256", nsbox_store_root (store));
  DIR *d = opendir (path);
  if (!d)
    return 0;
  struct dirent *de;
  int n = 0;
  while ((de = readdir (d)))
    {
      if (de->d_name[0] == '.')
        continue;
      char file[4400];
      snprintf (file, sizeof file, "%s/%s", path, de->d_name);
      FILE *f = fopen (file, "re");
      cr_assert (f, "open '%s'", file);
      EVP_MD_CTX *ctx = EVP_MD_CTX_new ();
      EVP_DigestInit_ex (ctx, EVP_sha256 (), NULL);
      char buf[65536];
      size_t got;
      while ((got = fread (buf, 1, sizeof buf, f)) > 0)
        EVP_DigestUpdate (ctx, buf, got);
      fclose (f);
      unsigned char md[32];
      unsigned len = 0;
      EVP_DigestFinal_ex (ctx, md, &len);
      EVP_MD_CTX_free (ctx);
      char hex[65];
      for (int i = 0; i < 32; i++)
        snprintf (hex + 2 * i, 3, "%02x", md[i]);
      cr_assert_str_eq (hex, de->d_name, "blobs/sha256/%s holds content hashing to %s", de->d_name,
                        hex);
      n++;
    }
  closedir (d);
  return n;
}

const char *
first_layer_digest (struct nsbox_store *store, const char *manifest_digest)
{
  static char digest[80];
  char *data = NULL;
  size_t len = 0;
  cr_assert (nsbox_store_read_blob (store, manifest_digest, 1 << 20, &data, &len, NULL) >= 0);
  json_t *m = json_loadb (data, len, 0, NULL);
  free (data);
  snprintf (digest, sizeof digest, "%s",
            json_string_value (
                json_object_get (json_array_get (json_object_get (m, "layers"), 0), "digest")));
  json_decref (m);
  return digest;
}

char *
ref_at (uint16_t port, const char *name)
{
  char *s = NULL;
  cr_assert (asprintf (&s, "127.0.0.1:%u/%s", port, name) > 0);
  return s;
}
