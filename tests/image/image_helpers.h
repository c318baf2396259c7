/* Helpers for the image tests: a temp directory per test holding the store,
 * a victim directory beside it and the images built there with umoci from
 * layer tarballs that Python's tarfile writes (hostile ones included).
 *
 * Environment: NSBOX_IMAGE_BIN (default build/nsbox-image),
 * NSBOX_TEST_ROOTFS (the Python fixture rootfs, for realistic images). */
#ifndef NSBOX_IMAGE_TEST_HELPERS_H
#define NSBOX_IMAGE_TEST_HELPERS_H

#include <criterion/criterion.h>

#include <stdbool.h>
#include <stddef.h>

struct fx
{
  char *dir;    /* $T */
  char *store;  /* $T/store */
  char *victim; /* $T/victim: must never change */
  char *victim_before;
};

struct cmd_out
{
  int status; /* exit status, or 128 + signal */
  char *out;  /* stdout */
  char *err;  /* stderr */
};

/* The nsbox-image binary under test (absolute). */
const char *image_bin (void);

void fx_setup (struct fx *fx);
void fx_teardown (struct fx *fx);
/* A suite whose tests share one `fx`, set up before and torn down after
 * each test. */
#define FX_TEST_SUITE(suite, seconds)                                                              \
  static struct fx fx;                                                                             \
  static void suite##_setup (void) { fx_setup (&fx); }                                             \
  static void suite##_teardown (void) { fx_teardown (&fx); }                                       \
  TestSuite (suite, .init = suite##_setup, .fini = suite##_teardown, .timeout = seconds)

/* Runs `sh -c` with $T, $STORE and $IMG (the nsbox-image binary) set and
 * the working directory $T. */
void sh (struct fx *fx, struct cmd_out *out, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
void cmd_out_free (struct cmd_out *out);
/* The same, asserting exit status 0; returns stdout without the final
 * newline (caller frees). */
char *sh_ok (struct fx *fx, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

/* Writes layer tarballs from a Python body using the prelude's helpers
 *   l = layer(); F(l, name, data, mode=), D(l, name, mode=), S(l, name,
 *   target), H(l, name, target), P(l, name), C(l, name, major, minor)
 * and builds the OCI layout $T/oci with tag t from them (umoci raw
 * add-layer). */
void build_image (struct fx *fx, const char *python_body);
/* import oci:$T/oci:t, then rootfs: returns the rootfs command's output. */
void import_and_unpack (struct fx *fx, struct cmd_out *out);
#define IMAGE_REF "localhost/import/oci:t"

/* A hash of a tree: names, types, modes, mtimes, contents, link targets. */
char *tree_hash (const char *path);
/* The victim is unchanged, and no tree or work directory is left. */
void assert_clean_failure (struct fx *fx, struct cmd_out *out);
void assert_victim_unchanged (struct fx *fx);
size_t count_entries (const char *dir);
bool path_exists (const char *path);
char *read_text (const char *path);

#endif
