/* Measuring an unpack from outside nsbox-image, for the bomb tests: what it
 * held in memory and what it created on disk, without asking it.
 *
 * A child of the test enters a mount namespace of its own and mounts a
 * fresh tmpfs (size and inode count given) on $STORE, so the store, and
 * the unpack's work directory with it, is on a filesystem of its own that
 * disappears with the child. There it imports $T/oci:t, then runs
 * `nsbox-image --store $STORE rootfs IMAGE_REF` directly (no shell)
 * with the given environment, and while it runs samples statvfs: the
 * inodes in use above what the store held before, and the free bytes.
 * nr_inodes is also a hard ceiling: an unpack that created more than the
 * tmpfs holds would fail with ENOSPC, not with the limit a test expects.
 * Peak RSS is wait4's ru_maxrss of nsbox-image itself (it starts no
 * processes). Needs root (mount). */
#ifndef NSBOX_IMAGE_TEST_MEASURE_H
#define NSBOX_IMAGE_TEST_MEASURE_H

#include "image_helpers.h"

struct measure_opts
{
  const char *tmpfs_size;     /* e.g. "64m" */
  unsigned long tmpfs_inodes; /* nr_inodes of the tmpfs */
  const char *env;            /* "NAME=VALUE NAME=VALUE", or NULL */
};

struct measured
{
  int status;             /* exit status of `rootfs`, 128 + signal */
  char *err;              /* its stderr */
  long max_rss_kb;        /* its peak RSS */
  long inodes_before;     /* inodes in use on the tmpfs before it (the store) */
  long inodes_peak;       /* most inodes in use seen, above the store before */
  long inodes_after;      /* inodes in use after it, above the store before */
  long long min_free;     /* fewest free bytes seen (f_bavail) */
  long long reserve;      /* 2 % of the tmpfs: the default free-space reserve */
  unsigned long fs_files; /* f_files of the tmpfs */
  long tmp_left;          /* entries left in $STORE/tmp */
  long rootfs_left;       /* entries left in $STORE/rootfs */
};

/* Skips unless root (the tmpfs needs a mount). */
void measure_require_root (void);
void measure_unpack (struct fx *fx, const struct measure_opts *opts, struct measured *out);
void measured_free (struct measured *m);
/* Asserts the measured run failed cleanly with `status`: its message names
 * each of the NULL-terminated needles, the peak RSS is within the bound
 * (64 MiB; more for a sanitizer build, which says so), and nothing is left
 * in tmp/ or rootfs/. */
void assert_measured_failure (const struct measured *m, int status, const char *const *needles);
/* The digest of layer `index` of $T/oci:t (caller frees). */
char *layer_digest (struct fx *fx, unsigned index);
/* The bound on nsbox-image's peak RSS, in kB. */
long rss_bound_kb (void);

#endif
