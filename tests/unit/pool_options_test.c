/* Unit tests of the pool's options and the per-run options: what they
 * accept, and the clear error for everything else. No sandbox starts. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "nsbox.h"

/* Called with the return value and the error the call filled: a macro, as
 * the call must come before err is read. */
#define EXPECT_REFUSED(call, needle)                                                               \
  do                                                                                               \
    {                                                                                              \
      err = NULL;                                                                                  \
      int r_ = (call);                                                                             \
      expect_refused (r_, err, (needle));                                                          \
    }                                                                                              \
  while (0)

static void
expect_refused (int r, struct nsbox_error *err, const char *needle)
{
  cr_assert (r < 0, "expected a refusal naming '%s'", needle);
  cr_assert_eq (nsbox_error_errno (err), EINVAL, "errno %d: %s", nsbox_error_errno (err),
                nsbox_error_message (err));
  cr_assert (strstr (nsbox_error_message (err), needle), "'%s' does not name '%s'",
             nsbox_error_message (err), needle);
  nsbox_error_free (err);
}

Test (pool_options, valid_values_are_taken, .timeout = 5)
{
  struct nsbox_error *err = NULL;
  nsbox_pool_options *o = nsbox_pool_options_new (&err);
  cr_assert_not_null (o);
  cr_assert_eq (nsbox_pool_options_set (o, "size", "0", &err), 0);
  cr_assert_eq (nsbox_pool_options_set (o, "size", "1024", &err), 0);
  cr_assert_eq (nsbox_pool_options_set (o, "max-age", "90s", &err), 0);
  cr_assert_eq (nsbox_pool_options_set (o, "refill-concurrency", "64", &err), 0);
  cr_assert_eq (nsbox_pool_options_set (o, "sandboxes", "0", &err), 0);
  cr_assert_eq (nsbox_pool_options_set (o, "sandboxes", "1024", &err), 0);
  nsbox_pool_options_free (o);
}

Test (pool_options, bad_values_and_keys_are_refused_by_name, .timeout = 5)
{
  struct nsbox_error *err = NULL;
  nsbox_pool_options *o = nsbox_pool_options_new (&err);
  cr_assert_not_null (o);
  static const char *const bad[][3] = {
    { "size", "1025", "'size'" },
    { "size", "-1", "'size'" },
    { "size", "two", "'size'" },
    { "size", "", "'size'" },
    { "max-age", "0", "'max-age'" },
    { "max-age", "soon", "'max-age'" },
    { "refill-concurrency", "0", "'refill-concurrency'" },
    { "refill-concurrency", "65", "'refill-concurrency'" },
    { "sandboxes", "1025", "'sandboxes'" },
    { "sandboxes", "many", "'sandboxes'" },
    { "colour", "red", "unknown pool option 'colour'" },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      EXPECT_REFUSED (nsbox_pool_options_set (o, bad[i][0], bad[i][1], &err), bad[i][2]);
    }
  EXPECT_REFUSED (nsbox_pool_options_set (NULL, "size", "1", &err), "invalid arguments");
  nsbox_pool_options_free (o);
  nsbox_pool_options_free (NULL);
}

Test (run_options, only_timeout_and_output_cap_may_be_set_per_run, .timeout = 5)
{
  struct nsbox_error *err = NULL;
  nsbox_run_options *o = nsbox_run_options_new (&err);
  cr_assert_not_null (o);
  cr_assert_eq (nsbox_run_options_set (o, "timeout", "250ms", &err), 0);
  cr_assert_eq (nsbox_run_options_set (o, "max-output-bytes", "4k", &err), 0);
  cr_assert_eq (nsbox_run_options_set (o, "max-output-bytes", "0", &err), 0);
  static const char *const sandbox_keys[]
      = { "memory", "image", "network", "rootfs", "cpus", "user", "runtime" };
  for (size_t i = 0; i < sizeof sandbox_keys / sizeof sandbox_keys[0]; i++)
    {
      EXPECT_REFUSED (nsbox_run_options_set (o, sandbox_keys[i], "1", &err), "different sandbox");
    }
  EXPECT_REFUSED (nsbox_run_options_set (o, "timeout", "0", &err), "'timeout'");
  EXPECT_REFUSED (nsbox_run_options_set (o, "timeout", "forever", &err), "'timeout'");
  EXPECT_REFUSED (nsbox_run_options_set (o, "max-output-bytes", "lots", &err),
                  "'max-output-bytes'");
  EXPECT_REFUSED (nsbox_run_options_set (o, "colour", "red", &err), "unknown key 'colour'");
  nsbox_run_options_free (o);
}

Test (pool, a_bad_rootfs_is_refused_when_the_pool_is_made, .timeout = 10)
{
  struct nsbox_error *err = NULL;
  nsbox_config *c = nsbox_config_new (&err);
  cr_assert_not_null (c);
  /* No image to pull from anywhere: a named store that does not hold it. */
  cr_assert_eq (nsbox_config_set (c, "image", "local/nothing:here", &err), 0);
  cr_assert_eq (nsbox_config_set (c, "store", "/nonexistent/nsbox-store", &err), 0);
  cr_assert_eq (nsbox_config_set (c, "pull", "never", &err), 0);
  nsbox_pool *pool = NULL;
  int r = nsbox_pool_new (c, NULL, &pool, &err);
  cr_assert (r < 0 && !pool, "a pool over a missing image must be refused");
  cr_assert_not_null (strstr (nsbox_error_message (err), "nothing"), "%s",
                      nsbox_error_message (err));
  nsbox_error_free (err);
  nsbox_config_free (c);
}

Test (sandbox_options, the_life_keys_are_taken_and_bad_ones_refused_by_name, .timeout = 5)
{
  struct nsbox_error *err = NULL;
  nsbox_sandbox_options *o = nsbox_sandbox_options_new (&err);
  cr_assert_not_null (o);
  cr_assert_eq (nsbox_sandbox_options_set (o, "sandbox-idle-timeout", "90s", &err), 0);
  cr_assert_eq (nsbox_sandbox_options_set (o, "sandbox-max-lifetime", "2h", &err), 0);
  cr_assert_eq (nsbox_sandbox_options_set (o, "sandbox-max-runs", "0", &err), 0);
  cr_assert_eq (nsbox_sandbox_options_set (o, "session", "conversation-7", &err), 0);
  static const char *const bad[][3] = {
    { "sandbox-idle-timeout", "0", "'sandbox-idle-timeout'" },
    { "sandbox-idle-timeout", "later", "'sandbox-idle-timeout'" },
    { "sandbox-max-lifetime", "", "'sandbox-max-lifetime'" },
    { "sandbox-max-lifetime", "8d", "'sandbox-max-lifetime'" },
    { "sandbox-idle-timeout", "500ms", "'sandbox-idle-timeout'" },
    { "sandbox-max-runs", "-3", "'sandbox-max-runs'" },
    { "sandbox-max-runs", "many", "'sandbox-max-runs'" },
    { "timeout", "1s", "unknown sandbox option 'timeout'" },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      EXPECT_REFUSED (nsbox_sandbox_options_set (o, bad[i][0], bad[i][1], &err), bad[i][2]);
    }
  EXPECT_REFUSED (nsbox_sandbox_options_set (o, "session", "no spaces", &err), "'session'");
  EXPECT_REFUSED (nsbox_sandbox_options_set (NULL, "session", "x", &err), "invalid arguments");
  EXPECT_REFUSED (nsbox_sandbox_open (NULL, o, NULL, &err), "invalid arguments");
  EXPECT_REFUSED (nsbox_sandbox_run (NULL, "1", 1, NULL, NULL, &err), "invalid arguments");
  nsbox_sandbox_options_free (o);
  nsbox_sandbox_options_free (NULL);
  nsbox_sandbox_close (NULL);
}
