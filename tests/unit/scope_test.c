/* The user scope without a systemd user instance: asking fails quietly,
 * says why, moves nothing, and is not repeated. With a real user instance it
 * is shown by make check-vm (userscope/ of tests/vm/cgroup2_test.c). */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scope.h"

static void
read_own_cgroup (char *buf, size_t size)
{
  FILE *f = fopen ("/proc/self/cgroup", "re");
  cr_assert_not_null (f);
  size_t n = fread (buf, 1, size - 1, f);
  buf[n] = '\0';
  fclose (f);
}

Test (scope, without_a_user_bus_the_process_stays_where_it_is, .timeout = 30)
{
  char before[4096], after[4096];
  cr_assert (setenv ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/nsbox-test/bus", 1) == 0);
  read_own_cgroup (before, sizeof before);
  const char *why = NULL;
  cr_assert_lt (nsbox_scope_join (&why), 0);
  cr_assert_not_null (why);
  cr_assert (strstr (why, "no delegated scope from systemd") && strstr (why, "user bus"), "why: %s",
             why);
  read_own_cgroup (after, sizeof after);
  cr_assert_str_eq (after, before);
}

Test (scope, a_second_call_returns_the_first_outcome_without_asking_again, .timeout = 30)
{
  cr_assert (setenv ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/nsbox-test/bus", 1) == 0);
  const char *first = NULL, *second = NULL;
  int r = nsbox_scope_join (&first);
  cr_assert_lt (r, 0);
  char first_text[512];
  snprintf (first_text, sizeof first_text, "%s", first);
  /* A bus address that would fail differently, were it used. */
  cr_assert (setenv ("DBUS_SESSION_BUS_ADDRESS", "not-an-address", 1) == 0);
  cr_assert_eq (nsbox_scope_join (&second), r);
  cr_assert_str_eq (second, first_text);
}
