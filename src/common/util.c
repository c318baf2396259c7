/* Helpers of the base layer: see util.h. */
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

char *
vxasprintf (const char *fmt, va_list ap)
{
  char *s = NULL;
  if (vasprintf (&s, fmt, ap) < 0)
    s = NULL;
  return s;
}

char *
xasprintf (const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  char *s = vxasprintf (fmt, ap);
  va_end (ap);
  return s;
}

void
nsbox_strv_free (char **strv)
{
  if (!strv)
    return;
  for (char **s = strv; *s; s++)
    free (*s);
  free (strv);
}

char **
nsbox_strv_dup (const char *const *strv, size_t count)
{
  char **copy = calloc (count + 1, sizeof *copy);
  if (!copy)
    return NULL;
  for (size_t i = 0; i < count; i++)
    if (!(copy[i] = strdup (strv[i])))
      {
        nsbox_strv_free (copy);
        return NULL;
      }
  return copy;
}

int
nsbox_strv_append (char ***strv, size_t *count, char *item)
{
  if (!item)
    return -ENOMEM;
  char **grown = realloc (*strv, (*count + 2) * sizeof *grown);
  if (!grown)
    {
      free (item);
      return -ENOMEM;
    }
  grown[(*count)++] = item;
  grown[*count] = NULL;
  *strv = grown;
  return 0;
}

int
nsbox_write_all (int fd, const void *data, size_t len)
{
  const char *p = data;
  while (len > 0)
    {
      ssize_t n = write (fd, p, len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return -errno;
      if (n == 0)
        return -EIO;
      p += n;
      len -= (size_t)n;
    }
  return 0;
}

void
nsbox_sweep_stale (const char *dir, const char *prefix,
                   void (*remove) (int dir_fd, const char *name))
{
  DIR *d = opendir (dir);
  if (!d)
    return;
  size_t prefix_len = strlen (prefix);
  struct dirent *e;
  while ((e = readdir (d)))
    {
      if (strncmp (e->d_name, prefix, prefix_len) != 0)
        continue;
      char *end = NULL;
      errno = 0;
      long pid = strtol (e->d_name + prefix_len, &end, 10);
      if (errno || end == e->d_name + prefix_len || *end != '-' || pid <= 0 || pid > INT_MAX
          || pid == getpid ())
        continue;
      if (kill ((pid_t)pid, 0) < 0 && errno == ESRCH)
        remove (dirfd (d), e->d_name);
    }
  closedir (d);
}

int
nsbox_read_small (const char *path, char *buf, size_t size)
{
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  ssize_t n = read (fd, buf, size - 1);
  if (n < 0)
    return -errno;
  buf[n] = '\0';
  return (int)n;
}

void
nsbox_set_nonblocking (int fd)
{
  if (fd >= 0)
    fcntl (fd, F_SETFL, fcntl (fd, F_GETFL) | O_NONBLOCK);
}

int
nsbox_random_id (char id[33])
{
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof bytes)
    {
      ssize_t n = getrandom (bytes + got, sizeof bytes - got, 0);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return -errno;
      got += (size_t)n;
    }
  for (size_t i = 0; i < sizeof bytes; i++)
    snprintf (id + 2 * i, 3, "%02x", bytes[i]);
  return 0;
}

uint64_t
nsbox_realtime_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t
nsbox_now_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t
nsbox_now_usec (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

struct timespec
nsbox_monotonic_after (uint64_t ms)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  ts.tv_sec += (time_t)(ms / 1000);
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L)
    {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
  return ts;
}

void
nsbox_cond_init_monotonic (pthread_cond_t *cond)
{
  pthread_condattr_t attr;
  pthread_condattr_init (&attr);
  pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
  pthread_cond_init (cond, &attr);
  pthread_condattr_destroy (&attr);
}

void
nsbox_zeroing_free (void *p)
{
  if (p)
    explicit_bzero (p, malloc_usable_size (p));
  free (p);
}

void
nsbox_vprint_message (const char *program, const char *fmt, va_list ap)
{
  /* One line in one call, so that lines of several threads do not mix. */
  char *message = NULL;
  va_list copy;
  va_copy (copy, ap);
  if (vasprintf (&message, fmt, copy) < 0)
    message = NULL;
  va_end (copy);
  if (message)
    fprintf (stderr, "%s: %s\n", program, message);
  else
    {
      fprintf (stderr, "%s: ", program);
      vfprintf (stderr, fmt, ap);
      fputc ('\n', stderr);
    }
  free (message);
}

double
nsbox_now_seconds (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

char *
nsbox_default_store (void)
{
  const char *env = getenv ("NSBOX_STORE");
  if (env && *env)
    return strdup (env);
  if (geteuid () == 0)
    return strdup ("/var/lib/nsbox");
  const char *xdg = getenv ("XDG_CACHE_HOME");
  if (xdg && *xdg == '/')
    return xasprintf ("%s/nsbox", xdg);
  const char *home = getenv ("HOME");
  if (!home || *home != '/')
    return NULL;
  return xasprintf ("%s/.cache/nsbox", home);
}

/* Fields first..first+n-1 (numbered as in proc(5)) of a /proc/PID/stat
 * file into out; false unless all are there. */
bool
nsbox_proc_stat_fields (const char *path, int first, int n, uint64_t *out)
{
  char buf[2048]; /* 52 fields of at most 20 digits, and comm */
  if (nsbox_read_small (path, buf, sizeof buf) < 0)
    return false;
  /* After "pid (comm)", where comm may hold spaces, comes field 3. */
  char *p = strrchr (buf, ')');
  if (!p)
    return false;
  int field = 2;
  char *save = NULL;
  for (char *tok = strtok_r (p + 1, " ", &save); tok && field < first + n - 1;
       tok = strtok_r (NULL, " ", &save))
    if (++field >= first)
      out[field - first] = strtoull (tok, NULL, 10);
  return field == first + n - 1;
}
