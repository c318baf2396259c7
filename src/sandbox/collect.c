/* Outputs: the regular files a program left at the top of /tmp/out, copied
 * into the caller's output directory once every process of the sandbox is
 * gone. The launcher reads the sandbox's tmpfs through an fd init sent it,
 * resolving every name with openat2 beneath that fd: no symlink, no magic
 * link, no other mount is ever followed, so nothing outside the tmpfs can
 * be read; names are single path components checked before use, and each
 * file is created with O_EXCL | O_NOFOLLOW, so nothing outside the output
 * directory can be written. Hard links, FIFOs, sockets, devices and
 * directories are refused, each with its reason in the result. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "digest.h"
#include "error.h"
#include "fileio.h"
#include "files.h"
#include "result.h"

/* ---- the result's lists ---- */

static int
append_refusal (struct nsbox_result *res, const char *name, const char *reason)
{
  struct nsbox_result_refusal *grown
      = realloc (res->refused, (res->n_refused + 1) * sizeof *res->refused);
  if (!grown)
    return -ENOMEM;
  res->refused = grown;
  char *n = strdup (name), *r = strdup (reason);
  if (!n || !r)
    {
      free (n);
      free (r);
      return -ENOMEM;
    }
  res->refused[res->n_refused++] = (struct nsbox_result_refusal){ n, r };
  return 0;
}

/* What one collection found, for the result. */
struct collect
{
  struct nsbox_result *res;
  uint64_t unlisted; /* refusals past NSBOX_OUTPUTS_REFUSED_LISTED */
  uint64_t bytes;    /* budget left */
  unsigned files;
  bool take; /* remove each collected file from /tmp/out */
};

/* Listed one by one up to NSBOX_OUTPUTS_REFUSED_LISTED, then counted. */
static int
add_refusal (struct collect *c, const char *name, const char *reason)
{
  if (c->res->n_refused >= NSBOX_OUTPUTS_REFUSED_LISTED)
    {
      c->unlisted++;
      return 0;
    }
  return append_refusal (c->res, name, reason);
}

static int
add_file (struct nsbox_result *res, const char *name, uint64_t size, const char *sha256)
{
  struct nsbox_result_file *grown = realloc (res->files, (res->n_files + 1) * sizeof *res->files);
  if (!grown)
    return -ENOMEM;
  res->files = grown;
  struct nsbox_result_file *f = &res->files[res->n_files];
  if (!(f->name = strdup (name)))
    return -ENOMEM;
  f->size = size;
  memcpy (f->sha256, sha256, sizeof f->sha256);
  res->n_files++;
  return 0;
}

/* ---- one file ---- */

int
nsbox_open_beneath (int dirfd, const char *name, uint64_t flags)
{
  struct open_how how = {
    .flags = flags | O_CLOEXEC | O_NOFOLLOW,
    .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
  };
  return (int)syscall (SYS_openat2, dirfd, name, &how, sizeof how);
}

static const char *
kind_refused (mode_t mode)
{
  if (S_ISLNK (mode))
    return "a symbolic link";
  if (S_ISDIR (mode))
    return "a directory";
  if (S_ISFIFO (mode))
    return "a FIFO";
  if (S_ISSOCK (mode))
    return "a socket";
  if (S_ISCHR (mode) || S_ISBLK (mode))
    return "a device";
  return S_ISREG (mode) ? NULL : "not a regular file";
}

/* Copies at most `size` bytes (what fstat said: a file is never read past
 * it) from `from` to `to`, hashing them. *copied gets how many. */
static int
copy_hashing (int from, int to, uint64_t size, uint64_t *copied, char hex[NSBOX_SHA256_HEX])
{
  __attribute__ ((cleanup (nsbox_sha256_free))) struct nsbox_sha256 h = { NULL };
  if (nsbox_sha256_init (&h, NULL) < 0)
    return -ENOMEM;
  char buf[65536];
  uint64_t done = 0;
  while (done < size)
    {
      size_t want = size - done < sizeof buf ? (size_t)(size - done) : sizeof buf;
      ssize_t n = nsbox_read_full (from, buf, want);
      if (n < 0)
        return (int)n;
      if (n == 0)
        break;
      if (nsbox_write_all (to, buf, (size_t)n) < 0)
        return -errno;
      if (nsbox_sha256_update (&h, buf, (size_t)n) < 0)
        return -ENOMEM;
      done += (uint64_t)n;
    }
  if (nsbox_sha256_final (&h, hex) < 0)
    return -ENOMEM;
  *copied = done;
  return 0;
}

/* One entry of /tmp/out: collected, or refused with its reason. Returns
 * -ENOMEM only; everything the program could cause is a refusal. */
static int
collect_one (int out_fd, int dir_fd, const char *name, struct collect *c)
{
  const char *why = NULL;
  char reason[160];
  if (!nsbox_file_name_valid (name, strlen (name), &why))
    {
      snprintf (reason, sizeof reason, "name not allowed: %s", why);
      return add_refusal (c, name, reason);
    }
  struct stat st;
  if (fstatat (out_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    {
      snprintf (reason, sizeof reason, "cannot inspect: %s", strerror (errno));
      return add_refusal (c, name, reason);
    }
  if ((why = kind_refused (st.st_mode)))
    return add_refusal (c, name, why);
  if (st.st_nlink != 1)
    return add_refusal (c, name, "a hard link (more than one name)");
  if (c->files == 0)
    {
      snprintf (reason, sizeof reason, "too many files: at most %d are collected",
                NSBOX_OUTPUTS_MAX);
      return add_refusal (c, name, reason);
    }
  if ((uint64_t)st.st_size > c->bytes)
    {
      snprintf (reason, sizeof reason,
                "too large: %" PRIu64 " bytes, past the %" PRIu64 " MiB collected in all",
                (uint64_t)st.st_size, NSBOX_OUTPUTS_BYTES_MAX >> 20);
      return add_refusal (c, name, reason);
    }
  /* O_NONBLOCK: should the entry have become a FIFO since fstatat, the
   * open does not wait for a writer. */
  cleanup_close int from = nsbox_open_beneath (out_fd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  struct stat again;
  if (from < 0 || fstat (from, &again) < 0)
    {
      snprintf (reason, sizeof reason, "cannot open: %s", strerror (errno));
      return add_refusal (c, name, reason);
    }
  if (again.st_ino != st.st_ino || again.st_dev != st.st_dev || !S_ISREG (again.st_mode)
      || again.st_nlink != 1)
    return add_refusal (c, name, "changed while it was collected");
  uint64_t size = (uint64_t)again.st_size < (uint64_t)st.st_size ? (uint64_t)again.st_size
                                                                 : (uint64_t)st.st_size;
  cleanup_close int to
      = openat (dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (to < 0)
    {
      snprintf (reason, sizeof reason, "%s in output-dir",
                errno == EEXIST ? "already exists" : strerror (errno));
      return add_refusal (c, name, reason);
    }
  uint64_t copied = 0;
  char hex[NSBOX_SHA256_HEX] = "";
  int r = copy_hashing (from, to, size, &copied, hex);
  if (r < 0)
    {
      unlinkat (dir_fd, name, 0);
      if (r == -ENOMEM)
        return r;
      snprintf (reason, sizeof reason, "cannot copy into output-dir: %s", strerror (-r));
      return add_refusal (c, name, reason);
    }
  c->files--;
  c->bytes -= copied;
  /* A live sandbox's /tmp/out is an outbox: what was collected leaves it,
   * if the name is still that file (a process of the sandbox may have
   * put another in its place meanwhile: that one stays). */
  struct stat now;
  if (c->take && fstatat (out_fd, name, &now, AT_SYMLINK_NOFOLLOW) == 0
      && now.st_ino == again.st_ino && now.st_dev == again.st_dev)
    unlinkat (out_fd, name, 0);
  return add_file (c->res, name, copied, hex);
}

static int
compare_names (const void *a, const void *b)
{
  return strcmp (*(char *const *)a, *(char *const *)b);
}

/* The names in `out`, sorted, at most NSBOX_OUTPUTS_SCAN_MAX of them;
 * *more counts the rest, up to as many again (a live sandbox's processes
 * may add names as fast as they are read: the reading ends). */
static int
read_names (int out_fd, char ***names, size_t *n, uint64_t *more)
{
  int fd = fcntl (out_fd, F_DUPFD_CLOEXEC, 3);
  if (fd < 0)
    return -errno;
  DIR *d = fdopendir (fd);
  if (!d)
    {
      int e = errno;
      close (fd);
      return -e;
    }
  int r = 0;
  struct dirent *e;
  while ((errno = 0, e = readdir (d)))
    {
      if (strcmp (e->d_name, ".") == 0 || strcmp (e->d_name, "..") == 0)
        continue;
      if (*n >= NSBOX_OUTPUTS_SCAN_MAX)
        {
          if (++*more >= NSBOX_OUTPUTS_SCAN_MAX)
            break;
          continue;
        }
      if ((r = nsbox_strv_append (names, n, strdup (e->d_name))) < 0)
        break;
    }
  if (r == 0 && errno)
    r = -errno;
  closedir (d);
  if (r == 0 && *n > 1)
    qsort (*names, *n, sizeof **names, compare_names);
  return r;
}

int
nsbox_collect_outputs (int tmp_fd, int dir_fd, bool take, struct nsbox_result *res,
                       struct nsbox_error **err)
{
  /* libcrypto must load before anything is copied. */
  struct nsbox_sha256 probe;
  int loaded = nsbox_sha256_init (&probe, err);
  if (loaded < 0)
    return loaded;
  nsbox_sha256_free (&probe);
  struct collect c = { res, 0, NSBOX_OUTPUTS_BYTES_MAX, NSBOX_OUTPUTS_MAX, take };
  char reason[160];
  cleanup_close int out_fd = nsbox_open_beneath (tmp_fd, "out", O_RDONLY | O_DIRECTORY);
  if (out_fd < 0)
    {
      if (errno == ENOENT)
        return 0; /* the program removed it: nothing to collect */
      if (errno == ENOSYS)
        return nsbox_error_sys (err, errno, "collect outputs: openat2 (Linux 5.6 or later)");
      int e = errno;
      struct stat st;
      const char *kind = fstatat (tmp_fd, "out", &st, AT_SYMLINK_NOFOLLOW) == 0
                             ? kind_refused (st.st_mode)
                             : NULL;
      snprintf (reason, sizeof reason, "not collected: /tmp/out is %s", kind ? kind : strerror (e));
      return append_refusal (res, "/tmp/out", reason) < 0 ? nsbox_error_oom (err) : 0;
    }
  cleanup_strv char **names = NULL;
  size_t n = 0;
  uint64_t more = 0;
  int r = read_names (out_fd, &names, &n, &more);
  if (r == -ENOMEM)
    return nsbox_error_oom (err);
  if (r < 0)
    {
      snprintf (reason, sizeof reason, "not collected: cannot read /tmp/out: %s", strerror (-r));
      return append_refusal (res, "/tmp/out", reason) < 0 ? nsbox_error_oom (err) : 0;
    }
  for (size_t i = 0; i < n; i++)
    if (collect_one (out_fd, dir_fd, names[i], &c) < 0)
      return nsbox_error_oom (err);
  /* Names of files cannot hold '/': these summaries cannot be mistaken
   * for one. */
  if (c.unlisted)
    {
      snprintf (reason, sizeof reason, "%" PRIu64 " more entries refused, not listed", c.unlisted);
      if (append_refusal (res, "/tmp/out: more refused", reason) < 0)
        return nsbox_error_oom (err);
    }
  if (more)
    {
      snprintf (reason, sizeof reason,
                "%s%" PRIu64 " more entries not examined: only %d names are read",
                more >= NSBOX_OUTPUTS_SCAN_MAX ? "at least " : "", more, NSBOX_OUTPUTS_SCAN_MAX);
      if (append_refusal (res, "/tmp/out: not examined", reason) < 0)
        return nsbox_error_oom (err);
    }
  return 0;
}

/* mkdir -p: every missing component of `path` (no trailing slash) made
 * 0700, its parents too. A component that exists is passed through as
 * mkdir -p passes it; the last one is checked by the caller. */
static int
make_dirs (const char *path, struct nsbox_error **err)
{
  cleanup_free char *copy = strdup (path);
  if (!copy)
    return nsbox_error_oom (err);
  for (char *p = copy + 1;; p++)
    {
      bool last = *p == '\0';
      if (*p != '/' && !last)
        continue;
      if (p[-1] == '/')
        {
          if (last)
            break;
          continue;
        }
      *p = '\0';
      if (mkdir (copy, 0700) < 0 && errno != EEXIST)
        return nsbox_error_sys (err, errno, "output-dir '%s': create '%s'", path, copy);
      if (last)
        break;
      *p = '/';
    }
  return 0;
}

int
nsbox_output_dir_open (const char *path, int *fd, struct nsbox_error **err)
{
  if (!path || !*path)
    return nsbox_error_set (err, EINVAL, "output-dir: the path is empty");
  /* "DIR/" would follow a symlink DIR: the name is checked without its
   * trailing slashes. */
  cleanup_free char *name = strdup (path);
  if (!name)
    return nsbox_error_oom (err);
  for (size_t n = strlen (name); n > 1 && name[n - 1] == '/'; n--)
    name[n - 1] = '\0';
  int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  int d = open (name, flags);
  if (d < 0 && errno == ENOENT)
    {
      int r = make_dirs (name, err);
      if (r < 0)
        return r;
      d = open (name, flags);
    }
  if (d < 0)
    {
      int e = errno;
      struct stat st;
      if (e == ENOTDIR && lstat (name, &st) == 0 && S_ISLNK (st.st_mode))
        return nsbox_error_set (
            err, ELOOP, "output-dir '%s' is a symlink: refused (name the directory itself)", path);
      if (e == ENOTDIR && lstat (name, &st) == 0)
        return nsbox_error_set (err, ENOTDIR, "output-dir '%s' exists and is not a directory",
                                path);
      if (e == ENOTDIR)
        return nsbox_error_set (
            err, ENOTDIR, "output-dir '%s': a component of its path is not a directory", path);
      return nsbox_error_sys (err, e, "output-dir '%s'", path);
    }
  if (faccessat (d, ".", W_OK | X_OK, AT_EACCESS) < 0)
    {
      int e = errno;
      close (d);
      return nsbox_error_sys (err, e, "output-dir '%s' is not writable", path);
    }
  *fd = d;
  return 0;
}
