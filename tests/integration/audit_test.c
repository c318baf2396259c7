/* The audit log, by effect: each run (CLI and library) appends one record
 * whose facts are checked against what the test itself knows (the SHA-256
 * of the code computed here, the exit code the code asks for, the uid the
 * launcher ran as); the hash chain is recomputed here, not taken from
 * `nsbox audit verify`; concurrent launchers never interleave or fork the
 * chain; the code, its output and environment values stay out unless
 * audit-code; a log that cannot be written stops the run before a sandbox
 * starts; `nsbox audit verify` names the first record an edit broke; runs
 * through `nsbox serve` carry their session and their client. */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define TAIL 75 /* ,"hash":"<64 hex>"} */

static char *
log_path (const char *dir)
{
  char *p = NULL;
  cr_assert (asprintf (&p, "%s/audit.log", dir) > 0);
  return p;
}

/* The whole file: it must be there. */
static char *
slurp (const char *path, size_t *len)
{
  char *data = read_file (path, len);
  cr_assert_not_null (data, "%s: %s", path, strerror (errno));
  return data;
}

static void
spill (const char *path, const char *data, size_t len)
{
  FILE *f = fopen (path, "wb");
  cr_assert_not_null (f, "%s: %s", path, strerror (errno));
  cr_assert (fwrite (data, 1, len, f) == len);
  fclose (f);
}

/* The log's records, each checked here: one JSON object per line, its
 * "hash" the SHA-256 of its text before it (closed with '}'), its "prev"
 * the hash of the line before (null on the first). Returns the records
 * (a JSON array; the caller frees). */
static json_t *
read_chain (const char *path)
{
  size_t len = 0;
  char *text = slurp (path, &len);
  json_t *records = json_array ();
  char prev[65] = "";
  size_t n = 0;
  for (char *line = text, *end; line < text + len; line = end + 1)
    {
      end = memchr (line, '\n', (size_t)(text + len - line));
      cr_assert_not_null (end, "%s: the last record has no newline", path);
      n++;
      size_t l = (size_t)(end - line);
      cr_assert (l > TAIL && memcmp (line + l - TAIL, ",\"hash\":\"", 9) == 0,
                 "%s: record %zu does not end with its hash: %.*s", path, n, (int)l, line);
      char body_end = line[l - TAIL];
      line[l - TAIL] = '}';
      char computed[65];
      sha256_hex (line, l - TAIL + 1, computed);
      line[l - TAIL] = body_end;
      cr_assert (memcmp (computed, line + l - TAIL + 9, 64) == 0,
                 "%s: record %zu: its hash is not the SHA-256 of its text", path, n);
      json_error_t jerr;
      json_t *r = json_loadb (line, l, JSON_REJECT_DUPLICATES, &jerr);
      cr_assert (json_is_object (r), "%s: record %zu is not a JSON object: %s", path, n, jerr.text);
      json_t *p = json_object_get (r, "prev");
      if (n == 1)
        cr_assert (json_is_null (p), "%s: the first record must start the chain", path);
      else
        cr_assert (json_is_string (p) && strcmp (json_string_value (p), prev) == 0,
                   "%s: record %zu does not chain to record %zu", path, n, n - 1);
      memcpy (prev, computed, sizeof prev);
      json_array_append_new (records, r);
    }
  free (text);
  return records;
}

static const char *
str_at (json_t *record, const char *a, const char *b)
{
  json_t *v = json_object_get (record, a);
  if (b)
    v = json_object_get (v, b);
  return json_string_value (v);
}

static long long
int_at (json_t *record, const char *a, const char *b)
{
  json_t *v = json_object_get (record, a);
  if (b)
    v = json_object_get (v, b);
  cr_assert (json_is_integer (v), "record member %s%s%s is not an integer", a, b ? "." : "",
             b ? b : "");
  return json_integer_value (v);
}

/* The uid the launcher runs as: the test user's in the unprivileged passes. */
static long long
launcher_uid (void)
{
  const char *user = harness_test_user ();
  if (!user)
    return (long long)getuid ();
  struct passwd *pw = getpwnam (user);
  cr_assert_not_null (pw, "no user %s", user);
  return (long long)pw->pw_uid;
}

MODE_TEST (audit, each_run_appends_one_chained_record_with_its_facts, .timeout = 120)
{
  char *dir = user_dir ();
  char *log = log_path (dir);
  char timeout[32];
  /* The first two must end by themselves under runsc and the other lane's
   * load (1 s scaled by the pass's first measure was not enough). */
  harness_scaled_duration (3, timeout, sizeof timeout);
  static const char *const codes[]
      = { "print(sum(range(10)))\n", "import sys\nsys.exit(3)\n", "while True: pass\n" };
  const char *const args[]
      = { "--audit-log", log, "--session", "agent-7:conv/42", "--timeout", timeout, NULL };
  for (size_t i = 0; i < 3; i++)
    {
      struct run_out out;
      run_mode (*mode, codes[i], args, &out);
      run_out_free (&out);
    }
  json_t *records = read_chain (log);
  cr_assert_eq (json_array_size (records), 3, "3 runs must leave 3 records, not %zu",
                json_array_size (records));
  static const int exits[] = { 0, 3, 137 };
  for (size_t i = 0; i < 3; i++)
    {
      json_t *r = json_array_get (records, i);
      char want[65];
      sha256_hex (codes[i], strlen (codes[i]), want);
      cr_assert_str_eq (str_at (r, "event", NULL), "run");
      cr_assert_str_eq (str_at (r, "session", NULL), "agent-7:conv/42");
      cr_assert_eq (int_at (r, "caller", "uid"), launcher_uid ());
      cr_assert_str_eq (str_at (r, "code", "sha256"), want, "record %zu: code digest", i + 1);
      cr_assert_eq (int_at (r, "code", "length"), (long long)strlen (codes[i]));
      cr_assert_str_eq (str_at (r, "runtime", NULL), harness_runtime ());
      cr_assert_str_eq (str_at (r, "image", "rootfs"), harness_rootfs ());
      const char *seccomp = str_at (r, "seccomp_sha256", NULL);
      cr_assert (seccomp && strlen (seccomp) == 64, "record %zu: no seccomp filter digest", i + 1);
      cr_assert_eq (int_at (r, "limits", "memory_bytes"), 256LL << 20);
      cr_assert_eq (int_at (r, "outcome", "exit_code"), exits[i], "record %zu: exit code", i + 1);
      cr_assert (json_is_true (json_object_get (json_object_get (r, "outcome"), "timed_out"))
                     == (i == 2),
                 "record %zu: timed_out", i + 1);
      cr_assert_eq (strlen (str_at (r, "run_id", NULL)), 32);
      cr_assert_null (json_object_get (json_object_get (r, "outcome"), "stdout"),
                      "the output is not audited by default");
    }
  cr_assert_str_neq (str_at (json_array_get (records, 0), "run_id", NULL),
                     str_at (json_array_get (records, 1), "run_id", NULL));
  json_decref (records);
  unlink (log);
  rmdir (dir);
  free (log);
  free (dir);
}

MODE_TEST (audit, code_output_and_environment_values_stay_out_unless_audit_code, .timeout = 60)
{
  char *dir = user_dir ();
  char *log = log_path (dir);
  char tag[64], code[256], secret[96];
  make_run_tag (tag, sizeof tag);
  snprintf (secret, sizeof secret, "TOKEN=s3cr3t-%s", tag);
  snprintf (code, sizeof code, "# code-marker-%s\nimport os\nprint('out-' + os.environ['TOKEN'])\n",
            tag);
  const char *const args[] = { "--audit-log", log, "--env", secret, NULL };
  struct run_out out;
  run_mode (*mode, code, args, &out);
  RUN_ASSERT (&out, out.exit_status == 0, "the run must succeed");
  run_out_free (&out);
  size_t len = 0;
  char *text = slurp (log, &len);
  cr_assert (len > 0 && !memmem (text, len, tag, strlen (tag)),
             "neither the code, nor its output, nor the value of TOKEN may reach the log: %s",
             text);
  free (text);

  const char *const with_code[]
      = { "--audit-log", log, "--env", secret, "--audit-code=true", NULL };
  run_mode (*mode, code, with_code, &out);
  run_out_free (&out);
  json_t *records = read_chain (log);
  cr_assert_eq (json_array_size (records), 2);
  json_t *r = json_array_get (records, 1);
  cr_assert_str_eq (str_at (r, "code", "text"), code, "audit-code keeps the code");
  const char *stdout_text = str_at (r, "outcome", "stdout");
  cr_assert (stdout_text && strstr (stdout_text, "out-s3cr3t-"), "audit-code keeps the output");
  json_decref (records);
  unlink (log);
  rmdir (dir);
  free (log);
  free (dir);
}

enum
{
  ROUNDS = 3,
  AT_ONCE = 6
};

/* ROUNDS times, AT_ONCE launchers started together, each running print(1). */
static void
run_at_once (const char *const *args)
{
  for (int round = 0; round < ROUNDS; round++)
    {
      struct run_job jobs[AT_ONCE];
      for (int i = 0; i < AT_ONCE; i++)
        run_cli_spawn (args, true, &jobs[i]);
      for (int i = 0; i < AT_ONCE; i++)
        {
          struct run_out out;
          run_cli_wait (&jobs[i], "print(1)\n", 9, &out);
          RUN_ASSERT (&out, out.exit_status == 0, "every run must succeed");
          run_out_free (&out);
        }
    }
}

Test (audit, concurrent_launchers_never_interleave_records, .timeout = 300)
{
  char *dir = user_dir ();
  char *log = log_path (dir);
  const char *const args[] = { "--audit-log", log, NULL };
  run_at_once (args);
  json_t *records = read_chain (log);
  cr_assert_eq (json_array_size (records), ROUNDS * AT_ONCE, "%d runs, %zu records",
                ROUNDS * AT_ONCE, json_array_size (records));
  for (size_t i = 0; i < json_array_size (records); i++)
    for (size_t j = 0; j < i; j++)
      cr_assert_str_neq (str_at (json_array_get (records, i), "run_id", NULL),
                         str_at (json_array_get (records, j), "run_id", NULL));
  json_decref (records);
  unlink (log);
  rmdir (dir);
  free (log);
  free (dir);
}

Test (audit, a_log_that_cannot_be_written_stops_the_run_before_it_starts, .timeout = 60)
{
  char *dir = user_dir ();
  char missing[4200], tag[64], code[160];
  snprintf (missing, sizeof missing, "%s/no-such-dir/audit.log", dir);
  make_run_tag (tag, sizeof tag);
  /* The program would print the tag: its absence shows it never ran. */
  snprintf (code, sizeof code, "print('ran-%s')\n", tag);
  const char *const cases[][3] = { { "--audit-log", missing, NULL }, { "--audit-log", dir, NULL } };
  for (size_t i = 0; i < 2; i++)
    {
      struct run_out out;
      run_cli (code, strlen (code), cases[i], &out);
      RUN_ASSERT (&out, out.exit_status == 125 && strstr (out.err, "audit log"),
                  "an unwritable audit log must stop the run with exit 125, naming the log");
      RUN_ASSERT (&out, !strstr (out.out, tag) && !strstr (out.err, tag),
                  "the program must not have run");
      run_out_free (&out);
    }
  rmdir (dir);
  free (dir);
}

static int verify (const char *path, char **err_text);

Test (audit, launchers_sharing_one_descriptor_keep_one_chain, .timeout = 300)
{
  /* fd:N inherited by every launcher from one open file description, as
   * `exec 3>>log` in a shell gives it: a flock on that description would
   * exclude none of them. */
  char *dir = user_dir ();
  char *log = log_path (dir);
  int fd = open (log, O_WRONLY | O_APPEND | O_CREAT, 0600);
  cr_assert (fd >= 0, "%s: %s", log, strerror (errno));
  cr_assert (fchown (fd, (uid_t)launcher_uid (), (gid_t)-1) == 0, "chown: %s", strerror (errno));
  char spec[32];
  snprintf (spec, sizeof spec, "fd:%d", fd);
  const char *const args[] = { "--audit-log", spec, NULL };
  run_at_once (args);
  close (fd);
  json_t *records = read_chain (log);
  cr_assert_eq (json_array_size (records), ROUNDS * AT_ONCE);
  json_decref (records);
  unlink (log);
  rmdir (dir);
  free (log);
  free (dir);
}

Test (audit, a_log_others_could_change_or_stall_is_refused, .timeout = 60)
{
  char *dir = user_dir ();
  char *log = log_path (dir);
  const char *const args[] = { "--audit-log", log, NULL };
  struct
  {
    const char *what;
    const char *expect;
  } cases[] = {
    { "group-writable", "writable by its owner only" },
    { "a FIFO", "not a regular file" },
    { "a symbolic link", "audit log" },
    { "a second name", "one name" },
  };
  char other[4200];
  snprintf (other, sizeof other, "%s/other", dir);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      unlink (log);
      unlink (other);
      int fd = -1;
      switch (i)
        {
        case 0:
          fd = open (log, O_WRONLY | O_CREAT | O_EXCL, 0620);
          cr_assert (fd >= 0 && fchmod (fd, 0620) == 0);
          cr_assert (fchown (fd, (uid_t)launcher_uid (), (gid_t)-1) == 0);
          break;
        case 1:
          cr_assert (mkfifo (log, 0600) == 0
                     && chown (log, (uid_t)launcher_uid (), (gid_t)-1) == 0);
          break;
        case 2:
          fd = open (other, O_WRONLY | O_CREAT | O_EXCL, 0600);
          cr_assert (fd >= 0 && fchown (fd, (uid_t)launcher_uid (), (gid_t)-1) == 0);
          cr_assert (symlink (other, log) == 0);
          break;
        default:
          fd = open (other, O_WRONLY | O_CREAT | O_EXCL, 0600);
          cr_assert (fd >= 0 && fchown (fd, (uid_t)launcher_uid (), (gid_t)-1) == 0);
          cr_assert (link (other, log) == 0);
          break;
        }
      if (fd >= 0)
        close (fd);
      struct run_out out;
      run_cli ("print('ran-' + 'here')\n", 23, args, &out);
      RUN_ASSERT (&out, out.exit_status == 125 && strstr (out.err, cases[i].expect),
                  "a log that is %s must be refused ('%s')", cases[i].what, cases[i].expect);
      RUN_ASSERT (&out, !strstr (out.out, "ran-here"), "the program must not have run");
      run_out_free (&out);
      struct stat st;
      if (i != 1)
        cr_assert (stat (log, &st) == 0 && st.st_size == 0, "nothing may be written to %s",
                   cases[i].what);
    }
  unlink (log);
  unlink (other);
  rmdir (dir);
  free (log);
  free (dir);
}

Test (audit, a_record_cut_short_is_followed_by_a_whole_one, .timeout = 60)
{
  char *dir = user_dir ();
  char *log = log_path (dir);
  const char *const args[] = { "--audit-log", log, NULL };
  struct run_out out;
  run_cli ("print(1)\n", 9, args, &out);
  run_out_free (&out);
  /* A crash or a full disk in the middle of a record. */
  int fd = open (log, O_WRONLY | O_APPEND);
  static const char cut[] = "{\"v\":1,\"time\":";
  cr_assert (fd >= 0 && write (fd, cut, strlen (cut)) == (ssize_t)strlen (cut));
  close (fd);
  run_cli ("print(2)\n", 9, args, &out);
  RUN_ASSERT (&out, out.exit_status == 0, "the run after the damage must succeed");
  run_out_free (&out);
  size_t len = 0;
  char *text = slurp (log, &len);
  cr_assert (len > 0 && text[len - 1] == '\n');
  text[len - 1] = '\0';
  char *last = strrchr (text, '\n');
  cr_assert_not_null (last, "the new record must start on a line of its own");
  json_error_t jerr;
  json_t *r = json_loads (last + 1, 0, &jerr);
  cr_assert (json_is_object (r), "the last line must be a whole record: %s: %s", jerr.text,
             last + 1);
  cr_assert (json_is_null (json_object_get (r, "prev"))
                 && strstr (json_string_value (json_object_get (r, "chain")), "restart"),
             "it restarts the chain and says why");
  json_decref (r);
  free (text);
  char *why = NULL;
  int status = verify (log, &why);
  cr_assert (status == 1 && strstr (why, "record 2: does not end with its hash"), "got %d: %s",
             status, why);
  free (why);
  unlink (log);
  rmdir (dir);
  free (log);
  free (dir);
}

Test (audit, a_log_rotated_during_a_run_gets_the_record_in_the_new_file, .timeout = 120)
{
  char *dir = user_dir ();
  char *log = log_path (dir);
  char rotated[4200], code[64];
  snprintf (rotated, sizeof rotated, "%s.1", log);
  const char *const args[] = { "--audit-log", log, NULL };
  struct run_out out;
  run_cli ("print(1)\n", 9, args, &out);
  run_out_free (&out);
  snprintf (code, sizeof code, "import time\ntime.sleep(%.1f)\n", harness_scaled (1.5));
  const char *const slow[] = { "--audit-log", log, "--timeout", "60s", NULL };
  struct run_job job;
  run_cli_spawn (slow, true, &job);
  run_job_feed (&job, code, strlen (code));
  sleep_seconds (harness_scaled (0.5));
  /* logrotate's default: rename, then a new file is made by the next run. */
  cr_assert (rename (log, rotated) == 0, "rename: %s", strerror (errno));
  run_cli_wait (&job, code, strlen (code), &out);
  RUN_ASSERT (&out, out.exit_status == 0, "the run must succeed");
  run_out_free (&out);
  json_t *old = read_chain (rotated), *fresh = read_chain (log);
  cr_assert_eq (json_array_size (old), 1, "the rotated file keeps the earlier record only");
  cr_assert_eq (json_array_size (fresh), 1, "the run's record is in the file now at the path");
  char want[65];
  sha256_hex (code, strlen (code), want);
  cr_assert_str_eq (str_at (json_array_get (fresh, 0), "code", "sha256"), want);
  json_decref (old);
  json_decref (fresh);
  unlink (rotated);
  unlink (log);
  rmdir (dir);
  free (log);
  free (dir);
}

static int
verify (const char *path, char **err_text)
{
  const char *const args[] = { "verify", path, NULL };
  struct run_job job;
  run_nsbox_spawn ("audit", false, args, false, &job);
  struct run_out out;
  run_cli_wait (&job, "", 0, &out);
  int status = out.exit_status;
  *err_text = strdup (out.err);
  run_out_free (&out);
  return status;
}

/* The log with its lines rearranged: `order` lists which original line
 * (1-based) goes where, 0 ending it. */
static void
rearranged (const char *from, const char *to, const int *order)
{
  size_t len = 0;
  char *text = slurp (from, &len);
  char *lines[16];
  size_t n = 0;
  for (char *p = text; p < text + len && n < 16; p = strchr (p, '\n') + 1)
    lines[n++] = p;
  FILE *f = fopen (to, "wb");
  cr_assert_not_null (f);
  for (const int *o = order; *o; o++)
    {
      char *l = lines[*o - 1];
      fwrite (l, 1, (size_t)(strchr (l, '\n') - l + 1), f);
    }
  fclose (f);
  free (text);
}

Test (audit, verify_names_the_first_record_an_edit_broke, .timeout = 120)
{
  char *dir = user_dir ();
  char *log = log_path (dir);
  const char *const args[] = { "--audit-log", log, NULL };
  for (int i = 0; i < 4; i++)
    {
      struct run_out out;
      char code[32];
      snprintf (code, sizeof code, "print(%d)\n", i);
      run_cli (code, strlen (code), args, &out);
      run_out_free (&out);
    }
  json_decref (read_chain (log));
  char *why = NULL;
  cr_assert_eq (verify (log, &why), 0, "an intact log must verify: %s", why);
  free (why);

  char edited[4200];
  snprintf (edited, sizeof edited, "%s/edited.log", dir);
  struct
  {
    int order[6];
    const char *edit; /* replaced in record 3, or NULL */
    const char *expect;
  } cases[] = {
    { { 1, 2, 3, 4, 0 }, "\"exit_code\":0", "record 3: its hash does not match" },
    { { 1, 3, 4, 0 }, NULL, "record 2: does not follow record 1" },
    { { 2, 3, 4, 0 }, NULL, "record 1: follows a record that is not in the file" },
    { { 1, 3, 2, 4, 0 }, NULL, "record 2: does not follow record 1" },
    { { 1, 2, 3, 4, 1, 0 }, NULL, "record 5: starts a new chain" },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      rearranged (log, edited, cases[i].order);
      if (cases[i].edit)
        {
          size_t len = 0;
          char *text = slurp (edited, &len);
          char *third = strchr (strchr (text, '\n') + 1, '\n') + 1;
          char *at = strstr (third, cases[i].edit);
          cr_assert_not_null (at);
          at[strlen (cases[i].edit) - 1] = '1';
          spill (edited, text, len);
          free (text);
        }
      int status = verify (edited, &why);
      cr_assert (status == 1 && strstr (why, cases[i].expect),
                 "case %zu: expected exit 1 and '%s', got %d: %s", i, cases[i].expect, status, why);
      free (why);
    }
  /* A record cut short (a crash mid-write): the writer that comes next
   * starts a new chain and says why, and verify names the cut record. */
  size_t len = 0;
  char *text = slurp (log, &len);
  spill (edited, text, len - 20);
  free (text);
  int status = verify (edited, &why);
  cr_assert (status == 1 && strstr (why, "record 4: cut short"), "got %d: %s", status, why);
  free (why);
  unlink (edited);
  unlink (log);
  rmdir (dir);
  free (log);
  free (dir);
}

Test (audit, served_runs_carry_their_session_and_client, .timeout = 120)
{
  char *dir = user_dir ();
  char *log = log_path (dir);
  /* A profile that names no audit log of its own is audited too. */
  char profile[4200], profile_arg[4300];
  snprintf (profile, sizeof profile, "%s/other.yaml", dir);
  FILE *f = fopen (profile, "we");
  cr_assert_not_null (f);
  fprintf (f, "rootfs: %s\nruntime: %s\n", harness_rootfs (), harness_runtime ());
  fclose (f);
  cr_assert (chmod (profile, 0644) == 0);
  snprintf (profile_arg, sizeof profile_arg, "other=%s", profile);
  const char *const args[]
      = { "--audit-log", log, "--pool-size", "1", "--profile", profile_arg, NULL };
  struct serve_job s;
  serve_start (args, &s);
  static const char body_session[] = "{\"code\":\"print(1)\",\"session\":\"from-body\"}";
  static const char body_plain[] = "{\"code\":\"print(2)\"}";
  const char *const header[] = { "X-Nsbox-Session: from-header", NULL };
  char *answer = NULL;
  long st = serve_http (s.socket, "POST", "/v1/runs", body_session, strlen (body_session), NULL,
                        &answer, NULL);
  cr_assert_eq (st, 200, "%s", answer);
  free (answer);
  st = serve_http (s.socket, "POST", "/v1/runs", body_plain, strlen (body_plain), header, &answer,
                   NULL);
  cr_assert_eq (st, 200, "%s", answer);
  free (answer);
  static const char body_other[] = "{\"code\":\"print(3)\",\"profile\":\"other\"}";
  st = serve_http (s.socket, "POST", "/v1/runs", body_other, strlen (body_other), NULL, &answer,
                   NULL);
  cr_assert_eq (st, 200, "%s", answer);
  free (answer);
  /* A client cannot point the server's audit log elsewhere. */
  static const char body_log[] = "{\"code\":\"print(4)\",\"audit-log\":\"/tmp/elsewhere\"}";
  st = serve_http (s.socket, "POST", "/v1/runs", body_log, strlen (body_log), NULL, &answer, NULL);
  cr_assert (st == 400 && strstr (answer, "audit log is the pool's"), "got %ld: %s", st, answer);
  free (answer);
  const char *const bad[] = { "X-Nsbox-Session: no spaces allowed", NULL };
  st = serve_http (s.socket, "POST", "/v1/runs", body_plain, strlen (body_plain), bad, &answer,
                   NULL);
  cr_assert (st == 400 && strstr (answer, "X-Nsbox-Session"), "got %ld: %s", st, answer);
  free (answer);
  char *serve_log = NULL;
  serve_stop (&s, &serve_log);
  free (serve_log);

  json_t *records = read_chain (log);
  cr_assert_eq (json_array_size (records), 3,
                "3 runs, %zu records (a refused request is not a run)", json_array_size (records));
  char want_code[65];
  sha256_hex ("print(3)", 8, want_code);
  cr_assert_str_eq (str_at (json_array_get (records, 2), "code", "sha256"), want_code,
                    "the run of profile 'other' is in the server's log");
  cr_assert_str_eq (str_at (json_array_get (records, 0), "session", NULL), "from-body");
  cr_assert_str_eq (str_at (json_array_get (records, 1), "session", NULL), "from-header");
  char want[64];
  snprintf (want, sizeof want, "serve unix uid %u pid %d", (unsigned)getuid (), (int)getpid ());
  const char *client = str_at (json_array_get (records, 0), "caller", "client");
  cr_assert (client && strcmp (client, want) == 0, "client '%s', expected '%s'", client, want);
  cr_assert_eq (int_at (json_array_get (records, 0), "caller", "uid"), launcher_uid ());
  json_decref (records);
  unlink (log);
  unlink (profile);
  rmdir (dir);
  free (log);
  free (dir);
}
