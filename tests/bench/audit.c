/* The audit log's cost (make bench): what appending a run's record adds to
 * the run, i.e. exactly the work nsbox_run adds when audit-log is set (open
 * the log, build the record with the code's SHA-256, lock, read the last
 * hash, write, close), for the result of a real run of
 * `print(sum(range(10)))`, against the floor of any append-only log in the
 * same run, interleaved: open(O_APPEND), one write of a line of the same
 * size, close. Target: the audit append at most 0.2 ms at the median.
 * Then `nsbox audit verify`'s speed on the log written.
 *
 * Usage: audit ROOTFS [N] */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "audit.h"
#include "config.h"
#include "nsbox.h"

static double
now (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
die (const char *what, struct nsbox_error *err)
{
  fprintf (stderr, "bench audit: %s: %s\n", what, err ? nsbox_error_message (err) : strerror (errno));
  exit (1);
}

static int
compare (const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double
percentile (double *v, size_t n, double p)
{
  qsort (v, n, sizeof *v, compare);
  size_t i = (size_t)(p * (double)(n - 1) + 0.5);
  return v[i];
}

int
main (int argc, char **argv)
{
  if (argc < 2)
    {
      fprintf (stderr, "usage: audit ROOTFS [N]\n");
      return 2;
    }
  size_t n = argc > 2 ? strtoul (argv[2], NULL, 10) * 50 : 1500;
  if (n < 100)
    n = 100;
  char dir[] = "/tmp/nsbox-bench-audit.XXXXXX";
  if (!mkdtemp (dir))
    die ("mkdtemp", NULL);
  char log[sizeof dir + 16], floor_log[sizeof dir + 16];
  snprintf (log, sizeof log, "%s/audit.log", dir);
  snprintf (floor_log, sizeof floor_log, "%s/floor.log", dir);

  struct nsbox_error *err = NULL;
  nsbox_config *c = nsbox_config_new (&err);
  if (!c || nsbox_config_set (c, "rootfs", argv[1], &err) < 0)
    die ("config", err);
  static const char code[] = "print(sum(range(10)))\n";
  nsbox_result *res = NULL;
  if (nsbox_run (c, code, strlen (code), &res, &err) < 0)
    die ("the run whose result is logged", err);
  if (nsbox_config_set (c, "audit-log", log, &err) < 0
      || nsbox_config_set (c, "session", "bench", &err) < 0)
    die ("config", err);

  double *audit = calloc (n, sizeof *audit), *floor = calloc (n, sizeof *floor);
  if (!audit || !floor)
    die ("calloc", NULL);
  size_t line_len = 0;
  char *line = NULL;
  for (size_t i = 0; i < n; i++)
    {
      struct nsbox_audit_run run = { .code = code, .code_len = strlen (code) };
      double t0 = now ();
      run.started_ms = nsbox_realtime_ms ();
      int fd;
      if (nsbox_audit_open (c, &fd, &err) < 0 || nsbox_audit_append (fd, c, &run, res, NULL, &err) < 0)
        die ("audit append", err);
      audit[i] = now () - t0;
      if (!line)
        {
          /* The floor writes lines as long as a record. */
          FILE *f = fopen (log, "r");
          size_t cap = 0;
          ssize_t got = f ? getline (&line, &cap, f) : -1;
          if (got <= 0)
            die ("read the first record", NULL);
          line_len = (size_t)got;
          fclose (f);
        }
      t0 = now ();
      int f = open (floor_log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
      if (f < 0 || write (f, line, line_len) != (ssize_t)line_len)
        die ("floor append", NULL);
      close (f);
      floor[i] = now () - t0;
    }
  double a50 = percentile (audit, n, 0.5) * 1e3, a99 = percentile (audit, n, 0.99) * 1e3;
  double f50 = percentile (floor, n, 0.5) * 1e3, f99 = percentile (floor, n, 0.99) * 1e3;
  printf ("audit log: %zu appends of a %zu-byte record, interleaved with the floor\n", n, line_len);
  printf ("  %-34s p50 %7.4f ms  p99 %7.4f ms\n", "floor (open O_APPEND, write, close)", f50,
          f99);
  printf ("  %-34s p50 %7.4f ms  p99 %7.4f ms\n", "audit record (nsbox_audit_append)", a50, a99);
  printf ("  audit/floor p50 %.2fx; added to a run at the median: %.4f ms (target <= 0.2 ms: %s)\n",
          a50 / f50, a50, a50 <= 0.2 ? "met" : "MISSED");

  size_t records = 0;
  double t0 = now ();
  if (nsbox_audit_verify (log, &records, &err) < 0)
    die ("verify", err);
  double took = now () - t0;
  printf ("  nsbox audit verify: %zu records in %.1f ms (%.4f ms a record)\n", records, took * 1e3,
          took * 1e3 / (double)records);

  unlink (log);
  unlink (floor_log);
  rmdir (dir);
  free (line);
  free (audit);
  free (floor);
  nsbox_result_free (res);
  nsbox_config_free (c);
  return a50 <= 0.2 ? 0 : 1;
}
