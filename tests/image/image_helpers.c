/* Helpers for the image tests; see image_helpers.h. */
#include "image_helpers.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

const char *
image_bin (void)
{
  static char path[4096];
  if (!path[0])
    {
      const char *env = getenv ("NSBOX_IMAGE_BIN");
      const char *bin = env && *env ? env : "build/nsbox-image";
      if (!realpath (bin, path))
        cr_assert_fail ("nsbox-image binary '%s' not found (set NSBOX_IMAGE_BIN)", bin);
    }
  return path;
}

static char *
read_fd_all (int fd)
{
  size_t cap = 4096, len = 0;
  char *buf = malloc (cap);
  cr_assert (buf);
  for (;;)
    {
      if (len + 1 >= cap)
        {
          cap *= 2;
          buf = realloc (buf, cap);
          cr_assert (buf);
        }
      ssize_t n = read (fd, buf + len, cap - len - 1);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      len += (size_t)n;
    }
  buf[len] = '\0';
  return buf;
}

static void
vsh (struct fx *fx, struct cmd_out *out, const char *fmt, va_list ap)
{
  char *script = NULL;
  cr_assert (vasprintf (&script, fmt, ap) >= 0);
  char errpath[] = "/tmp/nsbox-image-test-err.XXXXXX";
  int errfd = mkstemp (errpath);
  cr_assert (errfd >= 0);
  unlink (errpath);
  const char *bin = image_bin ();
  int pipefd[2];
  cr_assert (pipe2 (pipefd, O_CLOEXEC) == 0);
  pid_t pid = fork ();
  cr_assert (pid >= 0);
  if (pid == 0)
    {
      dup2 (pipefd[1], 1);
      dup2 (errfd, 2);
      if (chdir (fx->dir) < 0)
        _exit (127);
      setenv ("T", fx->dir, 1);
      setenv ("STORE", fx->store, 1);
      setenv ("IMG", bin, 1);
      execl ("/bin/sh", "sh", "-ec", script, (char *)NULL);
      _exit (127);
    }
  close (pipefd[1]);
  out->out = read_fd_all (pipefd[0]);
  close (pipefd[0]);
  int status;
  while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
    ;
  lseek (errfd, 0, SEEK_SET);
  out->err = read_fd_all (errfd);
  close (errfd);
  out->status = WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
  free (script);
}

void
sh (struct fx *fx, struct cmd_out *out, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  vsh (fx, out, fmt, ap);
  va_end (ap);
}

char *
sh_ok (struct fx *fx, const char *fmt, ...)
{
  struct cmd_out out;
  va_list ap;
  va_start (ap, fmt);
  vsh (fx, &out, fmt, ap);
  va_end (ap);
  cr_assert_eq (out.status, 0, "command failed (exit %d): %s\nstderr:\n%s", out.status, fmt,
                out.err);
  size_t n = strlen (out.out);
  if (n && out.out[n - 1] == '\n')
    out.out[n - 1] = '\0';
  free (out.err);
  return out.out;
}

void
cmd_out_free (struct cmd_out *out)
{
  free (out->out);
  free (out->err);
  out->out = out->err = NULL;
}

static char *
snapshot (struct fx *fx)
{
  return sh_ok (fx, "cd \"$T\" && find victim -printf '%%p %%y %%m %%s %%l %%T@\\n' | sort"
                    " && find victim -type f -exec sha256sum {} + | sort");
}

void
fx_setup (struct fx *fx)
{
  char tmpl[] = "/tmp/nsbox-image-test.XXXXXX";
  cr_assert (mkdtemp (tmpl));
  fx->dir = strdup (tmpl);
  cr_assert (asprintf (&fx->store, "%s/store", tmpl) >= 0);
  cr_assert (asprintf (&fx->victim, "%s/victim", tmpl) >= 0);
  char *ok = sh_ok (fx, "mkdir -p victim/sub && echo hello > victim/hello && chmod 0640 "
                        "victim/hello && echo passwd > victim/passwd && touch -d @1600000000 "
                        "victim/hello victim/passwd victim/sub victim");
  free (ok);
  fx->victim_before = snapshot (fx);
}

void
fx_teardown (struct fx *fx)
{
  if (!fx->dir)
    return;
  char *cmd = NULL;
  if (asprintf (&cmd, "chmod -R u+rwx '%s' 2>/dev/null; rm -rf '%s'", fx->dir, fx->dir) >= 0)
    {
      if (system (cmd) != 0)
        fprintf (stderr, "could not remove %s\n", fx->dir);
      free (cmd);
    }
  free (fx->dir);
  free (fx->store);
  free (fx->victim);
  free (fx->victim_before);
  fx->dir = NULL;
}

static const char prelude[]
    = "import io, os, sys, tarfile\n"
      "layers = []\n"
      "def layer(fmt=tarfile.PAX_FORMAT):\n"
      "    l = {'entries': [], 'fmt': fmt}\n"
      "    layers.append(l)\n"
      "    return l\n"
      "def add(l, name, type=tarfile.REGTYPE, data=b'', mode=0o644, linkname='', uid=0, gid=0,\n"
      "        mtime=1700000000, pax=None, major=0, minor=0, size=None):\n"
      "    ti = tarfile.TarInfo(name)\n"
      "    ti.type = type; ti.mode = mode; ti.linkname = linkname; ti.uid = uid; ti.gid = gid\n"
      "    ti.mtime = mtime; ti.devmajor = major; ti.devminor = minor\n"
      "    if pax: ti.pax_headers = pax\n"
      "    if isinstance(data, str): data = data.encode()\n"
      "    ti.size = len(data) if size is None else size\n"
      "    l['entries'].append((ti, data))\n"
      "def F(l, name, data=b'x', mode=0o644, **kw): add(l, name, data=data, mode=mode, **kw)\n"
      "def D(l, name, mode=0o755, **kw): add(l, name, tarfile.DIRTYPE, mode=mode, **kw)\n"
      "def S(l, name, target, **kw): add(l, name, tarfile.SYMTYPE, linkname=target, mode=0o777, "
      "**kw)\n"
      "def H(l, name, target, **kw): add(l, name, tarfile.LNKTYPE, linkname=target, **kw)\n"
      "def P(l, name, **kw): add(l, name, tarfile.FIFOTYPE, **kw)\n"
      "def C(l, name, major=1, minor=3, **kw): add(l, name, tarfile.CHRTYPE, major=major, "
      "minor=minor, **kw)\n"
      "raw_layers = {}\n";

static const char epilogue[]
    = "\nfor i, l in enumerate(layers):\n"
      "    if i in raw_layers:\n"
      "        open(f'layer{i}.tar', 'wb').write(raw_layers[i])\n"
      "        continue\n"
      "    with tarfile.open(f'layer{i}.tar', 'w', format=l['fmt']) as t:\n"
      "        for ti, data in l['entries']:\n"
      "            if ti.type == tarfile.REGTYPE:\n"
      "                t.addfile(ti, io.BytesIO(data))\n"
      "            else:\n"
      "                t.addfile(ti)\n"
      "print(len(layers))\n";

void
build_image (struct fx *fx, const char *python_body)
{
  char *path = NULL;
  cr_assert (asprintf (&path, "%s/mk.py", fx->dir) >= 0);
  FILE *f = fopen (path, "w");
  cr_assert (f);
  fputs (prelude, f);
  fputs (python_body, f);
  fputs (epilogue, f);
  fclose (f);
  free (path);
  char *n = sh_ok (fx, "/usr/bin/python3 mk.py");
  int layers = atoi (n);
  free (n);
  free (sh_ok (fx, "umoci init --layout oci && umoci new --image oci:t"));
  for (int i = 0; i < layers; i++)
    free (sh_ok (fx, "umoci raw add-layer --image oci:t layer%d.tar", i));
}

void
import_and_unpack (struct fx *fx, struct cmd_out *out)
{
  free (sh_ok (fx, "\"$IMG\" --store \"$STORE\" import oci:\"$T/oci\":t"));
  sh (fx, out, "\"$IMG\" --store \"$STORE\" rootfs " IMAGE_REF);
  size_t n = strlen (out->out);
  if (n && out->out[n - 1] == '\n')
    out->out[n - 1] = '\0';
}

char *
tree_hash (const char *path)
{
  struct fx fx = { .dir = (char *)"/", .store = (char *)"", .victim = (char *)"" };
  char *q = NULL;
  cr_assert (asprintf (&q,
                       "/usr/bin/python3 - '%s' <<'PY'\n"
                       "import hashlib, os, stat, sys\n"
                       "root = sys.argv[1]; h = hashlib.sha256()\n"
                       "for d, dirs, files in os.walk(root):\n"
                       "    dirs.sort()\n"
                       "    for n in sorted(dirs + files):\n"
                       "        p = os.path.join(d, n); st = os.lstat(p)\n"
                       "        h.update(f'{os.path.relpath(p, root)} {stat.S_IFMT(st.st_mode)} "
                       "{stat.S_IMODE(st.st_mode):o} {st.st_mtime_ns}'.encode())\n"
                       "        if stat.S_ISLNK(st.st_mode): h.update(os.readlink(p).encode())\n"
                       "        elif stat.S_ISREG(st.st_mode): h.update(open(p, 'rb').read())\n"
                       "print(h.hexdigest())\n"
                       "PY",
                       path)
             >= 0);
  char *out = sh_ok (&fx, "%s", q);
  free (q);
  return out;
}

size_t
count_entries (const char *dir)
{
  DIR *d = opendir (dir);
  if (!d)
    return 0;
  size_t n = 0;
  struct dirent *de;
  while ((de = readdir (d)))
    if (strcmp (de->d_name, ".") != 0 && strcmp (de->d_name, "..") != 0)
      n++;
  closedir (d);
  return n;
}

bool
path_exists (const char *path)
{
  struct stat st;
  return lstat (path, &st) == 0;
}

char *
read_text (const char *path)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return NULL;
  char *s = read_fd_all (fd);
  close (fd);
  return s;
}

void
assert_victim_unchanged (struct fx *fx)
{
  char *now = snapshot (fx);
  cr_assert_str_eq (now, fx->victim_before, "the victim directory beside the store changed");
  free (now);
}

void
assert_clean_failure (struct fx *fx, struct cmd_out *out)
{
  cr_assert_neq (out->status, 0, "expected a failure; stdout: %s", out->out);
  cr_assert (strstr (out->err, "nsbox-image: "), "no error message: %s", out->err);
  assert_victim_unchanged (fx);
  char *p = NULL;
  cr_assert (asprintf (&p, "%s/rootfs", fx->store) >= 0);
  cr_assert_eq (count_entries (p), 0, "a tree was left in rootfs/");
  free (p);
  cr_assert (asprintf (&p, "%s/tmp", fx->store) >= 0);
  cr_assert_eq (count_entries (p), 0, "a work directory was left in tmp/");
  free (p);
}
