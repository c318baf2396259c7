/* nsbox-image: pull, import, list, remove and unpack images in the store.
 * The only place of rootfs-tools that prints and picks exit codes. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "pull.h"
#include "nsbox.h"
#include "store.h"
#include "util.h"

#define NSBOX_VERSION "0.1.0"

/* Exit codes per failure class; documented in usage() and nsbox-image.1. */
enum
{
  EXIT_OK = 0,
  EXIT_FAILURE_OTHER = 1,
  EXIT_USAGE = 2,
  EXIT_NOT_FOUND = 3,
  EXIT_UNAUTHORIZED = 4,
  EXIT_RATE_LIMITED = 5,
  EXIT_INVALID_IMAGE = 6,
  EXIT_NO_PLATFORM = 7,
  EXIT_DISK_FULL = 8,
  EXIT_NETWORK = 9,
  EXIT_BUSY = 10,
  EXIT_LIMIT = 11,
};

static const struct
{
  int errnum;
  int status;
} exit_classes[] = {
  { ENOENT, EXIT_NOT_FOUND },
  { EACCES, EXIT_UNAUTHORIZED },
  { EPERM, EXIT_UNAUTHORIZED },
  { EAGAIN, EXIT_RATE_LIMITED },
  { EBADMSG, EXIT_INVALID_IMAGE },
  { EPROTO, EXIT_INVALID_IMAGE },
  { EILSEQ, EXIT_INVALID_IMAGE },
  { ENOTDIR, EXIT_INVALID_IMAGE },
  { EPROTONOSUPPORT, EXIT_INVALID_IMAGE },
  { ENOEXEC, EXIT_NO_PLATFORM },
  { ENOSPC, EXIT_DISK_FULL },
  { EDQUOT, EXIT_DISK_FULL },
  { ENETUNREACH, EXIT_NETWORK },
  { ECONNREFUSED, EXIT_NETWORK },
  { ECONNRESET, EXIT_NETWORK },
  { ETIMEDOUT, EXIT_NETWORK },
  { EHOSTUNREACH, EXIT_NETWORK },
  { EBUSY, EXIT_BUSY },
  { EFBIG, EXIT_LIMIT },
  { E2BIG, EXIT_LIMIT },
  { ENAMETOOLONG, EXIT_LIMIT },
  { EINVAL, EXIT_USAGE },
};

static void
usage (FILE *out)
{
  fputs ("usage: nsbox-image [--store DIR] COMMAND [ARGS]\n\n"
         "commands:\n"
         "  pull [--platform OS/ARCH[/VARIANT]] [--insecure-registry HOST]... REF\n"
         "                      pull an image from its registry into the store\n"
         "  import SOURCE       import docker-archive:FILE[:REF], oci:DIR[:TAG] or\n"
         "                      oci-archive:FILE[:TAG]\n"
         "  ls                  list the images of the store\n"
         "  rm REF              forget an image (its data goes at the next gc)\n"
         "  gc                  remove unreferenced blobs and trees, stale downloads\n"
         "  rootfs REF          print the path of the image's unpacked rootfs\n"
         "  resolve [--pass-lock] [--pull missing|always|never] REF\n"
         "                      store root, rootfs and Env, NUL-separated (for nsbox run);\n"
         "                      --pass-lock: first the store's lock, over a unix socket\n\n"
         "The store: --store DIR, else $NSBOX_STORE, else /var/lib/nsbox for root,\n"
         "else ${XDG_CACHE_HOME:-~/.cache}/nsbox.\n\n"
         "Limits against unpack bombs (environment; whole numbers, anything else is a\n"
         "usage error):\n"
         "  NSBOX_MAX_LAYERS        layers per image (128)\n"
         "  NSBOX_MAX_IMAGE_INODES  inodes and links an image creates, implicit parent\n"
         "                          directories included (1000000)\n"
         "  NSBOX_MAX_IMAGE_BYTES   bytes per image: file data, xattrs, 4 KiB per other\n"
         "                          inode or link (16 GiB)\n"
         "  NSBOX_MAX_LAYER_BYTES   the same per layer (8 GiB)\n"
         "  NSBOX_MAX_LAYER_ENTRIES tar entries per layer (1000000)\n"
         "  NSBOX_MAX_PATH_DEPTH    components of a path (256)\n"
         "  NSBOX_MIN_FREE_PERCENT  share of the store's filesystem kept free (2)\n\n"
         "exit status: 0 ok; 1 other failure; 2 usage or invalid argument (a bad limit\n"
         "variable too); 3 image or reference not found; 4 unauthorized; 5 rate limited;\n"
         "6 invalid image or archive (digest mismatch, hostile entry); 7 no matching\n"
         "platform; 8 disk full (or the free-space reserve reached); 9 network failure;\n"
         "10 store busy; 11 a limit exceeded (size, entries, inodes, layers, path depth\n"
         "or name length).\n",
         out);
}

static int
exit_status (const struct nsbox_error *error)
{
  int code = nsbox_error_errno (error);
  for (size_t i = 0; i < ARRAY_SIZE (exit_classes); i++)
    if (exit_classes[i].errnum == code)
      return exit_classes[i].status;
  return EXIT_FAILURE_OTHER;
}

static int
report (struct nsbox_error *error)
{
  fprintf (stderr, "nsbox-image: %s\n", nsbox_error_message (error));
  int status = exit_status (error);
  nsbox_error_free (error);
  return status;
}

static int __attribute__ ((format (printf, 1, 2))) usage_error (const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  nsbox_vprint_message ("nsbox-image", fmt, ap);
  va_end (ap);
  fputs ("(nsbox-image --help for usage)\n", stderr);
  return EXIT_USAGE;
}

static void
log_to_stderr (void *data, const char *message)
{
  (void)data;
  fprintf (stderr, "nsbox-image: %s\n", message);
}

/* The pull's progress bar, on stderr when it is a terminal; redrawn at
 * most ten times a second. */
static void
draw_progress (void *data, const char *ref, uint64_t done, uint64_t total, bool final)
{
  double *last = data;
  double now = nsbox_now_seconds ();
  if (!final && now - *last < 0.1)
    return;
  *last = now;
  enum
  {
    WIDTH = 30
  };
  int filled = total ? (int)((double)done / (double)total * WIDTH) : WIDTH;
  char bar[WIDTH + 1];
  for (int i = 0; i < WIDTH; i++)
    bar[i] = i < filled ? '#' : '.';
  bar[WIDTH] = '\0';
  fprintf (stderr, "\r%s [%s] %6.1f/%.1f MB%s", ref, bar, (double)done / 1e6, (double)total / 1e6,
           final ? "\n" : "");
  fflush (stderr);
}

static double progress_last;

static struct nsbox_pull_options
pull_options (void)
{
  struct nsbox_pull_options options = { 0 };
  if (isatty (STDERR_FILENO))
    {
      options.progress = draw_progress;
      options.progress_data = &progress_last;
    }
  return options;
}

static int
cmd_pull (struct nsbox_store *store, int argc, char **argv)
{
  static const struct option opts[] = {
    { "platform", required_argument, NULL, 'p' },
    { "insecure-registry", required_argument, NULL, 'i' },
    { NULL, 0, NULL, 0 },
  };
  struct nsbox_pull_options options = pull_options ();
  cleanup_free const char **insecure = calloc ((size_t)argc + 1, sizeof *insecure);
  size_t n_insecure = 0;
  if (!insecure)
    return EXIT_FAILURE_OTHER;
  int c;
  optind = 1;
  while ((c = getopt_long (argc, argv, "+", opts, NULL)) != -1)
    switch (c)
      {
      case 'p':
        options.platform = optarg;
        break;
      case 'i':
        insecure[n_insecure++] = optarg;
        break;
      default:
        return EXIT_USAGE;
      }
  if (optind != argc - 1)
    return usage_error ("pull takes one image reference");
  options.insecure_registries = insecure;
  struct nsbox_error *error = NULL;
  cleanup_free char *digest = NULL;
  if (nsbox_image_pull (store, argv[optind], &options, &digest, &error) < 0)
    return report (error);
  printf ("%s %s\n", argv[optind], digest ? digest : "");
  return EXIT_OK;
}

static int
cmd_import (struct nsbox_store *store, int argc, char **argv)
{
  if (argc != 2)
    return usage_error ("import takes one source");
  struct nsbox_error *error = NULL;
  cleanup_free char *ref = NULL, *digest = NULL;
  if (nsbox_store_import (store, argv[1], &ref, &digest, &error) < 0)
    return report (error);
  printf ("%s %s\n", ref, digest);
  return EXIT_OK;
}

static int
cmd_ls (struct nsbox_store *store, int argc, char **argv)
{
  (void)argv;
  if (argc != 1)
    return usage_error ("ls takes no argument");
  struct nsbox_error *error = NULL;
  struct nsbox_store_image *images = NULL;
  size_t count = 0;
  if (nsbox_store_list (store, &images, &count, &error) < 0)
    return report (error);
  printf ("%-50s %-14s %-19s %s\n", "REFERENCE", "PLATFORM", "MANIFEST", "UNPACKED");
  for (size_t i = 0; i < count; i++)
    printf ("%-50s %-14s %.19s %s\n", images[i].ref, images[i].platform, images[i].manifest_digest,
            images[i].rootfs ? "yes" : "no");
  nsbox_store_images_free (images, count);
  return EXIT_OK;
}

static int
cmd_rm (struct nsbox_store *store, int argc, char **argv)
{
  if (argc < 2)
    return usage_error ("rm takes image references");
  int status = EXIT_OK;
  for (int i = 1; i < argc; i++)
    {
      struct nsbox_error *error = NULL;
      if (nsbox_store_untag (store, argv[i], &error) < 0)
        status = report (error);
    }
  return status;
}

static int
cmd_gc (struct nsbox_store *store, int argc, char **argv)
{
  (void)argv;
  if (argc != 1)
    return usage_error ("gc takes no argument");
  struct nsbox_error *error = NULL;
  struct nsbox_store_gc_stats stats;
  if (nsbox_store_gc (store, &stats, &error) < 0)
    return report (error);
  printf ("removed %zu blobs, %zu trees, %zu stale downloads, %zu work directories "
          "(%llu bytes of blobs and downloads)\n",
          stats.blobs_removed, stats.trees_removed, stats.ingest_removed, stats.tmp_removed,
          (unsigned long long)stats.bytes_freed);
  return EXIT_OK;
}

static int
cmd_rootfs (struct nsbox_store *store, int argc, char **argv)
{
  if (argc != 2)
    return usage_error ("rootfs takes one image reference");
  struct nsbox_error *error = NULL;
  cleanup_free char *rootfs = NULL;
  if (nsbox_image_resolve (store, argv[1], NSBOX_PULL_NEVER, NULL, &rootfs, NULL, NULL, &error) < 0)
    return report (error);
  printf ("%s\n", rootfs);
  return EXIT_OK;
}

/* resolve --pass-lock's failure: the message on the socket, for nsbox. */
static int
answer_error (struct nsbox_error *error)
{
  cleanup_free char *answer
      = xasprintf ("E %d %s", nsbox_error_errno (error), nsbox_error_message (error));
  if (!answer || nsbox_write_all (STDOUT_FILENO, answer, strlen (answer) + 1) < 0)
    fprintf (stderr, "nsbox-image: %s\n", nsbox_error_message (error));
  int status = exit_status (error);
  nsbox_error_free (error);
  return status;
}

/* Sends the store's lock fd over stdout, a unix socket, with one byte: the
 * receiver holds the shared lock from before the image was resolved for as
 * long as it keeps the fd. */
static int
pass_lock (struct nsbox_store *store)
{
  int fd = nsbox_store_lock_fd (store);
  union
  {
    char buf[CMSG_SPACE (sizeof (int))];
    struct cmsghdr align;
  } control;
  memset (&control, 0, sizeof control);
  char byte = 'L';
  struct iovec iov = { &byte, 1 };
  struct msghdr msg = { .msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = control.buf,
                        .msg_controllen = sizeof control.buf };
  struct cmsghdr *cm = CMSG_FIRSTHDR (&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN (sizeof (int));
  memcpy (CMSG_DATA (cm), &fd, sizeof fd);
  ssize_t n;
  do
    n = sendmsg (STDOUT_FILENO, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n == 1)
    return EXIT_OK;
  if (errno == ENOTSOCK)
    return usage_error ("resolve --pass-lock needs a unix socket as stdout");
  fprintf (stderr, "nsbox-image: pass the store lock: %s\n", strerror (errno));
  return EXIT_FAILURE_OTHER;
}

/* For `nsbox run --image` (src/image_tool.c): the nsbox CLI resolves
 * images through this command so that it does not load libcurl and
 * libarchive on every run. Output, each item NUL-terminated: the store
 * root, the rootfs path, the manifest digest, then the image config's Env
 * entries. With
 * --pass-lock (stdout a unix socket) the store's shared lock comes first
 * (see pass_lock): resolving and locking are one step, and `gc` cannot
 * remove the tree before the run ends; and a failure is an answer on the
 * socket too, "E ", the errno, a space and the message, for nsbox to
 * report as its own. */
static int
cmd_resolve (struct nsbox_store *store, int argc, char **argv)
{
  enum nsbox_pull_policy policy = NSBOX_PULL_MISSING;
  bool send_lock = false;
  if (argc >= 2 && strcmp (argv[1], "--pass-lock") == 0)
    {
      send_lock = true;
      argv++;
      argc--;
    }
  if (argc == 4 && strcmp (argv[1], "--pull") == 0)
    {
      if (nsbox_pull_policy_parse (argv[2], &policy) < 0)
        return usage_error ("--pull takes missing, always or never, not '%s'", argv[2]);
      argv += 2;
      argc -= 2;
    }
  if (argc != 2)
    return usage_error ("resolve takes [--pass-lock] [--pull POLICY] and one image reference");
  struct nsbox_pull_options options = pull_options ();
  struct nsbox_error *error = NULL;
  cleanup_free char *rootfs = NULL;
  cleanup_strv char **env = NULL;
  cleanup_free char *digest = NULL;
  if (nsbox_image_resolve (store, argv[1], policy, &options, &rootfs, &env, &digest, &error) < 0)
    return send_lock ? answer_error (error) : report (error);
  int ret = send_lock ? pass_lock (store) : EXIT_OK;
  if (ret != EXIT_OK)
    return ret;
  printf ("%s%c%s%c%s%c", nsbox_store_root (store), 0, rootfs, 0, digest, 0);
  for (char **e = env; e && *e; e++)
    printf ("%s%c", *e, 0);
  /* An answer cut short at an item boundary would still parse: the
   * status says it was not all written. */
  if (fflush (stdout) != 0 || ferror (stdout))
    {
      fprintf (stderr, "nsbox-image: resolve: write the answer: %s\n", strerror (errno));
      return EXIT_FAILURE_OTHER;
    }
  return EXIT_OK;
}

static const struct
{
  const char *name;
  int (*run) (struct nsbox_store *store, int argc, char **argv);
} commands[] = {
  { "resolve", cmd_resolve }, { "pull", cmd_pull }, { "import", cmd_import }, { "ls", cmd_ls },
  { "rm", cmd_rm },           { "gc", cmd_gc },     { "rootfs", cmd_rootfs },
};

int
main (int argc, char **argv)
{
  static const struct option opts[] = {
    { "store", required_argument, NULL, 's' },
    { "help", no_argument, NULL, 'h' },
    { "version", no_argument, NULL, 'V' },
    { NULL, 0, NULL, 0 },
  };
  const char *root = NULL;
  int c;
  while ((c = getopt_long (argc, argv, "+h", opts, NULL)) != -1)
    switch (c)
      {
      case 's':
        root = optarg;
        break;
      case 'h':
        usage (stdout);
        return EXIT_OK;
      case 'V':
        printf ("nsbox-image %s\n", NSBOX_VERSION);
        return EXIT_OK;
      default:
        usage (stderr);
        return EXIT_USAGE;
      }
  if (optind >= argc)
    {
      usage (stderr);
      return EXIT_USAGE;
    }
  const char *name = argv[optind];
  for (size_t i = 0; i < ARRAY_SIZE (commands); i++)
    {
      if (strcmp (commands[i].name, name) != 0)
        continue;
      struct nsbox_error *error = NULL;
      struct nsbox_store *store = NULL;
      if (nsbox_store_open (root, &store, &error) < 0)
        return report (error);
      nsbox_store_set_log (store, log_to_stderr, NULL);
      int status = commands[i].run (store, argc - optind, argv + optind);
      nsbox_store_close (store);
      if (fflush (stdout) != 0 && status == EXIT_OK)
        status = EXIT_FAILURE_OTHER;
      return status;
    }
  return usage_error ("unknown command '%s'", name);
}
