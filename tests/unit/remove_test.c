/* Tree removal (src/common/remove.c): whatever the depth, within a small
 * fd limit, with directories the owner cannot write, and never through a
 * symlink. */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "remove.h"

static char *
make_temp_dir (void)
{
  char tmpl[] = "/tmp/nsbox-remove-test.XXXXXX";
  cr_assert_not_null (mkdtemp (tmpl));
  return strdup (tmpl);
}

/* depth levels of t/a/a/..., each with a file, a symlink to the level
 * above and to `outside`, some with a 0000 side directory, some 0555. */
static void
build_deep_tree (int top, int depth, const char *outside)
{
  cr_assert (mkdirat (top, "t", 0755) == 0);
  int cur = openat (top, "t", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  cr_assert_geq (cur, 0);
  for (int i = 0; i < depth; i++)
    {
      cr_assert (mkdirat (cur, "a", 0755) == 0, "mkdir at level %d: %s", i, strerror (errno));
      int f = openat (cur, "file", O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
      cr_assert_geq (f, 0);
      close (f);
      cr_assert (symlinkat ("..", cur, "up") == 0);
      cr_assert (symlinkat (outside, cur, "out") == 0);
      if (i % 5 == 0)
        cr_assert (mkdirat (cur, "side", 0) == 0);
      int next = openat (cur, "a", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      cr_assert_geq (next, 0);
      if (i % 7 == 0)
        fchmod (cur, 0555);
      close (cur);
      cur = next;
    }
  close (cur);
}

/* Builds a tree depth levels deep and removes it in a child with 128 fds,
 * as root or, with owner != 0, as that uid owning the tree: without
 * privilege, the 0000 and 0555 directories must be made writable first. */
static void
remove_deep_tree_case (int depth, uid_t owner)
{
  char *dir = make_temp_dir ();
  char *outside = NULL;
  cr_assert (asprintf (&outside, "%s/outside", dir) >= 0);
  cr_assert (mkdir (outside, 0755) == 0);
  char *canary = NULL;
  cr_assert (asprintf (&canary, "%s/canary", outside) >= 0);
  int fd = open (canary, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  cr_assert_geq (fd, 0);
  close (fd);
  int top = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  cr_assert_geq (top, 0);
  build_deep_tree (top, depth, outside);
  if (owner != 0)
    {
      char *chown_cmd = NULL;
      cr_assert (
          asprintf (&chown_cmd, "chown -R -h %u:%u '%s'", (unsigned)owner, (unsigned)owner, dir)
          >= 0);
      cr_assert (system (chown_cmd) == 0);
      free (chown_cmd);
    }
  pid_t pid = fork ();
  cr_assert_geq (pid, 0);
  if (pid == 0)
    {
      /* Far fewer fds than levels. */
      struct rlimit rl = { 128, 128 };
      if (setrlimit (RLIMIT_NOFILE, &rl) < 0)
        _exit (100);
      if (owner != 0
          && (setresgid (owner, owner, owner) < 0 || setresuid (owner, owner, owner) < 0))
        _exit (99);
      int r = nsbox_remove_at (top, "t");
      _exit (r == 0 ? 0 : 100 + (-r & 0x7f));
    }
  int status;
  cr_assert_eq (waitpid (pid, &status, 0), pid);
  cr_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0, "nsbox_remove_at failed: status %#x",
             status);
  struct stat st;
  cr_assert (fstatat (top, "t", &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT,
             "the tree is still there");
  cr_assert (stat (canary, &st) == 0, "a symlink was followed out of the tree");
  close (top);
  char *cmd = NULL;
  cr_assert (asprintf (&cmd, "rm -rf '%s'", dir) >= 0);
  cr_assert (system (cmd) == 0);
  free (cmd);
  free (canary);
  free (outside);
  free (dir);
}

Test (remove, a_shallow_tree_is_removed, .timeout = 60) { remove_deep_tree_case (10, 0); }

Test (remove, a_tree_deeper_than_the_fd_limit_is_removed_with_few_fds, .timeout = 120)
{
  remove_deep_tree_case (1500, 0);
}

Test (remove, an_owner_without_privilege_removes_its_0000_and_0555_directories, .timeout = 60)
{
  NSBOX_SKIP_UNLESS (geteuid () == 0, "needs root to hand the tree to another uid");
  remove_deep_tree_case (40, 65534);
}
