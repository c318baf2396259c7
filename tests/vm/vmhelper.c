/* The check-vm guest's small static helper (busybox-static has no
 * setuidgid, and nothing in the guest can write an I/O port):
 *
 *   vmhelper as UID GID COMMAND...   drop to UID:GID (no supplementary
 *                                    groups) and exec COMMAND
 *   vmhelper scope DIR COMMAND...    what `systemd-run --scope -p
 *                                    Delegate=yes` does for a user: make a
 *                                    fresh cgroup DIR/scope-PID, run COMMAND
 *                                    alone in it, then remove the scope and
 *                                    the launcher leaf nsbox leaves in it
 *                                    (never a run cgroup: a leak stays
 *                                    visible); exits with COMMAND's status
 *   vmhelper exit CODE               write CODE to the isa-debug-exit port
 *                                    (0xf4): qemu exits (CODE << 1) | 1
 *
 * Built with -static; it runs in the guest before any library is there. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/io.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int
usage (void)
{
  fprintf (stderr, "usage: vmhelper as UID GID COMMAND...\n"
                   "       vmhelper scope CGROUP-DIR COMMAND...\n"
                   "       vmhelper exit CODE\n");
  return 2;
}

static int
run_as (char **argv)
{
  uid_t uid = (uid_t) strtoul (argv[0], NULL, 10);
  gid_t gid = (gid_t) strtoul (argv[1], NULL, 10);
  if (uid == 0 || setgroups (0, NULL) < 0 || setgid (gid) < 0 || setuid (uid) < 0)
    {
      fprintf (stderr, "vmhelper: cannot become %s:%s: %s\n", argv[0], argv[1], strerror (errno));
      return 126;
    }
  execvp (argv[2], &argv[2]);
  fprintf (stderr, "vmhelper: exec '%s': %s\n", argv[2], strerror (errno));
  return 127;
}

static int
write_text (const char *path, const char *text)
{
  int fd = open (path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  ssize_t n = write (fd, text, strlen (text));
  int saved = errno;
  close (fd);
  return n == (ssize_t) strlen (text) ? 0 : -(n < 0 ? saved : EIO);
}

static int
run_in_scope (char **argv)
{
  char scope[4096], path[4200], pid[32];
  snprintf (scope, sizeof scope, "%s/scope-%d", argv[0], (int) getpid ());
  if (mkdir (scope, 0755) < 0)
    {
      fprintf (stderr, "vmhelper: mkdir '%s': %s\n", scope, strerror (errno));
      return 125;
    }
  pid_t child = fork ();
  if (child < 0)
    return 125;
  if (child == 0)
    {
      /* The launcher dies with us, as it would with its scope. */
      prctl (PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
      snprintf (path, sizeof path, "%s/cgroup.procs", scope);
      snprintf (pid, sizeof pid, "%d", (int) getpid ());
      int r = write_text (path, pid);
      if (r < 0)
        {
          fprintf (stderr, "vmhelper: join '%s': %s\n", scope, strerror (-r));
          _exit (125);
        }
      execvp (argv[1], &argv[1]);
      fprintf (stderr, "vmhelper: exec '%s': %s\n", argv[1], strerror (errno));
      _exit (127);
    }
  /* Signals meant for the launcher (tests stop it) go to it. */
  signal (SIGINT, SIG_IGN);
  signal (SIGTERM, SIG_IGN);
  int status = 0;
  while (waitpid (child, &status, 0) < 0 && errno == EINTR)
    ;
  snprintf (path, sizeof path, "%s/nsbox.launcher", scope);
  rmdir (path);
  if (rmdir (scope) < 0 && errno != ENOENT)
    fprintf (stderr, "vmhelper: scope '%s' not removed: %s\n", scope, strerror (errno));
  if (WIFSIGNALED (status))
    {
      signal (WTERMSIG (status), SIG_DFL);
      kill (getpid (), WTERMSIG (status));
      return 128 + WTERMSIG (status);
    }
  return WEXITSTATUS (status);
}

static int
debug_exit (const char *code)
{
  if (ioperm (0xf4, 1, 1) < 0)
    {
      fprintf (stderr, "vmhelper: ioperm: %s\n", strerror (errno));
      return 1;
    }
  outb ((unsigned char) strtoul (code, NULL, 0), 0xf4);
  return 1; /* not reached under qemu */
}

int
main (int argc, char **argv)
{
  if (argc >= 5 && strcmp (argv[1], "as") == 0)
    return run_as (&argv[2]);
  if (argc >= 4 && strcmp (argv[1], "scope") == 0)
    return run_in_scope (&argv[2]);
  if (argc == 3 && strcmp (argv[1], "exit") == 0)
    return debug_exit (argv[2]);
  return usage ();
}
