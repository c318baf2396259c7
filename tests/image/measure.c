/* Measuring an unpack from outside; see measure.h. */
#include "measure.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define RSS_BOUND_KB (64L * 1024)
/* ASan's shadow and quarantine, UBSan's runtime: not nsbox-image's. */
#define RSS_BOUND_SANITIZED_KB (320L * 1024)

void
measure_require_root (void)
{
  NSBOX_SKIP_UNLESS (geteuid () == 0, "the bomb tests mount a tmpfs for the store: need root");
}

static bool
image_bin_is_sanitized (void)
{
  static int state; /* 0 unknown, 1 yes, -1 no */
  if (!state)
    {
      char *cmd = NULL;
      cr_assert (
          asprintf (&cmd, "readelf -d '%s' 2>/dev/null | grep -q 'NEEDED.*libasan'", image_bin ())
          >= 0);
      state = system (cmd) == 0 ? 1 : -1;
      free (cmd);
    }
  return state > 0;
}

long
rss_bound_kb (void)
{
  return image_bin_is_sanitized () ? RSS_BOUND_SANITIZED_KB : RSS_BOUND_KB;
}

static long
used_inodes (const char *path)
{
  struct statvfs fs;
  if (statvfs (path, &fs) < 0)
    return -1;
  return (long)(fs.f_files - fs.f_ffree);
}

static long
count_dir (const char *store, const char *sub)
{
  char path[4096];
  snprintf (path, sizeof path, "%s/%s", store, sub);
  DIR *d = opendir (path);
  if (!d)
    return -1;
  long n = 0;
  struct dirent *de;
  while ((de = readdir (d)))
    n += strcmp (de->d_name, ".") != 0 && strcmp (de->d_name, "..") != 0;
  closedir (d);
  return n;
}

/* In the child: exec nsbox-image with argv, the environment plus `env`,
 * stdout and stderr to files. */
static void
exec_image (const char *env, const char *out_path, const char *err_path, char *const argv[])
{
  int out = open (out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  int err = open (err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (out < 0 || err < 0 || dup2 (out, 1) < 0 || dup2 (err, 2) < 0)
    _exit (126);
  if (env)
    {
      char *copy = strdup (env), *save = NULL;
      for (char *kv = strtok_r (copy, " ", &save); kv; kv = strtok_r (NULL, " ", &save))
        putenv (strdup (kv));
    }
  execv (argv[0], argv);
  _exit (127);
}

/* The measuring child: never returns. */
static void
measure_child (struct fx *fx, const struct measure_opts *o, const char *res_path)
{
  FILE *res = fopen (res_path, "we");
  if (!res)
    _exit (90);
  if (unshare (CLONE_NEWNS) < 0 || mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    {
      fprintf (res, "setup: unshare or mount --make-rprivate: %s\n", strerror (errno));
      _exit (91);
    }
  char data[128];
  snprintf (data, sizeof data, "size=%s,nr_inodes=%lu,mode=0700", o->tmpfs_size, o->tmpfs_inodes);
  if ((mkdir (fx->store, 0700) < 0 && errno != EEXIST)
      || mount ("tmpfs", fx->store, "tmpfs", MS_NOSUID | MS_NODEV, data) < 0)
    {
      fprintf (res, "setup: mount tmpfs (%s) on '%s': %s\n", data, fx->store, strerror (errno));
      _exit (92);
    }
  char *bin = (char *)image_bin ();
  char src[4200], out_path[4200], err_path[4200];
  snprintf (src, sizeof src, "oci:%s/oci:t", fx->dir);
  snprintf (out_path, sizeof out_path, "%s/measured.out", fx->dir);
  snprintf (err_path, sizeof err_path, "%s/measured.err", fx->dir);
  char *import_argv[] = { bin, (char *)"--store", fx->store, (char *)"import", src, NULL };
  pid_t pid = fork ();
  if (pid == 0)
    exec_image (NULL, out_path, err_path, import_argv);
  int status;
  if (pid < 0 || waitpid (pid, &status, 0) != pid || !WIFEXITED (status)
      || WEXITSTATUS (status) != 0)
    {
      fprintf (res, "setup: import into the tmpfs store failed (status %#x, see %s)\n", status,
               err_path);
      _exit (93);
    }
  struct statvfs fs;
  if (statvfs (fx->store, &fs) < 0)
    _exit (94);
  long base = (long)(fs.f_files - fs.f_ffree), peak = base;
  long long min_free = (long long)fs.f_bavail * (long long)fs.f_frsize;
  long long reserve = (long long)(fs.f_blocks * 2 / 100) * (long long)fs.f_frsize;

  char *rootfs_argv[]
      = { bin, (char *)"--store", fx->store, (char *)"rootfs", (char *)IMAGE_REF, NULL };
  pid = fork ();
  if (pid == 0)
    exec_image (o->env, out_path, err_path, rootfs_argv);
  if (pid < 0)
    _exit (95);
  struct rusage ru;
  for (;;)
    {
      pid_t done = wait4 (pid, &status, WNOHANG, &ru);
      if (done == pid)
        break;
      if (done < 0 && errno != EINTR)
        _exit (96);
      if (statvfs (fx->store, &fs) == 0)
        {
          long used = (long)(fs.f_files - fs.f_ffree);
          long long free_bytes = (long long)fs.f_bavail * (long long)fs.f_frsize;
          if (used > peak)
            peak = used;
          if (free_bytes < min_free)
            min_free = free_bytes;
        }
      struct timespec ts = { 0, 500 * 1000 };
      nanosleep (&ts, NULL);
    }
  int code = WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
  long after = used_inodes (fx->store);
  if (after > peak)
    peak = after;
  fprintf (res, "ok %d %ld %ld %ld %ld %lld %lld %lu %ld %ld\n", code, ru.ru_maxrss, base,
           peak - base, after - base, min_free, reserve, (unsigned long)fs.f_files,
           count_dir (fx->store, "tmp"), count_dir (fx->store, "rootfs"));
  fclose (res);
  _exit (0);
}

void
measure_unpack (struct fx *fx, const struct measure_opts *opts, struct measured *out)
{
  measure_require_root ();
  char *res_path = NULL;
  cr_assert (asprintf (&res_path, "%s/measured.res", fx->dir) >= 0);
  pid_t pid = fork ();
  cr_assert_geq (pid, 0);
  if (pid == 0)
    measure_child (fx, opts, res_path);
  int status;
  while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
    ;
  char *res = read_text (res_path);
  cr_assert_not_null (res, "no result from the measuring child (status %#x)", status);
  memset (out, 0, sizeof *out);
  int n = sscanf (res, "ok %d %ld %ld %ld %ld %lld %lld %lu %ld %ld", &out->status,
                  &out->max_rss_kb, &out->inodes_before, &out->inodes_peak, &out->inodes_after,
                  &out->min_free, &out->reserve, &out->fs_files, &out->tmp_left, &out->rootfs_left);
  cr_assert_eq (n, 10, "measuring child: %s", res);
  free (res);
  char *err_path = NULL;
  cr_assert (asprintf (&err_path, "%s/measured.err", fx->dir) >= 0);
  out->err = read_text (err_path);
  cr_assert_not_null (out->err);
  cr_log_info ("exit %d, peak RSS %ld kB, inodes: peak %ld, after %ld; fewest free bytes %lld; "
               "stderr: %.400s",
               out->status, out->max_rss_kb, out->inodes_peak, out->inodes_after, out->min_free,
               out->err);
  free (err_path);
  free (res_path);
}

void
measured_free (struct measured *m)
{
  free (m->err);
  m->err = NULL;
}

void
assert_measured_failure (const struct measured *m, int status, const char *const *needles)
{
  cr_assert_eq (m->status, status, "exit %d, expected %d: %s", m->status, status, m->err);
  cr_assert (strncmp (m->err, "nsbox-image: ", 13) == 0, "no error message: %s", m->err);
  for (const char *const *n = needles; n && *n; n++)
    cr_assert (strstr (m->err, *n), "'%s' not in the message: %s", *n, m->err);
  cr_assert_leq (m->max_rss_kb, rss_bound_kb (), "nsbox-image's peak RSS was %ld kB, over %ld kB%s",
                 m->max_rss_kb, rss_bound_kb (),
                 rss_bound_kb () > RSS_BOUND_KB ? " (sanitizer build)" : "");
  cr_assert_eq (m->tmp_left, 0, "%ld work directories left in tmp/", m->tmp_left);
  cr_assert_eq (m->rootfs_left, 0, "%ld trees left in rootfs/", m->rootfs_left);
  /* The lock file of the unpack stays (locks/), nothing else. */
  cr_assert_leq (m->inodes_after, 1, "%ld inodes more than before in the store", m->inodes_after);
}

char *
layer_digest (struct fx *fx, unsigned index)
{
  return sh_ok (
      fx,
      "/usr/bin/python3 - <<'PY'\n"
      "import json\n"
      "idx = json.load(open('oci/index.json'))\n"
      "m = [d for d in idx['manifests']\n"
      "     if d.get('annotations', {}).get('org.opencontainers.image.ref.name') == 't'][0]\n"
      "algo, hexd = m['digest'].split(':')\n"
      "man = json.load(open(f'oci/blobs/{algo}/{hexd}'))\n"
      "print(man['layers'][%u]['digest'])\n"
      "PY",
      index);
}
