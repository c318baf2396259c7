/* runsc-exec: the first program gVisor runs under runtime runsc.
 *
 *   /mnt/.nsbox-exec FILTER REPORT UID GID COMMAND [ARG...]
 *
 * Started by gVisor as uid 0 of the sandbox with CAP_SETUID, CAP_SETGID and
 * CAP_SETPCAP only (and no_new_privs). It opens REPORT (a host file of the
 * launcher's, which only uid 0 of the sandbox may open) and records that it
 * started, empties the capability bounding set, installs the run's seccomp
 * filter (classic BPF, as nsbox compiled it from the policy for the native
 * runtime), then forks the program's process, which becomes UID:GID with
 * no capabilities and executes COMMAND, looked up in the sandbox's PATH.
 * It stays as the sandbox's PID 1 reaper, without capabilities and under a
 * uid the program does not have, so the program can neither signal nor
 * stop it. A setup step that fails is written to REPORT, never to the
 * program's output: the program cannot forge a setup failure, and nothing
 * the program prints is read by the launcher. gVisor's sentry evaluates
 * the filter for the program as the kernel would, so both runtimes apply
 * the same policy.
 *
 * Static and libc-free: it runs from whatever root filesystem the job has.
 * Embedded into libnsbox and bind-mounted read-only into each sandbox. */
#include <asm/unistd.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#define NSBOX_REPORT_RECORDS_ONLY
#include "report.h"

#define PR_SET_SECCOMP_ 22
#define PR_SET_NO_NEW_PRIVS_ 38
#define PR_SET_DUMPABLE_ 4
#define PR_CAPBSET_DROP_ 24
#define O_RDONLY_ 0
#define O_WRONLY_ 1
#define O_APPEND_ 02000
#define O_CLOEXEC_ 02000000
#define LINUX_CAPABILITY_VERSION_3_ 0x20080522
#define EXIT_SETUP_FAILED 127
#define MAX_INSNS 4096

/* argv, as src/runsc.c builds it. */
enum
{
  ARG_FILTER = 1,
  ARG_REPORT,
  ARG_UID,
  ARG_GID,
  ARG_COMMAND,
};

#if defined(__x86_64__)
static long
sys (long n, long a, long b, long c, long d, long e)
{
  long ret;
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
                   : "rcx", "r11", "memory");
  return ret;
}
__asm__(".text\n.globl _start\n_start:\n xor %rbp, %rbp\n mov %rsp, %rdi\n and $-16, %rsp\n"
        " call start_c\n hlt\n");
#elif defined(__aarch64__)
static long
sys (long n, long a, long b, long c, long d, long e)
{
  register long x8 __asm__("x8") = n;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  register long x4 __asm__("x4") = e;
  __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4) : "memory");
  return x0;
}
__asm__(".text\n.globl _start\n_start:\n mov x29, #0\n mov x30, #0\n mov x0, sp\n"
        " bl start_c\n");
#else
#error "runsc-exec: unsupported architecture"
#endif

static struct sock_filter insns[MAX_INSNS];
static char path_buf[4096];

static long report_fd = -1;

static unsigned long
length (const char *s)
{
  unsigned long n = 0;
  while (s[n])
    n++;
  return n;
}

static void
report (int32_t kind, int32_t step, long err, const char *detail)
{
  struct nsbox_report r;
  char *bytes = (char *)&r;
  for (unsigned long i = 0; i < sizeof r; i++)
    bytes[i] = 0;
  r.kind = kind;
  r.step = step;
  r.err = (int32_t)err;
  for (unsigned long i = 0; detail && detail[i] && i + 1 < sizeof r.detail; i++)
    r.detail[i] = detail[i];
  sys (__NR_write, report_fd, (long)&r, (long)sizeof r, 0, 0);
}

static void __attribute__ ((noreturn)) fail (int32_t step, const char *detail, long err)
{
  report (NSBOX_REPORT_ERROR, step, err, detail);
  for (;;)
    sys (__NR_exit_group, EXIT_SETUP_FAILED, 0, 0, 0, 0);
}

/* A decimal id from argv, 0 to 4294967294 as the configuration accepts;
 * anything else is a broken launcher. */
static long
parse_id (const char *s)
{
  long v = 0;
  if (!*s)
    fail (NSBOX_STEP_NONE, s, 22);
  for (; *s; s++)
    {
      if (*s < '0' || *s > '9')
        fail (NSBOX_STEP_NONE, s, 22);
      v = v * 10 + (*s - '0');
      if (v > 4294967294L)
        fail (NSBOX_STEP_NONE, s, 22);
    }
  return v;
}

static void
install_filter (const char *file)
{
  long fd = sys (__NR_openat, -100 /* AT_FDCWD */, (long)file, O_RDONLY_ | O_CLOEXEC_, 0, 0);
  if (fd < 0)
    fail (NSBOX_STEP_READ_FILTER, file, -fd);
  unsigned long got = 0;
  for (;;)
    {
      long n = sys (__NR_read, fd, (long)insns + (long)got, (long)(sizeof insns - got), 0, 0);
      if (n == -4 /* EINTR */)
        continue;
      if (n < 0)
        fail (NSBOX_STEP_READ_FILTER, file, -n);
      if (n == 0)
        break;
      got += (unsigned long)n;
    }
  sys (__NR_close, fd, 0, 0, 0, 0);
  if (got == 0 || got % sizeof insns[0] != 0)
    fail (NSBOX_STEP_READ_FILTER, file, 8);
  struct sock_fprog prog = { .len = (unsigned short)(got / sizeof insns[0]), .filter = insns };
  long r = sys (__NR_prctl, PR_SET_NO_NEW_PRIVS_, 1, 0, 0, 0);
  if (r < 0)
    fail (NSBOX_STEP_NO_NEW_PRIVS, 0, -r);
  r = sys (__NR_prctl, PR_SET_SECCOMP_, SECCOMP_MODE_FILTER, (long)&prog, 0, 0);
  if (r < 0)
    fail (NSBOX_STEP_SECCOMP, 0, -r);
}

static const char *
find_path (char **envp)
{
  for (; *envp; envp++)
    {
      const char *e = *envp;
      if (e[0] == 'P' && e[1] == 'A' && e[2] == 'T' && e[3] == 'H' && e[4] == '=')
        return e + 5;
    }
  return "/usr/local/bin:/usr/bin:/bin";
}

static void __attribute__ ((noreturn)) exec_command (char **argv, char **envp)
{
  const char *name = argv[0];
  for (const char *c = name; *c; c++)
    if (*c == '/')
      fail (NSBOX_STEP_EXEC, name, -sys (__NR_execve, (long)name, (long)argv, (long)envp, 0, 0));
  long saved = 2;
  const char *p = find_path (envp);
  unsigned long name_len = length (name);
  while (*p)
    {
      unsigned long len = 0;
      for (; *p && *p != ':'; p++)
        if (len + 1 < sizeof path_buf)
          path_buf[len++] = *p;
      if (*p == ':')
        p++;
      if (len == 0 || len + name_len + 2 > sizeof path_buf)
        continue;
      path_buf[len++] = '/';
      for (unsigned long i = 0; i <= name_len; i++)
        path_buf[len + i] = name[i];
      long r = sys (__NR_execve, (long)path_buf, (long)argv, (long)envp, 0, 0);
      if (r != -2 && r != -20)
        saved = -r;
    }
  fail (NSBOX_STEP_EXEC, name, saved);
}

/* Capabilities, without libc: capset with version 3 takes two 32-bit words
 * per set. */
struct cap_header
{
  unsigned int version;
  int pid;
};
struct cap_data
{
  unsigned int effective, permitted, inheritable;
};

static void
drop_all_capabilities (void)
{
  struct cap_header header = { LINUX_CAPABILITY_VERSION_3_, 0 };
  struct cap_data none[2] = { { 0, 0, 0 }, { 0, 0, 0 } };
  long r = sys (__NR_capset, (long)&header, (long)none, 0, 0, 0);
  if (r < 0)
    fail (NSBOX_STEP_CAPS, 0, -r);
}

/* Nothing the program executes can gain a capability back. Before the
 * filter, which refuses PR_CAPBSET_DROP. */
static void
empty_bounding_set (void)
{
  for (long cap = 0; cap < 64; cap++)
    {
      long r = sys (__NR_prctl, PR_CAPBSET_DROP_, cap, 0, 0, 0);
      if (r == -22 /* EINVAL: past the last capability */)
        return;
      if (r < 0)
        fail (NSBOX_STEP_CAPBSET, 0, -r);
    }
}

/* The program's process: the sandbox user, no supplementary groups, no
 * capabilities (changing every uid away from 0 clears them; capset makes
 * sure for a sandbox user of 0), a session of its own. */
static void __attribute__ ((noreturn))
start_program (long uid, long gid, char **argv, char **envp)
{
  long r = sys (__NR_setgroups, 0, 0, 0, 0, 0);
  if (r < 0)
    fail (NSBOX_STEP_SETGROUPS, 0, -r);
  if ((r = sys (__NR_setresgid, gid, gid, gid, 0, 0)) < 0)
    fail (NSBOX_STEP_SETGID, 0, -r);
  if ((r = sys (__NR_setresuid, uid, uid, uid, 0, 0)) < 0)
    fail (NSBOX_STEP_SETUID, 0, -r);
  drop_all_capabilities ();
  if ((r = sys (__NR_setsid, 0, 0, 0, 0, 0)) < 0)
    fail (NSBOX_STEP_SETSID, 0, -r);
  exec_command (argv, envp);
}

/* PID 1 of the sandbox, as the native runtime's init: reaps every orphan,
 * is not dumpable (the program cannot read its memory, fds, cwd or root
 * through /proc/1), shows no command line, and ends the sandbox with the
 * program's status when the program ends. gVisor does not shield a PID
 * namespace's init from signals the way Linux does: it stays under a uid
 * the program does not have, without capabilities, so kill(1, ...) from
 * the program is refused (EPERM) whatever the signal; it also ignores
 * every signal it can. */
static void
ignore_signals (void)
{
  struct
  {
    unsigned long handler, flags, restorer, mask;
  } ignore = { 1 /* SIG_IGN */, 0, 0, 0 };
  for (long sig = 1; sig <= 64; sig++)
    if (sig != 9 && sig != 19 && sig != 17 /* SIGKILL, SIGSTOP, SIGCHLD */)
      sys (__NR_rt_sigaction, sig, (long) &ignore, 0, 8, 0);
}

static void __attribute__ ((noreturn))
reap (long program, long program_uid, char **argv, char **envp)
{
  ignore_signals ();
  /* A uid of its own that is not the program's: 0, or 1 when the sandbox
   * user is 0. */
  if (program_uid == 0)
    {
      long r = sys (__NR_setresuid, 1, 1, 1, 0, 0);
      if (r < 0)
        fail (NSBOX_STEP_SETUID, 0, -r);
    }
  drop_all_capabilities ();
  sys (__NR_prctl, PR_SET_DUMPABLE_, 0, 0, 0, 0);
  sys (__NR_close, report_fd, 0, 0, 0, 0);
  char *first = argv[0], *last = argv[0];
  for (char **a = argv; *a; a++)
    last = *a;
  for (char **e = envp; *e; e++)
    last = *e;
  for (char *c = first; c <= last + length (last); c++)
    *c = 0;
  for (long fd = 0; fd < 3; fd++)
    sys (__NR_close, fd, 0, 0, 0, 0);
  for (;;)
    {
      int status = 0;
      long pid = sys (__NR_wait4, -1, (long) &status, 0, 0, 0);
      if (pid == -4 /* EINTR */)
        continue;
      if (pid < 0)
        for (;;)
          sys (__NR_exit_group, EXIT_SETUP_FAILED, 0, 0, 0, 0);
      if (pid != program)
        continue;
      long code = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f);
      for (;;)
        sys (__NR_exit_group, code, 0, 0, 0, 0);
    }
}

void start_c (long *sp) __attribute__ ((noreturn, used));

void
start_c (long *sp)
{
  long argc = sp[0];
  char **argv = (char **) (sp + 1);
  char **envp = argv + argc + 1;
  if (argc <= ARG_COMMAND)
    for (;;)
      sys (__NR_exit_group, EXIT_SETUP_FAILED, 0, 0, 0, 0);
  /* Without its report file the helper cannot say anything: the launcher
   * takes the missing "started" record as a failed start. */
  report_fd = sys (__NR_openat, -100 /* AT_FDCWD */, (long)argv[ARG_REPORT],
                   O_WRONLY_ | O_APPEND_ | O_CLOEXEC_, 0, 0);
  if (report_fd < 0)
    for (;;)
      sys (__NR_exit_group, EXIT_SETUP_FAILED, 0, 0, 0, 0);
  report (NSBOX_REPORT_STARTED, NSBOX_STEP_NONE, 0, 0);
  long uid = parse_id (argv[ARG_UID]);
  long gid = parse_id (argv[ARG_GID]);
  empty_bounding_set ();
  /* One filter for init and the program, as natively: fork, setsid,
   * the id changes, capset, execve, wait4 and exit are all allowed by it;
   * clone, not clone3. */
  install_filter (argv[ARG_FILTER]);
  long program = sys (__NR_clone, 17 /* SIGCHLD */, 0, 0, 0, 0);
  if (program < 0)
    fail (NSBOX_STEP_FORK, 0, -program);
  if (program == 0)
    start_program (uid, gid, argv + ARG_COMMAND, envp);
  reap (program, uid, argv, envp);
}
