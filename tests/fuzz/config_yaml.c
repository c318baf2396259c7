/* Fuzz target: nsbox_config_load_yaml on arbitrary file contents (a memfd
 * reached through /proc/self/fd, so nothing is left on disk).
 *
 * Checked: a failed load leaves every key as it was and fills the error; a
 * successful load yields values that read back, and the textual value of
 * every single-valued key is accepted by nsbox_config_set unchanged (the
 * one vocabulary shared by YAML, CLI, setter and JSON). */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "fuzz.h"
#include "nsbox.h"

#define MAX_KEYS 64

/* Every key's textual value; NULL entries past the end. */
static void
snapshot (const nsbox_config *config, char *values[MAX_KEYS])
{
  const struct nsbox_key_info *keys = nsbox_config_keys ();
  for (size_t i = 0; i < MAX_KEYS; i++)
    {
      values[i] = NULL;
      if (!keys[i].name)
        break;
      struct nsbox_error *err = NULL;
      values[i] = nsbox_config_get (config, keys[i].name, &err);
      FUZZ_CHECK (values[i], "get '%s' failed: %s", keys[i].name, nsbox_error_message (err));
    }
}

static void
snapshot_free (char *values[MAX_KEYS])
{
  for (size_t i = 0; i < MAX_KEYS && values[i]; i++)
    free (values[i]);
}

/* A single-valued key's value, set on a fresh configuration, reads back
 * the same. */
static void
check_round_trip (const struct nsbox_key_info *key, const char *value)
{
  nsbox_config *fresh = nsbox_config_new (NULL);
  FUZZ_CHECK (fresh, "nsbox_config_new failed");
  struct nsbox_error *err = NULL;
  int r = nsbox_config_set (fresh, key->name, value, &err);
  FUZZ_CHECK (r == 0, "'%s' read back as '%s' is refused by nsbox_config_set: %s", key->name, value,
              nsbox_error_message (err));
  char *again = nsbox_config_get (fresh, key->name, NULL);
  FUZZ_CHECK (again && strcmp (again, value) == 0, "'%s': '%s' set, '%s' read back", key->name,
              value, again ? again : "(null)");
  free (again);
  nsbox_config_free (fresh);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static int fd = -1;
  static char path[64];
  if (fd < 0)
    {
      fd = memfd_create ("nsbox-fuzz-config", MFD_CLOEXEC);
      FUZZ_CHECK (fd >= 0, "memfd_create: %s", strerror (errno));
      snprintf (path, sizeof path, "/proc/self/fd/%d", fd);
    }
  FUZZ_CHECK (ftruncate (fd, 0) == 0, "ftruncate: %s", strerror (errno));
  FUZZ_CHECK (size == 0 || pwrite (fd, data, size, 0) == (ssize_t)size, "pwrite: %s",
              strerror (errno));

  nsbox_config *config = nsbox_config_new (NULL);
  FUZZ_CHECK (config, "nsbox_config_new failed");
  char *before[MAX_KEYS], *after[MAX_KEYS];
  snapshot (config, before);

  struct nsbox_error *err = NULL;
  int r = nsbox_config_load_yaml (config, path, &err);
  snapshot (config, after);
  const struct nsbox_key_info *keys = nsbox_config_keys ();
  if (r < 0)
    {
      FUZZ_CHECK (err && nsbox_error_message (err) && nsbox_error_errno (err) == -r,
                  "load failed with %d but the error is missing or disagrees", r);
      for (size_t i = 0; i < MAX_KEYS && keys[i].name; i++)
        FUZZ_CHECK (strcmp (before[i], after[i]) == 0,
                    "a failed load changed '%s' from '%s' to '%s'", keys[i].name, before[i],
                    after[i]);
    }
  else
    {
      FUZZ_CHECK (!err, "load succeeded and filled the error");
      for (size_t i = 0; i < MAX_KEYS && keys[i].name; i++)
        if (!keys[i].repeatable && after[i][0])
          check_round_trip (&keys[i], after[i]);
      nsbox_config *copy = nsbox_config_dup (config, NULL);
      FUZZ_CHECK (copy, "nsbox_config_dup failed");
      nsbox_config_free (copy);
    }

  snapshot_free (before);
  snapshot_free (after);
  nsbox_error_free (err);
  nsbox_config_free (config);
  return 0;
}
