/* Layer application semantics: whiteouts,
 * opaque directories, replacement, merged directories, hardlinks, special
 * files and what an unprivileged unpack drops. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image_helpers.h"

FX_TEST_SUITE (layers, 60);

static char *
in_root (const char *rootfs, const char *rel)
{
  char *p = NULL;
  cr_assert (asprintf (&p, "%s/%s", rootfs, rel) >= 0);
  return p;
}

static bool
exists_in (const char *rootfs, const char *rel)
{
  char *p = in_root (rootfs, rel);
  bool e = path_exists (p);
  free (p);
  return e;
}

static struct stat
stat_in (const char *rootfs, const char *rel)
{
  char *p = in_root (rootfs, rel);
  struct stat st;
  cr_assert (lstat (p, &st) == 0, "'%s' missing", rel);
  free (p);
  return st;
}

Test (layers, whiteouts_remove_lower_files_dirs_and_opaque_children_in_any_order)
{
  build_image (&fx, "l = layer()\n"
                    "D(l, 'etc'); F(l, 'etc/a'); F(l, 'etc/b')\n"
                    "D(l, 'dir'); F(l, 'dir/x')\n"
                    "D(l, 'opq'); F(l, 'opq/old1'); D(l, 'opq/sub'); F(l, 'opq/sub/old2')\n"
                    "D(l, 'opq2'); F(l, 'opq2/old')\n"
                    "l = layer()\n"
                    "F(l, 'etc/.wh.a'); F(l, '.wh.dir'); F(l, '.wh.absent')\n"
                    "F(l, 'opq/.wh..wh..opq'); F(l, 'opq/new')\n"
                    "F(l, 'opq2/new'); F(l, 'opq2/.wh..wh..opq')\n"
                    "F(l, 'same'); F(l, '.wh.same')\n");
  struct cmd_out out;
  import_and_unpack (&fx, &out);
  cr_assert_eq (out.status, 0, "%s", out.err);
  const char *r = out.out;
  cr_assert (!exists_in (r, "etc/a"));
  cr_assert (exists_in (r, "etc/b"));
  cr_assert (!exists_in (r, "dir"));
  cr_assert (!exists_in (r, "opq/old1"));
  cr_assert (!exists_in (r, "opq/sub"));
  cr_assert (exists_in (r, "opq/new"), "a child written before or after .wh..wh..opq survives");
  cr_assert (!exists_in (r, "opq2/old"));
  cr_assert (exists_in (r, "opq2/new"), "a child written before .wh..wh..opq survives");
  cr_assert (exists_in (r, "same"), "a whiteout does not hide its own layer's file");
  char *found = sh_ok (&fx, "find '%s' -name '.wh.*'", r);
  cr_assert_str_empty (found, "whiteout markers were materialised: %s", found);
  free (found);
  cmd_out_free (&out);
}

Test (layers, replacement_merge_and_read_only_dirs_get_their_final_modes_last)
{
  build_image (&fx, "l = layer()\n"
                    "D(l, 'a'); F(l, 'a/in'); F(l, 'b')\n"
                    "D(l, 'ro', mode=0o555, mtime=1000000000)\n"
                    "D(l, 'm', mode=0o700); F(l, 'm/one')\n"
                    "l = layer()\n"
                    "F(l, 'a', 'now a file'); D(l, 'b'); F(l, 'b/x')\n"
                    "F(l, 'ro/new')\n"
                    "D(l, 'm', mode=0o750, mtime=1100000000); F(l, 'm/two')\n");
  struct cmd_out out;
  import_and_unpack (&fx, &out);
  cr_assert_eq (out.status, 0, "%s", out.err);
  const char *r = out.out;
  cr_assert (S_ISREG (stat_in (r, "a").st_mode), "a directory replaced by a file");
  cr_assert (S_ISDIR (stat_in (r, "b").st_mode), "a file replaced by a directory");
  cr_assert (exists_in (r, "b/x"));
  struct stat ro = stat_in (r, "ro");
  cr_assert_eq (ro.st_mode & 07777, 0555, "mode %o", ro.st_mode & 07777);
  cr_assert_eq (ro.st_mtime, 1000000000, "the header mtime is applied after the children");
  cr_assert (exists_in (r, "ro/new"), "a 0555 directory received a file from a later layer");
  cr_assert (exists_in (r, "m/one") && exists_in (r, "m/two"), "dir over dir merges");
  struct stat m = stat_in (r, "m");
  cr_assert_eq (m.st_mode & 07777, 0750);
  cr_assert_eq (m.st_mtime, 1100000000);
  cmd_out_free (&out);
}

Test (layers, hardlinks_fifos_devices_setuid_and_privileged_xattrs)
{
  build_image (&fx, "l = layer()\n"
                    "F(l, 'f1', 'data'); H(l, 'h1', 'f1'); P(l, 'fifo', mode=0o640)\n"
                    "D(l, 'dev'); C(l, 'dev/null', 1, 3)\n"
                    "F(l, 'suid', mode=0o4755); F(l, 'sgid', mode=0o2755)\n"
                    "F(l, 'owned', uid=1000, gid=1001, mode=0o600)\n"
                    "F(l, 'cap', pax={'SCHILY.xattr.security.capability': 'x'})\n"
                    "S(l, 'abs', '/usr/lib')\n"
                    "l = layer()\n"
                    "H(l, 'h2', 'f1')\n");
  struct cmd_out out;
  import_and_unpack (&fx, &out);
  cr_assert_eq (out.status, 0, "%s", out.err);
  const char *r = out.out;
  struct stat f1 = stat_in (r, "f1"), h1 = stat_in (r, "h1"), h2 = stat_in (r, "h2");
  cr_assert (f1.st_ino == h1.st_ino && f1.st_ino == h2.st_ino,
             "hardlinks within and across layers share the inode");
  cr_assert (S_ISFIFO (stat_in (r, "fifo").st_mode));
  cr_assert_eq (stat_in (r, "fifo").st_mode & 07777, 0640);
  cr_assert (!exists_in (r, "dev/null"), "device nodes are skipped");
  cr_assert (strstr (out.err, "skipping device node 'dev/null'"), "%s", out.err);
  cr_assert_eq (stat_in (r, "suid").st_mode & 07777, 0755, "setuid stripped");
  cr_assert_eq (stat_in (r, "sgid").st_mode & 07777, 0755, "setgid stripped");
  cr_assert (strstr (out.err, "dropping privileged extended attribute 'security.capability'"), "%s",
             out.err);
  char link[64] = "";
  char *abs = in_root (r, "abs");
  cr_assert (readlink (abs, link, sizeof link - 1) > 0);
  cr_assert_str_eq (link, "/usr/lib", "symlink targets are kept verbatim");
  free (abs);
  char *tsv_path = in_root (r, "../ownership.tsv");
  char *tsv = read_text (tsv_path);
  cr_assert (tsv && strstr (tsv, "\n/owned\t1000\t1001\t0600\n"), "%s", tsv ? tsv : "(none)");
  cr_assert (strstr (tsv, "\n/suid\t0\t0\t4755\n"), "the original mode is recorded");
  free (tsv);
  free (tsv_path);
  cmd_out_free (&out);
}

Test (layers, the_rootfs_gets_proc_dev_and_a_sticky_tmp_for_the_launcher)
{
  build_image (&fx, "l = layer()\nF(l, 'only-a-file')\n");
  struct cmd_out out;
  import_and_unpack (&fx, &out);
  cr_assert_eq (out.status, 0, "%s", out.err);
  cr_assert (S_ISDIR (stat_in (out.out, "proc").st_mode));
  cr_assert (S_ISDIR (stat_in (out.out, "dev").st_mode));
  cr_assert_eq (stat_in (out.out, "tmp").st_mode & 07777, 01777);
  char *added_path = in_root (out.out, "../added-dirs");
  char *added = read_text (added_path);
  cr_assert_str_eq (added, "proc\ndev\ntmp\n");
  free (added);
  free (added_path);
  cmd_out_free (&out);
}

/* The file thread holds one fd per directory it has files queued in, not
 * one per file: thousands of small files, in one directory and one per
 * directory, unpack under a low RLIMIT_NOFILE (a login's 1024 is common). */
Test (layers, many_small_files_unpack_under_a_low_open_files_limit)
{
  build_image (&fx, "l = layer()\n"
                    "D(l, 'one')\n"
                    "for i in range(3000): F(l, f'one/f{i}', 'x' * 100)\n"
                    "for i in range(2000): D(l, f'd{i}'); F(l, f'd{i}/f', 'y' * 100)\n");
  free (sh_ok (&fx, "\"$IMG\" --store \"$STORE\" import oci:\"$T/oci\":t"));
  struct cmd_out out;
  sh (&fx, &out, "ulimit -n 128 && \"$IMG\" --store \"$STORE\" rootfs " IMAGE_REF);
  cr_assert_eq (out.status, 0, "unpack under 128 open files failed: %s", out.err);
  char *count = sh_ok (&fx, "find \"$STORE\"/rootfs/*/rootfs/one \"$STORE\"/rootfs/*/rootfs/d* "
                            "-type f | wc -l");
  cr_assert_eq (atoi (count), 5000, "%s files written, not 5000", count);
  free (count);
  cmd_out_free (&out);
}
