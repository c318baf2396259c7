/* Child-side filesystem setup: the read-only rootfs, /tmp, /dev, /proc with
 * Docker's masks, then pivot_root. Runs between clone and exec, so only
 * async-signal-safe calls and stack buffers. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "child.h"
#include "files.h"
#include "sandbox.h"

/* Writes "a" + "b" into buf; truncation is impossible for our fixed paths
 * and a rootfs path checked by the parent to be shorter than PATH_MAX/2. */
static const char *
join (char *buf, size_t size, const char *a, const char *b)
{
  size_t i = 0;
  for (; *a && i + 1 < size; a++)
    buf[i++] = *a;
  for (; *b && i + 1 < size; b++)
    buf[i++] = *b;
  buf[i] = '\0';
  return buf;
}

static void
must_mount (int step, const char *detail, const char *src, const char *target, const char *fstype,
            unsigned long flags, const char *data)
{
  if (mount (src, target, fstype, flags, data) < 0)
    nsbox_child_fail (step, errno, detail);
}

/* Flags of the mount holding `path` that an unprivileged remount must keep. */
static unsigned long
locked_flags (const char *path)
{
  struct statfs st;
  if (statfs (path, &st) < 0)
    return 0;
  static const struct
  {
    unsigned long st, ms;
  } map[] = {
    { ST_NOSUID, MS_NOSUID },   { ST_NODEV, MS_NODEV },           { ST_NOEXEC, MS_NOEXEC },
    { ST_NOATIME, MS_NOATIME }, { ST_NODIRATIME, MS_NODIRATIME }, { ST_RELATIME, MS_RELATIME },
  };
  unsigned long flags = 0;
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (st.f_flags & map[i].st)
      flags |= map[i].ms;
  return flags;
}

static void
setup_rootfs (const char *root)
{
  must_mount (NSBOX_STEP_MOUNT_PRIVATE, "/", NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
  /* Not recursive: mounts below the rootfs directory on the host are not
   * part of the sandbox (and would not be read-only). */
  must_mount (NSBOX_STEP_BIND_ROOTFS, root, root, root, NULL, MS_BIND, NULL);
  unsigned long flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV;
  must_mount (NSBOX_STEP_REMOUNT_ROOTFS, root, NULL, root, NULL, flags | locked_flags (root), NULL);
  /* Everything from here on is relative to the new root: its host path may
   * lie below directories the sandbox user cannot traverse (a root-owned
   * 0700 image store). */
  if (chdir (root) < 0)
    nsbox_child_fail (NSBOX_STEP_BIND_ROOTFS, errno, root);
}

/* The launcher collects the files a program leaves in /tmp/out after the
 * run, when every process here is gone and the mount namespace with them:
 * an fd of the tmpfs, sent now on the sync channel, keeps it for that. */
static void
send_tmp (void)
{
  if (mkdir ("tmp/out", 0755) < 0)
    nsbox_child_fail (NSBOX_STEP_TMP_OUT, errno, "/tmp/out");
  int fd = open ("tmp", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    nsbox_child_fail (NSBOX_STEP_TMP_OUT, errno, "/tmp");
  nsbox_child_send_fd ('t', fd, NSBOX_STEP_TMP_OUT, "/tmp");
  close (fd);
}

static void
setup_tmp (const struct nsbox_plan *plan)
{
  must_mount (NSBOX_STEP_MOUNT_TMP, "/tmp", "tmpfs", "tmp", "tmpfs", MS_NOSUID | MS_NODEV,
              plan->tmp_options);
  send_tmp ();
}

static const char *const dev_nodes[] = { "null", "zero", "full", "random", "urandom" };
static const char *const dev_links[][2] = {
  { "fd", "/proc/self/fd" },
  { "stdin", "/proc/self/fd/0" },
  { "stdout", "/proc/self/fd/1" },
  { "stderr", "/proc/self/fd/2" },
};

/* Device nodes cannot be created in a user namespace: bind the host's. */
static void
setup_dev_nodes (const char *dev)
{
  int dirfd = open (dev, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0)
    nsbox_child_fail (NSBOX_STEP_MOUNT_DEV, errno, "/dev");
  for (size_t i = 0; i < sizeof dev_nodes / sizeof dev_nodes[0]; i++)
    {
      char host[32], target[PATH_MAX];
      join (host, sizeof host, "/dev/", dev_nodes[i]);
      int fd = openat (dirfd, dev_nodes[i], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd < 0)
        nsbox_child_fail (NSBOX_STEP_CREATE_DEV, errno, host);
      close (fd);
      join (target, sizeof target, dev, host + 4);
      must_mount (NSBOX_STEP_BIND_DEV, host, host, target, NULL, MS_BIND, NULL);
    }
  for (size_t i = 0; i < sizeof dev_links / sizeof dev_links[0]; i++)
    if (symlinkat (dev_links[i][1], dirfd, dev_links[i][0]) < 0)
      nsbox_child_fail (NSBOX_STEP_CREATE_DEV, errno, dev_links[i][0]);
  if (mkdirat (dirfd, "shm", 01777) < 0)
    nsbox_child_fail (NSBOX_STEP_CREATE_DEV, errno, "/dev/shm");
  close (dirfd);
}

static void
setup_dev (const struct nsbox_plan *plan)
{
  const char *dev = "dev", *shm = "dev/shm";
  must_mount (NSBOX_STEP_MOUNT_DEV, "/dev", "tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC,
              "size=64k,nr_inodes=64,mode=0755");
  setup_dev_nodes (dev);
  must_mount (NSBOX_STEP_MOUNT_SHM, "/dev/shm", "tmpfs", shm, "tmpfs",
              MS_NOSUID | MS_NODEV | MS_NOEXEC, plan->shm_options);
  must_mount (NSBOX_STEP_REMOUNT_DEV, "/dev", NULL, dev, NULL,
              MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, "size=64k,nr_inodes=64,mode=0755");
}

/* Docker's masked and read-only /proc paths (moby's daemon/pkg/oci
 * defaults: /proc/interrupts since 28.0.2), plus kallsyms: kernel addresses
 * are 0 for the unprivileged anyway, and nothing in the sandbox needs the
 * symbol names. No /sys is mounted, so Docker's /sys masks have nothing to
 * cover. */
static const char *const proc_masked_files[]
    = { "/proc/interrupts",  "/proc/kcore",         "/proc/keys",        "/proc/timer_list",
        "/proc/sched_debug", "/proc/latency_stats", "/proc/timer_stats", "/proc/kallsyms" };
static const char *const proc_masked_dirs[] = { "/proc/scsi", "/proc/acpi", "/proc/asound" };
static const char *const proc_readonly[]
    = { "/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs" };

static void
mask_proc (void)
{
  const char *devnull = "dev/null";
  char path[PATH_MAX];
  for (size_t i = 0; i < sizeof proc_masked_files / sizeof proc_masked_files[0]; i++)
    {
      join (path, sizeof path, "", proc_masked_files[i] + 1);
      if (mount (devnull, path, NULL, MS_BIND, NULL) < 0 && errno != ENOENT)
        nsbox_child_fail (NSBOX_STEP_MASK_PROC, errno, proc_masked_files[i]);
    }
  for (size_t i = 0; i < sizeof proc_masked_dirs / sizeof proc_masked_dirs[0]; i++)
    {
      join (path, sizeof path, "", proc_masked_dirs[i] + 1);
      if (mount ("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                 "size=0,nr_inodes=1,mode=0555")
              < 0
          && errno != ENOENT)
        nsbox_child_fail (NSBOX_STEP_MASK_PROC, errno, proc_masked_dirs[i]);
    }
}

static void
readonly_proc (void)
{
  char path[PATH_MAX];
  for (size_t i = 0; i < sizeof proc_readonly / sizeof proc_readonly[0]; i++)
    {
      join (path, sizeof path, "", proc_readonly[i] + 1);
      if (mount (path, path, NULL, MS_BIND | MS_REC, NULL) < 0)
        {
          if (errno == ENOENT)
            continue;
          nsbox_child_fail (NSBOX_STEP_READONLY_PROC, errno, proc_readonly[i]);
        }
      unsigned long flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;
      must_mount (NSBOX_STEP_READONLY_PROC, proc_readonly[i], NULL, path, NULL,
                  flags | locked_flags (path), NULL);
    }
}

/* Defence in depth behind the seccomp rule: no nested user namespaces, even
 * through a path the filter does not see. The sysctl is per user namespace. */
static void
limit_nested_userns (void)
{
  int fd = open ("proc/sys/user/max_user_namespaces", O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    nsbox_child_fail (NSBOX_STEP_USERNS_LIMIT, errno, "/proc/sys/user/max_user_namespaces");
  if (write (fd, "0\n", 2) != 2)
    nsbox_child_fail (NSBOX_STEP_USERNS_LIMIT, errno, "/proc/sys/user/max_user_namespaces");
  close (fd);
}

static void
setup_proc (void)
{
  must_mount (NSBOX_STEP_MOUNT_PROC, "/proc", "proc", "proc", "proc",
              MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
  mask_proc ();
  limit_nested_userns ();
  readonly_proc ();
}

static void
enter_root (const char *root)
{
  if (syscall (SYS_pivot_root, ".", ".") < 0)
    nsbox_child_fail (NSBOX_STEP_PIVOT_ROOT, errno, root);
  /* The old root is now stacked under the new one: detach it entirely. */
  if (umount2 (".", MNT_DETACH) < 0)
    nsbox_child_fail (NSBOX_STEP_DETACH_OLD_ROOT, errno, "/");
  if (chdir ("/") < 0)
    nsbox_child_fail (NSBOX_STEP_PIVOT_ROOT, errno, "/");
}

void
nsbox_mounts_bind_root (const struct nsbox_plan *plan)
{
  setup_rootfs (plan->rootfs);
}

void
nsbox_mounts_setup (const struct nsbox_plan *plan)
{
  setup_tmp (plan);
  nsbox_inputs_place (&plan->inputs, NSBOX_CHILD_FIRST_FREE_FD);
  setup_dev (plan);
  setup_proc ();
  enter_root (plan->rootfs);
}
