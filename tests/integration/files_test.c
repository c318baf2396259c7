/* Files in and out, by effect: an input is readable and not writable in
 * the sandbox and its host file is unchanged; the files a program leaves
 * in /tmp/out appear in the output directory with the bytes it wrote (their
 * SHA-256 computed here, not taken from the result), and nothing else does:
 * no link is followed out of the tmpfs, nothing is written beside the
 * output directory, an existing file is never replaced, and the caps hold
 * against a flood of files. Under runsc both are refused with one clear
 * line. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define MIB (1u << 20)

static const char *const runsc_refuses_inputs[]
    = { "inputs are not available with runtime runsc", NULL };
static const char *const runsc_refuses_output[]
    = { "output-dir is not available with runtime runsc", NULL };

/* A fresh directory the sandbox's user may use (the test user's in the
 * unprivileged passes), and `name` in it. */
static char *
path_in (const char *dir, const char *name)
{
  char *p = NULL;
  cr_assert (asprintf (&p, "%s/%s", dir, name) > 0);
  return p;
}

static void
write_file (const char *path, const char *data, size_t len)
{
  int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  cr_assert (fd >= 0, "create %s: %s", path, strerror (errno));
  cr_assert (write (fd, data, len) == (ssize_t)len, "write %s", path);
  close (fd);
}

/* The names in dir, sorted, joined by ' '. */
static char *
list_dir (const char *dir)
{
  struct dirent **entries = NULL;
  int n = scandir (dir, &entries, NULL, alphasort);
  cr_assert (n >= 0, "scandir %s: %s", dir, strerror (errno));
  char *text = NULL;
  size_t len = 0;
  FILE *m = open_memstream (&text, &len);
  bool first = true;
  for (int i = 0; i < n; i++)
    {
      if (strcmp (entries[i]->d_name, ".") && strcmp (entries[i]->d_name, ".."))
        {
          fprintf (m, "%s%s", first ? "" : " ", entries[i]->d_name);
          first = false;
        }
      free (entries[i]);
    }
  free (entries);
  fclose (m);
  return text;
}

static size_t
count_dir (const char *dir)
{
  DIR *d = opendir (dir);
  cr_assert_not_null (d, "opendir %s: %s", dir, strerror (errno));
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir (d)))
    n += strcmp (e->d_name, ".") && strcmp (e->d_name, "..");
  closedir (d);
  return n;
}

/* base/out, a fresh output directory of the sandbox's user; *base is
 * removed with everything in it by remove_tree. */
static char *
output_dir (char **base)
{
  *base = user_dir ();
  char *dir = path_in (*base, "out");
  cr_assert (mkdir (dir, 0755) == 0);
  if (harness_test_user ())
    cr_assert (chown (dir, sandbox_host_uid (), sandbox_host_gid ()) == 0);
  return dir;
}

/* Runs `code`, which prints "done", with --output-dir dir: false under
 * runsc (after checking it refused), else true once it printed. */
static bool
run_collecting (enum run_mode mode, const char *code, const char *dir, struct run_out *out)
{
  const char *const args[] = { "--output-dir", dir, NULL };
  run_mode (mode, code, args, out);
  if (harness_is_runsc ())
    {
      assert_refused (out, runsc_refuses_output);
      return false;
    }
  assert_prints (out, "done\n");
  return true;
}

static void
output_dir_free (char *base, char *dir)
{
  remove_tree (base);
  free (dir);
  free (base);
}

/* Nothing but the output directory appeared in its parent. */
static void
assert_nothing_beside (const char *base)
{
  char *beside = list_dir (base);
  cr_assert (strcmp (beside, "out") == 0, "something was written beside the output dir: %s",
             beside);
  free (beside);
}

/* files[i] of the result, or NULL. */
static json_t *
result_file (struct run_out *out, const char *name)
{
  json_t *files = json_object_get (run_json (out), "files");
  RUN_ASSERT (out, json_is_array (files), "expected a files array");
  size_t i;
  json_t *f;
  json_array_foreach (files, i, f)
  {
    if (strcmp (json_string_value (json_object_get (f, "name")), name) == 0)
      return f;
  }
  return NULL;
}

/* The reason files_refused gives for `name`, or NULL. */
static const char *
refusal (struct run_out *out, const char *name)
{
  json_t *refused = json_object_get (run_json (out), "files_refused");
  RUN_ASSERT (out, json_is_array (refused), "expected a files_refused array");
  size_t i;
  json_t *f;
  json_array_foreach (refused, i, f)
  {
    if (strcmp (json_string_value (json_object_get (f, "name")), name) == 0)
      return json_string_value (json_object_get (f, "reason"));
  }
  return NULL;
}

/* A file in the output directory holds exactly `data`, and the result
 * lists it with that size and the SHA-256 of the bytes found on disk. */
static void
assert_collected (struct run_out *out, const char *dir, const char *name, const char *data,
                  size_t len)
{
  char *path = path_in (dir, name);
  size_t got = 0;
  char *bytes = read_file (path, &got);
  RUN_ASSERT (out, bytes && got == len && memcmp (bytes, data, len) == 0,
              "%s does not hold the %zu bytes the program wrote (%zu there)", path, len, got);
  struct stat st;
  RUN_ASSERT (out, lstat (path, &st) == 0 && S_ISREG (st.st_mode) && (st.st_mode & 07777) == 0644,
              "%s: expected a regular file of mode 0644", path);
  char hex[65];
  sha256_hex (bytes, got, hex);
  json_t *f = result_file (out, name);
  RUN_ASSERT (out, f, "the result does not list %s", name);
  RUN_ASSERT (out, json_integer_value (json_object_get (f, "size")) == (json_int_t)len,
              "wrong size for %s", name);
  RUN_ASSERT (out, strcmp (json_string_value (json_object_get (f, "sha256")), hex) == 0,
              "wrong sha256 for %s: expected %s", name, hex);
  free (bytes);
  free (path);
}

static void
assert_refusal (struct run_out *out, const char *name, const char *reason)
{
  const char *why = refusal (out, name);
  RUN_ASSERT (out, why && strstr (why, reason), "expected %s refused as '%s', got '%s'", name,
              reason, why ? why : "(not listed)");
}

/* ---- inputs ---- */

MODE_TEST (files, an_input_is_readable_read_only_and_its_host_file_unchanged, .timeout = 60)
{
  char *dir = user_dir ();
  char *host = path_in (dir, "table.csv");
  const char content[] = "a,b\n1,2\n";
  write_file (host, content, sizeof content - 1);
  struct stat before;
  cr_assert (stat (host, &before) == 0);
  char spec[256];
  snprintf (spec, sizeof spec, "%s:data.csv", host);
  const char *code
      = ("import os, errno\n"
         "print(open('/mnt/in/data.csv').read(), end='')\n"
         "for what, f in [('write', lambda: open('/mnt/in/data.csv', 'a')),\n"
         "                ('create', lambda: open('/mnt/in/new', 'w')),\n"
         "                ('chmod', lambda: os.chmod('/mnt/in/data.csv', 0o666)),\n"
         "                ('unlink', lambda: os.unlink('/mnt/in/data.csv')),\n"
         "                ('rename', lambda: os.rename('/mnt/in/data.csv', '/mnt/in/x'))]:\n"
         "    try:\n"
         "        f()\n"
         "        print(what, 'succeeded')\n"
         "    except OSError as e:\n"
         "        print(what, errno.errorcode[e.errno])\n"
         "print(sorted(os.listdir('/mnt/in')))\n"
         "print('host path seen' if '/nsbox-test-' in open('/proc/self/mountinfo').read() "
         "else 'no host path')\n");
  const char *const args[] = { "--inputs", spec, NULL };
  struct run_out out;
  run_mode (*mode, code, args, &out);
  if (harness_is_runsc ())
    assert_refused (&out, runsc_refuses_inputs);
  else
    assert_prints (&out, "a,b\n1,2\nwrite EROFS\ncreate EROFS\nchmod EROFS\nunlink EROFS\n"
                         "rename EROFS\n['data.csv']\nno host path\n");
  struct stat after;
  size_t len = 0;
  char *now = read_file (host, &len);
  cr_assert (now && len == sizeof content - 1 && memcmp (now, content, len) == 0,
             "the host file changed");
  cr_assert (stat (host, &after) == 0 && after.st_mtim.tv_sec == before.st_mtim.tv_sec
                 && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec
                 && after.st_mode == before.st_mode,
             "the host file was touched");
  free (now);
  remove_tree (dir);
  free (host);
  free (dir);
  run_out_free (&out);
}

Test (files, bad_inputs_are_refused_before_any_sandbox, .timeout = 60)
{
  char *dir = user_dir ();
  char *fifo = path_in (dir, "fifo"), *big = path_in (dir, "big"), *ok = path_in (dir, "ok");
  cr_assert (mkfifo (fifo, 0644) == 0);
  write_file (ok, "x", 1);
  int fd = open (big, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  cr_assert (fd >= 0 && ftruncate (fd, 64 * (off_t)MIB + 1) == 0);
  close (fd);
  char *missing = path_in (dir, "missing"), *ok_bad = NULL, *ok_dup = NULL;
  cr_assert (asprintf (&ok_bad, "%s:../escape", ok) > 0 && asprintf (&ok_dup, "%s:ok", ok) > 0);
  struct
  {
    const char *spec, *second, *needle;
    bool named; /* wrong as written: refused before the runtime is looked at */
  } cases[] = {
    { missing, NULL, "No such file or directory", false },
    { dir, NULL, "is not a regular file", false },
    { fifo, NULL, "is not a regular file", false },
    { big, NULL, "64 MiB", false },
    { ok_bad, NULL, "is not allowed in /mnt/in", true },
    { ok, ok_dup, "two inputs are named 'ok'", true },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      const char *const args[]
          = { "--input", cases[i].spec, cases[i].second ? "--input" : NULL, cases[i].second, NULL };
      struct run_out out;
      run_cli ("print(1)\n", 9, args, &out);
      const char *needles[] = { cases[i].needle, NULL };
      /* runsc refuses every input before opening it. */
      assert_refused (&out,
                      harness_is_runsc () && !cases[i].named ? runsc_refuses_inputs : needles);
      RUN_ASSERT (&out, out.seconds < harness_scaled (5), "a refusal must not wait (a FIFO)");
      run_out_free (&out);
    }
  remove_tree (dir);
  free (fifo);
  free (big);
  free (ok);
  free (missing);
  free (ok_bad);
  free (ok_dup);
  free (dir);
}

/* ---- outputs ---- */

MODE_TEST (files, files_left_in_tmp_out_are_collected_with_their_digests, .timeout = 60)
{
  char *base = NULL, *dir = output_dir (&base);
  const char *code = "import os\n"
                     "open('/tmp/out/hello.txt', 'w').write('hello from the sandbox\\n')\n"
                     "open('/tmp/out/bytes.bin', 'wb').write(bytes(range(256)) * 3)\n"
                     "open('/tmp/out/empty', 'wb').close()\n"
                     "open('/tmp/elsewhere.txt', 'w').write('not collected')\n"
                     "print('done')\n";
  struct run_out out;
  if (run_collecting (*mode, code, dir, &out))
    {
      char bin[768];
      for (int i = 0; i < 768; i++)
        bin[i] = (char)(i % 256);
      assert_collected (&out, dir, "hello.txt", "hello from the sandbox\n", 23);
      assert_collected (&out, dir, "bytes.bin", bin, sizeof bin);
      assert_collected (&out, dir, "empty", "", 0);
      char *names = list_dir (dir);
      RUN_ASSERT (&out, strcmp (names, "bytes.bin empty hello.txt") == 0,
                  "the output directory holds: %s", names);
      free (names);
      RUN_ASSERT (&out, json_array_size (json_object_get (run_json (&out), "files_refused")) == 0,
                  "nothing should be refused");
    }
  assert_nothing_beside (base);
  output_dir_free (base, dir);
  run_out_free (&out);
}

/* Links and special files in /tmp/out: none is followed or read, and
 * nothing is written anywhere but the output directory. */
MODE_TEST (files, links_and_special_files_are_refused_and_never_followed, .timeout = 60)
{
  char *base = NULL, *dir = output_dir (&base);
  const char *code = "import os, socket\n"
                     "os.chdir('/tmp/out')\n"
                     "open('ok.txt', 'w').write('fine')\n"
                     "os.symlink('/etc/shadow', 'shadow')\n"
                     "os.symlink('/proc/1/root/etc/passwd', 'proc_root')\n"
                     "os.symlink('/proc/self/root', 'self_root')\n"
                     "os.symlink('../../../../etc/hostname', 'dotdot')\n"
                     "open('/tmp/target', 'w').write('linked')\n"
                     "os.link('/tmp/target', 'hard')\n"
                     "os.mkfifo('fifo')\n"
                     "s = socket.socket(socket.AF_UNIX); s.bind('/tmp/out/sock')\n"
                     "os.mkdir('sub'); open('sub/inner.txt', 'w').write('in a subdirectory')\n"
                     "open('bad\\nname', 'w').write('x')\n"
                     "open('colon:name', 'w').write('x')\n"
                     "print('done')\n";
  struct run_out out;
  if (run_collecting (*mode, code, dir, &out))
    {
      assert_collected (&out, dir, "ok.txt", "fine", 4);
      char *names = list_dir (dir);
      RUN_ASSERT (&out, strcmp (names, "ok.txt") == 0, "the output directory holds: %s", names);
      free (names);
      assert_refusal (&out, "shadow", "a symbolic link");
      assert_refusal (&out, "proc_root", "a symbolic link");
      assert_refusal (&out, "self_root", "a symbolic link");
      assert_refusal (&out, "dotdot", "a symbolic link");
      assert_refusal (&out, "hard", "a hard link");
      assert_refusal (&out, "fifo", "a FIFO");
      assert_refusal (&out, "sock", "a socket");
      assert_refusal (&out, "sub", "a directory");
      assert_refusal (&out, "bad\nname", "control character");
      assert_refusal (&out, "colon:name", "name not allowed");
      RUN_ASSERT (&out, json_array_size (json_object_get (run_json (&out), "files")) == 1,
                  "expected ok.txt alone collected");
    }
  assert_nothing_beside (base);
  output_dir_free (base, dir);
  run_out_free (&out);
}

/* /tmp/out replaced by a link out of the tmpfs: nothing is collected. */
MODE_TEST (files, tmp_out_as_a_link_collects_nothing, .timeout = 60)
{
  static const char *const targets[] = { "/etc", "/proc/1/root/etc", "/proc/self/cwd" };
  for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++)
    {
      char *base = NULL, *dir = output_dir (&base);
      char code[256];
      snprintf (code, sizeof code,
                "import os\nos.rmdir('/tmp/out')\nos.symlink('%s', '/tmp/out')\nprint('done')\n",
                targets[t]);
      struct run_out out;
      if (run_collecting (*mode, code, dir, &out))
        {
          RUN_ASSERT (&out, count_dir (dir) == 0, "files were collected through a link to %s",
                      targets[t]);
          assert_refusal (&out, "/tmp/out", "a symbolic link");
        }
      output_dir_free (base, dir);
      run_out_free (&out);
    }
}

MODE_TEST (files, an_existing_file_in_the_output_dir_is_never_replaced, .timeout = 60)
{
  char *base = NULL, *dir = output_dir (&base);
  char *kept = path_in (dir, "report.txt");
  write_file (kept, "the caller's own", 16);
  const char *code = "open('/tmp/out/report.txt', 'w').write('from the sandbox')\nprint('done')\n";
  struct run_out out;
  if (run_collecting (*mode, code, dir, &out))
    {
      assert_refusal (&out, "report.txt", "already exists in output-dir");
    }
  size_t len = 0;
  char *now = read_file (kept, &len);
  cr_assert (now && len == 16 && memcmp (now, "the caller's own", 16) == 0,
             "the existing file was replaced");
  free (now);
  free (kept);
  output_dir_free (base, dir);
  run_out_free (&out);
}

/* 100,000 tiny files: at most 256 collected, only 4096 names read, and the
 * run ends; a 65 MiB file is past the byte cap. */
MODE_TEST (files, floods_of_files_and_bytes_are_capped, .timeout = 240)
{
  char *base = NULL, *dir = output_dir (&base);
  const char *code = "import os\n"
                     "for i in range(100000):\n"
                     "    with open('/tmp/out/f%06d' % i, 'wb') as f:\n"
                     "        f.write(b'%d' % i)\n"
                     "with open('/tmp/out/big', 'wb') as f:\n"
                     "    f.truncate(65 << 20)\n"
                     "print('done')\n";
  char timeout[32];
  harness_scaled_duration (120, timeout, sizeof timeout);
  const char *const args[]
      = { "--output-dir", dir, "--tmp-size", "512m", "--memory", "1g", "--timeout", timeout, NULL };
  struct run_out out;
  run_mode (*mode, code, args, &out);
  if (harness_is_runsc ())
    assert_refused (&out, runsc_refuses_output);
  else
    {
      assert_prints (&out, "done\n");
      size_t n = count_dir (dir);
      RUN_ASSERT (&out, n == 256, "expected the 256 first files, found %zu", n);
      RUN_ASSERT (&out, json_array_size (json_object_get (run_json (&out), "files")) == 256,
                  "expected 256 files listed");
      /* Which 4096 names a directory read meets first is the file
       * system's order: each collected file holds the number in its name. */
      json_t *first = json_array_get (json_object_get (run_json (&out), "files"), 0);
      const char *name = json_string_value (json_object_get (first, "name"));
      char *path = path_in (dir, name);
      size_t len = 0;
      char *bytes = read_file (path, &len);
      char expected[16];
      snprintf (expected, sizeof expected, "%ld", strtol (name + 1, NULL, 10));
      RUN_ASSERT (&out, bytes && len == strlen (expected) && memcmp (bytes, expected, len) == 0,
                  "%s holds the wrong bytes", name);
      free (bytes);
      free (path);
      json_t *refused = json_object_get (run_json (&out), "files_refused");
      RUN_ASSERT (&out, json_array_size (refused) <= 66, "the refusals listed must be capped");
      assert_refusal (&out, "/tmp/out: not examined", "not examined");
      assert_refusal (&out, "/tmp/out: more refused", "not listed");
      char *big = path_in (dir, "big");
      RUN_ASSERT (&out, access (big, F_OK) != 0, "the 65 MiB file was collected");
      const char *why = refusal (&out, "big");
      RUN_ASSERT (&out, !why || strstr (why, "too large"), "big refused as '%s'", why);
      free (big);
    }
  run_out_free (&out);
  /* The byte cap alone: 64 MiB in all. */
  const char *big_code = "with open('/tmp/out/big', 'wb') as f:\n"
                         "    f.truncate((64 << 20) + 1)\n"
                         "open('/tmp/out/small', 'w').write('s')\n"
                         "print('done')\n";
  run_mode (*mode, big_code, args, &out);
  if (harness_is_runsc ())
    assert_refused (&out, runsc_refuses_output);
  else
    {
      assert_prints (&out, "done\n");
      assert_refusal (&out, "big", "too large");
      assert_collected (&out, dir, "small", "s", 1);
      char *names = list_dir (dir);
      RUN_ASSERT (&out, !strstr (names, "big"), "the file past the cap was collected");
      free (names);
    }
  output_dir_free (base, dir);
  run_out_free (&out);
}

/* A process still writing to /tmp/out when the program ends is gone before
 * collection: what is collected is complete and matches its digest. */
MODE_TEST (files, a_file_still_growing_at_the_end_is_collected_whole, .timeout = 60)
{
  char *base = NULL, *dir = output_dir (&base);
  const char *code = "import os, time\n"
                     "if os.fork() == 0:\n"
                     "    os.setsid()\n"
                     "    f = open('/tmp/out/grow.log', 'wb', buffering=0)\n"
                     "    while True:\n"
                     "        f.write(b'x' * 4096)\n"
                     "time.sleep(0.3)\n"
                     "print('done')\n";
  struct run_out out;
  if (run_collecting (*mode, code, dir, &out))
    {
      char *path = path_in (dir, "grow.log");
      size_t len = 0;
      char *bytes = read_file (path, &len);
      RUN_ASSERT (&out, bytes && len > 0 && len % 4096 == 0, "grow.log: %zu bytes", len);
      json_t *f = result_file (&out, "grow.log");
      char hex[65];
      sha256_hex (bytes, len, hex);
      RUN_ASSERT (&out,
                  f && json_integer_value (json_object_get (f, "size")) == (json_int_t)len
                      && strcmp (json_string_value (json_object_get (f, "sha256")), hex) == 0,
                  "the result does not describe the %zu bytes collected", len);
      struct stat st;
      sleep_seconds (0.2);
      RUN_ASSERT (&out, stat (path, &st) == 0 && (size_t)st.st_size == len,
                  "the collected file still grows");
      free (bytes);
      free (path);
    }
  output_dir_free (base, dir);
  run_out_free (&out);
}

/* The mode bits of path, or -1. */
static int
mode_of (const char *path)
{
  struct stat st;
  return lstat (path, &st) == 0 && S_ISDIR (st.st_mode) ? (int)(st.st_mode & 07777) : -1;
}

Test (files, a_missing_output_dir_is_made_0700_with_its_parents, .timeout = 60)
{
  char *base = user_dir ();
  char *parent = path_in (base, "new"), *mid = path_in (parent, "a"), *dir = path_in (mid, "b");
  char *file = path_in (dir, "report.txt");
  const char *const args[] = { "--output-dir", dir, NULL };
  struct run_out out;
  static const char code[] = "open('/tmp/out/report.txt', 'w').write('made')\nprint('done')\n";
  run_cli (code, strlen (code), args, &out);
  if (harness_is_runsc ())
    {
      /* Refused before anything was made for it. */
      assert_refused (&out, runsc_refuses_output);
      cr_assert (access (parent, F_OK) != 0, "a refused run created %s", parent);
    }
  else
    {
      assert_prints (&out, "done\n");
      cr_assert (mode_of (parent) == 0700 && mode_of (mid) == 0700 && mode_of (dir) == 0700,
                 "expected three new directories of mode 0700, got %o %o %o", mode_of (parent),
                 mode_of (mid), mode_of (dir));
      size_t len = 0;
      char *bytes = read_file (file, &len);
      cr_assert (bytes && len == 4 && memcmp (bytes, "made", 4) == 0,
                 "the program's file did not arrive in the new output dir");
      free (bytes);
    }
  run_out_free (&out);
  remove_tree (base);
  free (file);
  free (dir);
  free (mid);
  free (parent);
  free (base);
}

Test (files, an_output_dir_that_is_a_file_or_a_symlink_is_refused_before_the_run, .timeout = 60)
{
  char *base = user_dir ();
  char *file = path_in (base, "file"), *real = path_in (base, "real");
  char *link = path_in (base, "link"), *under = path_in (file, "x");
  char *slashed = NULL;
  cr_assert (asprintf (&slashed, "%s/", link) > 0);
  write_file (file, "x", 1);
  cr_assert (mkdir (real, 0755) == 0 && symlink (real, link) == 0);
  if (harness_test_user ())
    cr_assert (lchown (real, sandbox_host_uid (), sandbox_host_gid ()) == 0
               && lchown (link, sandbox_host_uid (), sandbox_host_gid ()) == 0);
  /* The program would leave a file: none may appear anywhere. */
  static const char code[] = "open('/tmp/out/f', 'w').write('x')\nprint('ran')\n";
  const struct
  {
    const char *dir, *needle;
  } cases[] = {
    { file, "exists and is not a directory" },
    { link, "is a symlink" },
    { slashed, "is a symlink" },
    { under, "is not a directory" },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      const char *const args[] = { "--output-dir", cases[i].dir, NULL };
      struct run_out out;
      run_cli (code, strlen (code), args, &out);
      const char *native[] = { "output-dir", cases[i].needle, NULL };
      assert_refused (&out, harness_is_runsc () ? runsc_refuses_output : native);
      RUN_ASSERT (&out, !strstr (out.out, "ran"), "the program ran for output-dir %s",
                  cases[i].dir);
      run_out_free (&out);
    }
  cr_assert (count_dir (real) == 0, "a file appeared through the symlink");
  size_t len = 0;
  char *bytes = read_file (file, &len);
  cr_assert (bytes && len == 1, "the file named as output-dir changed");
  free (bytes);
  remove_tree (base);
  free (slashed);
  free (under);
  free (link);
  free (real);
  free (file);
  free (base);
}

/* ---- through the pool and the server ---- */

Test (files, a_pooled_run_collects_warm_and_takes_inputs_cold, .timeout = 120)
{
  char *base = NULL, *dir = output_dir (&base), *input = path_in (base, "in.txt");
  write_file (input, "pooled input", 12);
  struct pool_job job;
  pool_start (NULL, 1, &job);
  const char *const out_opts[] = { "output-dir", dir, NULL };
  struct run_out out;
  pool_run (&job, "open('/tmp/out/w.txt', 'w').write('warm')\nprint('ok')\n", out_opts, &out);
  if (harness_is_runsc ())
    assert_refused (&out, runsc_refuses_output);
  else
    {
      assert_prints (&out, "ok\n");
      RUN_ASSERT (&out, strcmp (run_json_str (&out, "served", NULL), "warm") == 0,
                  "expected a warm run");
      assert_collected (&out, dir, "w.txt", "warm", 4);
    }
  run_out_free (&out);
  char spec[256];
  snprintf (spec, sizeof spec, "%s:data.txt", input);
  const char *const in_opts[] = { "inputs", spec, NULL };
  pool_run (&job, "print(open('/mnt/in/data.txt').read())\n", in_opts, &out);
  if (harness_is_runsc ())
    assert_refused (&out, runsc_refuses_inputs);
  else
    {
      assert_prints (&out, "pooled input\n");
      RUN_ASSERT (&out, strcmp (run_json_str (&out, "served", NULL), "cold") == 0,
                  "a run with inputs is served cold");
    }
  run_out_free (&out);
  pool_stop (&job);
  free (input);
  output_dir_free (base, dir);
}

Test (files, a_server_profile_may_not_share_the_hosts_files, .timeout = 60)
{
  char *dir = user_dir ();
  char *input = path_in (dir, "secret");
  write_file (input, "s", 1);
  const char *const with_output[] = { "--output-dir", dir, NULL };
  const char *const with_input[] = { "--input", input, NULL };
  const char *const *cases[] = { with_output, with_input };
  static const char *const needles[] = { "sets output-dir", "sets inputs" };
  for (size_t i = 0; i < 2; i++)
    {
      struct run_job job;
      struct run_out out;
      run_nsbox_spawn ("serve", true, cases[i], false, &job);
      run_cli_wait (&job, "", 0, &out);
      RUN_ASSERT (&out, out.exit_status == 125 && strstr (out.err, needles[i]),
                  "a server whose profile %s must refuse to start", needles[i]);
      run_out_free (&out);
    }
  remove_tree (dir);
  free (input);
  free (dir);
}

Test (files, the_server_refuses_paths_from_its_clients, .timeout = 120)
{
  struct serve_job s;
  serve_start (NULL, &s);
  static const char *const bodies[] = {
    "{\"code\": \"print(1)\", \"inputs\": \"/etc/shadow:x\"}",
    "{\"code\": \"print(1)\", \"output-dir\": \"/etc\"}",
  };
  for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++)
    {
      char *answer = NULL;
      long status = serve_http (s.socket, "POST", "/v1/runs", bodies[i], strlen (bodies[i]), NULL,
                                &answer, NULL);
      cr_assert (status == 400 && answer && strstr (answer, "names files on the server's host"),
                 "expected 400 for %s, got %ld: %s", bodies[i], status, answer ? answer : "");
      free (answer);
    }
  char *log = NULL;
  serve_stop (&s, &log);
  free (log);
}

/* init passes its /tmp to the launcher with SCM_RIGHTS, which the kernel
 * refuses once the sending user has more fds in flight than the sender's
 * soft NOFILE limit; every sandbox of one host user shares that count. A
 * program holding thousands in flight must not stop another sandbox, whose
 * launcher has the common soft limit of 1024, from starting. */
Test (files, fds_held_in_flight_by_one_program_do_not_stop_another_sandbox, .timeout = 180)
{
  char timeout[32];
  harness_scaled_duration (60, timeout, sizeof timeout);
  char code[1024];
  snprintf (code, sizeof code,
            "import errno, os, resource, socket, time\n"
            "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
            "resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))\n"
            "a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
            "a.setblocking(False)\n"
            "fds = [os.open('/dev/null', os.O_RDONLY) for _ in range(200)]\n"
            "n, why = 0, ''\n"
            "try:\n"
            "    while n < 100000:\n"
            "        socket.send_fds(a, [b'x'], fds)\n"
            "        n += len(fds)\n"
            "except OSError as e:\n"
            "    why = errno.errorcode.get(e.errno, '')\n"
            "print(n, why, flush=True)\n"
            "time.sleep(%.1f)\n",
            harness_scaled (8));
  const char *const args[] = { "--timeout", timeout, NULL };
  struct run_job holder;
  run_cli_spawn (args, true, &holder);
  run_job_feed (&holder, code, strlen (code));
  sleep_seconds (harness_scaled (3));

  char *dir = user_dir ();
  char *result = path_in (dir, "b.out");
  pid_t pid = harness_fork_launcher ();
  if (pid == 0)
    {
      struct rlimit nofile;
      getrlimit (RLIMIT_NOFILE, &nofile);
      nofile.rlim_cur = 1024;
      setrlimit (RLIMIT_NOFILE, &nofile);
      int in = open ("/dev/null", O_RDONLY | O_CLOEXEC);
      int out = open (result, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      int code_pipe[2];
      if (in < 0 || out < 0 || pipe (code_pipe) < 0)
        _exit (126);
      if (write (code_pipe[1], "print('B ran')\n", 15) != 15)
        _exit (126);
      close (code_pipe[1]);
      dup2 (code_pipe[0], 0);
      dup2 (out, 1);
      dup2 (out, 2);
      execl (harness_nsbox_bin (), "nsbox", "run", "--rootfs", harness_rootfs (), "--runtime",
             harness_runtime (), (char *)NULL);
      _exit (127);
    }
  int status = 0;
  cr_assert (waitpid (pid, &status, 0) == pid);
  size_t len = 0;
  char *said = read_file (result, &len);
  struct run_out out;
  run_cli_wait (&holder, NULL, 0, &out);
  cr_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0 && said
                 && strcmp (said, "B ran\n") == 0,
             "a sandbox started while another held fds in flight failed (status %#x): %s", status,
             said ? said : "(no output)");
  /* The attack was real: far more in flight than B's launcher allows (or
   * already so many, from another program of the same user, that the
   * kernel refused the holder's first send). */
  if (!harness_is_runsc ())
    {
      const char *said_a = run_stdout (&out, &len);
      RUN_ASSERT (&out, atol (said_a) > 2048 || strstr (said_a, "ETOOMANYREFS"),
                  "the holder queued too few fds");
    }
  free (said);
  remove_tree (dir);
  free (result);
  free (dir);
  run_out_free (&out);
}
