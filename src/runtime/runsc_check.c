/* runtime auto: whether runsc works here, from a self-check (a trivial
 * job in the configured rootfs) whose answer is cached per user, keyed by
 * the runsc binary and the kernel. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "error.h"
#include "limit.h"
#include "runsc.h"
#include "seccomp.h"
#include "util.h"

static char *
check_cache_path (void)
{
  const char *xdg = getenv ("XDG_CACHE_HOME");
  const char *home = getenv ("HOME");
  cleanup_free char *dir = NULL;
  if (xdg && xdg[0] == '/')
    dir = xasprintf ("%s/nsbox", xdg);
  else if (home && home[0] == '/')
    dir = xasprintf ("%s/.cache/nsbox", home);
  return dir ? xasprintf ("%s/runsc-check-%u", dir, (unsigned)geteuid ()) : NULL;
}

/* What the answer depends on: the runsc binary and the kernel. */
static char *
check_key (const char *runsc)
{
  struct stat st;
  struct utsname u;
  if (stat (runsc, &st) < 0 || uname (&u) < 0)
    return NULL;
  return xasprintf ("v1 %s %ju %ju %lld.%09ld %jd %s", runsc, (uintmax_t)st.st_dev,
                    (uintmax_t)st.st_ino, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
                    (intmax_t)st.st_size, u.release);
}

static int
read_cached (const char *path, const char *key)
{
  char buf[1024];
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return -1;
  struct stat st;
  if (fstat (fd, &st) < 0 || st.st_uid != geteuid ())
    return -1;
  ssize_t n = read (fd, buf, sizeof buf - 1);
  if (n <= 0)
    return -1;
  buf[n] = '\0';
  size_t kl = strlen (key);
  if (strncmp (buf, key, kl) != 0 || buf[kl] != ' ')
    return -1;
  return strncmp (buf + kl + 1, "ok", 2) == 0 ? 1 : 0;
}

static void
write_cached (const char *path, const char *key, bool ok)
{
  cleanup_free char *dir = strdup (path);
  if (!dir)
    return;
  char *slash = strrchr (dir, '/');
  *slash = '\0';
  char *parent = strrchr (dir, '/');
  if (parent && parent != dir)
    {
      *parent = '\0';
      mkdir (dir, 0700);
      *parent = '/';
    }
  mkdir (dir, 0700);
  cleanup_free char *tmp = xasprintf ("%s.%d.tmp", path, (int)getpid ());
  if (!tmp)
    return;
  cleanup_close int fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return;
  dprintf (fd, "%s %s\n", key, ok ? "ok" : "fail");
  if (rename (tmp, path) < 0)
    unlink (tmp);
}

/* A trivial job with the real machinery, outside any cgroup of ours. */
static bool
self_check (const struct nsbox_config *c)
{
  if (!c->rootfs)
    return false;
  cleanup_free char *rootfs = realpath (c->rootfs, NULL);
  if (!rootfs)
    return false;
  static const char *const argv[] = { "python3", "-c", "pass", NULL };
  static const char *const envp[]
      = { "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", NULL };
  struct nsbox_plan plan;
  memset (&plan, 0, sizeof plan);
  plan.rootfs = rootfs;
  plan.argv = (char *const *)argv;
  plan.envp = (char *const *)envp;
  plan.bpf.insns = (struct sock_filter *)nsbox_default_bpf_insns;
  plan.bpf.len = nsbox_default_bpf_len;
  struct nsbox_config check_config = *c;
  check_config.timeout_ms = 10000;
  struct nsbox_limits none;
  nsbox_limits_init (&none);
  struct nsbox_result *res = calloc (1, sizeof *res);
  if (!res)
    return false;
  struct nsbox_error *err = NULL;
  struct nsbox_runsc_job *job = NULL;
  struct nsbox_child child = { -1, -1 };
  struct nsbox_streams streams;
  int r = nsbox_runsc_start (&plan, &none, &check_config, &job, &child, &streams, &err);
  if (r >= 0)
    {
      struct nsbox_dispatch d = {
        .timeout_ms = check_config.timeout_ms,
        .max_output_bytes = check_config.max_output_bytes,
        .cancel_fd = -1,
        .capture = check_config.output_capture,
        .memory_bytes = check_config.memory_bytes,
        .output_dir_fd = -1,
      };
      r = nsbox_runsc_finish (job, &child, &streams, &none, &d, res, &err);
    }
  bool ok = r >= 0 && !res->timed_out && res->exit_code == 0;
  nsbox_error_free (err);
  nsbox_result_free (res);
  return ok;
}

bool
nsbox_runsc_usable (const struct nsbox_config *c)
{
  cleanup_free char *runsc = NULL;
  if (nsbox_runsc_find (&runsc, NULL) < 0)
    return false;
  cleanup_free char *key = check_key (runsc);
  cleanup_free char *path = check_cache_path ();
  if (!key)
    return false;
  int cached = path ? read_cached (path, key) : -1;
  if (cached >= 0)
    return cached == 1;
  bool ok = self_check (c);
  if (path)
    write_cached (path, key, ok);
  return ok;
}
