/* The start-up benchmark's "floor" row: what the kernel alone charges for the
 * sandbox's namespaces. One clone with the same seven namespaces as nsbox,
 * a one-id map, the rootfs bound read-only, tmpfs /tmp, a fresh /proc,
 * pivot_root, a PID 1 that waits, and `python -` - and nothing else: no
 * cgroups, no seccomp filter, no capability drop, no /dev, no supervision.
 * Not a sandbox (it is only ever run by tests/bench/run.sh); a yardstick for
 * how close nsbox's own overhead comes to zero.
 *
 * Usage: floor ROOTFS (as root or as any user allowed user namespaces). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void
die (const char *what)
{
  fprintf (stderr, "floor: %s: %s\n", what, strerror (errno));
  _exit (125);
}

static void
write_proc (pid_t pid, const char *name, const char *text)
{
  char path[64];
  snprintf (path, sizeof path, "/proc/%d/%s", (int)pid, name);
  int fd = open (path, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write (fd, text, strlen (text)) != (ssize_t)strlen (text))
    die (path);
  close (fd);
}

static int
child (const char *rootfs, int sync_fd)
{
  char byte;
  if (read (sync_fd, &byte, 1) != 1)
    _exit (125);
  if (mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    die ("make / private");
  if (mount (rootfs, rootfs, NULL, MS_BIND, NULL) < 0
      || mount (NULL, rootfs, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL)
             < 0)
    die ("bind the rootfs");
  if (chdir (rootfs) < 0)
    die ("chdir");
  if (mount ("tmpfs", "tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=1777") < 0)
    die ("mount /tmp");
  if (mount ("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
    die ("mount /proc");
  if (syscall (SYS_pivot_root, ".", ".") < 0 || umount2 (".", MNT_DETACH) < 0 || chdir ("/") < 0)
    die ("pivot_root");
  if (setresgid (65534, 65534, 65534) < 0 || setresuid (65534, 65534, 65534) < 0)
    die ("set ids");
  pid_t program = fork ();
  if (program < 0)
    die ("fork");
  if (program == 0)
    {
      static char arg0[] = "python", arg1[] = "-";
      static char path[] = "PATH=/usr/local/bin:/usr/bin:/bin", home[] = "HOME=/tmp",
                  lang[] = "LANG=C.UTF-8";
      char *const argv[] = { arg0, arg1, NULL };
      char *const envp[] = { path, home, lang, NULL };
      execve ("/usr/bin/python", argv, envp);
      die ("execve /usr/bin/python");
    }
  int status;
  while (waitpid (program, &status, 0) < 0)
    if (errno != EINTR)
      die ("waitpid");
  return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
}

int
main (int argc, char **argv)
{
  if (argc != 2)
    {
      fprintf (stderr, "usage: floor ROOTFS\n");
      return 125;
    }
  int sync[2];
  if (pipe2 (sync, O_CLOEXEC) < 0)
    die ("pipe");
  unsigned host_uid = geteuid () == 0 ? 65534 : (unsigned)geteuid ();
  unsigned host_gid = geteuid () == 0 ? 65534 : (unsigned)getegid ();
  pid_t pid = (pid_t)syscall (SYS_clone,
                              CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID
                                  | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP | SIGCHLD,
                              0UL, 0UL, 0UL, 0UL);
  if (pid < 0)
    die ("clone");
  if (pid == 0)
    _exit (child (argv[1], sync[0]));
  char map[64];
  snprintf (map, sizeof map, "65534 %u 1\n", host_uid);
  write_proc (pid, "uid_map", map);
  write_proc (pid, "setgroups", "deny");
  snprintf (map, sizeof map, "65534 %u 1\n", host_gid);
  write_proc (pid, "gid_map", map);
  if (write (sync[1], "x", 1) != 1)
    die ("sync");
  int status;
  while (waitpid (pid, &status, 0) < 0)
    if (errno != EINTR)
      die ("waitpid");
  return WIFEXITED (status) ? WEXITSTATUS (status) : 125;
}
