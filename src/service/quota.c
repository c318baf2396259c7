/* The quota arithmetic of one session (quota.h), with no clock and no I/O
 * of its own, so that the unit tests drive it with a clock of their own.
 *
 * Runs per minute: a token bucket of N tokens refilled at N per minute,
 * kept as GCRA (one "theoretical arrival time"): a burst of N is admitted
 * at once, then one run every 60/N s.
 *
 * CPU and wall time per rolling window: a run reserves, at admission, the
 * most it can use (its timeout, times its CPU bandwidth for CPU time), and
 * is admitted only when the window's usage, the reservations in flight and
 * its own fit under the quota; at its end the reservation is replaced by
 * what it really used. So concurrent callers cannot overspend, and a run
 * that sleeps is charged its wall time but nearly no CPU. The window is 60
 * buckets; usage leaves it a bucket at a time. */
#include "quota.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "units.h"

static uint64_t
bucket_ms (uint64_t window_ms)
{
  uint64_t len = window_ms / NSBOX_QUOTA_BUCKETS;
  return len ? len : 1;
}

/* Whether bucket b is still in the window that ends in epoch `now`. A
 * bucket from the future (the clock went back) counts until the clock
 * passes it. */
static bool
bucket_live (uint64_t epoch, uint64_t now)
{
  return epoch != 0 && epoch + NSBOX_QUOTA_BUCKETS > now;
}

/* A session kept under another window (a state file written under another
 * quota-window): its live usage moves whole into the current bucket, so
 * changing the window cannot reset it. */
static void
adopt_window (struct nsbox_quota_session *s, uint64_t window_ms, uint64_t now_ms)
{
  if (s->window_ms == window_ms)
    return;
  uint64_t cpu = 0, wall = 0;
  uint64_t old_epoch = s->window_ms ? now_ms / bucket_ms (s->window_ms) : 0;
  for (size_t i = 0; i < NSBOX_QUOTA_BUCKETS; i++)
    if (s->window_ms && bucket_live (s->buckets[i].epoch, old_epoch))
      {
        cpu += s->buckets[i].cpu_ms;
        wall += s->buckets[i].wall_ms;
      }
  memset (s->buckets, 0, sizeof s->buckets);
  s->window_ms = window_ms;
  if (cpu || wall)
    {
      uint64_t epoch = now_ms / bucket_ms (window_ms);
      s->buckets[epoch % NSBOX_QUOTA_BUCKETS].epoch = epoch;
      s->buckets[epoch % NSBOX_QUOTA_BUCKETS].cpu_ms = cpu;
      s->buckets[epoch % NSBOX_QUOTA_BUCKETS].wall_ms = wall;
    }
}

bool
nsbox_quota_idle (const struct nsbox_quota_session *s, uint64_t now_ms)
{
  if (s->n_flights || s->tat_us > now_ms * 1000)
    return false;
  uint64_t now_epoch = now_ms / bucket_ms (s->window_ms);
  for (size_t i = 0; i < NSBOX_QUOTA_BUCKETS; i++)
    if (bucket_live (s->buckets[i].epoch, now_epoch))
      return false;
  return true;
}

static uint64_t
window_used (const struct nsbox_quota_session *s, uint64_t now_epoch, bool cpu)
{
  uint64_t used = 0;
  for (size_t i = 0; i < NSBOX_QUOTA_BUCKETS; i++)
    if (bucket_live (s->buckets[i].epoch, now_epoch))
      used += cpu ? s->buckets[i].cpu_ms : s->buckets[i].wall_ms;
  return used;
}

static uint64_t
flights_reserved (const struct nsbox_quota_session *s, bool cpu)
{
  uint64_t sum = 0;
  for (size_t i = 0; i < s->n_flights; i++)
    sum += cpu ? s->flights[i].cpu_ms : s->flights[i].wall_ms;
  return sum;
}

/* Until the first run in flight is due to end (at least 100 ms: one overdue
 * is being torn down). */
static uint64_t
first_landing (const struct nsbox_quota_session *s, uint64_t now_ms)
{
  uint64_t first = UINT64_MAX;
  for (size_t i = 0; i < s->n_flights; i++)
    if (s->flights[i].deadline_ms < first)
      first = s->flights[i].deadline_ms;
  if (first == UINT64_MAX || first <= now_ms + 100)
    return 100;
  return first - now_ms;
}

/* Until enough usage has left the window for `need` more to fit, given
 * what is in flight; the landing of a flight when expiry alone is not
 * enough. */
static uint64_t
window_retry (const struct nsbox_quota_session *s, uint64_t now_ms, bool cpu, uint64_t need,
              uint64_t limit)
{
  uint64_t reserved = flights_reserved (s, cpu);
  if (reserved + need > limit)
    return first_landing (s, now_ms);
  uint64_t len = bucket_ms (s->window_ms), now_epoch = now_ms / len;
  uint64_t excess = window_used (s, now_epoch, cpu) + reserved + need - limit, freed = 0;
  uint64_t oldest
      = now_epoch >= NSBOX_QUOTA_BUCKETS - 1 ? now_epoch - (NSBOX_QUOTA_BUCKETS - 1) : 1;
  for (uint64_t e = oldest; e <= now_epoch; e++)
    {
      const struct nsbox_quota_bucket *b = &s->buckets[e % NSBOX_QUOTA_BUCKETS];
      if (b->epoch != e)
        continue;
      freed += cpu ? b->cpu_ms : b->wall_ms;
      if (freed >= excess)
        {
          uint64_t leaves = (e + NSBOX_QUOTA_BUCKETS) * len;
          return leaves > now_ms ? leaves - now_ms : 1;
        }
    }
  /* Usage stamped in the future (the clock went back): a whole window. */
  return s->window_ms;
}

/* A flight long past its deadline (a process that forked mid-run keeps
 * its parent's flights in its copy of the table) is charged its
 * reservation and dropped. */
#define STALE_MS (60 * 1000)

static void
drop_stale_flights (struct nsbox_quota_session *s, uint64_t now_ms)
{
  for (size_t i = 0; i < s->n_flights;)
    if (s->flights[i].deadline_ms + STALE_MS < now_ms)
      {
        struct nsbox_quota_flight f = s->flights[i];
        nsbox_quota_settle (s, f.id, now_ms, f.cpu_ms, f.wall_ms);
      }
    else
      i++;
}

static int
over_quota (const char *name, uint64_t need, uint64_t limit, struct nsbox_error **err)
{
  return nsbox_error_set (err, EINVAL,
                          "quota-%s is %" PRIu64 "ms but one run may use %" PRIu64
                          "ms (its timeout%s): no run could ever be admitted; raise the quota "
                          "or lower the timeout",
                          name, limit, need, strcmp (name, "cpu-time") == 0 ? " times cpus" : "");
}

int
nsbox_quota_decide (struct nsbox_quota_session *s, const struct nsbox_quota_limits *l,
                    uint64_t now_ms, struct nsbox_quota_flight *flight,
                    enum nsbox_quota_kind *refused, uint64_t *retry_after_ms,
                    struct nsbox_error **err)
{
  if (l->cpu_ms && flight->cpu_ms > l->cpu_ms)
    return over_quota ("cpu-time", flight->cpu_ms, l->cpu_ms, err);
  if (l->wall_ms && flight->wall_ms > l->wall_ms)
    return over_quota ("wall-time", flight->wall_ms, l->wall_ms, err);
  adopt_window (s, l->window_ms, now_ms);
  drop_stale_flights (s, now_ms);
  uint64_t now_epoch = now_ms / bucket_ms (s->window_ms);
  enum nsbox_quota_kind kind = NSBOX_QUOTA_NONE;
  uint64_t retry = 0;
  if ((l->concurrent && s->n_flights >= l->concurrent) || s->n_flights >= NSBOX_QUOTA_FLIGHTS_MAX)
    {
      kind = NSBOX_QUOTA_CONCURRENT;
      retry = first_landing (s, now_ms);
    }
  else if (l->cpu_ms
           && window_used (s, now_epoch, true) + flights_reserved (s, true) + flight->cpu_ms
                  > l->cpu_ms)
    {
      kind = NSBOX_QUOTA_CPU;
      retry = window_retry (s, now_ms, true, flight->cpu_ms, l->cpu_ms);
    }
  else if (l->wall_ms
           && window_used (s, now_epoch, false) + flights_reserved (s, false) + flight->wall_ms
                  > l->wall_ms)
    {
      kind = NSBOX_QUOTA_WALL;
      retry = window_retry (s, now_ms, false, flight->wall_ms, l->wall_ms);
    }
  uint64_t next_tat = s->tat_us;
  if (kind == NSBOX_QUOTA_NONE && l->runs_per_minute)
    {
      uint64_t interval = (60000000 + l->runs_per_minute - 1) / l->runs_per_minute;
      uint64_t tolerance = (l->runs_per_minute - 1) * interval;
      uint64_t now_us = now_ms * 1000;
      /* A clock that went back cannot leave the bucket emptier than full use. */
      if (next_tat > now_us + tolerance + interval)
        next_tat = now_us + tolerance + interval;
      uint64_t tat = next_tat > now_us ? next_tat : now_us;
      if (tat - now_us > tolerance)
        {
          kind = NSBOX_QUOTA_RATE;
          retry = (tat - now_us - tolerance + 999) / 1000;
        }
      else
        next_tat = tat + interval;
    }
  if (kind != NSBOX_QUOTA_NONE)
    {
      *refused = kind;
      *retry_after_ms = retry ? retry : 1;
      return 0;
    }
  struct nsbox_quota_flight *grown
      = reallocarray (s->flights, s->n_flights + 1, sizeof *s->flights);
  if (!grown)
    return nsbox_error_oom (err);
  s->flights = grown;
  flight->started_ms = now_ms;
  s->flights[s->n_flights++] = *flight;
  s->tat_us = next_tat;
  *refused = NSBOX_QUOTA_NONE;
  *retry_after_ms = 0;
  return 0;
}

void
nsbox_quota_settle (struct nsbox_quota_session *s, uint64_t id, uint64_t now_ms, uint64_t cpu_ms,
                    uint64_t wall_ms)
{
  for (size_t i = 0; i < s->n_flights; i++)
    if (s->flights[i].id == id)
      {
        s->flights[i] = s->flights[--s->n_flights];
        break;
      }
  if (!s->window_ms)
    return;
  uint64_t epoch = now_ms / bucket_ms (s->window_ms);
  struct nsbox_quota_bucket *b = &s->buckets[epoch % NSBOX_QUOTA_BUCKETS];
  if (b->epoch != epoch)
    *b = (struct nsbox_quota_bucket){ .epoch = epoch };
  b->cpu_ms += cpu_ms;
  b->wall_ms += wall_ms;
}

void
nsbox_quota_session_clear (struct nsbox_quota_session *s)
{
  free (s->flights);
  memset (s, 0, sizeof *s);
}

/* ---- the state file ---- */

char *
nsbox_quota_format (const struct nsbox_quota_session *s)
{
  char *text = NULL;
  size_t size = 0;
  FILE *f = open_memstream (&text, &size);
  if (!f)
    return NULL;
  fprintf (f, "nsbox-quota 1\nwindow %" PRIu64 "\ntat %" PRIu64 "\n", s->window_ms, s->tat_us);
  for (size_t i = 0; i < NSBOX_QUOTA_BUCKETS; i++)
    if (s->buckets[i].epoch)
      fprintf (f, "bucket %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", s->buckets[i].epoch,
               s->buckets[i].cpu_ms, s->buckets[i].wall_ms);
  for (size_t i = 0; i < s->n_flights; i++)
    {
      const struct nsbox_quota_flight *f_ = &s->flights[i];
      fprintf (
          f, "flight %" PRIu64 " %d %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
          f_->id, (int)f_->pid, f_->starttime, f_->started_ms, f_->deadline_ms, f_->cpu_ms,
          f_->wall_ms);
    }
  if (fclose (f) != 0)
    {
      free (text);
      return NULL;
    }
  return text;
}

/* "WORD n1 n2 ...": exactly `count` decimal numbers after the word. */
static bool
parse_numbers (const char *line, const char *word, uint64_t *v, size_t count)
{
  size_t wl = strlen (word);
  if (strncmp (line, word, wl) != 0)
    return false;
  const char *p = line + wl;
  for (size_t i = 0; i < count; i++)
    {
      if (*p != ' ')
        return false;
      p++;
      if (nsbox_parse_digits (&p, &v[i]) < 0)
        return false;
    }
  return *p == '\0';
}

int
nsbox_quota_parse (const char *text, struct nsbox_quota_session *s, struct nsbox_error **err)
{
  struct nsbox_quota_session parsed = { 0 };
  cleanup_free char *copy = strdup (text);
  if (!copy)
    return nsbox_error_oom (err);
  char *save = NULL;
  unsigned line_no = 0;
  int ret = 0;
  for (char *line = strtok_r (copy, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    {
      line_no++;
      uint64_t v[7];
      bool header = (line_no == 1 && strcmp (line, "nsbox-quota 1") == 0)
                    || (line_no == 2 && parse_numbers (line, "window", &parsed.window_ms, 1))
                    || (line_no == 3 && parse_numbers (line, "tat", &parsed.tat_us, 1));
      if (header)
        continue;
      if (line_no > 3 && parse_numbers (line, "bucket", v, 3) && v[0] != 0)
        {
          struct nsbox_quota_bucket *b = &parsed.buckets[v[0] % NSBOX_QUOTA_BUCKETS];
          if (b->epoch == 0)
            {
              *b = (struct nsbox_quota_bucket){ v[0], v[1], v[2] };
              continue;
            }
        }
      else if (line_no > 3 && parse_numbers (line, "flight", v, 7) && v[1] > 0 && v[1] <= INT32_MAX
               && parsed.n_flights < NSBOX_QUOTA_FLIGHTS_MAX)
        {
          struct nsbox_quota_flight *grown
              = reallocarray (parsed.flights, parsed.n_flights + 1, sizeof *parsed.flights);
          if (!grown)
            {
              ret = nsbox_error_oom (err);
              break;
            }
          parsed.flights = grown;
          parsed.flights[parsed.n_flights++] = (struct nsbox_quota_flight){
            .id = v[0],
            .pid = (pid_t)v[1],
            .starttime = v[2],
            .started_ms = v[3],
            .deadline_ms = v[4],
            .cpu_ms = v[5],
            .wall_ms = v[6],
          };
          continue;
        }
      ret = nsbox_error_set (err, EBADMSG, "line %u is not what nsbox wrote", line_no);
      break;
    }
  if (ret == 0 && line_no < 3)
    ret = nsbox_error_set (err, EBADMSG, "it ends after %u lines", line_no);
  if (ret < 0)
    {
      nsbox_quota_session_clear (&parsed);
      return ret;
    }
  *s = parsed;
  return 0;
}
