/* Hostile layers. Each asserts that the
 * victim directory beside the store is unchanged and, for rejected layers,
 * that no tree or work directory is left behind. The *_walker variants
 * repeat symlink cases with the userspace resolver (NSBOX_RESOLVE_FALLBACK)
 * that replaces openat2 where it is missing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image_helpers.h"

FX_TEST_SUITE (hostile, 90);

#define EXIT_INVALID_IMAGE 6
#define EXIT_LIMIT 11

/* Builds, imports and unpacks; expects a clean failure with `status`. */
static void
expect_rejected (const char *body, int status, const char *needle)
{
  build_image (&fx, body);
  struct cmd_out out;
  import_and_unpack (&fx, &out);
  assert_clean_failure (&fx, &out);
  cr_assert_eq (out.status, status, "exit %d, expected %d: %s", out.status, status, out.err);
  if (needle)
    cr_assert (strstr (out.err, needle), "'%s' not in: %s", needle, out.err);
  cmd_out_free (&out);
}

/* Builds, imports and unpacks; expects success; returns the rootfs. */
static char *
expect_unpacked (const char *body)
{
  build_image (&fx, body);
  struct cmd_out out;
  import_and_unpack (&fx, &out);
  cr_assert_eq (out.status, 0, "exit %d: %s", out.status, out.err);
  assert_victim_unchanged (&fx);
  char *rootfs = strdup (out.out);
  cmd_out_free (&out);
  return rootfs;
}

static char *
token_name (const char *prefix)
{
  char *s = NULL;
  cr_assert (asprintf (&s, "%s-%d-%ld", prefix, getpid (), (long)random ()) >= 0);
  return s;
}

static bool
exists_in (const char *rootfs, const char *rel)
{
  char *p = NULL;
  cr_assert (asprintf (&p, "%s/%s", rootfs, rel) >= 0);
  bool e = path_exists (p);
  free (p);
  return e;
}

Test (hostile, dotdot_names_are_a_breakout_error)
{
  expect_rejected ("l = layer()\nF(l, '../victim/dotdot')\n", EXIT_INVALID_IMAGE, "breakout");
  cr_assert (!path_exists ("/tmp/victim/dotdot"));
}

Test (hostile, absolute_dotdot_names_are_a_breakout_error)
{
  expect_rejected ("l = layer()\nF(l, 'ok'); F(l, '/../victim/x')\n", EXIT_INVALID_IMAGE,
                   "breakout");
}

static void
symlink_dir_case (const char *target)
{
  char *name = token_name ("unbroken");
  char *body = NULL;
  cr_assert (asprintf (&body,
                       "l = layer()\nD(l, 'etc')\nS(l, 'localetc', '%s')\n"
                       "F(l, 'localetc/%s')\n",
                       target, name)
             >= 0);
  char *rootfs = expect_unpacked (body);
  char *rel = NULL, *host = NULL;
  cr_assert (asprintf (&rel, "etc/%s", name) >= 0 && asprintf (&host, "/etc/%s", name) >= 0);
  bool escaped = path_exists (host);
  if (escaped)
    unlink (host);
  cr_assert (!escaped, "the file escaped to the host's %s", host);
  cr_assert (exists_in (rootfs, rel), "the file lands in the rootfs's /etc");
  free (rel);
  free (host);
  free (rootfs);
  free (body);
  free (name);
}

Test (hostile, absolute_symlink_parent_resolves_inside_the_rootfs) { symlink_dir_case ("/etc"); }

Test (hostile, dotdot_inside_a_symlink_target_resolves_inside_the_rootfs)
{
  symlink_dir_case ("/dummy/../etc");
}

Test (hostile, symlink_climbing_out_resolves_inside_the_rootfs)
{
  symlink_dir_case ("../../../../etc");
}

Test (hostile, symlink_cases_hold_with_the_userspace_walker)
{
  setenv ("NSBOX_RESOLVE_FALLBACK", "1", 1);
  symlink_dir_case ("../../../../etc");
}

static void
loophole_case (void)
{
  char *rootfs = expect_unpacked ("l = layer()\nS(l, 'loophole', '../victim')\n"
                                  "F(l, 'loophole/file')\n");
  cr_assert (!path_exists ("/tmp/victim/file"));
  cr_assert (exists_in (rootfs, "victim/file"), "written to the in-root target of the link");
  free (rootfs);
}

Test (hostile, relative_symlink_to_the_victim_stays_inside) { loophole_case (); }

Test (hostile, relative_symlink_to_the_victim_stays_inside_with_the_userspace_walker)
{
  setenv ("NSBOX_RESOLVE_FALLBACK", "1", 1);
  loophole_case ();
}

Test (hostile, symlink_to_root_from_a_lower_layer_is_followed_in_root)
{
  char *name = token_name ("x");
  char *body = NULL;
  cr_assert (
      asprintf (&body, "l = layer()\nS(l, 'foo', '/')\nl = layer()\nF(l, 'foo/tmp/%s')\n", name)
      >= 0);
  char *rootfs = expect_unpacked (body);
  char *rel = NULL, *host = NULL;
  cr_assert (asprintf (&rel, "tmp/%s", name) >= 0 && asprintf (&host, "/tmp/%s", name) >= 0);
  bool escaped = path_exists (host);
  if (escaped)
    unlink (host);
  cr_assert (!escaped, "escaped to %s", host);
  cr_assert (exists_in (rootfs, rel));
  free (rel);
  free (host);
  free (rootfs);
  free (body);
  free (name);
}

Test (hostile, hardlinks_out_of_the_root_are_rejected)
{
  expect_rejected ("l = layer()\nH(l, 'h', '../victim/hello')\n", EXIT_INVALID_IMAGE, "breakout");
}

Test (hostile, hardlinks_to_absolute_dotdot_are_rejected)
{
  expect_rejected ("l = layer()\nH(l, 'h', '/../victim/hello')\n", EXIT_INVALID_IMAGE, "breakout");
}

Test (hostile, hardlinks_to_absolute_paths_link_the_rootfs_inode)
{
  char *rootfs = expect_unpacked ("l = layer()\nD(l, 'etc'); F(l, 'etc/passwd', 'root:x')\n"
                                  "H(l, 'pw', '/etc/passwd')\n");
  char *a = NULL, *b = NULL;
  cr_assert (asprintf (&a, "%s/pw", rootfs) >= 0 && asprintf (&b, "%s/etc/passwd", rootfs) >= 0);
  struct stat sa, sb, host;
  cr_assert (stat (a, &sa) == 0 && stat (b, &sb) == 0 && stat ("/etc/passwd", &host) == 0);
  cr_assert_eq (sa.st_ino, sb.st_ino);
  cr_assert (sa.st_ino != host.st_ino || sa.st_dev != host.st_dev);
  free (a);
  free (b);
  free (rootfs);
}

Test (hostile, hardlink_to_a_missing_absolute_path_is_rejected)
{
  expect_rejected ("l = layer()\nH(l, 'h', '/etc/passwd')\n", EXIT_INVALID_IMAGE, "not found");
}

Test (hostile, hardlink_to_a_symlink_to_a_host_file_never_chmods_the_host_file)
{
  char *body = NULL;
  cr_assert (asprintf (&body,
                       "l = layer()\nS(l, 's', '%s/hello')\nH(l, 'h', 's', mode=0o777)\n"
                       "F(l, 'h2', mode=0o777)\n",
                       fx.victim)
             >= 0);
  char *rootfs = expect_unpacked (body);
  char *h = NULL;
  cr_assert (asprintf (&h, "%s/h", rootfs) >= 0);
  struct stat st;
  cr_assert (lstat (h, &st) == 0 && S_ISLNK (st.st_mode), "the hardlink is the symlink itself");
  free (h);
  free (rootfs);
  free (body);
}

Test (hostile, root_entry_as_a_symlink_is_rejected)
{
  expect_rejected ("l = layer()\nS(l, '.', '/')\n", EXIT_INVALID_IMAGE, "root entry");
}

Test (hostile, slash_root_entry_as_a_symlink_is_rejected)
{
  expect_rejected ("l = layer()\nS(l, '/', '/')\n", EXIT_INVALID_IMAGE, "root entry");
}

Test (hostile, symlink_named_dotdot_is_refused_harmlessly)
{
  expect_rejected ("l = layer()\nS(l, '..', '/')\n", EXIT_INVALID_IMAGE, NULL);
}

Test (hostile, invalid_whiteouts_are_rejected)
{
  static const char *const names[] = { ".wh.", ".wh..", ".wh...", "etc/.wh.." };
  for (size_t i = 0; i < 4; i++)
    {
      if (i > 0)
        {
          fx_teardown (&fx);
          fx_setup (&fx);
        }
      char *body = NULL;
      cr_assert (asprintf (&body, "l = layer()\nD(l, 'etc')\nF(l, '%s')\n", names[i]) >= 0);
      expect_rejected (body, EXIT_INVALID_IMAGE, "invalid whiteout");
      free (body);
    }
}

Test (hostile, whiteouts_through_symlinks_stay_in_the_rootfs)
{
  char *rootfs
      = expect_unpacked ("l = layer()\nD(l, 'etc'); F(l, 'etc/passwd'); F(l, 'etc/group')\n"
                         "S(l, 'localetc', '/etc'); S(l, 'other', '/etc')\n"
                         "S(l, 'dead', '/nonexistent')\n"
                         "l = layer()\nF(l, '.wh.localetc'); F(l, 'other/.wh.passwd')\n"
                         "F(l, 'dead/.wh.x')\n");
  cr_assert (!exists_in (rootfs, "localetc"), ".wh.localetc removes the link");
  cr_assert (exists_in (rootfs, "etc/group"), "and not its target");
  cr_assert (!exists_in (rootfs, "etc/passwd"), "other/.wh.passwd removes rootfs/etc/passwd");
  cr_assert (path_exists ("/etc/passwd"));
  free (rootfs);
}

Test (hostile, opaque_whiteout_through_a_root_symlink_only_empties_the_rootfs)
{
  char *rootfs = expect_unpacked ("l = layer()\nD(l, 'etc'); F(l, 'etc/passwd')\n"
                                  "l = layer()\nS(l, 'evil', '/'); F(l, 'evil/.wh..wh..opq')\n");
  cr_assert (!exists_in (rootfs, "etc"), "the rootfs's lower children are gone");
  cr_assert (path_exists ("/etc/passwd"));
  free (rootfs);
}

Test (hostile, a_large_file_beyond_the_layer_limit_is_aborted)
{
  build_image (&fx, "l = layer()\nF(l, 'big', b'\\0' * (8 << 20))\n");
  struct cmd_out out;
  free (sh_ok (&fx, "\"$IMG\" --store \"$STORE\" import oci:\"$T/oci\":t"));
  sh (&fx, &out, "NSBOX_MAX_LAYER_BYTES=1048576 \"$IMG\" --store \"$STORE\" rootfs " IMAGE_REF);
  assert_clean_failure (&fx, &out);
  cr_assert_eq (out.status, EXIT_LIMIT, "%s", out.err);
  cr_assert (strstr (out.err, "exceeds the limit"), "%s", out.err);
  cmd_out_free (&out);
}

Test (hostile, a_stream_of_zeros_beyond_the_limit_is_aborted)
{
  /* 256 MiB of zeros after the end of the tar; umoci gzips it to ~250 KB. */
  build_image (&fx, "l = layer()\nF(l, 'a')\n"
                    "import tarfile as _t\n"
                    "b = io.BytesIO()\n"
                    "with _t.open(fileobj=b, mode='w') as t:\n"
                    "    ti = _t.TarInfo('a'); ti.size = 1; t.addfile(ti, io.BytesIO(b'x'))\n"
                    "raw_layers[0] = b.getvalue() + b'\\0' * (256 << 20)\n");
  struct cmd_out out;
  sh (&fx, &out,
      "NSBOX_MAX_LAYER_BYTES=1048576 \"$IMG\" --store \"$STORE\" import oci:\"$T/oci\":t");
  assert_clean_failure (&fx, &out);
  cr_assert_eq (out.status, EXIT_LIMIT, "%s", out.err);
  cmd_out_free (&out);
  free (sh_ok (&fx, "\"$IMG\" --store \"$STORE\" import oci:\"$T/oci\":t"));
  sh (&fx, &out, "NSBOX_MAX_LAYER_BYTES=1048576 \"$IMG\" --store \"$STORE\" rootfs " IMAGE_REF);
  assert_clean_failure (&fx, &out);
  cr_assert_eq (out.status, EXIT_LIMIT, "%s", out.err);
  cr_assert (strstr (out.err, "uncompressed layer exceeds the limit"), "%s", out.err);
  cmd_out_free (&out);
}

Test (hostile, too_many_entries_are_an_entry_limit_error)
{
  build_image (&fx, "l = layer()\nfor i in range(300): F(l, f'f{i}')\n");
  struct cmd_out out;
  free (sh_ok (&fx, "\"$IMG\" --store \"$STORE\" import oci:\"$T/oci\":t"));
  sh (&fx, &out, "NSBOX_MAX_LAYER_ENTRIES=200 \"$IMG\" --store \"$STORE\" rootfs " IMAGE_REF);
  assert_clean_failure (&fx, &out);
  cr_assert_eq (out.status, EXIT_LIMIT, "%s", out.err);
  cr_assert (strstr (out.err, "more than 200 entries"), "%s", out.err);
  cmd_out_free (&out);
}

Test (hostile, overlong_paths_and_components_are_rejected)
{
  expect_rejected ("l = layer()\nF(l, '/'.join(['d' * 100] * 50))\n", EXIT_LIMIT, "path of");
  fx_teardown (&fx);
  fx_setup (&fx);
  expect_rejected ("l = layer()\nF(l, 'c' * 300)\n", EXIT_LIMIT, "255 bytes");
}

Test (hostile, truncated_payload_is_rejected)
{
  expect_rejected ("l = layer()\nF(l, 'a', b'y' * 100000)\n"
                   "b = io.BytesIO()\n"
                   "with tarfile.open(fileobj=b, mode='w') as t:\n"
                   "    ti = tarfile.TarInfo('a'); ti.size = 100000\n"
                   "    t.addfile(ti, io.BytesIO(b'y' * 100000))\n"
                   "raw_layers[0] = b.getvalue()[:50000]\n",
                   EXIT_INVALID_IMAGE, NULL);
}

Test (hostile, overlong_symlink_target_is_rejected)
{
  expect_rejected ("l = layer()\nS(l, 'l', 'a' * 10000)\n", EXIT_LIMIT, "4095");
}

Test (hostile, device_numbers_beyond_32_bits_are_rejected)
{
  expect_rejected ("l = layer(tarfile.GNU_FORMAT)\nC(l, 'dev', 2**32, 1)\n", EXIT_INVALID_IMAGE,
                   "device number");
}

Test (hostile, sparse_and_unknown_entry_types_are_rejected)
{
  expect_rejected ("l = layer(tarfile.GNU_FORMAT)\nadd(l, 's', b'S', data=b'')\n",
                   EXIT_INVALID_IMAGE, NULL);
  fx_teardown (&fx);
  fx_setup (&fx);
  expect_rejected ("l = layer()\nadd(l, 'u', b'Z', data=b'zz')\n", EXIT_INVALID_IMAGE, NULL);
}

Test (hostile, a_file_used_as_a_directory_is_enotdir)
{
  expect_rejected ("l = layer()\nF(l, 'a'); F(l, 'a/b')\n", EXIT_INVALID_IMAGE, "not a directory");
}

Test (hostile, every_hostile_case_holds_with_the_userspace_walker, .timeout = 900)
{
  if (getenv ("NSBOX_RESOLVE_FALLBACK"))
    cr_skip_test ("already running with the userspace walker");
  char exe[4096];
  ssize_t n = readlink ("/proc/self/exe", exe, sizeof exe - 1);
  cr_assert (n > 0);
  exe[n] = '\0';
  struct cmd_out out;
  sh (&fx, &out,
      "unset BXFI_MAP; NSBOX_RESOLVE_FALLBACK=1 NSBOX_IMAGE_BIN=\"$IMG\" '%s' --jobs 1 --filter "
      "'hostile/*' 2>&1",
      exe);
  cr_assert (strstr (out.out, "| Failing: 0 | Crashing: 0"), "exit %d:\n%s", out.status, out.out);
  cr_assert_eq (out.status, 0);
  cmd_out_free (&out);
}
