/* Fuzz target: the layer applier (rootfs-tools/layer*.c) on an arbitrary
 * byte stream (plain tar, gzip or zstd: the stream is sniffed), applied as
 * a layer over a small lower tree, then finished like an unpack.
 *
 * Layout, under a fixed directory so that seeds can name it in absolute
 * symlinks (one fuzzer at a time holds its lock):
 *
 *   /dev/shm/nsbox-fuzz-layer/     (NSBOX_FUZZ_LAYER_DIR overrides)
 *     sentinel/                    never to be touched
 *     root/                        the tree, made and removed per input
 *
 * The lower tree offers ways out: lib -> usr/lib, abs -> /, up -> ../..,
 * sentinel-rel -> ../sentinel and sentinel-abs -> the sentinel's absolute
 * path. Each input is applied twice, with openat2 and with the userspace
 * walker. Checked after each: the base directory holds only root/ and
 * sentinel/, every sentinel entry keeps its type, mode, size, link count
 * and mtime (a hardlink to it or a write through it shows), and the tree
 * can be removed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "remove.h"
#include "layer.h"
#include "store-private.h"

#define DEFAULT_BASE "/dev/shm/nsbox-fuzz-layer"
#define SIGNATURE_MAX 4096

static char sentinel_path[PATH_MAX];
static int base_fd = -1;
static int blob_fd = -1;
static FILE *devnull;
static char sentinel_signature[SIGNATURE_MAX];

static void
ignore_log (void *data, const char *message)
{
  (void)data;
  FUZZ_CHECK (message && *message, "empty warning");
}

static int
compare_names (const void *a, const void *b)
{
  return strcmp (a, b);
}

/* Appends one line per entry at and below dir_fd/path, by name: path,
 * type and mode, size, links, mtime. */
static void
signature_of (int dir_fd, const char *path, char *out, size_t *used)
{
  struct stat st;
  FUZZ_CHECK (fstatat (dir_fd, path, &st, AT_SYMLINK_NOFOLLOW) == 0, "stat '%s': %s", path,
              strerror (errno));
  int n = snprintf (out + *used, SIGNATURE_MAX - *used, "%s %o %jd %ju %jd.%09ld\n", path,
                    (unsigned)st.st_mode, (intmax_t)st.st_size, (uintmax_t)st.st_nlink,
                    (intmax_t)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  FUZZ_CHECK (n > 0 && (size_t)n < SIGNATURE_MAX - *used, "signature too long");
  *used += (size_t)n;
  if (!S_ISDIR (st.st_mode))
    return;
  int fd = openat (dir_fd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  FUZZ_CHECK (fd >= 0, "open '%s': %s", path, strerror (errno));
  DIR *dir = fdopendir (fd);
  FUZZ_CHECK (dir, "fdopendir '%s'", path);
  char names[16][NAME_MAX + 1];
  size_t count = 0;
  struct dirent *de;
  while ((de = readdir (dir)))
    {
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      FUZZ_CHECK (count < 16, "'%s' gained entries (now '%s')", path, de->d_name);
      snprintf (names[count++], sizeof names[0], "%s", de->d_name);
    }
  closedir (dir);
  qsort (names, count, sizeof names[0], compare_names);
  for (size_t i = 0; i < count; i++)
    {
      char child[PATH_MAX];
      snprintf (child, sizeof child, "%s/%s", path, names[i]);
      signature_of (dir_fd, child, out, used);
    }
}

static void
write_file_at (int dir_fd, const char *name, const char *text)
{
  int fd = openat (dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  FUZZ_CHECK (fd >= 0, "create '%s': %s", name, strerror (errno));
  FUZZ_CHECK (write (fd, text, strlen (text)) == (ssize_t)strlen (text), "write '%s'", name);
  close (fd);
}

static void
setup (void)
{
  const char *base = getenv ("NSBOX_FUZZ_LAYER_DIR");
  if (!base || !*base)
    base = DEFAULT_BASE;
  snprintf (sentinel_path, sizeof sentinel_path, "%s/sentinel", base);
  if (mkdir (base, 0700) < 0)
    FUZZ_CHECK (errno == EEXIST, "mkdir '%s': %s", base, strerror (errno));
  base_fd = open (base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  FUZZ_CHECK (base_fd >= 0, "open '%s': %s", base, strerror (errno));
  FUZZ_CHECK (flock (base_fd, LOCK_EX | LOCK_NB) == 0,
              "'%s' is locked: another layer fuzzer runs (set NSBOX_FUZZ_LAYER_DIR)", base);
  /* Left over from a run that crashed. */
  FUZZ_CHECK (nsbox_remove_at (base_fd, "root") == 0, "remove the old tree");
  FUZZ_CHECK (nsbox_remove_at (base_fd, "sentinel") == 0, "remove the old sentinel");

  FUZZ_CHECK (mkdirat (base_fd, "sentinel", 0755) == 0, "mkdir sentinel: %s", strerror (errno));
  int sentinel_fd = openat (base_fd, "sentinel", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  FUZZ_CHECK (sentinel_fd >= 0, "open sentinel");
  write_file_at (sentinel_fd, "canary", "canary\n");
  FUZZ_CHECK (mkdirat (sentinel_fd, "sub", 0755) == 0, "mkdir sentinel/sub");
  write_file_at (sentinel_fd, "sub/deep", "deep\n");
  FUZZ_CHECK (symlinkat ("../canary", sentinel_fd, "sub/link") == 0, "symlink sentinel/sub/link");
  close (sentinel_fd);
  size_t used = 0;
  signature_of (base_fd, "sentinel", sentinel_signature, &used);

  blob_fd = memfd_create ("nsbox-fuzz-layer", MFD_CLOEXEC);
  FUZZ_CHECK (blob_fd >= 0, "memfd_create: %s", strerror (errno));
  devnull = fopen ("/dev/null", "we");
  FUZZ_CHECK (devnull, "open /dev/null");
}

/* The lower layer, written directly. */
static int
make_tree (void)
{
  FUZZ_CHECK (mkdirat (base_fd, "root", 0755) == 0, "mkdir root: %s", strerror (errno));
  int root_fd = openat (base_fd, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  FUZZ_CHECK (root_fd >= 0, "open root");
  FUZZ_CHECK (mkdirat (root_fd, "etc", 0755) == 0, "mkdir etc");
  write_file_at (root_fd, "etc/passwd", "root:x:0:0::/root:/bin/sh\n");
  FUZZ_CHECK (mkdirat (root_fd, "usr", 0755) == 0 && mkdirat (root_fd, "usr/lib", 0755) == 0,
              "mkdir usr/lib");
  write_file_at (root_fd, "usr/lib/libc.so", "\177ELF");
  const char *const links[][2] = {
    { "usr/lib", "lib" },
    { "/", "abs" },
    { "../..", "up" },
    { "../sentinel", "sentinel-rel" },
    { sentinel_path, "sentinel-abs" },
  };
  for (size_t i = 0; i < sizeof links / sizeof links[0]; i++)
    FUZZ_CHECK (symlinkat (links[i][0], root_fd, links[i][1]) == 0, "symlink '%s'", links[i][1]);
  return root_fd;
}

static void
check_outside (void)
{
  DIR *dir = fdopendir (dup (base_fd));
  FUZZ_CHECK (dir, "fdopendir base");
  rewinddir (dir);
  struct dirent *de;
  while ((de = readdir (dir)))
    FUZZ_CHECK (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0
                    || strcmp (de->d_name, "root") == 0 || strcmp (de->d_name, "sentinel") == 0,
                "'%s' appeared beside the tree", de->d_name);
  closedir (dir);
  char now[SIGNATURE_MAX];
  size_t used = 0;
  signature_of (base_fd, "sentinel", now, &used);
  FUZZ_CHECK (strcmp (now, sentinel_signature) == 0, "the sentinel changed:\n%s\nwas:\n%s", now,
              sentinel_signature);
}

static void
apply_once (bool fallback)
{
  struct nsbox_store store = {
    .root = (char *)"fuzz",
    .root_fd = -1,
    .lock_fd = -1,
    .limits = { .layer_bytes = 1u << 20,
                .image_bytes = 2u << 20,
                .layer_entries = 2048,
                .image_inodes = 4096,
                .layers = 16,
                .path_depth = 64,
                .min_free_percent = 0 },
    .force_resolve_fallback = fallback,
    .log = ignore_log,
  };
  int root_fd = make_tree ();
  struct rt_unpack *unpack = NULL;
  struct nsbox_error *err = NULL;
  FUZZ_CHECK (rt_unpack_new (&store, root_fd, &unpack, &err) == 0, "rt_unpack_new");
  FUZZ_CHECK (lseek (blob_fd, 0, SEEK_SET) == 0, "lseek");
  int r = rt_unpack_layer (unpack, blob_fd, "sha256:fuzz", "sha256:0", 1, &err);
  if (r >= 0)
    FUZZ_CHECK (!err, "rt_unpack_layer succeeded and filled the error");
  else
    FUZZ_CHECK (err && nsbox_error_errno (err) == -r,
                "rt_unpack_layer failed with %d but the "
                "error is missing or disagrees",
                r);
  nsbox_error_free (err);
  err = NULL;
  check_outside ();

  r = rt_unpack_finish (unpack, devnull, devnull, &err);
  if (r < 0)
    FUZZ_CHECK (err && nsbox_error_errno (err) == -r,
                "rt_unpack_finish failed with %d but the "
                "error is missing or disagrees",
                r);
  nsbox_error_free (err);
  rt_unpack_free (unpack);
  close (root_fd);
  check_outside ();
  FUZZ_CHECK (nsbox_remove_at (base_fd, "root") == 0, "remove the tree: %s", strerror (errno));
  check_outside ();
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  if (base_fd < 0)
    setup ();
  FUZZ_CHECK (ftruncate (blob_fd, 0) == 0, "ftruncate");
  FUZZ_CHECK (size == 0 || pwrite (blob_fd, data, size, 0) == (ssize_t)size, "pwrite");
  apply_once (false);
  apply_once (true);
  return 0;
}
