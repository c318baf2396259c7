/* The user namespace, both sides of clone: see userns.h. */
#include "userns.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "child.h"
#include "error.h"

/* A child of a non-dumpable launcher makes itself dumpable first thing;
 * until it has, its /proc files belong to root: wait for that (bounded). */
static int
open_proc_file (const char *path, bool wait_dumpable)
{
  for (int tries = 0;; tries++)
    {
      int fd = open (path, O_WRONLY | O_CLOEXEC);
      if (fd >= 0 || errno != EACCES || !wait_dumpable || tries >= 2000)
        return fd;
      struct timespec ts = { 0, 100000 };
      nanosleep (&ts, NULL);
    }
}

int
nsbox_write_proc_file (pid_t pid, const char *name, const char *text, bool wait_dumpable,
                       struct nsbox_error **err)
{
  char path[64];
  snprintf (path, sizeof path, "/proc/%d/%s", (int)pid, name);
  cleanup_close int fd = open_proc_file (path, wait_dumpable);
  if (fd < 0)
    return nsbox_error_sys (err, errno, "open '%s'", path);
  size_t len = strlen (text);
  ssize_t n = write (fd, text, len);
  if (n < 0)
    return nsbox_error_sys (err, errno, "write '%s' to '%s'", text, path);
  if ((size_t)n != len)
    return nsbox_error_set (err, EIO, "short write to '%s'", path);
  return 0;
}

int
nsbox_userns_write_maps (pid_t pid, uid_t uid, gid_t gid, bool caller_undumpable,
                         struct nsbox_error **err)
{
  bool root = geteuid () == 0;
  unsigned host_uid = root ? NSBOX_ROOT_HOST_ID : (unsigned)geteuid ();
  unsigned host_gid = root ? NSBOX_ROOT_HOST_ID : (unsigned)getegid ();
  char map[64];
  if (!root && nsbox_write_proc_file (pid, "setgroups", "deny", caller_undumpable, err) < 0)
    return nsbox_error_prefix (err, "write id maps");
  snprintf (map, sizeof map, "%u %u 1\n", (unsigned)uid, host_uid);
  if (nsbox_write_proc_file (pid, "uid_map", map, caller_undumpable, err) < 0)
    return nsbox_error_prefix (err, "write id maps");
  snprintf (map, sizeof map, "%u %u 1\n", (unsigned)gid, host_gid);
  if (nsbox_write_proc_file (pid, "gid_map", map, caller_undumpable, err) < 0)
    return nsbox_error_prefix (err, "write id maps");
  return 0;
}

/* Run by root, the child starts as host uid 0, which is unmapped in the
 * user namespace and so could not even create a file in its own tmpfs.
 * Host uid 0 is never mapped, so the kernel does not treat this as leaving
 * root: the capabilities of the namespace stay until they are dropped. */
void
nsbox_userns_become (uid_t uid, gid_t gid, bool clear_groups)
{
  if (clear_groups && syscall (SYS_setgroups, 0, NULL) < 0)
    nsbox_child_fail (NSBOX_STEP_SETGROUPS, errno, NULL);
  if (syscall (SYS_setresgid, gid, gid, gid) < 0)
    nsbox_child_fail (NSBOX_STEP_SETGID, errno, NULL);
  if (syscall (SYS_setresuid, uid, uid, uid) < 0)
    nsbox_child_fail (NSBOX_STEP_SETUID, errno, NULL);
}
