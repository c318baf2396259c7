/* The hostile corpus: every tests/hostile/<group>/<name>.py runs through the
 * nsbox CLI (one Criterion test per file), its result is checked against the
 * expectation in its header, and the host around it is checked from outside.
 *
 * Header of a case (comment lines at the top of the file):
 *   # hostile: what the case attacks (required)
 *   # runtimes: native runsc  where the attacked hole exists or existed (a
 *                            case added for a hole says so; it runs under
 *                            every runtime all the same)
 *   # args: CLI arguments after `run --rootfs R --json` ("..." quotes a word)
 *   # prelude: NAME          prepend tests/hostile/lib/NAME.py to the code
 *   # pad: SIZE              append SIZE bytes of comment lines (64k, 60m)
 *   # mode: text             run without --json; stdout/stderr are raw bytes
 *   # expect: KEY=VALUE ...  (required)
 *   # expect[Q,...]: ...     replaces `expect` when every qualifier holds:
 *                            native, runsc, root, user, rlimit or cgroup (how
 *                            this host can enforce the memory limit for the
 *                            launching user), cpu-none (it offers no CPU
 *                            quota), i386 (the host kernel runs int 0x80
 *                            from a 64-bit process); needs because="...".
 *                            Every qualifier is probed here, outside any
 *                            sandbox, never read from the result:
 *                            rlimit, cgroup and cpu-none come from
 *                            harness_expected_mechanism (tests/lib), for
 *                            a launcher started through the CLI.
 * Keys: exit (N, nonzero, any), timed_out, oom_killed, stdout_truncated,
 * stderr_truncated (true/false), signal (N or null), stdout, stderr (exact),
 * stdout_contains, stdout_lacks, stderr_contains, stderr_lacks (repeatable),
 * raw_lacks (bytes the CLI's own stdout must not hold), max_cpu_share (the
 * result's cpu_ms over duration_ms), max_seconds,
 * min_seconds, max_rss_kb, max_tasks (the most tasks, threads included, the
 * sandbox's PID namespace held at once, init included, counted from the
 * host while it ran: native only, the host cannot see gVisor's tasks),
 * because. Values may be "quoted"; \n \t \r \\ \" \xHH and \uXXXX are
 * understood in any value.
 *
 * Placeholders replaced in the code: @PORT@ (a host TCP listener on
 * 127.0.0.1), @ABSTRACT@ (a host abstract unix listener's name), @SHMID@ (a
 * host SysV shared memory segment), @LEAKED_FD@ / @LEAKED_DIRFD@ (a root-only
 * canary file and its directory, opened without O_CLOEXEC by the harness so
 * the launcher inherits them), @CANARY_ROOT@, @CANARY_TMP@, @CANARY_PUBLIC@
 * (host paths of canary files), @ROOTFS_ROOT@ (the path a bind mount of the
 * rootfs directory shows as its root in mountinfo: the directory's path
 * inside the host filesystem that holds it).
 *
 * Every run with a JSON result must report, for memory, cpus and pids, the
 * mechanism the harness's probe says this host offers (a weaker one fails,
 * and so does one the host cannot back).
 *
 * Every case's launcher starts with its resource limits raised as far as
 * the harness may (harness_raise_launcher_rlimits).
 *
 * After every case, whatever it expects: stdout never holds "ESCAPED" (the
 * cases' own alarm word) nor the canaries' secret (also in nsbox's own
 * environment); the canaries are unchanged and unread (atime); the listeners
 * saw no connection; the SysV segment was never attached; no process of the
 * sandbox's host uid outlives the run; no nsbox cgroup, runsc work directory
 * or mount of the rootfs is left; the CLI's peak RSS stays bounded. */
#include "harness.h"

#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_EXPECT 24
#define MAX_ARGS 32

/* Without a bound of its own (max_rss_kb), a case may not push the CLI's
 * own peak RSS beyond this. */
#define DEFAULT_MAX_RSS_KB (24 * 1024)
#define DEFAULT_MAX_RSS_KB_RUNSC (24 * 1024)
#define DEFAULT_MAX_SECONDS 20.0

struct case_param
{
  char group[32];
  char name[96];
  char path[PATH_MAX];
};

static const char *
corpus_dir (void)
{
  const char *d = getenv ("NSBOX_HOSTILE_DIR");
  return d && *d ? d : "tests/hostile";
}

static int
cmp_params (const void *a, const void *b)
{
  const struct case_param *x = a, *y = b;
  int c = strcmp (x->group, y->group);
  return c ? c : strcmp (x->name, y->name);
}

static void
free_params (struct criterion_test_params *crp)
{
  cr_free (crp->params);
}

/* Every <group>/<name>.py below the corpus directory, except lib/. */
static size_t
scan_corpus (struct case_param **out, bool shared)
{
  size_t n = 0, alloc = 256;
  struct case_param *params
      = shared ? cr_malloc (alloc * sizeof *params) : malloc (alloc * sizeof *params);
  DIR *top = opendir (corpus_dir ());
  struct dirent *g;
  while (params && top && (g = readdir (top)))
    {
      if (g->d_name[0] == '.' || strcmp (g->d_name, "lib") == 0 || strlen (g->d_name) >= 32)
        continue;
      char dir[PATH_MAX - 128];
      snprintf (dir, sizeof dir, "%.3800s/%.31s", corpus_dir (), g->d_name);
      DIR *d = opendir (dir);
      struct dirent *f;
      while (d && (f = readdir (d)))
        {
          size_t len = strlen (f->d_name);
          if (len < 4 || len >= 96 || strcmp (f->d_name + len - 3, ".py") != 0 || n == alloc)
            continue;
          struct case_param *p = &params[n++];
          memset (p, 0, sizeof *p);
          snprintf (p->group, sizeof p->group, "%.31s", g->d_name);
          snprintf (p->name, sizeof p->name, "%.*s", (int)(len - 3), f->d_name);
          snprintf (p->path, sizeof p->path, "%s/%.95s", dir, f->d_name);
        }
      if (d)
        closedir (d);
    }
  if (top)
    closedir (top);
  if (params)
    qsort (params, n, sizeof *params, cmp_params);
  *out = params;
  return n;
}

/* Files. */

/* The whole file: it must be there. */
static char *
read_existing (const char *path, size_t *len)
{
  char *data = read_file (path, len);
  cr_assert_not_null (data, "open '%s': %s", path, strerror (errno));
  return data;
}

/* Values: "quoted" or bare words, with backslash escapes. */
static size_t
unescape (const char *s, size_t len, char *out)
{
  size_t o = 0;
  for (size_t i = 0; i < len; i++)
    {
      if (s[i] != '\\' || i + 1 == len)
        {
          out[o++] = s[i];
          continue;
        }
      char c = s[++i];
      if (c == 'n')
        out[o++] = '\n';
      else if (c == 't')
        out[o++] = '\t';
      else if (c == 'r')
        out[o++] = '\r';
      else if (c == 'x' && i + 2 < len + 0 + 1 && isxdigit ((unsigned char)s[i + 1])
               && isxdigit ((unsigned char)s[i + 2]))
        {
          char hex[3] = { s[i + 1], s[i + 2], 0 };
          out[o++] = (char)strtol (hex, NULL, 16);
          i += 2;
        }
      else if (c == 'u' && i + 4 < len + 1)
        {
          char hex[5] = { s[i + 1], s[i + 2], s[i + 3], s[i + 4], 0 };
          unsigned long cp = strtoul (hex, NULL, 16);
          i += 4;
          if (cp < 0x80)
            out[o++] = (char)cp;
          else if (cp < 0x800)
            {
              out[o++] = (char)(0xc0 | (cp >> 6));
              out[o++] = (char)(0x80 | (cp & 0x3f));
            }
          else
            {
              out[o++] = (char)(0xe0 | (cp >> 12));
              out[o++] = (char)(0x80 | ((cp >> 6) & 0x3f));
              out[o++] = (char)(0x80 | (cp & 0x3f));
            }
        }
      else
        out[o++] = c;
    }
  out[o] = '\0';
  return o;
}

struct value
{
  char *data;
  size_t len;
};

/* Splits a header value into words; returns the count. */
static size_t
split_words (const char *line, struct value *words, size_t max)
{
  size_t n = 0;
  const char *p = line;
  while (*p && n < max)
    {
      while (*p == ' ' || *p == '\t')
        p++;
      if (!*p)
        break;
      /* A word runs to the next blank outside quotes. */
      char raw[4096];
      size_t rl = 0;
      bool quoted = false;
      for (; *p && (quoted || (*p != ' ' && *p != '\t')) && rl + 2 < sizeof raw; p++)
        {
          if (*p == '"')
            {
              quoted = !quoted;
              continue;
            }
          if (*p == '\\' && p[1])
            raw[rl++] = *p++;
          raw[rl++] = *p;
        }
      words[n].data = malloc (rl * 4 + 1);
      cr_assert_not_null (words[n].data);
      words[n].len = unescape (raw, rl, words[n].data);
      n++;
    }
  return n;
}

struct header
{
  char *what;
  char *args_line;
  char *prelude;
  char *pad;
  bool text_mode;
  char *expect_line;   /* the one that applies */
  int expect_quals;    /* how many qualifiers it had */
  bool expect_because; /* the qualified line gave a reason */
};

/* Whether this kernel runs an i386 system call made with int 0x80 by a
 * 64-bit process (getpid in a forked child, no filter). Without an i386
 * entry (CONFIG_IA32_EMULATION off, ia32_emulation=0, some hypervisors)
 * the trap faults instead. */
static bool
host_has_i386_entry (void)
{
#if defined(__x86_64__)
  static int known = -1;
  if (known >= 0)
    return known;
  pid_t pid = fork ();
  cr_assert (pid >= 0, "fork: %s", strerror (errno));
  if (pid == 0)
    {
      /* A fault kills the child as it is, not through a sanitizer's
       * handler (whose report would fail a sanitizer pass). */
      signal (SIGSEGV, SIG_DFL);
      long r = 20; /* __NR_getpid of i386 */
      __asm__ volatile("int $0x80" : "+a"(r) : : "memory");
      _exit (r > 0 ? 0 : 1);
    }
  int status;
  cr_assert (waitpid (pid, &status, 0) == pid);
  known = WIFEXITED (status) && WEXITSTATUS (status) == 0;
  return known;
#else
  return false;
#endif
}

static bool
qualifier_holds (const char *q, size_t len)
{
  if (len == 4 && strncmp (q, "i386", 4) == 0)
    return host_has_i386_entry ();
  if (len == 6 && strncmp (q, "rlimit", 6) == 0)
    return strcmp (harness_expected_mechanism (RUN_CLI, "memory"), "rlimit") == 0;
  if (len == 6 && strncmp (q, "cgroup", 6) == 0)
    return strncmp (harness_expected_mechanism (RUN_CLI, "memory"), "cgroup", 6) == 0;
  if (len == 8 && strncmp (q, "cpu-none", 8) == 0)
    return strcmp (harness_expected_mechanism (RUN_CLI, "cpus"), "none") == 0;
  bool runsc = harness_is_runsc ();
  bool user = harness_test_user () != NULL || geteuid () != 0;
  if (len == 5 && strncmp (q, "runsc", 5) == 0)
    return runsc;
  if (len == 6 && strncmp (q, "native", 6) == 0)
    return !runsc;
  if (len == 4 && strncmp (q, "user", 4) == 0)
    return user;
  if (len == 4 && strncmp (q, "root", 4) == 0)
    return !user;
  cr_assert_fail ("unknown expectation qualifier '%.*s'", (int)len, q);
  return false;
}

static void
parse_header (const char *name, const char *code, size_t len, struct header *h)
{
  memset (h, 0, sizeof *h);
  h->expect_quals = -1;
  const char *p = code, *end = code + len;
  while (p < end && *p == '#')
    {
      const char *nl = memchr (p, '\n', (size_t)(end - p));
      if (!nl)
        nl = end;
      char line[4096];
      snprintf (line, sizeof line, "%.*s", (int)(nl - p), p);
      p = nl + 1;
      char *body = line + 1;
      while (*body == ' ')
        body++;
      char *colon = strstr (body, ": ");
      if (!colon)
        continue;
      *colon = '\0';
      char *value = colon + 2;
      char **slot = NULL;
      if (strcmp (body, "hostile") == 0)
        slot = &h->what;
      else if (strcmp (body, "args") == 0)
        slot = &h->args_line;
      else if (strcmp (body, "prelude") == 0)
        slot = &h->prelude;
      else if (strcmp (body, "pad") == 0)
        slot = &h->pad;
      else if (strcmp (body, "mode") == 0)
        h->text_mode = strcmp (value, "text") == 0;
      else if (strcmp (body, "runtimes") == 0)
        {
          for (char *w = strtok (value, " "); w; w = strtok (NULL, " "))
            cr_assert (strcmp (w, "native") == 0 || strcmp (w, "runsc") == 0,
                       "%s: unknown runtime '%s' in '# runtimes:'", name, w);
          continue;
        }
      else if (strncmp (body, "expect", 6) == 0)
        {
          int quals = 0;
          bool holds = true;
          if (body[6] == '[')
            {
              char *close = strchr (body, ']');
              cr_assert_not_null (close, "%s: malformed '%s'", name, body);
              for (char *q = body + 7; q < close;)
                {
                  size_t ql = strcspn (q, ",]");
                  holds = holds && qualifier_holds (q, ql);
                  quals++;
                  q += ql + (q[ql] == ',');
                }
            }
          else
            cr_assert (body[6] == '\0', "%s: unknown header '%s'", name, body);
          if (holds && quals > h->expect_quals)
            {
              free (h->expect_line);
              h->expect_line = strdup (value);
              h->expect_quals = quals;
              h->expect_because = strstr (value, "because=") != NULL;
            }
          continue;
        }
      if (slot)
        {
          free (*slot);
          *slot = strdup (value);
        }
    }
  cr_assert (h->what, "%s: no '# hostile:' line saying what the case attacks", name);
  cr_assert (h->expect_line, "%s: no '# expect:' line", name);
  cr_assert (h->expect_quals == 0 || h->expect_because,
             "%s: a qualified expectation must say why (because=\"...\")", name);
}

static void
header_free (struct header *h)
{
  free (h->what);
  free (h->args_line);
  free (h->prelude);
  free (h->pad);
  free (h->expect_line);
}

static size_t
parse_size (const char *s)
{
  char *end;
  double v = strtod (s, &end);
  if (*end == 'k')
    v *= 1024;
  else if (*end == 'm')
    v *= 1024 * 1024;
  return (size_t)v;
}

/* The host around one case. */
struct host
{
  char secret[64];
  char root_canary[256], tmp_dir[256], tmp_canary[512];
  char pub_dir[256], pub_canary[512];
  struct stat root_st, tmp_st, pub_st;
  bool have_root_canary;
  int leaked_fd, leaked_dirfd;
  int tcp_fd;
  uint16_t port;
  int unix_fd;
  char abstract[64];
  int shmid;
  int rootfs_mounts;
};

static void
make_canary (const char *path, const char *secret, mode_t mode, struct stat *st)
{
  write_text_file (path, secret, mode);
  cr_assert (chmod (path, mode) == 0, "chmod '%s': %s", path, strerror (errno));
  /* atime well before mtime: with relatime (or strictatime) any read of the
   * file moves it. */
  struct stat now;
  cr_assert (stat (path, &now) == 0);
  struct timespec times[2] = { now.st_mtim, { UTIME_OMIT, UTIME_OMIT } };
  times[0].tv_sec -= 3 * 86400;
  cr_assert (utimensat (AT_FDCWD, path, times, 0) == 0, "utimensat: %s", strerror (errno));
  cr_assert (stat (path, st) == 0);
}

static void
check_canary (const char *path, const char *secret, const struct stat *before, const char *name)
{
  struct stat st;
  cr_assert (lstat (path, &st) == 0, "%s: canary '%s' is gone: %s", name, path, strerror (errno));
  cr_assert (st.st_atim.tv_sec == before->st_atim.tv_sec
                 && st.st_atim.tv_nsec == before->st_atim.tv_nsec,
             "%s: canary '%s' was read during the run (atime moved)", name, path);
  cr_assert (st.st_mtim.tv_sec == before->st_mtim.tv_sec
                 && st.st_mtim.tv_nsec == before->st_mtim.tv_nsec
                 && st.st_ctim.tv_sec == before->st_ctim.tv_sec
                 && st.st_ctim.tv_nsec == before->st_ctim.tv_nsec && st.st_mode == before->st_mode
                 && st.st_uid == before->st_uid && st.st_ino == before->st_ino,
             "%s: canary '%s' was changed during the run", name, path);
  size_t len;
  char *content = read_existing (path, &len);
  cr_assert (len == strlen (secret) && memcmp (content, secret, len) == 0,
             "%s: canary '%s' content changed", name, path);
  free (content);
}

static int
count_rootfs_mounts (void)
{
  FILE *f = fopen ("/proc/self/mountinfo", "re");
  cr_assert_not_null (f);
  char line[8192];
  int n = 0;
  const char *rootfs = harness_rootfs ();
  while (fgets (line, sizeof line, f))
    if (strstr (line, rootfs))
      n++;
  fclose (f);
  return n;
}

static void
host_setup (struct host *h)
{
  memset (h, 0, sizeof *h);
  unsigned char rnd[12];
  int ufd = open ("/dev/urandom", O_RDONLY | O_CLOEXEC);
  cr_assert (ufd >= 0 && read (ufd, rnd, sizeof rnd) == (ssize_t)sizeof rnd);
  close (ufd);
  int o = snprintf (h->secret, sizeof h->secret, "NSBOX-CANARY-");
  for (size_t i = 0; i < sizeof rnd; i++)
    o += snprintf (h->secret + o, sizeof h->secret - (size_t)o, "%02x", rnd[i]);
  /* The launcher's own environment holds it too: nothing of it may reach
   * the sandbox. */
  setenv ("NSBOX_HOSTILE_SECRET", h->secret, 1);

  static unsigned counter;
  unsigned k = counter++;
  h->have_root_canary = access ("/root", W_OK) == 0;
  if (h->have_root_canary)
    {
      snprintf (h->root_canary, sizeof h->root_canary, "/root/nsbox-hostile-canary-%d-%u",
                (int)getpid (), k);
      make_canary (h->root_canary, h->secret, 0600, &h->root_st);
    }
  snprintf (h->tmp_dir, sizeof h->tmp_dir, "/tmp/nsbox-hostile-%d-%u.XXXXXX", (int)getpid (), k);
  cr_assert_not_null (mkdtemp (h->tmp_dir));
  snprintf (h->tmp_canary, sizeof h->tmp_canary, "%s/secret", h->tmp_dir);
  make_canary (h->tmp_canary, h->secret, 0600, &h->tmp_st);
  /* Readable by anyone, the test user included: only the sandbox's own
   * filesystem view keeps it out. */
  snprintf (h->pub_dir, sizeof h->pub_dir, "/tmp/nsbox-hostile-pub-%d-%u.XXXXXX", (int)getpid (),
            k);
  cr_assert_not_null (mkdtemp (h->pub_dir));
  chmod (h->pub_dir, 0755);
  snprintf (h->pub_canary, sizeof h->pub_canary, "%s/public", h->pub_dir);
  make_canary (h->pub_canary, h->secret, 0644, &h->pub_st);

  h->leaked_fd = open_inheritable (h->have_root_canary ? h->root_canary : h->tmp_canary);
  h->leaked_dirfd = open (h->have_root_canary ? "/root" : h->tmp_dir, O_RDONLY | O_DIRECTORY);
  cr_assert (h->leaked_dirfd >= 0, "open directory: %s", strerror (errno));
  /* An opened fd moves no atime; reading through it would. */

  h->tcp_fd = tcp_listener (&h->port);
  h->unix_fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  cr_assert (h->unix_fd >= 0);
  snprintf (h->abstract, sizeof h->abstract, "nsbox-hostile-%d-%u", (int)getpid (), k);
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  memcpy (addr.sun_path + 1, h->abstract, strlen (h->abstract));
  socklen_t alen = (socklen_t)(offsetof (struct sockaddr_un, sun_path) + 1 + strlen (h->abstract));
  cr_assert (bind (h->unix_fd, (struct sockaddr *)&addr, alen) == 0, "bind abstract: %s",
             strerror (errno));
  cr_assert (listen (h->unix_fd, 4) == 0);
  h->shmid = shmget (IPC_PRIVATE, 4096, IPC_CREAT | 0666);
  cr_assert (h->shmid >= 0, "shmget: %s", strerror (errno));
  h->rootfs_mounts = count_rootfs_mounts ();
}

static void
host_teardown (struct host *h)
{
  if (!h->secret[0])
    return;
  unsetenv ("NSBOX_HOSTILE_SECRET");
  if (h->leaked_fd >= 0)
    close (h->leaked_fd);
  if (h->leaked_dirfd >= 0)
    close (h->leaked_dirfd);
  close (h->tcp_fd);
  close (h->unix_fd);
  shmctl (h->shmid, IPC_RMID, NULL);
  if (h->have_root_canary)
    unlink (h->root_canary);
  unlink (h->tmp_canary);
  rmdir (h->tmp_dir);
  unlink (h->pub_canary);
  rmdir (h->pub_dir);
  h->secret[0] = '\0';
}

/* A failed assertion ends the test early: .fini still removes the
 * canaries and closes the listeners. */
static struct host current_host;

static void
teardown_current (void)
{
  host_teardown (&current_host);
}

/* The root a bind mount of the rootfs directory shows in mountinfo: its
 * path inside the host filesystem that holds it, from the host mount with
 * the longest mount point above it. */
static void
rootfs_mount_root (char *buf, size_t size)
{
  char rootfs[PATH_MAX];
  cr_assert (realpath (harness_rootfs (), rootfs), "realpath '%s': %s", harness_rootfs (),
             strerror (errno));
  FILE *f = fopen ("/proc/self/mountinfo", "re");
  cr_assert_not_null (f);
  char line[8192];
  long best = -1;
  buf[0] = '\0';
  while (fgets (line, sizeof line, f))
    {
      char root[PATH_MAX], point[PATH_MAX];
      if (sscanf (line, "%*s %*s %*s %4095s %4095s", root, point) != 2)
        continue;
      size_t pl = strcmp (point, "/") == 0 ? 0 : strlen (point);
      if ((long)pl < best || strncmp (rootfs, point, pl) != 0
          || (rootfs[pl] != '/' && rootfs[pl] != '\0'))
        continue;
      /* A later line on the same mount point is the mount on top. */
      best = (long)pl;
      snprintf (buf, size, "%s%s", strcmp (root, "/") == 0 ? "" : root, rootfs + pl);
    }
  fclose (f);
  if (!buf[0])
    snprintf (buf, size, "/");
}

/* Replaces every placeholder in code; returns a new buffer. */
static char *
substitute (const char *code, size_t len, const struct host *h, size_t *out_len)
{
  char num[8][PATH_MAX];
  const char *keys[]
      = { "@PORT@",        "@ABSTRACT@",   "@SHMID@",         "@LEAKED_FD@",  "@LEAKED_DIRFD@",
          "@CANARY_ROOT@", "@CANARY_TMP@", "@CANARY_PUBLIC@", "@ROOTFS_ROOT@" };
  snprintf (num[0], sizeof num[0], "%u", (unsigned)h->port);
  snprintf (num[1], sizeof num[1], "%d", h->shmid);
  snprintf (num[2], sizeof num[2], "%d", h->leaked_fd);
  snprintf (num[3], sizeof num[3], "%d", h->leaked_dirfd);
  snprintf (num[4], sizeof num[4], "%s",
            h->have_root_canary ? h->root_canary : "/root/nsbox-hostile-no-canary");
  snprintf (num[5], sizeof num[5], "%s", h->tmp_canary);
  snprintf (num[6], sizeof num[6], "%s", h->pub_canary);
  rootfs_mount_root (num[7], sizeof num[7]);
  const char *vals[]
      = { num[0], h->abstract, num[1], num[2], num[3], num[4], num[5], num[6], num[7] };
  size_t alloc = len * 2 + 4096, o = 0;
  char *out = malloc (alloc);
  cr_assert_not_null (out);
  for (size_t i = 0; i < len;)
    {
      size_t k = 0;
      if (code[i] == '@')
        for (k = 0; k < sizeof keys / sizeof keys[0]; k++)
          if (len - i >= strlen (keys[k]) && memcmp (code + i, keys[k], strlen (keys[k])) == 0)
            break;
      if (code[i] == '@' && k < sizeof keys / sizeof keys[0])
        {
          size_t vl = strlen (vals[k]);
          if (o + vl + 1 > alloc)
            out = realloc (out, alloc = alloc * 2 + vl);
          memcpy (out + o, vals[k], vl);
          o += vl;
          i += strlen (keys[k]);
          continue;
        }
      if (o + 2 > alloc)
        out = realloc (out, alloc *= 2);
      out[o++] = code[i++];
    }
  *out_len = o;
  return out;
}

/* The code as fed: prelude, the case, padding. */
static char *
build_code (const struct case_param *c, const struct header *hd, const struct host *h,
            size_t *out_len)
{
  size_t len;
  char *body = read_existing (c->path, &len);
  size_t plen = 0;
  char *prelude = NULL;
  if (hd->prelude)
    {
      char path[PATH_MAX];
      snprintf (path, sizeof path, "%s/lib/%s.py", corpus_dir (), hd->prelude);
      prelude = read_existing (path, &plen);
    }
  size_t pad = hd->pad ? parse_size (hd->pad) : 0;
  char *all = malloc (plen + len + pad + 2);
  cr_assert_not_null (all);
  if (plen)
    memcpy (all, prelude, plen);
  memcpy (all + plen, body, len);
  size_t o = plen + len;
  if (pad && o && all[o - 1] != '\n')
    all[o++] = '\n';
  for (size_t i = 0; i < pad; i++)
    all[o++] = (i % 64 == 63) ? '\n' : (i % 64 == 0 ? '#' : 'x');
  free (body);
  free (prelude);
  char *code = substitute (all, o, h, out_len);
  free (all);
  return code;
}

/* Expectations. */

static bool
parse_bool (const char *v, const char *name, const char *key)
{
  cr_assert (strcmp (v, "true") == 0 || strcmp (v, "false") == 0, "%s: %s wants true or false",
             name, key);
  return strcmp (v, "true") == 0;
}

static const char *
json_stream (struct run_out *out, const char *key, size_t *len)
{
  json_t *v = out->json ? json_object_get (out->json, key) : NULL;
  if (!json_is_string (v))
    {
      *len = 0;
      return NULL;
    }
  *len = json_string_length (v);
  return json_string_value (v);
}

/* stdout/stderr as the case sees them: the JSON strings, or raw bytes in
 * text mode. */
static const char *
stream_of (struct run_out *out, bool text, bool is_stdout, size_t *len)
{
  if (text)
    {
      *len = is_stdout ? out->out_len : out->err_len;
      return is_stdout ? out->out : out->err;
    }
  const char *s = json_stream (out, is_stdout ? "stdout" : "stderr", len);
  RUN_ASSERT (out, s != NULL, "expected a JSON result with %s", is_stdout ? "stdout" : "stderr");
  return s;
}

struct limits_seen
{
  double max_seconds, min_seconds;
  long max_rss_kb;
  int tasks_seen; /* the task watch's count (max_tasks) */
  char tasks_desc[512];
};

static void
check_expectation (const char *name, struct run_out *out, bool text, const struct value *kv,
                   size_t n, struct limits_seen *lim)
{
  for (size_t i = 0; i < n; i++)
    {
      char *eq = memchr (kv[i].data, '=', kv[i].len);
      cr_assert_not_null (eq, "%s: expectation word '%s' has no '='", name, kv[i].data);
      char key[64];
      snprintf (key, sizeof key, "%.*s", (int)(eq - kv[i].data), kv[i].data);
      const char *v = eq + 1;
      size_t vlen = kv[i].len - (size_t)(eq + 1 - kv[i].data);
      size_t slen;
      const char *s;
      if (strcmp (key, "because") == 0)
        continue;
      else if (strcmp (key, "exit") == 0)
        {
          if (strcmp (v, "any") == 0)
            continue;
          if (strcmp (v, "nonzero") == 0)
            RUN_ASSERT (out, out->exit_status != 0 && out->exit_status != 125,
                        "%s: expected a non-zero exit status that is not nsbox's own 125", name);
          else
            RUN_ASSERT (out, out->exit_status == atoi (v), "%s: expected exit status %s", name, v);
        }
      else if (strcmp (key, "timed_out") == 0 || strcmp (key, "oom_killed") == 0
               || strcmp (key, "stdout_truncated") == 0 || strcmp (key, "stderr_truncated") == 0)
        {
          cr_assert (!text, "%s: %s needs the JSON result", name, key);
          bool want = parse_bool (v, name, key);
          RUN_ASSERT (out, run_json_bool (out, key) == want, "%s: expected %s=%s", name, key, v);
        }
      else if (strcmp (key, "signal") == 0)
        {
          json_t *sig = json_object_get (run_json (out), "signal");
          if (strcmp (v, "null") == 0)
            RUN_ASSERT (out, json_is_null (sig), "%s: expected signal null", name);
          else
            RUN_ASSERT (out,
                        json_is_integer (sig)
                            ? json_integer_value (sig) == atoi (v)
                            : json_is_string (sig) && strcmp (json_string_value (sig), v) == 0,
                        "%s: expected signal %s", name, v);
        }
      else if (strcmp (key, "stdout") == 0 || strcmp (key, "stderr") == 0)
        {
          s = stream_of (out, text, key[3] == 'o', &slen);
          RUN_ASSERT (out, slen == vlen && memcmp (s, v, vlen) == 0, "%s: expected %s \"%s\"", name,
                      key, v);
        }
      else if (strcmp (key, "stdout_contains") == 0 || strcmp (key, "stderr_contains") == 0
               || strcmp (key, "stdout_lacks") == 0 || strcmp (key, "stderr_lacks") == 0)
        {
          s = stream_of (out, text, key[3] == 'o', &slen);
          bool found = vlen == 0 || memmem (s, slen, v, vlen) != NULL;
          bool want = strstr (key, "contains") != NULL;
          RUN_ASSERT (out, found == want, "%s: expected %.6s to %s \"%s\"", name, key,
                      want ? "contain" : "lack", v);
        }
      else if (strcmp (key, "raw_lacks") == 0)
        RUN_ASSERT (out, !memmem (out->out, out->out_len, v, vlen),
                    "%s: the CLI's own stdout holds a forbidden byte sequence", name);
      else if (strcmp (key, "max_cpu_share") == 0)
        {
          long long cpu = run_json_int (out, "cpu_ms");
          long long wall = run_json_int (out, "duration_ms");
          RUN_ASSERT (out, wall > 0 && (double)cpu / (double)wall <= atof (v),
                      "%s: used %lld ms of CPU in %lld ms, more than a share of %s", name, cpu,
                      wall, v);
        }
      else if (strcmp (key, "max_seconds") == 0)
        lim->max_seconds = atof (v);
      else if (strcmp (key, "min_seconds") == 0)
        lim->min_seconds = atof (v);
      else if (strcmp (key, "max_rss_kb") == 0)
        lim->max_rss_kb = atol (v);
      else if (strcmp (key, "max_tasks") == 0)
        {
          RUN_ASSERT (out, lim->tasks_seen > 0,
                      "%s: the host never saw the sandbox's tasks while it ran (%s)", name,
                      lim->tasks_desc);
          RUN_ASSERT (out, lim->tasks_seen <= atoi (v), "%s: the host saw %s, more than %s", name,
                      lim->tasks_desc, v);
          cr_log_info ("%s: the host saw at most %s", name, lim->tasks_desc);
        }
      else
        cr_assert_fail ("%s: unknown expectation key '%s'", name, key);
    }
}

/* Host checks. */

static bool
status_field (const char *pid, const char *field, char *buf, size_t size)
{
  char path[64], text[4096];
  snprintf (path, sizeof path, "/proc/%s/status", pid);
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  ssize_t n = read (fd, text, sizeof text - 1);
  close (fd);
  if (n <= 0)
    return false;
  text[n] = '\0';
  char needle[32];
  snprintf (needle, sizeof needle, "\n%s:", field);
  const char *p
      = strncmp (text, needle + 1, strlen (needle) - 1) == 0 ? text - 1 : strstr (text, needle);
  if (!p)
    return false;
  p += strlen (needle);
  while (*p == ' ' || *p == '\t')
    p++;
  size_t l = strcspn (p, "\n");
  snprintf (buf, size, "%.*s", (int)l, p);
  return true;
}

/* Field 22 of /proc/PID/stat: start time in clock ticks after boot. */
static unsigned long long
start_ticks (const char *pid)
{
  char path[320], buf[1024];
  snprintf (path, sizeof path, "/proc/%s/stat", pid);
  size_t n;
  if (!read_whole (path, buf, sizeof buf, &n) || n == 0)
    return 0;
  char *p = strrchr (buf, ')');
  for (int field = 2; p && field < 22; field++)
    p = strchr (p + 1, ' ');
  return p ? strtoull (p + 1, NULL, 10) : 0;
}

static unsigned long long
now_ticks (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_BOOTTIME, &ts);
  long hz = sysconf (_SC_CLK_TCK);
  return (unsigned long long)ts.tv_sec * (unsigned long long)hz
         + (unsigned long long)ts.tv_nsec / (1000000000ull / (unsigned long long)hz);
}

static bool
in_run_cgroup (const char *pid, pid_t launcher)
{
  char path[320], buf[4096], needle[32];
  snprintf (path, sizeof path, "/proc/%s/cgroup", pid);
  snprintf (needle, sizeof needle, "/nsbox-%d-", (int)launcher);
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  ssize_t n = read (fd, buf, sizeof buf - 1);
  close (fd);
  if (n <= 0)
    return false;
  buf[n] = '\0';
  return strstr (buf, needle) != NULL;
}

/* What a run left behind once its launcher is gone: processes in its
 * cgroups, and processes of `uid` in another PID namespace, started during
 * the run, with no live launcher above them. Runs of parallel tests (and of
 * other users of this machine) keep their launcher as an ancestor, and a
 * sandbox whose launcher was just killed dies with it (PDEATHSIG), so the
 * caller polls for a while before failing. */
static int
count_orphans (uid_t uid, pid_t launcher, unsigned long long since, unsigned long long until,
               char *desc, size_t size)
{
  char own_ns[128];
  cr_assert (read_pid_ns ("self", own_ns, sizeof own_ns));
  DIR *proc = opendir ("/proc");
  cr_assert_not_null (proc);
  int count = 0;
  size_t used = 0;
  desc[0] = '\0';
  struct dirent *d;
  while ((d = readdir (proc)))
    {
      if (!isdigit ((unsigned char)d->d_name[0]))
        continue;
      char buf[64], ns[128];
      bool orphan = in_run_cgroup (d->d_name, launcher);
      if (!orphan)
        {
          if (!status_field (d->d_name, "Uid", buf, sizeof buf) || strtoul (buf, NULL, 10) != uid)
            continue;
          if (!read_pid_ns (d->d_name, ns, sizeof ns) || strcmp (ns, own_ns) == 0)
            continue;
          unsigned long long started = start_ticks (d->d_name);
          if (started < since || started > until)
            continue;
          /* Up to the first ancestor in our namespace: its launcher. */
          char cur[256];
          snprintf (cur, sizeof cur, "%s", d->d_name);
          orphan = true;
          for (int depth = 0; depth < 64; depth++)
            {
              if (!status_field (cur, "PPid", buf, sizeof buf))
                break;
              snprintf (cur, sizeof cur, "%s", buf);
              if (atoi (cur) <= 1)
                break;
              if (read_pid_ns (cur, ns, sizeof ns) && strcmp (ns, own_ns) == 0)
                {
                  orphan = false;
                  break;
                }
            }
        }
      if (!orphan)
        continue;
      count++;
      char comm[64] = "";
      status_field (d->d_name, "Name", comm, sizeof comm);
      if (used + 80 < size)
        used += (size_t)snprintf (desc + used, size - used, "%s%s (%s)", used ? ", " : "",
                                  d->d_name, comm);
    }
  closedir (proc);
  return count;
}

/* runsc's work directories (nsbox-runsc-<pid>-*) and anything else named
 * nsbox*-<pid>-* in /tmp or /dev/shm. */
static int
count_temp_left (pid_t launcher, char *desc, size_t size)
{
  const char *dirs[] = { "/tmp", "/dev/shm" };
  char needle[32];
  snprintf (needle, sizeof needle, "-%d-", (int)launcher);
  int count = 0;
  size_t used = 0;
  desc[0] = '\0';
  for (size_t i = 0; i < 2; i++)
    {
      DIR *d = opendir (dirs[i]);
      struct dirent *e;
      while (d && (e = readdir (d)))
        if (strncmp (e->d_name, "nsbox", 5) == 0 && strstr (e->d_name, needle)
            && strncmp (e->d_name, "nsbox-hostile-", 14) != 0)
          {
            count++;
            if (used + 80 < size)
              used += (size_t)snprintf (desc + used, size - used, "%s%s/%s", used ? ", " : "",
                                        dirs[i], e->d_name);
          }
      if (d)
        closedir (d);
    }
  return count;
}

static void
check_host (const char *name, struct run_out *out, struct host *h, const char *tag,
            unsigned long long since, unsigned long long until)
{
  size_t slen;
  const char *streams[4] = { out->out, out->err, NULL, NULL };
  size_t lens[4] = { out->out_len, out->err_len, 0, 0 };
  streams[2] = json_stream (out, "stdout", &lens[2]);
  streams[3] = json_stream (out, "stderr", &lens[3]);
  for (int i = 0; i < 4; i++)
    {
      if (!streams[i])
        continue;
      RUN_ASSERT (out, !memmem (streams[i], lens[i], h->secret, strlen (h->secret)),
                  "%s: the canary secret reached the output", name);
    }
  const char *s = out->json ? json_stream (out, "stdout", &slen) : out->out;
  if (!out->json)
    slen = out->out_len;
  RUN_ASSERT (out, !s || !memmem (s, slen, "ESCAPED", 7), "%s: the case reported ESCAPED", name);

  if (h->have_root_canary)
    check_canary (h->root_canary, h->secret, &h->root_st, name);
  check_canary (h->tmp_canary, h->secret, &h->tmp_st, name);
  check_canary (h->pub_canary, h->secret, &h->pub_st, name);
  RUN_ASSERT (out, !listener_was_connected (h->tcp_fd),
              "%s: the host TCP listener on 127.0.0.1:%u was reached", name, (unsigned)h->port);
  RUN_ASSERT (out, !listener_was_connected (h->unix_fd),
              "%s: the host abstract unix socket @%s was reached", name, h->abstract);
  struct shmid_ds ds;
  RUN_ASSERT (out, shmctl (h->shmid, IPC_STAT, &ds) == 0 && ds.shm_nattch == 0 && ds.shm_atime == 0,
              "%s: the host SysV segment %d was attached", name, h->shmid);

  char desc[2048];
  int left = wait_uid_processes_gone (sandbox_host_uid (), tag, 3000, desc, sizeof desc);
  RUN_ASSERT (out, left == 0, "%s: %d process(es) of the run (%s) outlived it: %s", name, left, tag,
              desc);
  /* 3 s on the machine the bounds were tuned on, scaled. */
  int tries_left = (int)harness_scaled (150);
  for (int tries = 0; tries < tries_left; tries++)
    {
      left = count_orphans (sandbox_host_uid (), out->pid, since, until, desc, sizeof desc);
      if (left == 0)
        break;
      struct timespec ts = { 0, 20 * 1000 * 1000 };
      nanosleep (&ts, NULL);
    }
  RUN_ASSERT (out, left == 0, "%s: %d orphaned process(es) of host uid %u: %s", name, left,
              (unsigned)sandbox_host_uid (), desc);
  if (harness_is_runsc ())
    {
      left = count_runsc_processes (out->pid, desc, sizeof desc);
      RUN_ASSERT (out, left == 0, "%s: %d runsc process(es) outlived the run: %s", name, left,
                  desc);
    }
  if (have_cgroups ())
    {
      left = count_nsbox_cgroups (out->pid, desc, sizeof desc);
      RUN_ASSERT (out, left == 0, "%s: %d cgroup(s) of the run left: %s", name, left, desc);
    }
  left = count_temp_left (out->pid, desc, sizeof desc);
  RUN_ASSERT (out, left == 0, "%s: %d temporary file(s) of the run left: %s", name, left, desc);
  RUN_ASSERT (out, count_rootfs_mounts () == h->rootfs_mounts,
              "%s: the host's mounts of the rootfs changed", name);
}

/* The CLI's own high-water mark (VmHWM), sampled while it runs: wait4's
 * ru_maxrss also folds in the sandbox's processes (init reaps the
 * program, the launcher reaps init) and so says little about nsbox. */
struct sampler
{
  pid_t pid;
  atomic_bool stop;
  long hwm_kb;
  pthread_t thread;
};

static void *
sample_hwm (void *arg)
{
  struct sampler *s = arg;
  char pid[32], buf[64];
  snprintf (pid, sizeof pid, "%d", (int)s->pid);
  while (!atomic_load (&s->stop))
    {
      if (status_field (pid, "VmHWM", buf, sizeof buf))
        {
          long kb = strtol (buf, NULL, 10);
          if (kb > s->hwm_kb)
            s->hwm_kb = kb;
        }
      struct timespec ts = { 0, 2 * 1000 * 1000 };
      nanosleep (&ts, NULL);
    }
  return NULL;
}

/* One case. */

/* Whether an expectation line accepts a run that the timeout ended: it
 * expects the timeout (timed_out=true, exit 124) or any exit at all. */
static bool
expects_timeout (const char *expect_line)
{
  return strstr (expect_line, "timed_out=true") || strstr (expect_line, "exit=124")
         || strstr (expect_line, "exit=any");
}

static bool
run_timed_out (struct run_out *out, bool text_mode)
{
  if (text_mode)
    return out->exit_status == 124;
  return out->json && json_is_true (json_object_get (out->json, "timed_out"));
}

/* Multiplies the value of every `--timeout` among the case's own
 * arguments by `factor`, in place. */
static void
scale_timeouts (struct value *args, size_t nargs, double factor)
{
  for (size_t i = 0; i + 1 < nargs && strcmp (args[i].data, "--") != 0; i++)
    {
      if (strcmp (args[i].data, "--timeout") != 0)
        continue;
      uint64_t ms;
      cr_assert (nsbox_parse_duration (args[i + 1].data, &ms) == 0, "bad --timeout '%s'",
                 args[i + 1].data);
      free (args[i + 1].data);
      cr_assert (asprintf (&args[i + 1].data, "%.0fms", (double)ms * factor) > 0);
      args[i + 1].len = strlen (args[i + 1].data);
      i++;
    }
}

static bool
has_timeout_arg (const struct value *args, size_t nargs)
{
  for (size_t i = 0; i < nargs && strcmp (args[i].data, "--") != 0; i++)
    if (strcmp (args[i].data, "--timeout") == 0)
      return true;
  return false;
}

/* nsbox's default timeout, for a case that sets none. */
static uint64_t
default_timeout_ms (void)
{
  struct nsbox_error *err = NULL;
  nsbox_config *config = nsbox_config_new (&err);
  cr_assert_not_null (config, "%s", nsbox_error_message (err));
  uint64_t ms = config->timeout_ms;
  nsbox_config_free (config);
  return ms;
}

/* The CLI's own memory: its sampled peak and wait4's view of it. */
static void
check_rss (const char *name, struct run_out *out, const struct sampler *sampler, long bound_kb)
{
  /* A run that ends before the sampler's first look (a loaded machine)
   * leaves only the wait4 bound below. */
  if (sampler->hwm_kb == 0)
    cr_log_warn ("%s: nsbox ended before its RSS was sampled", name);
  long max_rss_kb = bound_kb;
#ifdef __SANITIZE_ADDRESS__
  /* The CLI is built with ASan too: it pads every block and keeps freed
   * ones in quarantine, so a grown buffer costs about twice as much. */
  max_rss_kb *= 2;
#endif
  RUN_ASSERT (out, sampler->hwm_kb <= max_rss_kb,
              "%s: nsbox's own peak RSS (VmHWM) %ld kB is beyond %ld kB", name, sampler->hwm_kb,
              max_rss_kb);
  /* wait4: nsbox or the largest process of the sandbox. */
  json_t *peak = out->json ? json_object_get (out->json, "memory_peak_bytes") : NULL;
  long sandbox_kb = json_is_integer (peak) ? (long)(json_integer_value (peak) / 1024) : 0;
  RUN_ASSERT (out, out->peak_rss_kb <= max_rss_kb + sandbox_kb + 16 * 1024,
              "%s: wait4 ru_maxrss of nsbox %ld kB is beyond its own bound %ld kB plus the "
              "sandbox's peak %ld kB",
              name, out->peak_rss_kb, max_rss_kb, sandbox_kb);
}

/* One attempt at a case, with its time bounds (its timeout, unless the
 * timeout is the outcome it expects, and max_seconds) multiplied by
 * `scale`. Returns false, having checked the host but not the expectation,
 * when `may_retry` and a timeout the case does not expect ended the run:
 * too slow to judge. */
static bool
run_attempt (const struct case_param *c, double scale, bool may_retry)
{
  char name[160];
  snprintf (name, sizeof name, "%s/%s", c->group, c->name);
  size_t len;
  char *raw = read_existing (c->path, &len);
  struct header hd;
  parse_header (name, raw, len, &hd);
  free (raw);
  bool timeout_is_outcome = expects_timeout (hd.expect_line);
  /* Counted while the sandbox runs: started before it. */
  bool watch_tasks = strstr (hd.expect_line, "max_tasks=") != NULL;
  cr_assert (!watch_tasks || !harness_is_runsc (),
             "%s: max_tasks needs the native runtime: the host cannot see gVisor's tasks", name);

  struct host *hp = &current_host;
  host_setup (hp);
  size_t code_len;
  char *code = build_code (c, &hd, hp, &code_len);

  char tag[96];
  make_run_tag (tag, sizeof tag);
  struct value args[MAX_ARGS];
  size_t nargs = hd.args_line ? split_words (hd.args_line, args, MAX_ARGS - 5) : 0;
  if (!timeout_is_outcome)
    scale_timeouts (args, nargs, scale);
  const char *argv[MAX_ARGS + 1];
  size_t argc = 0;
  /* The tag (and a scaled default timeout) go before the case's own
   * arguments, which may end in "-- COMMAND...". */
  argv[argc++] = "--env";
  argv[argc++] = tag;
  char default_timeout[32];
  if (!timeout_is_outcome && !has_timeout_arg (args, nargs))
    {
      snprintf (default_timeout, sizeof default_timeout, "%.0fms",
                (double)default_timeout_ms () * scale);
      argv[argc++] = "--timeout";
      argv[argc++] = default_timeout;
    }
  for (size_t i = 0; i < nargs; i++)
    argv[argc++] = args[i].data;
  argv[argc] = NULL;

  struct run_job job;
  struct run_out out;
  unsigned long long since = now_ticks ();
  struct task_watch *watch = watch_tasks ? task_watch_start (tag) : NULL;
  run_cli_spawn (argv, !hd.text_mode, &job);
  struct sampler sampler = { .pid = job.pid };
  atomic_init (&sampler.stop, false);
  cr_assert (pthread_create (&sampler.thread, NULL, sample_hwm, &sampler) == 0);
  run_cli_wait (&job, code, code_len, &out);
  atomic_store (&sampler.stop, true);
  pthread_join (sampler.thread, NULL);
  struct limits_seen lim
      = { DEFAULT_MAX_SECONDS, 0,
          harness_is_runsc () ? DEFAULT_MAX_RSS_KB_RUNSC : DEFAULT_MAX_RSS_KB, 0, "" };
  if (watch)
    lim.tasks_seen = task_watch_stop (watch, lim.tasks_desc, sizeof lim.tasks_desc);
  unsigned long long until = now_ticks () + 1;
  close (hp->leaked_fd);
  close (hp->leaked_dirfd);
  hp->leaked_fd = hp->leaked_dirfd = -1;

  bool judged = !run_timed_out (&out, hd.text_mode) || expects_timeout (hd.expect_line);
  if (!judged)
    {
      RUN_ASSERT (&out, may_retry,
                  "%s: too slow to judge: the timeout ended it on both tries (the second after "
                  "%.2f s, with its time bounds scaled by %.2f)",
                  name, out.seconds, scale);
      cr_log_warn ("%s: too slow to judge: the timeout ended it after %.2f s (time bounds scaled "
                   "by %.2f); once more with twice the time",
                   name, out.seconds, scale);
    }
  else
    {
      struct value kv[MAX_EXPECT];
      size_t nkv = split_words (hd.expect_line, kv, MAX_EXPECT);
      RUN_ASSERT (&out, out.exit_status != 125 || strstr (hd.expect_line, "exit=125"),
                  "%s: nsbox could not run the case (%s)", name, hd.what);
      if (!hd.text_mode)
        RUN_ASSERT (&out, out.json != NULL || out.exit_status == 125,
                    "%s: the CLI printed no parsable JSON result", name);
      /* The expectation was chosen from the host probe: the result must
       * agree with it. */
      if (out.json)
        assert_limit_mechanisms (&out);
      check_expectation (name, &out, hd.text_mode, kv, nkv, &lim);
      /* max_seconds bounds time, not containment: scaled by the machine's
       * measured speed. min_seconds is what a timeout guarantees: never
       * scaled. */
      double max_seconds = lim.max_seconds * scale;
      RUN_ASSERT (&out, out.seconds <= max_seconds,
                  "%s: took %.2f s, more than %.1f s (%.1f s scaled by %.2f)", name, out.seconds,
                  max_seconds, lim.max_seconds, scale);
      RUN_ASSERT (&out, out.seconds >= lim.min_seconds, "%s: took %.2f s, less than %.1f s", name,
                  out.seconds, lim.min_seconds);
      check_rss (name, &out, &sampler, lim.max_rss_kb);
      for (size_t i = 0; i < nkv; i++)
        free (kv[i].data);
    }
  /* Whatever the verdict, what the sandbox did must have stayed inside. */
  check_host (name, &out, hp, tag, since, until);

  for (size_t i = 0; i < nargs; i++)
    free (args[i].data);
  run_out_free (&out);
  free (code);
  host_teardown (hp);
  header_free (&hd);
  return judged;
}

/* Every case runs with its time bounds scaled by the pass's measured speed
 * (harness_time_scale). A run that a timeout ended although the case does
 * not expect one is too slow to judge: the log says so and the case runs
 * once more with twice the time; ended by the timeout again, it fails. */
static void
run_case (const struct case_param *c)
{
  /* Every case's launcher inherits limits as high as they go. */
  harness_raise_launcher_rlimits ();
  double scale = harness_time_scale ();
  if (!run_attempt (c, scale, true))
    run_attempt (c, 2 * scale, false);
}

ParameterizedTestParameters (hostile, corpus)
{
  struct case_param *params = NULL;
  size_t n = scan_corpus (&params, true);
  return cr_make_param_array (struct case_param, params, n, free_params);
}

/* Hang guard only: a case's own bounds are its timeout and max_seconds,
 * scaled by the machine's speed (up to 10), tried at most twice. */
ParameterizedTest (struct case_param *c, hostile, corpus, .timeout = 900, .fini = teardown_current)
{
  cr_log_info ("case %s/%s", c->group, c->name);
  run_case (c);
}

/* The corpus is all there: a missing directory would make the suite pass
 * by running nothing. */
Test (hostile, corpus_has_80_cases_in_every_group, .timeout = 10)
{
  struct case_param *params = NULL;
  size_t n = scan_corpus (&params, false);
  static const char *const groups[]
      = { "fs", "net", "proc", "res", "kernel", "leak", "launcher", "control" };
  cr_assert (n >= 80, "only %zu cases in '%s' (NSBOX_HOSTILE_DIR)", n, corpus_dir ());
  for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
    {
      size_t k = 0;
      for (size_t i = 0; i < n; i++)
        k += strcmp (params[i].group, groups[g]) == 0;
      cr_assert (k >= 3, "group '%s' has %zu cases", groups[g], k);
    }
  free (params);
}
