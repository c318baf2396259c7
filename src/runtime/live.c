/* A live sandbox: one interpreter kept for many runs of one conversation.
 *
 * The driver below runs as the sandbox's program: it reads each run's code
 * from its code pipe (a frame "R RUN LEN CAP\n" and LEN bytes), runs it in
 * one __main__ namespace, and answers "D RUN STATUS HAS_VALUE LEN\n" with
 * LEN bytes of the last expression's repr (at most CAP) on its answer pipe.
 * Pipes, not a socket: a unix socket would let the program pass the
 * launcher fds (a lingering TCP socket whose last close, in the launcher's
 * read, blocks for as long as the program likes). The driver
 * is the program's to read, replace or crash, so the launcher trusts it
 * for one thing only, the end of the run it asked for, and only as long as
 * the run's time lasts: the timeout, the caps and the kill are enforced
 * here, on the launcher's side, whatever the driver says. A forged frame
 * can end the program's own run early; it cannot reach another sandbox.
 *
 * A run's output is what the launcher read from the sandbox's pipes
 * between sending the code and reading the driver's answer (then one last
 * look at the pipes): bytes a background thread or process writes later
 * stay in the pipes and are the next run's. A run's cpu_ms is the sandbox's
 * CPU time since the previous run's end, so that work done between runs is
 * charged (to the quotas too) with the next. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "error.h"
#include "files.h"
#include "launch-private.h"
#include "report.h"

/* After the interrupt at timeout: how long the code has to return before
 * the whole sandbox is killed. */
#define LIVE_GRACE_MS 2000
/* After the driver's end of its answer pipe closed: how long its
 * program has to exit on its own before the sandbox is killed. */
#define DRIVER_EXIT_MS 500
/* The longest answer line the driver may write before its value. */
#define FRAME_HEAD_MAX 96

/* Run with `python -u -c`, the code and answer pipes' fd numbers as argv[1]
 * and argv[2]. It imports only C modules (_ast, _signal, not ast and
 * signal, which bring enum, functools and a dozen more): an idle sandbox
 * holds what its driver imported. It runs `None` before it waits for code:
 * the first parse builds the AST's types (5 ms), which a warm pool's
 * sandbox has then done before its first run. */
const char nsbox_live_driver[]
    = "import sys\n"
      "def _nsbox_driver():\n"
      "    import _ast, _signal, builtins, os\n"
      "    fd_in = int(sys.argv.pop(1))\n"
      "    fd_out = int(sys.argv.pop(1))\n"
      "    sys.argv[0] = '-'\n"
      "    main = type(sys)('__main__')\n"
      "    main.__builtins__ = builtins\n"
      "    sys.modules['__main__'] = main\n"
      "    ns = main.__dict__\n"
      "    buf = bytearray()\n"
      "    _signal.signal(_signal.SIGINT, _signal.default_int_handler)\n"
      "\n"
      "    def fill():\n"
      "        data = os.read(fd_in, 65536)\n"
      "        if not data:\n"
      "            os._exit(0)\n"
      "        buf.extend(data)\n"
      "\n"
      "    def frame():\n"
      "        while b'\\n' not in buf:\n"
      "            fill()\n"
      "        end = buf.index(b'\\n')\n"
      "        head = bytes(buf[:end]).split()\n"
      "        if len(head) != 4 or head[0] != b'R':\n"
      "            os._exit(125)\n"
      "        run, size, cap = int(head[1]), int(head[2]), int(head[3])\n"
      "        while len(buf) < end + 1 + size:\n"
      "            fill()\n"
      "        code = bytes(buf[end + 1:end + 1 + size])\n"
      "        del buf[:end + 1 + size]\n"
      "        return run, code, cap\n"
      "\n"
      "    def flush():\n"
      "        for f in (sys.stdout, sys.stderr):\n"
      "            try:\n"
      "                f.flush()\n"
      "            except BaseException:\n"
      "                pass\n"
      "\n"
      "    def execute(code):\n"
      "        tree = compile(code, '<stdin>', 'exec', _ast.PyCF_ONLY_AST, dont_inherit=True)\n"
      "        last = None\n"
      "        if tree.body and isinstance(tree.body[-1], _ast.Expr):\n"
      "            last = _ast.Expression(tree.body.pop().value)\n"
      "        exec(compile(tree, '<stdin>', 'exec', dont_inherit=True), ns)\n"
      "        if last is not None:\n"
      "            value = eval(compile(last, '<stdin>', 'eval', dont_inherit=True), ns)\n"
      "            if value is not None:\n"
      "                return repr(value)\n"
      "        return None\n"
      "\n"
      "    def report(e):\n"
      "        tb = e.__traceback__\n"
      "        while tb is not None and tb.tb_frame.f_code.co_filename != '<stdin>':\n"
      "            tb = tb.tb_next\n"
      "        try:\n"
      "            import traceback\n"
      "            traceback.print_exception(type(e), e, tb)\n"
      "        except BaseException:\n"
      "            pass\n"
      "\n"
      "    execute(b'None')\n"
      "    while True:\n"
      "        try:\n"
      "            try:\n"
      "                run, code, cap = frame()\n"
      "            except KeyboardInterrupt:\n"
      "                continue\n"
      "            status, value = 0, None\n"
      "            try:\n"
      "                try:\n"
      "                    value = execute(code)\n"
      "                except SystemExit as e:\n"
      "                    if e.code is None:\n"
      "                        status = 0\n"
      "                    elif isinstance(e.code, int):\n"
      "                        status = e.code & 0xff\n"
      "                    else:\n"
      "                        print(e.code, file=sys.stderr)\n"
      "                        status = 1\n"
      "                except KeyboardInterrupt as e:\n"
      "                    report(e)\n"
      "                    status = 130\n"
      "                except BaseException as e:\n"
      "                    report(e)\n"
      "                    status = 1\n"
      "                flush()\n"
      "            except KeyboardInterrupt:\n"
      "                status = 130\n"
      "            answer = None\n"
      "            while True:\n"
      "                try:\n"
      "                    if answer is None:\n"
      "                        raw = b''\n"
      "                        if value is not None:\n"
      "                            raw = value.encode('utf-8', 'backslashreplace')[:cap]\n"
      "                        head = b'D %d %d %d %d\\n' % (run, status, value is not None, "
      "len(raw))\n"
      "                        answer = head + raw\n"
      "                    while answer:\n"
      "                        answer = answer[os.write(fd_out, answer):]\n"
      "                    break\n"
      "                except KeyboardInterrupt:\n"
      "                    continue\n"
      "            value = raw = code = answer = None\n"
      "        except KeyboardInterrupt:\n"
      "            pass\n"
      "_nsbox_driver()\n";

struct turn
{
  struct nsbox_launch *r;
  const struct nsbox_dispatch *d;
  uint64_t run;
  char head[FRAME_HEAD_MAX];
  size_t head_len, sent; /* of head, then of the code */
  struct nsbox_capture out, errs;
  char *answer; /* what came on the answer pipe */
  size_t answer_len, answer_off, answer_cap;
  bool done, gone, broken, interrupted, killed, cancelled;
  int status;
  bool has_value;
  size_t value_off, value_len;
  uint64_t deadline, grace_deadline;
};

/* Whatever sits on the answer pipe before a run was not asked for. */
static void
discard_answers (int fd)
{
  char junk[4096];
  for (int i = 0; i < 64; i++)
    if (read (fd, junk, sizeof junk) <= 0)
      return;
}

static void
send_code (struct turn *t)
{
  while (!t->broken)
    {
      const char *p;
      size_t n;
      if (t->sent < t->head_len)
        p = t->head + t->sent, n = t->head_len - t->sent;
      else if (t->sent - t->head_len < t->d->code_len)
        p = t->d->code + (t->sent - t->head_len), n = t->d->code_len - (t->sent - t->head_len);
      else
        return;
      /* SIGPIPE is blocked for the turn (nsbox_sigpipe_block). */
      ssize_t w = write (t->r->code_fd, p, n > 65536 ? 65536 : n);
      if (w < 0 && errno == EINTR)
        continue;
      if (w < 0 && errno == EAGAIN)
        return;
      if (w <= 0)
        t->broken = true; /* the driver closed its end */
      else
        t->sent += (size_t)w;
    }
}

static bool
all_sent (const struct turn *t)
{
  return t->sent >= t->head_len + t->d->code_len;
}

/* Whether `line` is "D" and four numbers, each after one space. */
static bool
answer_head_valid (const char *line, size_t len)
{
  if (len < 2 || line[0] != 'D')
    return false;
  int numbers = 0;
  for (size_t i = 1; i < len; i++)
    {
      if (line[i] != ' ')
        return false;
      size_t digits = 0;
      while (i + 1 < len && line[i + 1] >= '0' && line[i + 1] <= '9' && digits < 20)
        i++, digits++;
      if (digits == 0 || digits == 20)
        return false;
      numbers++;
    }
  return numbers == 4;
}

/* The answers in t->answer from t->answer_off: 1 with the answer of this
 * run complete (value at value_off), 0 while more is to come, -1 when it
 * cannot be one. An answer for another run (a stale or a forged one) is
 * skipped. Linear in what arrived: each byte is looked at once. */
static int
parse_answer (struct turn *t)
{
  for (;;)
    {
      const char *at = t->answer + t->answer_off;
      size_t left = t->answer_len - t->answer_off;
      const char *nl = memchr (at, '\n', left < FRAME_HEAD_MAX ? left : FRAME_HEAD_MAX);
      if (!nl)
        return left >= FRAME_HEAD_MAX ? -1 : 0;
      size_t line_len = (size_t)(nl - at);
      if (!answer_head_valid (at, line_len))
        return -1;
      char line[FRAME_HEAD_MAX + 1];
      memcpy (line, at, line_len);
      line[line_len] = '\0';
      uint64_t run;
      int status, has_value;
      size_t len;
      if (sscanf (line, "D %" SCNu64 " %d %d %zu", &run, &status, &has_value, &len) != 4
          || status < 0 || status > 255 || (has_value != 0 && has_value != 1)
          || len > t->d->max_output_bytes)
        return -1;
      size_t total = line_len + 1 + len;
      if (left < total)
        return 0;
      if (run == t->run)
        {
          t->status = status;
          t->has_value = has_value;
          t->value_off = t->answer_off + line_len + 1;
          t->value_len = len;
          return 1;
        }
      t->answer_off += total;
    }
}

/* At most 16 reads a turn of the poll loop: a program that writes frames
 * for ever must not keep the launcher from its deadline. What was parsed
 * is dropped once per read. */
static void
read_answer (struct turn *t)
{
  for (int i = 0; i < 16; i++)
    {
      if (t->answer_off)
        {
          memmove (t->answer, t->answer + t->answer_off, t->answer_len - t->answer_off);
          t->answer_len -= t->answer_off;
          t->answer_off = 0;
        }
      if (t->answer_len == t->answer_cap)
        {
          t->broken = true; /* longer than any answer may be */
          return;
        }
      ssize_t n = read (t->r->answer_fd, t->answer + t->answer_len, t->answer_cap - t->answer_len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN)
        return;
      if (n <= 0)
        {
          t->broken = true; /* the driver's end is gone */
          return;
        }
      t->answer_len += (size_t)n;
      int p = parse_answer (t);
      if (p != 0)
        {
          t->done = p > 0;
          t->broken = p < 0;
          return;
        }
    }
}

static int
drain_output (struct turn *t)
{
  struct nsbox_streams *s = &t->r->streams;
  if ((s->stdout_fd >= 0 && nsbox_supervise_drain (&s->stdout_fd, &t->out) < 0)
      || (s->stderr_fd >= 0 && nsbox_supervise_drain (&s->stderr_fd, &t->errs) < 0))
    return -ENOMEM;
  return 0;
}

/* KeyboardInterrupt in the driver's main thread: its answer then comes
 * with the state kept. */
static bool
interrupt (struct turn *t)
{
  struct nsbox_launch *r = t->r;
  if (r->program_pidfd < 0)
    {
      pid_t pid = nsbox_native_program (r);
      int fd = pid > 0 ? (int)syscall (SYS_pidfd_open, pid, 0) : -1;
      /* Still init's child once the pidfd is held: the pid was not freed
       * and reused by a host process in between. */
      r->native.program = 0;
      if (fd >= 0 && nsbox_native_program (r) == pid)
        r->program_pidfd = fd;
      else if (fd >= 0)
        close (fd);
    }
  return r->program_pidfd >= 0
         && syscall (SYS_pidfd_send_signal, r->program_pidfd, SIGINT, NULL, 0) == 0;
}

static int
poll_turn (struct turn *t)
{
  struct nsbox_launch *r = t->r;
  struct pollfd p[6];
  int n = 0, i_ans, i_code = -1, i_out = -1, i_err = -1, i_pid, i_cancel = -1;
  p[i_ans = n++] = (struct pollfd){ r->answer_fd, POLLIN, 0 };
  if (!all_sent (t))
    p[i_code = n++] = (struct pollfd){ r->code_fd, POLLOUT, 0 };
  if (r->streams.stdout_fd >= 0)
    p[i_out = n++] = (struct pollfd){ r->streams.stdout_fd, POLLIN, 0 };
  if (r->streams.stderr_fd >= 0)
    p[i_err = n++] = (struct pollfd){ r->streams.stderr_fd, POLLIN, 0 };
  p[i_pid = n++] = (struct pollfd){ r->child.pidfd, POLLIN, 0 };
  if (t->d->cancel_fd >= 0)
    p[i_cancel = n++]
        = (struct pollfd){ t->d->cancel_fd, t->d->cancel_on_half_close ? POLLRDHUP : 0, 0 };
  uint64_t now = nsbox_now_ms ();
  uint64_t until = t->interrupted ? t->grace_deadline : t->deadline;
  int wait = until > now ? (int)(until - now > 60000 ? 60000 : until - now) : 0;
  if (poll (p, (nfds_t)n, wait) < 0 && errno != EINTR)
    return -errno;
  /* The output first: what was written before the answer is in the pipes
   * before it. */
  if ((i_out >= 0 && p[i_out].revents && nsbox_supervise_drain (&r->streams.stdout_fd, &t->out) < 0)
      || (i_err >= 0 && p[i_err].revents
          && nsbox_supervise_drain (&r->streams.stderr_fd, &t->errs) < 0))
    return -ENOMEM;
  if (i_code >= 0 && p[i_code].revents)
    send_code (t);
  if (p[i_ans].revents)
    read_answer (t);
  if (p[i_pid].revents)
    t->gone = true;
  if (i_cancel >= 0 && p[i_cancel].revents)
    t->cancelled = true;
  return 0;
}

/* The sandbox is lost: what init said of its program, if it said it. */
static void
conclude_lost (struct turn *t, struct nsbox_result *res)
{
  struct nsbox_launch *r = t->r;
  struct nsbox_report rep = { 0 };
  bool have = r->streams.report_fd >= 0
              && read (r->streams.report_fd, &rep, sizeof rep) == (ssize_t)sizeof rep
              && rep.kind == NSBOX_REPORT_STATUS;
  nsbox_limits_kill (&r->limits);
  nsbox_limits_collect (&r->limits, res);
  nsbox_launch_kill (r);
  res->sandbox_lost = true;
  if (have && !t->killed && WIFEXITED (rep.status))
    res->exit_code = WEXITSTATUS (rep.status);
  else
    {
      res->signal = have && WIFSIGNALED (rep.status) ? WTERMSIG (rep.status) : SIGKILL;
      res->exit_code = 128 + res->signal;
    }
}

int
nsbox_launch_place_inputs (struct nsbox_launch *r, const struct nsbox_inputs *in,
                           struct nsbox_error **err)
{
  int owned = nsbox_launch_owned (r, err);
  if (owned < 0 || !in || in->n == 0)
    return owned;
  int tmp = nsbox_native_tmp_fd (r);
  if (tmp < 0)
    return nsbox_error_set (err, EPROTO, "the sandbox's /tmp did not arrive");
  return nsbox_inputs_copy_beneath (tmp, in, err);
}

void
nsbox_launch_count_cpu_from (struct nsbox_launch *r, uint64_t usec)
{
  if (usec != UINT64_MAX)
    r->live_cpu_usec = usec;
}

int
nsbox_launch_turn (struct nsbox_launch *r, uint64_t run, const struct nsbox_dispatch *d,
                   struct nsbox_result *res, struct nsbox_error **err)
{
  int owned = nsbox_launch_owned (r, err);
  if (owned < 0)
    return owned;
  if (r->code_fd < 0 || r->answer_fd < 0 || r->child.pidfd < 0)
    return nsbox_error_set (err, ESRCH, "this sandbox is gone");
  struct turn t = { .r = r, .d = d, .run = run };
  t.answer_cap = FRAME_HEAD_MAX + (size_t)d->max_output_bytes + 1;
  t.answer = malloc (t.answer_cap);
  if (!t.answer)
    return nsbox_error_oom (err);
  t.head_len = (size_t)snprintf (t.head, sizeof t.head, "R %" PRIu64 " %zu %" PRIu64 "\n", run,
                                 d->code_len, d->max_output_bytes);
  nsbox_capture_init (&t.out, d->capture, d->max_output_bytes);
  nsbox_capture_init (&t.errs, d->capture, d->max_output_bytes);
  nsbox_capture_observe (&t.out, d->output, d->output_data, 1);
  nsbox_capture_observe (&t.errs, d->output, d->output_data, 2);
  discard_answers (r->answer_fd);
  /* From the previous run's end: what the program did between runs (a
   * background thread or process) is charged to this one. */
  uint64_t cpu_before = r->live_cpu_usec;
  uint64_t start = nsbox_now_ms ();
  t.deadline = start + d->timeout_ms;
  int ret = 0;
  struct nsbox_sigpipe_guard pipe_guard;
  nsbox_sigpipe_block (&pipe_guard);
  send_code (&t);
  while (!t.done && !t.broken && !t.gone && !t.cancelled)
    {
      uint64_t now = nsbox_now_ms ();
      if (!t.interrupted && now >= t.deadline)
        {
          t.interrupted = true;
          t.grace_deadline = now + LIVE_GRACE_MS;
          if (!interrupt (&t))
            break;
        }
      else if (t.interrupted && now >= t.grace_deadline)
        break;
      if ((ret = poll_turn (&t)) < 0)
        break;
    }
  nsbox_sigpipe_restore (&pipe_guard);
  /* The driver's end closed: its program is most likely exiting; its own
   * status says more than a kill. Never past the grace period. */
  if (ret >= 0 && t.broken && !t.gone)
    {
      uint64_t now = nsbox_now_ms ();
      uint64_t wait = DRIVER_EXIT_MS;
      if (t.interrupted)
        wait = t.grace_deadline > now ? t.grace_deadline - now : 0;
      if (wait > DRIVER_EXIT_MS)
        wait = DRIVER_EXIT_MS;
      struct pollfd p = { r->child.pidfd, POLLIN, 0 };
      t.gone = poll (&p, 1, (int)wait) > 0;
    }
  /* One last look: what the program wrote before its answer. */
  if (ret >= 0)
    ret = drain_output (&t);
  uint64_t cpu_after = nsbox_launch_cpu_usec (r);
  if (cpu_after != UINT64_MAX)
    r->live_cpu_usec = cpu_after;
  res->in_sandbox = true;
  res->sandbox_run = run;
  res->timed_out = t.interrupted;
  if (t.done && ret >= 0)
    {
      res->exit_code = t.interrupted && t.status == 0 ? 130 : t.status;
      if (t.has_value)
        {
          res->value = malloc (t.value_len + 1);
          if (!res->value)
            ret = -ENOMEM;
          else
            {
              memcpy (res->value, t.answer + t.value_off, t.value_len);
              res->value[t.value_len] = '\0';
              res->value_len = t.value_len;
            }
        }
    }
  else
    {
      t.killed = !t.gone;
      conclude_lost (&t, res);
    }
  /* What the run left in /tmp/out, while the sandbox lives on: collected
   * beneath its /tmp fd, each file's type and size checked as it is
   * opened, so a process still writing can change a copy, not the
   * launcher's reach. Its failure (the host's: memory, libcrypto) fails
   * the run's call, not the sandbox. */
  int collected = 0;
  if (ret >= 0 && t.done && d->output_dir_fd >= 0)
    {
      int tmp = nsbox_native_tmp_fd (r);
      collected = tmp < 0 ? nsbox_error_set (err, EPROTO,
                                             "collect outputs: the sandbox's /tmp did not arrive")
                          : nsbox_collect_outputs (tmp, d->output_dir_fd, true, res, err);
    }
  explicit_bzero (t.answer, t.answer_len);
  free (t.answer);
  nsbox_supervise_store_output (&t.out, &t.errs, res);
  res->duration_ms = nsbox_now_ms () - start;
  if (cpu_after != UINT64_MAX && cpu_after >= cpu_before)
    res->cpu_ms = (cpu_after - cpu_before) / 1000;
  res->timeout_ms = d->timeout_ms;
  res->memory_limit_bytes = d->memory_bytes;
  nsbox_launch_describe (r, res);
  if (ret < 0)
    {
      if (!res->sandbox_lost)
        {
          nsbox_launch_kill (r);
          res->sandbox_lost = true;
        }
      return nsbox_error_sys (err, -ret, "supervise the sandbox's run");
    }
  if (t.cancelled)
    return nsbox_error_set (err, ECANCELED,
                            "the client went away: the run was killed, and its sandbox with it");
  return collected;
}
