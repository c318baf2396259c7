/* A delegated cgroup v2 for an unprivileged launcher whose own cgroup it
 * cannot use (a login session's scope, a shell's cgroup): the caller's
 * systemd user instance makes one, as `systemd-run --user --scope -p
 * Delegate=yes` would, through StartTransientUnit on the user bus. The user
 * instance moves the process itself (asking the system instance when the
 * process sits outside the user's own subtree), so nothing here needs a
 * privilege. Without a user bus this is not an error: the caller falls back
 * to what it can enforce and says why. */
#include "scope.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-bus.h>

#include "dl.h"
#include "util.h"

/* Bounds the whole exchange with a user instance that is there but stuck;
 * the launcher then goes on without a cgroup of its own. */
#define SCOPE_TIMEOUT_USEC (10ULL * 1000000ULL)

#define SYSTEMD_SERVICE "org.freedesktop.systemd1"
#define SYSTEMD_PATH "/org/freedesktop/systemd1"
#define SYSTEMD_MANAGER "org.freedesktop.systemd1.Manager"

static pthread_mutex_t scope_lock = PTHREAD_MUTEX_INITIALIZER;
static bool scope_tried;
static int scope_outcome;
static char scope_why[384];

/* sd-bus, loaded when a scope is first needed: linked in, libsystemd and
 * its six libraries would be loaded by every launcher start (about 0.5 ms
 * of a 0.8 ms CLI start here) for a path most runs never take. */
static struct
{
  __typeof__ (sd_bus_open_user) *open_user;
  __typeof__ (sd_bus_flush_close_unref) *flush_close_unref;
  __typeof__ (sd_bus_message_unref) *message_unref;
  __typeof__ (sd_bus_slot_unref) *slot_unref;
  __typeof__ (sd_bus_error_free) *error_free;
  __typeof__ (sd_bus_error_has_name) *error_has_name;
  __typeof__ (sd_bus_error_is_set) *error_is_set;
  __typeof__ (sd_bus_match_signal) *match_signal;
  __typeof__ (sd_bus_message_read) *message_read;
  __typeof__ (sd_bus_message_new_method_call) *message_new_method_call;
  __typeof__ (sd_bus_message_append) *message_append;
  __typeof__ (sd_bus_message_open_container) *message_open_container;
  __typeof__ (sd_bus_message_close_container) *message_close_container;
  __typeof__ (sd_bus_call) *call;
  __typeof__ (sd_bus_process) *process;
  __typeof__ (sd_bus_wait) *wait;
} api;

#define API_SYMBOL(field)                                                                          \
  {                                                                                                \
    "sd_bus_" #field, (void **)&api.field                                                          \
  }
static const struct nsbox_dl_symbol api_symbols[] = {
  API_SYMBOL (open_user),
  API_SYMBOL (flush_close_unref),
  API_SYMBOL (message_unref),
  API_SYMBOL (slot_unref),
  API_SYMBOL (error_free),
  API_SYMBOL (error_has_name),
  API_SYMBOL (error_is_set),
  API_SYMBOL (match_signal),
  API_SYMBOL (message_read),
  API_SYMBOL (message_new_method_call),
  API_SYMBOL (message_append),
  API_SYMBOL (message_open_container),
  API_SYMBOL (message_close_container),
  API_SYMBOL (call),
  API_SYMBOL (process),
  API_SYMBOL (wait),
};

static void
bus_closep (sd_bus **bus)
{
  if (*bus)
    api.flush_close_unref (*bus);
}

static void
bus_message_unrefp (sd_bus_message **m)
{
  if (*m)
    api.message_unref (*m);
}

static void
bus_slot_unrefp (sd_bus_slot **slot)
{
  if (*slot)
    api.slot_unref (*slot);
}

static void
bus_error_freep (sd_bus_error *error)
{
  api.error_free (error);
}

#define cleanup_bus __attribute__ ((cleanup (bus_closep)))
#define cleanup_bus_message __attribute__ ((cleanup (bus_message_unrefp)))
#define cleanup_bus_slot __attribute__ ((cleanup (bus_slot_unrefp)))
#define cleanup_bus_error __attribute__ ((cleanup (bus_error_freep)))

/* The start job we wait for; its path is known once StartTransientUnit
 * answered. JobRemoved signals read before then were only queued by
 * sd_bus_call, so none is missed. */
struct job_wait
{
  char path[256];
  char result[32];
  bool done;
};

static int
on_job_removed (sd_bus_message *m, void *userdata, sd_bus_error *ret_error)
{
  struct job_wait *wait = userdata;
  uint32_t id = 0;
  const char *path = NULL, *unit = NULL, *result = NULL;
  (void)ret_error;
  if (api.message_read (m, "uoss", &id, &path, &unit, &result) >= 0 && wait->path[0]
      && strcmp (path, wait->path) == 0)
    {
      snprintf (wait->result, sizeof wait->result, "%s", result);
      wait->done = true;
    }
  return 0;
}

static void
make_unit_name (char *name, size_t size)
{
  uint32_t random = 0;
  if (getrandom (&random, sizeof random, GRND_NONBLOCK) != (ssize_t)sizeof random)
    {
      struct timespec ts;
      clock_gettime (CLOCK_MONOTONIC, &ts);
      random = (uint32_t)ts.tv_nsec;
    }
  snprintf (name, size, "nsbox-%d-%08" PRIx32 ".scope", (int)getpid (), random);
}

/* OOMPolicy=continue: from systemd 253 on, a scope's default policy stops
 * the whole scope - the launcher with it - when the kernel kills any
 * process below it, and a run hitting its memory limit is such a kill.
 * CollectMode: a scope that failed to start does not linger. */
static int
start_scope (sd_bus *bus, const char *name, bool oom_policy, sd_bus_error *error,
             sd_bus_message **reply)
{
  cleanup_bus_message sd_bus_message *m = NULL;
  char description[64];
  snprintf (description, sizeof description, "nsbox launcher %d", (int)getpid ());
  int r = api.message_new_method_call (bus, &m, SYSTEMD_SERVICE, SYSTEMD_PATH, SYSTEMD_MANAGER,
                                       "StartTransientUnit");
  if (r >= 0)
    r = api.message_append (m, "ss", name, "fail");
  if (r >= 0)
    r = api.message_open_container (m, 'a', "(sv)");
  if (r >= 0)
    r = api.message_append (m, "(sv)(sv)(sv)(sv)", "Description", "s", description, "Delegate", "b",
                            1, "CollectMode", "s", "inactive-or-failed", "PIDs", "au", 1,
                            (uint32_t)getpid ());
  if (r >= 0 && oom_policy)
    r = api.message_append (m, "(sv)", "OOMPolicy", "s", "continue");
  if (r >= 0)
    r = api.message_close_container (m);
  if (r >= 0)
    r = api.message_append (m, "a(sa(sv))", 0);
  if (r < 0)
    return r;
  return api.call (bus, m, SCOPE_TIMEOUT_USEC, error, reply);
}

static int
wait_for_job (sd_bus *bus, struct job_wait *wait, uint64_t deadline)
{
  while (!wait->done)
    {
      int r = api.process (bus, NULL);
      if (r < 0)
        return r;
      if (r > 0)
        continue;
      uint64_t now = nsbox_now_usec ();
      if (now >= deadline)
        return -ETIMEDOUT;
      r = api.wait (bus, deadline - now);
      if (r < 0 && r != -EINTR)
        return r;
    }
  return 0;
}

/* Whether /proc/self/cgroup puts this process in the scope `name`. */
static bool
in_scope (const char *name)
{
  cleanup_fclose FILE *f = fopen ("/proc/self/cgroup", "re");
  cleanup_free char *line = NULL;
  size_t cap = 0, nl = strlen (name);
  while (f && getline (&line, &cap, f) > 0)
    {
      line[strcspn (line, "\n")] = '\0';
      size_t len = strlen (line);
      if (strncmp (line, "0::", 3) == 0 && len > nl + 3 && line[len - nl - 1] == '/'
          && strcmp (line + len - nl, name) == 0)
        return true;
    }
  return false;
}

static int fail (int r, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

static int
fail (int r, const char *fmt, ...)
{
  char text[256];
  va_list ap;
  va_start (ap, fmt);
  vsnprintf (text, sizeof text, fmt, ap);
  va_end (ap);
  snprintf (scope_why, sizeof scope_why, "no delegated scope from systemd (%s)", text);
  return r < 0 ? r : -EIO;
}

/* The handle is kept: the library is loaded at most once per process. */
static int
load_api (void)
{
  char why[192];
  int r = nsbox_dl_load ("libsystemd.so.0", api_symbols, ARRAY_SIZE (api_symbols), why, sizeof why);
  return r < 0 ? fail (r, "%s", why) : 0;
}

static int
join_scope (void)
{
  int r = load_api ();
  if (r < 0)
    return r;
  cleanup_bus sd_bus *bus = NULL;
  r = api.open_user (&bus);
  if (r == -ENOMEDIUM)
    return fail (r, "no user bus: neither DBUS_SESSION_BUS_ADDRESS nor XDG_RUNTIME_DIR is set");
  if (r < 0)
    return fail (r, "no user bus: %s", strerror (-r));
  uint64_t deadline = nsbox_now_usec () + SCOPE_TIMEOUT_USEC;
  struct job_wait wait = { 0 };
  cleanup_bus_slot sd_bus_slot *slot = NULL;
  r = api.match_signal (bus, &slot, SYSTEMD_SERVICE, SYSTEMD_PATH, SYSTEMD_MANAGER, "JobRemoved",
                        on_job_removed, &wait);
  if (r < 0)
    return fail (r, "user bus: %s", strerror (-r));
  char name[64];
  make_unit_name (name, sizeof name);
  cleanup_bus_error sd_bus_error error = SD_BUS_ERROR_NULL;
  cleanup_bus_message sd_bus_message *reply = NULL;
  r = start_scope (bus, name, true, &error, &reply);
  /* systemd before 253: scopes have no OOMPolicy (nor stop on an OOM kill). */
  if (r < 0
      && (api.error_has_name (&error, SD_BUS_ERROR_PROPERTY_READ_ONLY)
          || (error.message && strstr (error.message, "OOMPolicy"))))
    {
      api.error_free (&error);
      make_unit_name (name, sizeof name);
      r = start_scope (bus, name, false, &error, &reply);
    }
  if (r < 0)
    return fail (r, "StartTransientUnit: %s",
                 api.error_is_set (&error) ? error.message : strerror (-r));
  const char *job = NULL;
  r = api.message_read (reply, "o", &job);
  if (r < 0 || strlen (job) >= sizeof wait.path)
    return fail (r < 0 ? r : -EBADMSG, "StartTransientUnit: unexpected reply");
  snprintf (wait.path, sizeof wait.path, "%s", job);
  r = wait_for_job (bus, &wait, deadline);
  if (r < 0)
    return fail (r, "waiting for the start job: %s", strerror (-r));
  if (strcmp (wait.result, "done") != 0)
    return fail (-EIO, "its start job ended '%s'", wait.result);
  if (!in_scope (name))
    return fail (-EIO, "the scope '%s' started without this process", name);
  return 0;
}

int
nsbox_scope_join (const char **why)
{
  pthread_mutex_lock (&scope_lock);
  if (!scope_tried)
    {
      scope_outcome = join_scope ();
      scope_tried = true;
    }
  int r = scope_outcome;
  pthread_mutex_unlock (&scope_lock);
  if (r < 0)
    *why = scope_why;
  return r;
}
