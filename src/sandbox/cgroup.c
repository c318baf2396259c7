/* cgroupfs for the cgroup backends: see cgroup.h. */
#include "cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "util.h"

/* cpuacct measures the CPU time of a run: init's wait rusage misses what
 * the kernel reaps itself when init is killed (SIGCHLD ignored then). */
const char *const nsbox_v1_names[NSBOX_V1_COUNT_] = { "memory", "cpu", "pids", "cpuacct" };

void
nsbox_cgroup_view_free (struct cgroup_view *v)
{
  free (v->v2_dir);
  free (v->v2_mount);
  for (int i = 0; i < NSBOX_V1_COUNT_; i++)
    free (v->v1_dir[i]);
}

int
nsbox_cgroup_write (const char *dir, const char *name, const char *text)
{
  char path[4096];
  snprintf (path, sizeof path, "%s/%s", dir, name);
  cleanup_close int fd = open (path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  size_t len = strlen (text);
  if (write (fd, text, len) != (ssize_t)len)
    return errno ? -errno : -EIO;
  return 0;
}

bool
nsbox_cgroup_has_word (const char *list, const char *word, char sep)
{
  size_t wl = strlen (word);
  for (const char *p = list; p && *p;)
    {
      const char *end = strchr (p, sep);
      size_t len = end ? (size_t)(end - p) : strlen (p);
      while (len && (p[len - 1] == '\n' || p[len - 1] == ' '))
        len--;
      if (len == wl && strncmp (p, word, wl) == 0)
        return true;
      p = end ? end + 1 : NULL;
    }
  return false;
}

/* Joins a mount point and our path relative to the mount's root. */
static char *
cgroup_dir (const char *mountpoint, const char *mount_root, const char *own)
{
  size_t rl = strlen (mount_root);
  if (strcmp (mount_root, "/") == 0)
    rl = 0;
  else if (strncmp (own, mount_root, rl) != 0 || (own[rl] != '/' && own[rl] != '\0'))
    return NULL;
  char *dir = xasprintf ("%s%s", mountpoint, own + rl);
  if (!dir)
    return NULL;
  size_t len = strlen (dir);
  if (len > 1 && dir[len - 1] == '/')
    dir[len - 1] = '\0';
  return dir;
}

/* /proc/self/cgroup: "0::/path" for v2, "N:ctrl,ctrl:/path" for v1. */
static void
read_own_paths (char **v2, char *v1[NSBOX_V1_COUNT_])
{
  cleanup_fclose FILE *f = fopen ("/proc/self/cgroup", "re");
  cleanup_free char *line = NULL;
  size_t cap = 0;
  while (f && getline (&line, &cap, f) > 0)
    {
      line[strcspn (line, "\n")] = '\0';
      char *c1 = strchr (line, ':');
      char *c2 = c1 ? strchr (c1 + 1, ':') : NULL;
      if (!c2)
        continue;
      *c2 = '\0';
      const char *ctrls = c1 + 1, *path = c2 + 1;
      if (strncmp (line, "0:", 2) == 0 && *ctrls == '\0')
        {
          free (*v2);
          *v2 = strdup (path);
          continue;
        }
      for (int i = 0; i < NSBOX_V1_COUNT_; i++)
        if (nsbox_cgroup_has_word (ctrls, nsbox_v1_names[i], ',') && !v1[i])
          v1[i] = strdup (path);
    }
}

/* One mountinfo line: fields 4 (root) and 5 (mount point), then after " - "
 * the fs type and super options. */
static void
scan_mount (char *line, const char *own_v2, char *const own_v1[], struct cgroup_view *v)
{
  char *fields[6] = { 0 };
  char *save = NULL;
  for (int i = 0; i < 6; i++)
    if (!(fields[i] = strtok_r (i == 0 ? line : NULL, " ", &save)))
      return;
  char *sep = save ? strstr (save, "- ") : NULL;
  if (!fields[4] || !sep)
    return;
  char *rest = sep + 2, *s2 = NULL;
  char *fstype = strtok_r (rest, " ", &s2);
  strtok_r (NULL, " ", &s2);
  char *super = strtok_r (NULL, " \n", &s2);
  if (!fstype)
    return;
  if (strcmp (fstype, "cgroup2") == 0 && own_v2 && !v->v2_dir)
    {
      v->v2_dir = cgroup_dir (fields[4], fields[3], own_v2);
      v->v2_is_root = v->v2_dir && strcmp (fields[3], own_v2) == 0;
      if (strcmp (fields[3], "/") == 0)
        v->v2_mount = strdup (fields[4]);
    }
  if (strcmp (fstype, "cgroup") == 0 && super)
    for (int i = 0; i < NSBOX_V1_COUNT_; i++)
      if (own_v1[i] && !v->v1_dir[i] && nsbox_cgroup_has_word (super, nsbox_v1_names[i], ','))
        v->v1_dir[i] = cgroup_dir (fields[4], fields[3], own_v1[i]);
}

void
nsbox_cgroup_view_load (struct cgroup_view *v)
{
  cleanup_free char *own_v2 = NULL;
  char *own_v1[NSBOX_V1_COUNT_] = { 0 };
  read_own_paths (&own_v2, own_v1);
  cleanup_fclose FILE *f = fopen ("/proc/self/mountinfo", "re");
  cleanup_free char *line = NULL;
  size_t cap = 0;
  while (f && getline (&line, &cap, f) > 0)
    scan_mount (line, own_v2, own_v1, v);
  for (int i = 0; i < NSBOX_V1_COUNT_; i++)
    free (own_v1[i]);
}

void
nsbox_cgroup_remove (int dir_fd, const char *name)
{
  /* The last tasks of the PID namespace may still be leaving. */
  for (int i = 0; i < 200; i++)
    {
      if (unlinkat (dir_fd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
        return;
      if (errno != EBUSY)
        return;
      struct timespec ts = { 0, 1000000 };
      nanosleep (&ts, NULL);
    }
}

/* A launcher killed with SIGKILL cannot remove its run cgroups; its sandbox
 * died with it (PDEATHSIG, PID namespace), so the next run removes them.
 * rmdir fails harmlessly on a cgroup that still holds tasks, and on
 * anything that is not a directory. */
void
nsbox_cgroup_sweep_stale (const char *dir)
{
  nsbox_sweep_stale (dir, "nsbox-", nsbox_cgroup_remove);
}

char *
nsbox_cgroup_run_name (void)
{
  static atomic_uint counter;
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return xasprintf ("nsbox-%d-%u-%lx", (int)getpid (), atomic_fetch_add (&counter, 1),
                    (unsigned long)ts.tv_nsec);
}

/* Value of "key N" in a flat keyed file such as memory.events. */
bool
nsbox_cgroup_read_keyed (const char *dir, const char *file, const char *key, uint64_t *value)
{
  char path[4096], buf[4096];
  snprintf (path, sizeof path, "%s/%s", dir, file);
  if (nsbox_read_small (path, buf, sizeof buf) < 0)
    return false;
  size_t kl = strlen (key);
  for (char *p = buf; p && *p; p = strchr (p, '\n'), p = p ? p + 1 : NULL)
    if (strncmp (p, key, kl) == 0 && p[kl] == ' ')
      {
        *value = strtoull (p + kl + 1, NULL, 10);
        return true;
      }
  return false;
}

bool
nsbox_cgroup_read_number (const char *dir, const char *file, uint64_t *value)
{
  char path[4096], buf[64];
  snprintf (path, sizeof path, "%s/%s", dir, file);
  if (nsbox_read_small (path, buf, sizeof buf) <= 0)
    return false;
  *value = strtoull (buf, NULL, 10);
  return true;
}
