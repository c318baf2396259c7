/* runsc-exec: the first program gVisor runs under runtime runsc.
 *
 *   /dev/.nsbox-exec FILTER COMMAND [ARG...]
 *
 * Installs the run's seccomp filter (classic BPF, as nsbox compiled it from
 * the policy for the native runtime), forks and executes COMMAND, looked up
 * in the sandbox's PATH, and stays as the sandbox's PID 1 reaper. gVisor's
 * sentry evaluates the filter for the program as the kernel would, so both
 * runtimes apply the same policy.
 *
 * Static and libc-free: it runs from whatever root filesystem the job has.
 * Embedded into libnsbox and bind-mounted read-only into each sandbox. */
#include <asm/unistd.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#define PR_SET_SECCOMP_ 22
#define PR_SET_NO_NEW_PRIVS_ 38
#define PR_SET_DUMPABLE_ 4
#define O_RDONLY_ 0
#define O_CLOEXEC_ 02000000
#define EXIT_SETUP_FAILED 127
#define MAX_INSNS 4096

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

static unsigned long
length (const char *s)
{
  unsigned long n = 0;
  while (s[n])
    n++;
  return n;
}

static void
say (const char *s)
{
  sys (__NR_write, 2, (long)s, (long)length (s), 0, 0);
}

static const char *
describe (long err)
{
  switch (err)
    {
    case 2:
      return "No such file or directory";
    case 13:
      return "Permission denied";
    case 8:
      return "Exec format error";
    case 20:
      return "Not a directory";
    case 7:
      return "Argument list too long";
    case 12:
      return "Cannot allocate memory";
    case 1:
      return "Operation not permitted";
    default:
      return "error";
    }
}

static void __attribute__ ((noreturn)) fail (const char *what, const char *name, long err)
{
  say ("nsbox: sandbox setup: ");
  say (what);
  if (name)
    {
      say (" '");
      say (name);
      say ("'");
    }
  say (": ");
  say (describe (err));
  say ("\n");
  for (;;)
    sys (__NR_exit_group, EXIT_SETUP_FAILED, 0, 0, 0, 0);
}

static void
install_filter (const char *file)
{
  long fd = sys (__NR_openat, -100 /* AT_FDCWD */, (long)file, O_RDONLY_ | O_CLOEXEC_, 0, 0);
  if (fd < 0)
    fail ("open seccomp filter", file, -fd);
  unsigned long got = 0;
  for (;;)
    {
      long n = sys (__NR_read, fd, (long)insns + (long)got, (long)(sizeof insns - got), 0, 0);
      if (n == -4 /* EINTR */)
        continue;
      if (n < 0)
        fail ("read seccomp filter", file, -n);
      if (n == 0)
        break;
      got += (unsigned long)n;
    }
  sys (__NR_close, fd, 0, 0, 0, 0);
  if (got == 0 || got % sizeof insns[0] != 0)
    fail ("read seccomp filter", file, 8);
  struct sock_fprog prog = { .len = (unsigned short)(got / sizeof insns[0]), .filter = insns };
  long r = sys (__NR_prctl, PR_SET_NO_NEW_PRIVS_, 1, 0, 0, 0);
  if (r < 0)
    fail ("set no_new_privs", 0, -r);
  r = sys (__NR_prctl, PR_SET_SECCOMP_, SECCOMP_MODE_FILTER, (long)&prog, 0, 0);
  if (r < 0)
    fail ("install seccomp filter", 0, -r);
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
      fail ("execute", name, -sys (__NR_execve, (long)name, (long)argv, (long)envp, 0, 0));
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
  fail ("execute", name, saved);
}

/* PID 1 of the sandbox, as the native runtime's init: reaps every orphan,
 * is not dumpable (the program cannot read its memory, fds, cwd or root
 * through /proc/1), shows no command line, and ends the sandbox with the
 * program's status when the program ends. */
/* gVisor does not shield a PID namespace's init from signals it has no
 * handler for, as Linux does: ignore every one that can be (SIGKILL from
 * the program still ends the sandbox, and only it). */
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
reap (long program, char **argv, char **envp)
{
  ignore_signals ();
  sys (__NR_prctl, PR_SET_DUMPABLE_, 0, 0, 0, 0);
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
  if (argc < 3)
    fail ("usage: runsc-exec FILTER COMMAND [ARG...]", 0, 22);
  /* One filter for init and the program, as natively: fork, setsid,
   * execve, wait4 and exit are all allowed by it; clone, not clone3. */
  install_filter (argv[1]);
  long program = sys (__NR_clone, 17 /* SIGCHLD */, 0, 0, 0, 0);
  if (program < 0)
    fail ("fork the program", 0, -program);
  if (program == 0)
    {
      long r = sys (__NR_setsid, 0, 0, 0, 0, 0);
      if (r < 0)
        fail ("start a new session", 0, -r);
      exec_command (argv + 2, envp);
    }
  reap (program, argv, envp);
}
