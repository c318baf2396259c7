/* Unit tests of the seccomp policy compiler: parsing and its error
 * positions, the decisions of the compiled program (run by a small classic
 * BPF interpreter over many argument values, which proves the generated
 * complement rules), and the effect of the default policy on real syscalls
 * in a forked child (try-syscall: arguments that make an unfiltered call
 * fail with EFAULT/EBADF/EINVAL, so EPERM/ENOSYS proves the filter decided). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "seccomp.h"
#include "util.h"

#if defined(__x86_64__)
#define NATIVE_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "nsbox supports x86_64 and aarch64"
#endif

#define RET_ALLOW SECCOMP_RET_ALLOW
#define RET_KILL_PROCESS SECCOMP_RET_KILL_PROCESS
#define RET_ERRNO(e) (SECCOMP_RET_ERRNO | (uint32_t)(e))

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef AF_ALG
#define AF_ALG 38
#endif

/* ---- Helpers: compiling ---------------------------------------------------- */

struct warnings
{
  size_t count;
  char messages[16][160];
};

static void
collect_warning (const char *message, void *data)
{
  struct warnings *warnings = data;
  if (warnings->count < 16)
    snprintf (warnings->messages[warnings->count], sizeof warnings->messages[0], "%s", message);
  warnings->count++;
}

static struct nsbox_bpf
compile_ok (const char *yaml, struct warnings *warnings)
{
  struct nsbox_bpf bpf = { NULL, 0 };
  struct nsbox_error *err = NULL;
  int rc = nsbox_seccomp_compile (yaml, strlen (yaml), "test.yaml", &bpf, collect_warning, warnings,
                                  &err);
  cr_assert_eq (rc, 0, "compile failed: %s", nsbox_error_message (err));
  cr_assert_null (err);
  cr_assert_gt (bpf.len, 0);
  return bpf;
}

/* Asserts that yaml fails with -EBADMSG and exactly `message`. */
static void
expect_malformed (const char *yaml, const char *message)
{
  struct nsbox_bpf bpf = { NULL, 0 };
  struct nsbox_error *err = NULL;
  int rc = nsbox_seccomp_compile (yaml, strlen (yaml), "test.yaml", &bpf, NULL, NULL, &err);
  cr_assert_eq (rc, -EBADMSG, "compile returned %d (%s)", rc, nsbox_error_message (err));
  cr_assert_not_null (err);
  cr_expect_eq (nsbox_error_errno (err), EBADMSG);
  cr_expect_str_eq (nsbox_error_message (err), message);
  cr_expect_null (bpf.insns, "output written on failure");
  nsbox_error_free (err);
}

/* The default policy, compiled once per test process. */
static const struct nsbox_bpf *
default_bpf (void)
{
  static struct nsbox_bpf bpf;
  if (!bpf.insns)
    {
      struct nsbox_error *err = NULL;
      int rc = nsbox_seccomp_compile_default (&bpf, NULL, NULL, &err);
      cr_assert_eq (rc, 0, "default policy: %s", nsbox_error_message (err));
    }
  return &bpf;
}

/* ---- Helpers: a classic BPF interpreter ------------------------------------ */

/* How far a BPF_JMP instruction moves the program counter. */
static uint32_t
jump_offset (const struct sock_filter *insn, uint32_t a, uint32_t x)
{
  uint32_t operand = BPF_SRC (insn->code) == BPF_X ? x : insn->k;
  bool taken = false;
  switch (BPF_OP (insn->code))
    {
    case BPF_JA:
      return insn->k;
    case BPF_JEQ:
      taken = a == operand;
      break;
    case BPF_JGT:
      taken = a > operand;
      break;
    case BPF_JGE:
      taken = a >= operand;
      break;
    case BPF_JSET:
      taken = (a & operand) != 0;
      break;
    default:
      cr_assert_fail ("jump opcode 0x%x is not interpreted", insn->code);
    }
  return taken ? insn->jt : insn->jf;
}

/* Runs a seccomp program on data; fails the test on anything a seccomp
 * program may not do. */
static uint32_t
bpf_run (const struct nsbox_bpf *bpf, const struct seccomp_data *data)
{
  uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = { 0 };
  for (uint32_t pc = 0; pc < bpf->len; pc++)
    {
      const struct sock_filter *insn = &bpf->insns[pc];
      uint32_t k = insn->k;
      bool scratch = insn->code == BPF_ST || insn->code == BPF_STX
                     || insn->code == (BPF_LD | BPF_MEM) || insn->code == (BPF_LDX | BPF_MEM);
      cr_assert (!scratch || k < BPF_MEMWORDS, "bad scratch slot %u", k);
      if (BPF_CLASS (insn->code) == BPF_JMP)
        {
          pc += jump_offset (insn, a, x);
          continue;
        }
      switch (insn->code)
        {
        case BPF_LD | BPF_W | BPF_ABS:
          cr_assert (k % 4 == 0 && k + 4 <= sizeof *data, "bad load offset %u", k);
          memcpy (&a, (const unsigned char *)data + k, 4);
          break;
        case BPF_LD | BPF_IMM:
          a = k;
          break;
        case BPF_LDX | BPF_IMM:
          x = k;
          break;
        case BPF_LD | BPF_MEM:
          a = mem[k];
          break;
        case BPF_LDX | BPF_MEM:
          x = mem[k];
          break;
        case BPF_ST:
          mem[k] = a;
          break;
        case BPF_STX:
          mem[k] = x;
          break;
        case BPF_ALU | BPF_AND | BPF_K:
          a &= k;
          break;
        case BPF_MISC | BPF_TAX:
          x = a;
          break;
        case BPF_MISC | BPF_TXA:
          a = x;
          break;
        case BPF_RET | BPF_K:
          return k;
        case BPF_RET | BPF_A:
          return a;
        default:
          cr_assert_fail ("opcode 0x%x at %u is not interpreted", insn->code, pc);
        }
    }
  cr_assert_fail ("the program ran off its end");
  return 0;
}

static uint32_t
decide_arch (const struct nsbox_bpf *bpf, uint32_t arch, int nr, const uint64_t args[6])
{
  struct seccomp_data data = { .nr = nr, .arch = arch, .instruction_pointer = 0x1000 };
  memcpy (data.args, args, sizeof data.args);
  return bpf_run (bpf, &data);
}

#define DECIDE(bpf, nr, ...)                                                                       \
  decide_arch ((bpf), NATIVE_AUDIT_ARCH, (nr), (const uint64_t[6]){ __VA_ARGS__ })

static uint64_t
random_u64 (uint64_t *state)
{
  /* xorshift64*: deterministic, so a failure reproduces. */
  *state ^= *state >> 12;
  *state ^= *state << 25;
  *state ^= *state >> 27;
  return *state * UINT64_C (2685821657736338717);
}

/* Boundary-heavy values: small numbers, 32-bit edges and high bits. */
static uint64_t
sample_value (uint64_t *state, size_t i)
{
  static const uint64_t edges[] = { 0,
                                    1,
                                    2,
                                    0x7fffffff,
                                    0x80000000,
                                    0xffffffff,
                                    UINT64_C (1) << 32,
                                    (UINT64_C (1) << 32) | 2,
                                    UINT64_C (1) << 63,
                                    UINT64_MAX,
                                    UINT64_MAX - 1 };
  uint64_t r = random_u64 (state);
  switch (i % 4)
    {
    case 0:
      return i / 4 < 80 ? i / 4 : r % 80;
    case 1:
      return edges[r % (sizeof edges / sizeof edges[0])];
    case 2:
      return r & 0xffffffff;
    default:
      return r;
    }
}

/* ---- Helpers: running under the filter ------------------------------------- */

typedef int (*probe_fn) (void *arg);

/* Runs probe in a forked child (Criterion's worker has threads), under bpf
 * when it is not NULL; returns the wait status. Exit code 200 means the
 * filter could not be installed. */
static int
run_probe (const struct nsbox_bpf *bpf, probe_fn probe, void *arg)
{
  fflush (NULL);
  pid_t pid = fork ();
  cr_assert_geq (pid, 0, "fork: %s", strerror (errno));
  if (pid == 0)
    {
      struct rlimit no_core = { 0, 0 };
      setrlimit (RLIMIT_CORE, &no_core);
      if (bpf)
        {
          struct sock_fprog prog = { .len = bpf->len, .filter = bpf->insns };
          if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0
              || prctl (PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
            _exit (200);
        }
      _exit (probe (arg));
    }
  int status = 0;
  cr_assert_eq (waitpid (pid, &status, 0), pid, "waitpid: %s", strerror (errno));
  cr_assert (!WIFEXITED (status) || WEXITSTATUS (status) != 200, "installing the filter failed");
  return status;
}

struct call
{
  long nr;
  long args[6];
};

static int
call_probe (void *arg)
{
  const struct call *c = arg;
  long rc = syscall (c->nr, c->args[0], c->args[1], c->args[2], c->args[3], c->args[4], c->args[5]);
  return rc < 0 ? errno : 0;
}

/* The errno of the call in a child (0: it succeeded), under the default
 * filter or not. */
static int
call_errno (bool filtered, long nr, const long args[6])
{
  struct call c = { .nr = nr };
  memcpy (c.args, args, sizeof c.args);
  int status = run_probe (filtered ? default_bpf () : NULL, call_probe, &c);
  cr_assert (WIFEXITED (status), "syscall %ld: child killed by signal %d", nr,
             WIFSIGNALED (status) ? WTERMSIG (status) : 0);
  return WEXITSTATUS (status);
}

#define FILTERED(nr, ...) call_errno (true, (nr), (const long[6]){ __VA_ARGS__ })
#define UNFILTERED(nr, ...) call_errno (false, (nr), (const long[6]){ __VA_ARGS__ })

/* Asserts that the filter, not the kernel, decides: the call gets `expected`
 * under the filter and something else without it. */
#define EXPECT_FILTER_DECIDES(expected, nr, ...)                                                   \
  do                                                                                               \
    {                                                                                              \
      int filtered_ = FILTERED (nr, __VA_ARGS__);                                                  \
      int unfiltered_ = UNFILTERED (nr, __VA_ARGS__);                                              \
      cr_expect_eq (filtered_, (expected), "%s: %s under the filter, expected %s", #nr,            \
                    strerrorname_np (filtered_), strerrorname_np (expected));                      \
      cr_expect_neq (unfiltered_, (expected), "%s: the kernel already gives %s; not a proof", #nr, \
                     strerrorname_np (expected));                                                  \
    }                                                                                              \
  while (0)

static char *
make_temp_dir (void)
{
  char *dir = strdup ("/tmp/nsbox-seccomp-test-XXXXXX");
  cr_assert_not_null (dir);
  cr_assert_not_null (mkdtemp (dir), "mkdtemp: %s", strerror (errno));
  return dir;
}

/* ---- Compilation ----------------------------------------------------------- */

Test (seccomp, default_policy_compiles_with_only_unknown_syscall_warnings, .timeout = 10)
{
  struct warnings warnings = { 0 };
  struct nsbox_bpf bpf = { NULL, 0 };
  struct nsbox_error *err = NULL;
  int rc = nsbox_seccomp_compile_default (&bpf, collect_warning, &warnings, &err);
  cr_assert_eq (rc, 0, "%s", nsbox_error_message (err));
  cr_expect_gt (bpf.len, 100);
  cr_expect_leq (bpf.len, BPF_MAXINSNS);
  for (size_t i = 0; i < warnings.count && i < 16; i++)
    cr_expect (strncmp (warnings.messages[i], "default.yaml:", 13) == 0
                   && strstr (warnings.messages[i], ": unknown syscall '")
                   && strstr (warnings.messages[i], "' skipped"),
               "unexpected warning: %s", warnings.messages[i]);
  nsbox_bpf_release (&bpf);
  cr_expect_null (bpf.insns);
  cr_expect_eq (bpf.len, 0);
}

Test (seccomp, policy_file_compiles_and_names_itself_in_messages, .timeout = 10)
{
  char *dir = make_temp_dir ();
  char path[256];
  snprintf (path, sizeof path, "%s/p.yaml", dir);
  FILE *f = fopen (path, "w");
  cr_assert_not_null (f);
  fputs ("version: 1\ndefault_action: allow\ngroups:\n  g: {action: kill_process, "
         "syscalls: [mseal, getppid]}\n",
         f);
  fclose (f);
  struct warnings warnings = { 0 };
  struct nsbox_bpf bpf = { NULL, 0 };
  struct nsbox_error *err = NULL;
  cr_assert_eq (nsbox_seccomp_compile_file (path, &bpf, collect_warning, &warnings, &err), 0, "%s",
                nsbox_error_message (err));
  cr_assert_eq (warnings.count, 1);
  char expected[300];
  snprintf (expected, sizeof expected, "%s:4:40: unknown syscall 'mseal' skipped", path);
  cr_expect_str_eq (warnings.messages[0], expected);
  cr_expect_eq (DECIDE (&bpf, SYS_getppid, 0), RET_KILL_PROCESS);
  cr_expect_eq (DECIDE (&bpf, SYS_getpid, 0), RET_ALLOW);
  nsbox_bpf_release (&bpf);
  unlink (path);
  rmdir (dir);
  free (dir);
}

Test (seccomp, missing_policy_file_gets_enoent, .timeout = 10)
{
  struct nsbox_bpf bpf = { NULL, 0 };
  struct nsbox_error *err = NULL;
  int rc = nsbox_seccomp_compile_file ("/nonexistent/p.yaml", &bpf, NULL, NULL, &err);
  cr_assert_eq (rc, -ENOENT);
  cr_expect_str_eq (nsbox_error_message (err),
                    "open seccomp policy '/nonexistent/p.yaml': No such file or directory");
  nsbox_error_free (err);
}

Test (seccomp, unknown_syscall_is_skipped_with_a_warning, .timeout = 10)
{
  struct warnings warnings = { 0 };
  struct nsbox_bpf bpf = compile_ok ("version: 1\n"
                                     "default_action: {errno: ENOSYS}\n"
                                     "groups:\n"
                                     "  mem:\n"
                                     "    action: allow\n"
                                     "    syscalls: [getpid, mseal, no_such_call]\n"
                                     "conditional:\n"
                                     "  lsm_list_modules:\n"
                                     "    rules: [{action: allow}]\n",
                                     &warnings);
  cr_assert_eq (warnings.count, 3);
  cr_expect_str_eq (warnings.messages[0], "test.yaml:6:24: unknown syscall 'mseal' skipped");
  cr_expect_str_eq (warnings.messages[1], "test.yaml:6:31: unknown syscall 'no_such_call' skipped");
  cr_expect_str_eq (warnings.messages[2],
                    "test.yaml:8:3: unknown syscall 'lsm_list_modules' skipped");
  cr_expect_eq (DECIDE (&bpf, SYS_getpid, 0), RET_ALLOW);
  cr_expect_eq (DECIDE (&bpf, 462 /* mseal */, 0), RET_ERRNO (ENOSYS));
  nsbox_bpf_release (&bpf);
}

Test (seccomp, syscalls_of_other_architectures_are_skipped_silently, .timeout = 10)
{
  struct warnings warnings = { 0 };
  struct nsbox_bpf bpf = compile_ok ("version: 1\ndefault_action: allow\n"
                                     "groups: {old: {action: kill_process, "
                                     "syscalls: [socketcall, getppid]}}\n",
                                     &warnings);
  cr_expect_eq (warnings.count, 0);
  cr_expect_eq (DECIDE (&bpf, SYS_getppid, 0), RET_KILL_PROCESS);
  nsbox_bpf_release (&bpf);
}

Test (seccomp, unknown_key_gets_ebadmsg_with_position, .timeout = 10)
{
  expect_malformed ("version: 1\ndefault_action: allow\nallowed: []\n",
                    "test.yaml:3:1: unknown key 'allowed' in the policy");
  expect_malformed ("version: 1\ndefault_action: allow\ngroups:\n  g:\n    action: allow\n"
                    "    syscall: [read]\n",
                    "test.yaml:6:5: unknown key 'syscall' in a group");
  expect_malformed ("version: 1\ndefault_action: allow\nconditional:\n  socket:\n"
                    "    rules: [{action: kill_process, when: [{arg: 0, equals: 1}]}]\n",
                    "test.yaml:5:52: unknown key 'equals' in a condition");
}

Test (seccomp, wrong_type_gets_ebadmsg_with_position, .timeout = 10)
{
  expect_malformed ("version: 1\ndefault_action: allow\ngroups: [read, write]\n",
                    "test.yaml:3:9: 'groups' must be a mapping");
  expect_malformed ("version: 1\ndefault_action: allow\ngroups:\n  g: {action: kill_process, "
                    "syscalls: read}\n",
                    "test.yaml:4:39: 'syscalls' must be a list of syscall names");
  expect_malformed ("version: 1\ndefault_action: [allow]\n",
                    "test.yaml:2:17: expected an action: allow, log, trap, kill_thread, "
                    "kill_process or {errno: NAME}");
  expect_malformed ("- version\n", "test.yaml:1:1: the policy must be a mapping");
}

Test (seccomp, missing_or_unsupported_version_gets_ebadmsg, .timeout = 10)
{
  expect_malformed ("default_action: allow\n", "test.yaml:1:1: the policy needs 'version: 1'");
  expect_malformed ("version: 2\ndefault_action: allow\n",
                    "test.yaml:1:10: unsupported policy version '2' (expected 1)");
  expect_malformed ("version: 1\n", "test.yaml:1:1: the policy needs 'default_action'");
}

Test (seccomp, unknown_errno_or_action_gets_ebadmsg, .timeout = 10)
{
  expect_malformed ("version: 1\ndefault_action: {errno: EWHATEVER}\n",
                    "test.yaml:2:25: unknown errno name 'EWHATEVER'");
  expect_malformed ("version: 1\ndefault_action: {errno: 5000}\n",
                    "test.yaml:2:25: errno 5000 is out of range (1 to 4095)");
  expect_malformed ("version: 1\ndefault_action: deny\n", "test.yaml:2:17: unknown action 'deny'");
  expect_malformed ("version: 1\ndefault_action: default\n",
                    "test.yaml:2:17: unknown action 'default'");
  expect_malformed ("version: 1\ndefault_action: kill_process\nbad_arch_action: allow\n",
                    "test.yaml:3:18: 'bad_arch_action' must refuse the call: foreign-ABI "
                    "syscalls would bypass every rule");
}

Test (seccomp, errno_names_numbers_and_aliases_are_accepted, .timeout = 10)
{
  struct nsbox_bpf bpf = compile_ok ("version: 1\ndefault_action: {errno: 38}\n"
                                     "groups:\n"
                                     "  a: {action: {errno: EACCES}, syscalls: [getppid]}\n"
                                     "  b: {action: {errno: ENOTSUP}, syscalls: [getpgrp]}\n",
                                     NULL);
  cr_expect_eq (DECIDE (&bpf, SYS_getppid, 0), RET_ERRNO (EACCES));
  cr_expect_eq (DECIDE (&bpf, SYS_getpgrp, 0), RET_ERRNO (EOPNOTSUPP));
  cr_expect_eq (DECIDE (&bpf, SYS_getpid, 0), RET_ERRNO (ENOSYS));
  nsbox_bpf_release (&bpf);
}

Test (seccomp, bad_number_or_constant_gets_ebadmsg, .timeout = 10)
{
  const char *head = "version: 1\ndefault_action: allow\nconditional:\n  socket:\n    rules:\n";
  char yaml[512];
  snprintf (yaml, sizeof yaml, "%s      - {action: kill_process, when: [{arg: 0, eq: 12abc}]}\n",
            head);
  expect_malformed (yaml, "test.yaml:6:52: bad number '12abc'");
  snprintf (yaml, sizeof yaml, "%s      - {action: kill_process, when: [{arg: 0, eq: -1}]}\n",
            head);
  expect_malformed (yaml, "test.yaml:6:52: unknown constant '-1'");
  snprintf (yaml, sizeof yaml,
            "%s      - {action: kill_process, when: [{arg: 0, eq: AF_UNIX | AF_BOGUS}]}\n", head);
  expect_malformed (yaml, "test.yaml:6:52: unknown constant 'AF_BOGUS'");
  snprintf (yaml, sizeof yaml,
            "%s      - {action: kill_process, when: [{arg: 0, eq: 99999999999999999999}]}\n", head);
  expect_malformed (yaml, "test.yaml:6:52: bad number '99999999999999999999'");
  snprintf (yaml, sizeof yaml, "%s      - {action: kill_process, when: [{arg: 6, eq: 1}]}\n", head);
  expect_malformed (yaml, "test.yaml:6:45: 'arg' must be 0 to 5");
}

Test (seccomp, malformed_conditions_get_ebadmsg, .timeout = 10)
{
  const char *head = "version: 1\ndefault_action: allow\nconditional:\n  ioctl:\n    rules:\n";
  char yaml[512];
  snprintf (yaml, sizeof yaml,
            "%s      - {action: kill_process, when: [{arg: 1, mask: 0, lt: 3}]}\n", head);
  expect_malformed (yaml, "test.yaml:6:54: 'mask' must not be 0");
  snprintf (yaml, sizeof yaml,
            "%s      - {action: kill_process, when: [{arg: 1, mask: 0xff, eq: 0x100}]}\n", head);
  expect_malformed (yaml, "test.yaml:6:64: value 0x100 has bits outside mask 0xff");
  snprintf (yaml, sizeof yaml, "%s      - {action: kill_process, when: [{arg: 1, eq: 1, ne: 2}]}\n",
            head);
  expect_malformed (yaml,
                    "test.yaml:6:39: a condition takes exactly one of eq, ne, lt, le, gt, ge, in");
  snprintf (yaml, sizeof yaml,
            "%s      - {action: kill_process, when: [{arg: 1, mask: 0xff, eq: 1}]}\n"
            "      - {action: kill_process, when: [{arg: 1, eq: 7}]}\n",
            head);
  expect_malformed (yaml, "test.yaml:7:39: arg 1 is compared under mask 0xff elsewhere in this "
                          "syscall's rules; use one mask per argument");
  snprintf (yaml, sizeof yaml, "%s      - {when: [{arg: 1, eq: 1}]}\n", head);
  expect_malformed (yaml, "test.yaml:6:9: a rule needs 'action'");
}

Test (seccomp, duplicate_syscall_in_two_groups_gets_ebadmsg, .timeout = 10)
{
  expect_malformed ("version: 1\n"
                    "default_action: {errno: ENOSYS}\n"
                    "groups:\n"
                    "  io: {action: allow, syscalls: [read, write]}\n"
                    "  more: {action: allow, syscalls: [close, read]}\n",
                    "test.yaml:5:43: syscall 'read' is already listed at line 4");
  expect_malformed ("version: 1\n"
                    "default_action: {errno: ENOSYS}\n"
                    "groups:\n"
                    "  io: {action: allow, syscalls: [socket]}\n"
                    "conditional:\n"
                    "  socket: {rules: [{action: allow}]}\n",
                    "test.yaml:6:3: syscall 'socket' is already listed at line 4");
  expect_malformed ("version: 1\ndefault_action: allow\n"
                    "groups:\n  g: {action: kill_process, syscalls: []}\n"
                    "  g: {action: kill_process, syscalls: []}\n",
                    "test.yaml:5:3: duplicate key 'g' in 'groups'");
}

Test (seccomp, yaml_syntax_errors_get_ebadmsg_with_position, .timeout = 10)
{
  expect_malformed ("version: 1\ndefault_action: {errno: EPERM\n",
                    "test.yaml:3:1: did not find expected ',' or '}' (while parsing a flow "
                    "mapping)");
  expect_malformed ("", "test.yaml:1:1: the policy is empty");
  expect_malformed ("version: 1\ndefault_action: allow\n---\nversion: 1\n",
                    "test.yaml:3:1: more than one YAML document");
}

/* ---- Decisions of compiled programs (interpreter) -------------------------- */

static uint32_t
reference_getppid (const uint64_t a[6])
{
  if (a[0] == 5 && a[1] < 100)
    return RET_ERRNO (EPERM);
  if ((a[0] == 5 || a[0] == 6 || a[0] == 7) && a[1] >= 50 && a[1] <= 0xFFFF)
    return RET_ALLOW;
  if (a[0] == 6 && a[1] > 0xFFFFFFFF)
    return RET_ERRNO (ENOSYS);
  if (a[0] == 1 || a[0] == 2 || a[0] == 3 || a[0] == 6 || a[0] == 1000)
    return RET_KILL_PROCESS;
  return RET_ERRNO (ENOSYS);
}

static uint32_t
reference_getpgrp (const uint64_t a[6])
{
  if (((a[0] & 0xF0) == 0x10 || (a[0] & 0xF0) == 0x30) && a[1] != 7)
    return RET_ERRNO (EACCES);
  if (a[2] & UINT64_C (0x8000000000000003))
    return RET_ERRNO (EINVAL);
  if ((a[0] & 0xF0) == 0xF0)
    return RET_ALLOW;
  return RET_ERRNO (E2BIG);
}

Test (seccomp, first_matching_rule_decides_for_overlapping_rules, .timeout = 30)
{
  struct nsbox_bpf bpf = compile_ok (
      "version: 1\n"
      "default_action: {errno: ENOSYS}\n"
      "conditional:\n"
      "  getppid:\n"
      "    rules:\n"
      "      - {action: {errno: EPERM}, when: [{arg: 0, eq: 5}, {arg: 1, lt: 100}]}\n"
      "      - action: allow\n"
      "        when: [{arg: 0, in: [5, 6, 7]}, {arg: 1, ge: 50}, {arg: 1, le: 0xFFFF}]\n"
      "      - {action: default, when: [{arg: 0, eq: 6}, {arg: 1, gt: 0xFFFFFFFF}]}\n"
      "      - {action: kill_process, when: [{arg: 0, in: [1, 2, 3, 6, 1000]}]}\n"
      "    else: default\n"
      "  getpgrp:\n"
      "    rules:\n"
      "      - action: {errno: EACCES}\n"
      "        when: [{arg: 0, mask: 0xF0, in: [0x10, 0x30]}, {arg: 1, ne: 7}]\n"
      "      - {action: {errno: EINVAL}, when: [{arg: 2, mask: 0x8000000000000003, ne: 0}]}\n"
      "      - {action: allow, when: [{arg: 0, mask: 0xF0, eq: 0xF0}]}\n"
      "    else: {errno: E2BIG}\n",
      NULL);
  uint64_t state = 0x9e3779b97f4a7c15;
  for (size_t i = 0; i < 100000; i++)
    {
      uint64_t a[6];
      for (int k = 0; k < 6; k++)
        a[k] = sample_value (&state, i + (size_t)k * 7);
      if (i % 3 == 0)
        a[0] = (a[0] & ~UINT64_C (0xff)) | (random_u64 (&state) & 0xff);
      if (i % 5 == 0)
        a[1] = 40 + random_u64 (&state) % 80;
      uint32_t want = reference_getppid (a),
               got = decide_arch (&bpf, NATIVE_AUDIT_ARCH, SYS_getppid, a);
      cr_assert_eq (got, want, "getppid(%#" PRIx64 ", %#" PRIx64 "): got %#x, want %#x", a[0], a[1],
                    got, want);
      want = reference_getpgrp (a);
      got = decide_arch (&bpf, NATIVE_AUDIT_ARCH, SYS_getpgrp, a);
      cr_assert_eq (got, want,
                    "getpgrp(%#" PRIx64 ", %#" PRIx64 ", %#" PRIx64 "): got %#x, want %#x", a[0],
                    a[1], a[2], got, want);
    }
  nsbox_bpf_release (&bpf);
}

/* Random policies: a small rule language evaluated here directly and
 * compiled by nsbox; both must agree on every sampled call. */
enum random_op
{
  OP_EQ,
  OP_NE,
  OP_LT,
  OP_LE,
  OP_GT,
  OP_GE,
  OP_IN,
  OP_COUNT
};

struct random_cond
{
  unsigned arg;
  enum random_op op;
  uint64_t values[3];
  size_t n_values;
};

struct random_rule
{
  int action; /* index into random_actions */
  struct random_cond conds[3];
  size_t n_conds;
};

static const char *const random_action_yaml[]
    = { "allow", "{errno: EPERM}", "{errno: EACCES}", "default", "kill_process" };
static const uint32_t random_action_ret[]
    = { RET_ALLOW, RET_ERRNO (EPERM), RET_ERRNO (EACCES), RET_ERRNO (ENOSYS), RET_KILL_PROCESS };
static const char *const random_op_name[OP_COUNT] = { "eq", "ne", "lt", "le", "gt", "ge", "in" };
/* Args 0 and 1 are compared under small masks (cheap complements); arg 2
 * uses all 64 bits, with eq and in only: a 64-bit range or inequality
 * costs up to 64 rules per span, which random policies would combine past
 * the rule limit. */
static const uint64_t random_masks[3] = { 0xFF0, 0xF0F, UINT64_MAX };

static uint64_t
random_operand (uint64_t *state, unsigned arg)
{
  static const uint64_t values[3][6] = {
    { 0, 0x10, 0x50, 0x70, 0x640, 0xFF0 },
    { 0, 0x1, 0x100, 0x101, 0xF0F, 0x800 },
    { 0, 5, 0xffffffff, UINT64_C (1) << 32, UINT64_MAX - 1, UINT64_MAX },
  };
  return values[arg][random_u64 (state) % 6];
}

static bool
random_cond_holds (const struct random_cond *c, const uint64_t a[6])
{
  uint64_t x = a[c->arg] & random_masks[c->arg], v = c->values[0];
  switch (c->op)
    {
    case OP_EQ:
      return x == v;
    case OP_NE:
      return x != v;
    case OP_LT:
      return x < v;
    case OP_LE:
      return x <= v;
    case OP_GT:
      return x > v;
    case OP_GE:
      return x >= v;
    case OP_IN:
      return x == c->values[0] || x == c->values[1] || x == c->values[2];
    case OP_COUNT:
      break;
    }
  return false;
}

static int
random_policy (uint64_t *state, struct random_rule *rules, size_t *n_rules, char *yaml, size_t size)
{
  size_t used = (size_t)snprintf (yaml, size,
                                  "version: 1\ndefault_action: {errno: ENOSYS}\n"
                                  "conditional:\n  getppid:\n    rules:\n");
  *n_rules = 1 + random_u64 (state) % 4;
  for (size_t r = 0; r < *n_rules; r++)
    {
      struct random_rule *rule = &rules[r];
      rule->action = (int)(random_u64 (state) % 5);
      rule->n_conds = 1 + random_u64 (state) % 2;
      used += (size_t)snprintf (yaml + used, size - used, "      - {action: %s, when: [",
                                random_action_yaml[rule->action]);
      for (size_t c = 0; c < rule->n_conds; c++)
        {
          struct random_cond *cond = &rule->conds[c];
          cond->arg = (unsigned)(random_u64 (state) % 3);
          cond->op = (enum random_op) (random_u64 (state) % OP_COUNT);
          if (cond->arg == 2 && cond->op != OP_EQ)
            cond->op = OP_IN;
          cond->n_values = cond->op == OP_IN ? 3 : 1;
          for (size_t v = 0; v < 3; v++)
            cond->values[v] = random_operand (state, cond->arg);
          if (cond->n_values == 1)
            cond->values[1] = cond->values[2] = cond->values[0];
          used += (size_t)snprintf (yaml + used, size - used, "%s{arg: %u, %s%s: ", c ? ", " : "",
                                    cond->arg,
                                    cond->arg == 0   ? "mask: 0xFF0, "
                                    : cond->arg == 1 ? "mask: 0xF0F, "
                                                     : "",
                                    random_op_name[cond->op]);
          if (cond->op == OP_IN)
            used += (size_t)snprintf (yaml + used, size - used,
                                      "[%#" PRIx64 ", %#" PRIx64 ", %#" PRIx64 "]}",
                                      cond->values[0], cond->values[1], cond->values[2]);
          else
            used += (size_t)snprintf (yaml + used, size - used, "%#" PRIx64 "}", cond->values[0]);
        }
      used += (size_t)snprintf (yaml + used, size - used, "]}\n");
    }
  int else_action = (int)(random_u64 (state) % 5);
  snprintf (yaml + used, size - used, "    else: %s\n", random_action_yaml[else_action]);
  return else_action;
}

Test (seccomp, random_policies_compile_to_their_first_match_meaning, .timeout = 60)
{
  uint64_t state = 0x1234567;
  int compiled = 0;
  for (int round = 0; round < 400; round++)
    {
      struct random_rule rules[4];
      size_t n_rules = 0;
      char yaml[2048];
      int else_action = random_policy (&state, rules, &n_rules, yaml, sizeof yaml);
      struct nsbox_bpf bpf = { NULL, 0 };
      struct nsbox_error *err = NULL;
      int rc = nsbox_seccomp_compile (yaml, strlen (yaml), "random.yaml", &bpf, NULL, NULL, &err);
      if (rc < 0)
        {
          /* Only the documented complexity limits may refuse a valid policy. */
          cr_assert (strstr (nsbox_error_message (err), "simplify its conditions"), "%s\n%s",
                     nsbox_error_message (err), yaml);
          nsbox_error_free (err);
          continue;
        }
      compiled++;
      for (size_t i = 0; i < 1000; i++)
        {
          uint64_t a[6] = { 0 };
          for (unsigned k = 0; k < 3; k++)
            {
              uint64_t pick = random_u64 (&state);
              uint64_t noise = random_u64 (&state) & ~random_masks[k];
              a[k] = pick % 3 == 0   ? random_operand (&state, k) + (pick >> 8) % 3 - 1
                     : pick % 3 == 1 ? random_operand (&state, k) | noise
                                     : sample_value (&state, i);
            }
          uint32_t want = random_action_ret[else_action];
          for (size_t r = 0; r < n_rules; r++)
            {
              bool all = true;
              for (size_t c = 0; c < rules[r].n_conds; c++)
                all = all && random_cond_holds (&rules[r].conds[c], a);
              if (all)
                {
                  want = random_action_ret[rules[r].action];
                  break;
                }
            }
          uint32_t got = decide_arch (&bpf, NATIVE_AUDIT_ARCH, SYS_getppid, a);
          cr_assert_eq (got, want,
                        "args %#" PRIx64 " %#" PRIx64 " %#" PRIx64 ": got %#x, want %#x\n%s", a[0],
                        a[1], a[2], got, want, yaml);
        }
      nsbox_bpf_release (&bpf);
    }
  cr_expect_gt (compiled, 150, "only %d of 400 random policies compiled", compiled);
}

Test (seccomp, clone_decision_depends_only_on_namespace_flags, .timeout = 10)
{
  const uint64_t new_flags = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC
                             | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET;
  cr_assert_eq (new_flags, 0x7E020000);
  const struct nsbox_bpf *bpf = default_bpf ();
  const uint64_t thread_flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD
                                | CLONE_SYSVSEM | CLONE_SETTLS | CLONE_PARENT_SETTID
                                | CLONE_CHILD_CLEARTID;
  cr_expect_eq (DECIDE (bpf, SYS_clone, thread_flags, 0, 0, 0, 0, 0), RET_ALLOW);
  cr_expect_eq (DECIDE (bpf, SYS_clone, SIGCHLD, 0, 0, 0, 0, 0), RET_ALLOW);
  for (int bit = 0; bit < 64; bit++)
    {
      uint64_t flags = UINT64_C (1) << bit;
      uint32_t expected = (flags & new_flags) ? RET_ERRNO (EPERM) : RET_ALLOW;
      cr_expect_eq (DECIDE (bpf, SYS_clone, flags, 0, 0, 0, 0, 0), expected, "bit %d", bit);
      cr_expect_eq (DECIDE (bpf, SYS_clone, flags | thread_flags, 1, 2, 3, 4, 5), expected,
                    "bit %d with thread flags", bit);
    }
  uint64_t state = 42;
  for (int i = 0; i < 20000; i++)
    {
      uint64_t flags = random_u64 (&state);
      if (i % 2)
        flags &= ~new_flags | (UINT64_C (1) << (i % 31));
      uint32_t expected = (flags & new_flags) ? RET_ERRNO (EPERM) : RET_ALLOW;
      cr_assert_eq (DECIDE (bpf, SYS_clone, flags, 0, 0, 0, 0, 0), expected, "flags %#" PRIx64,
                    flags);
    }
}

/* What the default policy means for socket(family, type, protocol): the
 * family on all 64 bits, the type on its low 4 bits (stream, datagram,
 * raw, or 0, which the kernel refuses), the protocol on the 32 bits the
 * kernel reads. */
static uint32_t
expected_socket (uint64_t family, uint64_t type, uint64_t protocol)
{
  uint32_t proto = (uint32_t)protocol;
  if (family == AF_UNIX)
    return RET_ALLOW;
  if ((family == AF_INET || family == AF_INET6) && (type & 0xF) > SOCK_RAW)
    return RET_ERRNO (EPROTONOSUPPORT);
  if (family == AF_INET || family == AF_INET6)
    return proto == IPPROTO_IP || proto == IPPROTO_ICMP || proto == IPPROTO_TCP
                   || proto == IPPROTO_UDP || proto == IPPROTO_ICMPV6
               ? RET_ALLOW
               : RET_ERRNO (EPROTONOSUPPORT);
  if (family == AF_NETLINK && proto == NETLINK_ROUTE)
    return RET_ALLOW;
  return RET_ERRNO (EAFNOSUPPORT);
}

Test (seccomp, socket_decision_matches_the_family_and_protocol_allowlists, .timeout = 10)
{
  const struct nsbox_bpf *bpf = default_bpf ();
  static const uint64_t families[] = { AF_NETLINK, AF_INET, AF_INET6, AF_UNIX };
  static const uint64_t protocols[]
      = { IPPROTO_IP,   IPPROTO_ICMP, IPPROTO_TCP,     IPPROTO_UDP,        IPPROTO_ICMPV6,
          IPPROTO_SCTP, IPPROTO_RAW,  262 /* MPTCP */, 136 /* UDP-Lite */, 115 /* L2TP */ };
  uint64_t state = 7;
  for (size_t i = 0; i < 60000; i++)
    {
      uint64_t family = sample_value (&state, i);
      uint64_t protocol = sample_value (&state, i / 3 + 1);
      if (i % 7 < 4)
        family = families[i % 7];
      if (i % 3 == 0)
        protocol = protocols[(i / 3) % 10] | (i % 2 ? random_u64 (&state) << 32 : 0);
      /* Half the types are a real one (1 to 10) with random flag bits. */
      uint64_t type = random_u64 (&state);
      if (i % 2)
        type = (type & ~(uint64_t)0xF) | (1 + i / 2 % 10);
      uint32_t got = DECIDE (bpf, SYS_socket, family, type, protocol, 0, 0, 0);
      cr_assert_eq (got, expected_socket (family, type, protocol),
                    "socket(%#" PRIx64 ", %#" PRIx64 ", %#" PRIx64 ")", family, type, protocol);
    }
}

Test (seccomp, socketpair_is_allowed_for_af_unix_only, .timeout = 10)
{
  const struct nsbox_bpf *bpf = default_bpf ();
  uint64_t state = 11;
  for (size_t i = 0; i < 20000; i++)
    {
      uint64_t family = i % 5 == 0 ? AF_UNIX : sample_value (&state, i);
      uint32_t got = DECIDE (bpf, SYS_socketpair, family, random_u64 (&state), 0, 0, 0, 0);
      cr_assert_eq (got, family == AF_UNIX ? RET_ALLOW : RET_ERRNO (EAFNOSUPPORT),
                    "socketpair(%#" PRIx64 ")", family);
    }
}

/* Socket options: the listed attack surface gets ENOPROTOOPT, the allowed
 * ones pass, anything else (other options, other levels, stray high bits)
 * the default ENOSYS; the same for getsockopt. */
Test (seccomp, socket_options_are_decided_by_level_and_name, .timeout = 10)
{
  const struct nsbox_bpf *bpf = default_bpf ();
  static const uint64_t refused[][2] = {
    { SOL_TCP, TCP_ULP },
    { SOL_TCP, TCP_REPAIR },
    { SOL_TCP, TCP_MD5SIG },
    { SOL_TCP, TCP_FASTOPEN_KEY },
    { SOL_TCP, TCP_ZEROCOPY_RECEIVE },
    { SOL_SOCKET, SO_ATTACH_FILTER },
    { SOL_SOCKET, SO_ATTACH_BPF },
    { SOL_SOCKET, SO_PEEK_OFF },
    { SOL_SOCKET, SO_ZEROCOPY },
    { SOL_IP, IP_XFRM_POLICY },
    { SOL_IPV6, IPV6_ADDRFORM },
    { SOL_IPV6, IPV6_XFRM_POLICY },
  };
  static const uint64_t allowed[][2] = {
    { SOL_SOCKET, SO_REUSEADDR }, { SOL_SOCKET, SO_KEEPALIVE }, { SOL_SOCKET, SO_ERROR },
    { SOL_TCP, TCP_NODELAY },     { SOL_TCP, TCP_INFO },        { SOL_IP, IP_RECVERR },
    { SOL_IPV6, IPV6_V6ONLY },    { SOL_IPV6, IPV6_RECVERR },
  };
  static const uint64_t other[][2] = {
    { SOL_IP, IP_ADD_MEMBERSHIP },
    { SOL_IP, 64 /* IPT_SO_SET_REPLACE */ },
    { 282 /* SOL_TLS */, 1 },
    { 263 /* SOL_PACKET */, 5 },
    { SOL_SOCKET, SO_BINDTODEVICE },
    { SOL_TCP | (UINT64_C (1) << 32), TCP_NODELAY },
    { SOL_TCP, TCP_NODELAY | (UINT64_C (1) << 32) },
    { IPPROTO_UDP /* SOL_UDP */, 100 /* UDP_ENCAP */ },
  };
  static const long calls[] = { SYS_setsockopt, SYS_getsockopt };
  for (size_t c = 0; c < 2; c++)
    {
      for (size_t i = 0; i < ARRAY_SIZE (refused); i++)
        cr_expect_eq (DECIDE (bpf, calls[c], 3, refused[i][0], refused[i][1], 0, 4, 0),
                      RET_ERRNO (ENOPROTOOPT), "%ld: level %" PRIu64 " option %" PRIu64, calls[c],
                      refused[i][0], refused[i][1]);
      for (size_t i = 0; i < ARRAY_SIZE (allowed); i++)
        cr_expect_eq (DECIDE (bpf, calls[c], 3, allowed[i][0], allowed[i][1], 0, 4, 0), RET_ALLOW,
                      "%ld: level %" PRIu64 " option %" PRIu64, calls[c], allowed[i][0],
                      allowed[i][1]);
      for (size_t i = 0; i < ARRAY_SIZE (other); i++)
        cr_expect_eq (DECIDE (bpf, calls[c], 3, other[i][0], other[i][1], 0, 4, 0),
                      RET_ERRNO (ENOSYS), "%ld: level %#" PRIx64 " option %#" PRIx64, calls[c],
                      other[i][0], other[i][1]);
    }
}

Test (seccomp, ioctl_decision_uses_the_low_32_bits_of_the_command, .timeout = 10)
{
  const struct nsbox_bpf *bpf = default_bpf ();
  const uint64_t denied[] = { TIOCSTI, TIOCLINUX, TIOCSETD };
  const uint64_t allowed[]
      = { TCGETS,  TIOCGWINSZ, TIOCGPGRP,   FIONREAD,     FIONBIO,       FIONCLEX,
          FIOCLEX, FIOASYNC,   SIOCGIFCONF, SIOCGIFFLAGS, SIOCGIFHWADDR, SIOCGIFINDEX };
  const uint64_t high[] = { 0, UINT64_C (1) << 32, UINT64_C (0x123) << 32, UINT64_C (1) << 63 };
  for (size_t h = 0; h < 4; h++)
    {
      for (size_t i = 0; i < 3; i++)
        cr_expect_eq (DECIDE (bpf, SYS_ioctl, 0, denied[i] | high[h], 0, 0, 0, 0),
                      RET_ERRNO (EPERM));
      for (size_t i = 0; i < 12; i++)
        cr_expect_eq (DECIDE (bpf, SYS_ioctl, 5, allowed[i] | high[h], 0, 0, 0, 0), RET_ALLOW);
      cr_expect_eq (DECIDE (bpf, SYS_ioctl, 0, TCSETS | high[h], 0, 0, 0, 0), RET_ERRNO (ENOSYS));
      cr_expect_eq (DECIDE (bpf, SYS_ioctl, 0, TIOCSWINSZ | high[h], 0, 0, 0, 0),
                    RET_ERRNO (ENOSYS));
    }
}

Test (seccomp, prctl_decision_allows_only_listed_options, .timeout = 10)
{
  const struct nsbox_bpf *bpf = default_bpf ();
  const uint64_t listed[] = { PR_SET_PDEATHSIG,    PR_GET_PDEATHSIG,    PR_GET_DUMPABLE,
                              PR_SET_NAME,         PR_GET_NAME,         PR_GET_SECCOMP,
                              PR_CAPBSET_READ,     PR_GET_TIMERSLACK,   PR_GET_CHILD_SUBREAPER,
                              PR_SET_NO_NEW_PRIVS, PR_GET_NO_NEW_PRIVS, PR_GET_TID_ADDRESS,
                              PR_GET_THP_DISABLE };
  uint64_t state = 99;
  for (size_t i = 0; i < 20000; i++)
    {
      uint64_t option = sample_value (&state, i), arg1 = sample_value (&state, i / 4);
      bool allowed = option == PR_SET_DUMPABLE && arg1 == 0;
      for (size_t j = 0; j < sizeof listed / sizeof listed[0]; j++)
        allowed = allowed || option == listed[j];
      cr_assert_eq (DECIDE (bpf, SYS_prctl, option, arg1, 0, 0, 0, 0),
                    allowed ? RET_ALLOW : RET_ERRNO (EPERM), "prctl(%#" PRIx64 ", %#" PRIx64 ")",
                    option, arg1);
    }
}

Test (seccomp, mknod_decision_depends_on_the_file_type, .timeout = 10)
{
  const struct nsbox_bpf *bpf = default_bpf ();
  const uint64_t extra[] = { 0, 0644, 07777, 1 << 16, UINT64_C (1) << 32 };
  for (uint64_t type = 0; type < 16; type++)
    for (size_t e = 0; e < 5; e++)
      {
        uint64_t mode = (type << 12) | extra[e];
        uint32_t expected = RET_ERRNO (ENOSYS);
        if ((type << 12) == S_IFCHR || (type << 12) == S_IFBLK)
          expected = RET_ERRNO (EPERM);
        else if (type == 0 || (type << 12) == S_IFREG || (type << 12) == S_IFIFO
                 || (type << 12) == S_IFSOCK)
          expected = RET_ALLOW;
        cr_expect_eq (DECIDE (bpf, SYS_mknod, 0, mode, 0, 0, 0, 0), expected, "mknod %#" PRIx64,
                      mode);
        cr_expect_eq (DECIDE (bpf, SYS_mknodat, AT_FDCWD, 0, mode, 0, 0, 0), expected,
                      "mknodat %#" PRIx64, mode);
      }
}

Test (seccomp, personality_decision_allows_only_linux_and_query, .timeout = 10)
{
  const struct nsbox_bpf *bpf = default_bpf ();
  cr_expect_eq (DECIDE (bpf, SYS_personality, 0), RET_ALLOW);
  cr_expect_eq (DECIDE (bpf, SYS_personality, 0xffffffff), RET_ALLOW);
  cr_expect_eq (DECIDE (bpf, SYS_personality, UINT64_MAX), RET_ALLOW);
  cr_expect_eq (DECIDE (bpf, SYS_personality, ADDR_NO_RANDOMIZE), RET_ERRNO (ENOSYS));
  cr_expect_eq (DECIDE (bpf, SYS_personality, READ_IMPLIES_EXEC), RET_ERRNO (ENOSYS));
  cr_expect_eq (DECIDE (bpf, SYS_personality, PER_LINUX32), RET_ERRNO (ENOSYS));
  cr_expect_eq (DECIDE (bpf, SYS_personality, 0xfffffffe), RET_ERRNO (ENOSYS));
}

Test (seccomp, foreign_abi_calls_get_kill_process, .timeout = 10)
{
  const struct nsbox_bpf *bpf = default_bpf ();
  const uint64_t none[6] = { 0 };
  cr_expect_eq (decide_arch (bpf, AUDIT_ARCH_I386, 20, none), RET_KILL_PROCESS);
  cr_expect_eq (decide_arch (bpf, AUDIT_ARCH_ARM, 20, none), RET_KILL_PROCESS);
#ifdef __x86_64__
  cr_expect_eq (decide_arch (bpf, AUDIT_ARCH_X86_64, 0x40000000 | SYS_getpid, none),
                RET_KILL_PROCESS);
#endif
  cr_expect_eq (decide_arch (bpf, NATIVE_AUDIT_ARCH, SYS_getpid, none), RET_ALLOW);
}

Test (seccomp, default_action_applies_to_unlisted_syscalls, .timeout = 10)
{
  const struct nsbox_bpf *bpf = default_bpf ();
  cr_expect_eq (DECIDE (bpf, SYS_clone3, 0), RET_ERRNO (ENOSYS));
  cr_expect_eq (DECIDE (bpf, SYS_io_uring_setup, 0), RET_ERRNO (ENOSYS));
  cr_expect_eq (DECIDE (bpf, 999, 0), RET_ERRNO (ENOSYS));
  cr_expect_eq (DECIDE (bpf, SYS_read, 0), RET_ALLOW);
  cr_expect_eq (DECIDE (bpf, SYS_execve, 0), RET_ALLOW);
  cr_expect_eq (DECIDE (bpf, SYS_keyctl, 0), RET_ERRNO (EPERM));
}

/* ---- Effects of the default policy in the kernel --------------------------- */

Test (seccomp, unshare_newuser_gets_eperm, .timeout = 10)
{
  cr_expect_eq (FILTERED (SYS_unshare, CLONE_NEWUSER), EPERM);
  /* Bit 0 is no unshare flag: the kernel alone says EINVAL. */
  EXPECT_FILTER_DECIDES (EPERM, SYS_unshare, CLONE_NEWUSER | 1);
}

Test (seccomp, clone3_gets_enosys, .timeout = 10)
{
  EXPECT_FILTER_DECIDES (ENOSYS, SYS_clone3, 1, 88);
}

static int
fork_probe (void *arg)
{
  (void)arg;
  pid_t pid = fork ();
  if (pid < 0)
    return 1;
  if (pid == 0)
    _exit (7);
  int status = 0;
  if (waitpid (pid, &status, 0) != pid || !WIFEXITED (status) || WEXITSTATUS (status) != 7)
    return 2;
  return 0;
}

static void *
thread_main (void *arg)
{
  *(int *)arg = 42;
  return NULL;
}

static int
thread_probe (void *arg)
{
  (void)arg;
  pthread_t thread;
  int value = 0;
  if (pthread_create (&thread, NULL, thread_main, &value) != 0)
    return 1;
  pthread_join (thread, NULL);
  return value == 42 ? 0 : 2;
}

Test (seccomp, clone_with_newuser_gets_eperm_while_fork_works, .timeout = 10)
{
  /* CLONE_NEWUSER | CLONE_FS is invalid, so only the filter can say EPERM. */
  EXPECT_FILTER_DECIDES (EPERM, SYS_clone, CLONE_NEWUSER | CLONE_FS | SIGCHLD, 0, 0, 0, 0);
  int status = run_probe (default_bpf (), fork_probe, NULL);
  cr_expect (WIFEXITED (status) && WEXITSTATUS (status) == 0, "fork under the filter: %#x", status);
}

Test (seccomp, every_namespace_flag_of_clone_gets_eperm, .timeout = 30)
{
  const long flags[] = { CLONE_NEWNS,   CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
                         CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET };
  /* CLONE_THREAD without CLONE_SIGHAND is invalid: EINVAL unfiltered. */
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
    EXPECT_FILTER_DECIDES (EPERM, SYS_clone, flags[i] | CLONE_THREAD, 0, 0, 0, 0);
  cr_expect_eq (FILTERED (SYS_clone, CLONE_THREAD, 0, 0, 0, 0), EINVAL);
}

Test (seccomp, threads_work_through_the_clone3_fallback, .timeout = 10)
{
  int status = run_probe (default_bpf (), thread_probe, NULL);
  cr_expect (WIFEXITED (status) && WEXITSTATUS (status) == 0, "pthread_create: %#x", status);
}

Test (seccomp, keyctl_and_add_key_get_eperm, .timeout = 10)
{
  EXPECT_FILTER_DECIDES (EPERM, SYS_keyctl, 0xffff, 0, 0, 0, 0);
  EXPECT_FILTER_DECIDES (EPERM, SYS_add_key, 0, 0, 0, 0, 0);
  EXPECT_FILTER_DECIDES (EPERM, SYS_request_key, 0, 0, 0, 0);
}

Test (seccomp, bpf_gets_eperm, .timeout = 10) { EXPECT_FILTER_DECIDES (EPERM, SYS_bpf, -1, 0, 0); }

Test (seccomp, ptrace_gets_eperm, .timeout = 10)
{
  EXPECT_FILTER_DECIDES (EPERM, SYS_ptrace, 2 /* PTRACE_PEEKDATA */, -1, 0, 0);
}

Test (seccomp, process_vm_readv_gets_eperm, .timeout = 10)
{
  EXPECT_FILTER_DECIDES (EPERM, SYS_process_vm_readv, getpid (), 0, 1, 0, 1, 0);
}

Test (seccomp, userfaultfd_gets_eperm, .timeout = 10)
{
  EXPECT_FILTER_DECIDES (EPERM, SYS_userfaultfd, -1);
}

Test (seccomp, io_uring_setup_gets_enosys, .timeout = 10)
{
  EXPECT_FILTER_DECIDES (ENOSYS, SYS_io_uring_setup, 1, 0);
}

Test (seccomp, mount_gets_eperm, .timeout = 10)
{
  EXPECT_FILTER_DECIDES (EPERM, SYS_mount, 0, 0, 0, 0, 0);
}

Test (seccomp, fsopen_gets_enosys, .timeout = 10)
{
  EXPECT_FILTER_DECIDES (ENOSYS, SYS_fsopen, 0, 0);
}

Test (seccomp, splice_gets_eperm, .timeout = 10)
{
  EXPECT_FILTER_DECIDES (EPERM, SYS_splice, -1, 0, -1, 0, 1, 0);
}

Test (seccomp, socket_vsock_alg_and_netfilter_get_eafnosupport, .timeout = 20)
{
  /* An invalid type makes the kernel say EINVAL before it looks at the
   * family, so EAFNOSUPPORT can only come from the filter. */
  EXPECT_FILTER_DECIDES (EAFNOSUPPORT, SYS_socket, AF_VSOCK, -1, 0);
  EXPECT_FILTER_DECIDES (EAFNOSUPPORT, SYS_socket, AF_ALG, -1, 0);
  EXPECT_FILTER_DECIDES (EAFNOSUPPORT, SYS_socket, AF_NETLINK, -1, NETLINK_NETFILTER);
  EXPECT_FILTER_DECIDES (EAFNOSUPPORT, SYS_socket, AF_PACKET, -1, 0);
  cr_expect_eq (FILTERED (SYS_socket, AF_VSOCK, SOCK_STREAM, 0), EAFNOSUPPORT);
  cr_expect_eq (FILTERED (SYS_socket, AF_ALG, SOCK_SEQPACKET, 0), EAFNOSUPPORT);
  cr_expect_eq (FILTERED (SYS_socket, AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER), EAFNOSUPPORT);
}

/* The kernel answers socketpair(AF_INET) with EOPNOTSUPP, creates raw
 * sockets for root (and refuses them with EPERM otherwise), and checks the
 * fd of setsockopt first (EBADF): these answers can only be the filter's. */
Test (seccomp, filter_answers_socketpair_protocols_and_options_first, .timeout = 20)
{
  EXPECT_FILTER_DECIDES (EAFNOSUPPORT, SYS_socketpair, AF_INET, SOCK_STREAM, 0, 0);
  EXPECT_FILTER_DECIDES (EAFNOSUPPORT, SYS_socketpair, AF_NETLINK, SOCK_RAW, 0, 0);
  EXPECT_FILTER_DECIDES (EPROTONOSUPPORT, SYS_socket, AF_INET, SOCK_RAW, IPPROTO_SCTP);
  EXPECT_FILTER_DECIDES (EPROTONOSUPPORT, SYS_socket, AF_INET6, SOCK_RAW, 115 /* L2TP */);
  /* Protocol 0 of these types is SCTP and DCCP where their modules are
   * loaded; where not, the kernel says ESOCKTNOSUPPORT. */
  EXPECT_FILTER_DECIDES (EPROTONOSUPPORT, SYS_socket, AF_INET, SOCK_SEQPACKET, 0);
  EXPECT_FILTER_DECIDES (EPROTONOSUPPORT, SYS_socket, AF_INET6, 6 /* SOCK_DCCP */, 0);
  EXPECT_FILTER_DECIDES (EPROTONOSUPPORT, SYS_socket, AF_INET, SOCK_RDM | SOCK_CLOEXEC, 0);
  EXPECT_FILTER_DECIDES (ENOPROTOOPT, SYS_setsockopt, -1, SOL_TCP, TCP_ULP, 0, 0);
  EXPECT_FILTER_DECIDES (ENOPROTOOPT, SYS_getsockopt, -1, SOL_TCP, TCP_ZEROCOPY_RECEIVE, 0, 0);
  EXPECT_FILTER_DECIDES (ENOPROTOOPT, SYS_setsockopt, -1, SOL_SOCKET, SO_ATTACH_FILTER, 0, 0);
  /* Allowed ones reach the kernel, which looks at the fd. */
  cr_expect_eq (FILTERED (SYS_setsockopt, -1, SOL_TCP, TCP_NODELAY, 0, 0), EBADF);
  cr_expect_eq (FILTERED (SYS_socketpair, AF_UNIX, SOCK_STREAM, 0, 0), EFAULT);
}

Test (seccomp, socket_inet_unix_and_netlink_route_work, .timeout = 20)
{
  cr_expect_eq (FILTERED (SYS_socket, AF_INET, SOCK_STREAM, 0), 0);
  cr_expect_eq (FILTERED (SYS_socket, AF_UNIX, SOCK_STREAM, 0), 0);
  cr_expect_eq (FILTERED (SYS_socket, AF_NETLINK, SOCK_RAW, NETLINK_ROUTE), 0);
  /* The kernel decides for the allowed families. */
  cr_expect_eq (FILTERED (SYS_socket, AF_INET6, SOCK_STREAM | 0x100, 0), EINVAL);
  cr_expect_eq (FILTERED (SYS_socket, AF_NETLINK, -1, NETLINK_ROUTE), EINVAL);
}

Test (seccomp, socket_family_with_high_bits_gets_eafnosupport, .timeout = 10)
{
  /* The kernel reads the family as an int: unfiltered this is AF_INET. */
  EXPECT_FILTER_DECIDES (EAFNOSUPPORT, SYS_socket, (1L << 32) | AF_INET, SOCK_STREAM, 0);
}

Test (seccomp, ioctl_tiocsti_with_high_bits_gets_eperm, .timeout = 20)
{
  EXPECT_FILTER_DECIDES (EPERM, SYS_ioctl, -1, (long)(TIOCSTI | (1ULL << 32)), 0);
  EXPECT_FILTER_DECIDES (EPERM, SYS_ioctl, -1, TIOCSTI, 0);
  EXPECT_FILTER_DECIDES (EPERM, SYS_ioctl, -1, TIOCLINUX, 0);
  EXPECT_FILTER_DECIDES (EPERM, SYS_ioctl, -1, TIOCSETD, 0);
}

Test (seccomp, ioctl_listed_commands_reach_the_kernel_and_others_get_enosys, .timeout = 20)
{
  cr_expect_eq (FILTERED (SYS_ioctl, -1, TCGETS, 0), EBADF);
  cr_expect_eq (FILTERED (SYS_ioctl, -1, (long)(FIONBIO | (1ULL << 32)), 0), EBADF);
  EXPECT_FILTER_DECIDES (ENOSYS, SYS_ioctl, -1, TCSETS, 0);
}

Test (seccomp, personality_addr_no_randomize_gets_enosys, .timeout = 10)
{
  EXPECT_FILTER_DECIDES (ENOSYS, SYS_personality, ADDR_NO_RANDOMIZE);
  cr_expect_eq (FILTERED (SYS_personality, 0xffffffff), 0);
  cr_expect_eq (FILTERED (SYS_personality, PER_LINUX), 0);
}

Test (seccomp, prctl_set_dumpable_1_gets_eperm_while_0_works, .timeout = 20)
{
  cr_expect_eq (FILTERED (SYS_prctl, PR_SET_DUMPABLE, 1, 0, 0, 0), EPERM);
  cr_expect_eq (FILTERED (SYS_prctl, PR_SET_DUMPABLE, 0, 0, 0, 0), 0);
  /* Dumpable 2 is invalid for the kernel: EINVAL unfiltered. */
  EXPECT_FILTER_DECIDES (EPERM, SYS_prctl, PR_SET_DUMPABLE, 2, 0, 0, 0);
  EXPECT_FILTER_DECIDES (EPERM, SYS_prctl, PR_SET_SECCOMP, -1, 0, 0, 0);
  cr_expect_eq (FILTERED (SYS_prctl, PR_SET_MM, -1, 0, 0, 0), EPERM);
  cr_expect_eq (FILTERED (SYS_prctl, PR_SET_PTRACER, -1, 0, 0, 0), EPERM);
  cr_expect_eq (FILTERED (SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
}

Test (seccomp, mknod_of_a_char_device_gets_eperm_while_a_fifo_works, .timeout = 20)
{
  char *dir = make_temp_dir ();
  char fifo[300], device[300];
  snprintf (fifo, sizeof fifo, "%s/fifo", dir);
  snprintf (device, sizeof device, "%s/null", dir);
  /* A bad path pointer makes the unfiltered call fail with EFAULT. */
  EXPECT_FILTER_DECIDES (EPERM, SYS_mknodat, AT_FDCWD, 1, S_IFCHR | 0600, makedev (1, 3));
  EXPECT_FILTER_DECIDES (EPERM, SYS_mknodat, AT_FDCWD, 1, S_IFBLK | 0600, makedev (7, 0));
  cr_expect_eq (FILTERED (SYS_mknodat, AT_FDCWD, (long)device, S_IFCHR | 0600, makedev (1, 3)),
                EPERM);
  cr_expect_eq (FILTERED (SYS_mknodat, AT_FDCWD, (long)fifo, S_IFIFO | 0600, 0), 0);
  struct stat st;
  cr_expect_eq (lstat (fifo, &st), 0);
  cr_expect (S_ISFIFO (st.st_mode));
  cr_expect_neq (lstat (device, &st), 0);
#ifdef SYS_mknod
  EXPECT_FILTER_DECIDES (EPERM, SYS_mknod, 1, S_IFCHR | 0600, makedev (1, 3));
#endif
  unlink (fifo);
  rmdir (dir);
  free (dir);
}

static int
x32_getpid_probe (void *arg)
{
  (void)arg;
  syscall (0x40000000L | SYS_getpid);
  return 0;
}

Test (seccomp, x32_syscall_kills_the_process_with_sigsys, .timeout = 10)
{
#ifndef __x86_64__
  cr_skip_test ("x32 exists only on x86_64");
#endif
  int status = run_probe (default_bpf (), x32_getpid_probe, NULL);
  cr_expect (WIFSIGNALED (status) && WTERMSIG (status) == SIGSYS, "status %#x", status);
}

static int
int80_getpid_probe (void *arg)
{
  (void)arg;
#ifdef __x86_64__
  /* Without i386 emulation the kernel faults the instruction: die of the
   * SIGSEGV as it is, not through a sanitizer's handler (its report would
   * fail a sanitizer pass). */
  signal (SIGSEGV, SIG_DFL);
  long ret = 20; /* getpid on i386 */
  __asm__ volatile("int $0x80" : "+a"(ret) : : "memory", "cc", "r8", "r9", "r10", "r11");
  return ret > 0 ? 0 : 1;
#else
  return 1;
#endif
}

Test (seccomp, int80_syscall_kills_the_process_with_sigsys, .timeout = 10)
{
#ifndef __x86_64__
  cr_skip_test ("int 0x80 exists only on x86");
#endif
  int unfiltered = run_probe (NULL, int80_getpid_probe, NULL);
  int status = run_probe (default_bpf (), int80_getpid_probe, NULL);
  if (!WIFEXITED (unfiltered) || WEXITSTATUS (unfiltered) != 0)
    {
      /* A kernel without i386 emulation (ia32_emulation=0, or built
       * without it) faults on int 0x80 before any filter runs: no i386
       * call can run at all, filtered or not. */
      cr_expect (status == unfiltered, "unfiltered %#x, filtered %#x", unfiltered, status);
      return;
    }
  cr_expect (WIFSIGNALED (status) && WTERMSIG (status) == SIGSYS, "status %#x", status);
}

struct denial
{
  const char *name;
  long nr;
  long args[6];
  int expected;
};

Test (seccomp, listed_denials_get_their_documented_errno, .timeout = 60)
{
  const struct denial denials[] = {
    { "setns", SYS_setns, { -1, 0 }, EPERM },
    { "pivot_root", SYS_pivot_root, { 0, 0 }, EPERM },
    { "chroot", SYS_chroot, { 0 }, EPERM },
    { "umount2", SYS_umount2, { 0, 0 }, EPERM },
    { "process_vm_writev", SYS_process_vm_writev, { 0, 0, 1, 0, 1, 0 }, EPERM },
    { "kcmp", SYS_kcmp, { -1, -1, 0, 0, 0 }, EPERM },
    { "pidfd_getfd", SYS_pidfd_getfd, { -1, 0, 0 }, EPERM },
    { "process_madvise", SYS_process_madvise, { -1, 0, 0, 0, 0 }, EPERM },
    { "perf_event_open", SYS_perf_event_open, { 0, 0, -1, -1, 0 }, EPERM },
    { "fanotify_init", SYS_fanotify_init, { -1, 0 }, EPERM },
    { "open_by_handle_at", SYS_open_by_handle_at, { -1, 0, 0 }, EPERM },
    { "name_to_handle_at", SYS_name_to_handle_at, { -1, 0, 0, 0, 0 }, EPERM },
    { "memfd_secret", SYS_memfd_secret, { -1 }, EPERM },
    { "seccomp", SYS_seccomp, { -1, 0, 0 }, EPERM },
    { "tee", SYS_tee, { -1, -1, 1, 0 }, EPERM },
    { "vmsplice", SYS_vmsplice, { -1, 0, 1, 0 }, EPERM },
    { "finit_module", SYS_finit_module, { -1, 0, 0 }, EPERM },
    { "delete_module", SYS_delete_module, { 0, 0 }, EPERM },
    { "kexec_load", SYS_kexec_load, { 0, 0, 0, -1 }, EPERM },
    { "swapoff", SYS_swapoff, { 0 }, EPERM },
    { "sethostname", SYS_sethostname, { 0, 1 }, EPERM },
    { "settimeofday", SYS_settimeofday, { 1, 0 }, EPERM },
    { "clock_settime", SYS_clock_settime, { CLOCK_REALTIME, 0 }, EPERM },
    { "adjtimex", SYS_adjtimex, { 0 }, EPERM },
    { "set_mempolicy", SYS_set_mempolicy, { -1, 0, 0 }, EPERM },
    { "move_pages", SYS_move_pages, { 0, 1, 0, 0, 0, 0 }, EPERM },
#ifdef __x86_64__
    { "modify_ldt", SYS_modify_ldt, { 99, 0, 0 }, EPERM },
    { "iopl", SYS_iopl, { 99 }, EPERM },
#endif
    { "io_uring_enter", SYS_io_uring_enter, { -1, 0, 0, 0, 0, 0 }, ENOSYS },
    { "open_tree", SYS_open_tree, { -1, 0, -1 }, ENOSYS },
    { "move_mount", SYS_move_mount, { -1, 0, -1, 0, -1 }, ENOSYS },
    { "fspick", SYS_fspick, { -1, 0, -1 }, ENOSYS },
  };
  for (size_t i = 0; i < sizeof denials / sizeof denials[0]; i++)
    {
      const struct denial *d = &denials[i];
      int filtered = call_errno (true, d->nr, d->args);
      int unfiltered = call_errno (false, d->nr, d->args);
      cr_expect_eq (filtered, d->expected, "%s: %s under the filter", d->name,
                    strerrorname_np (filtered));
      cr_expect_neq (unfiltered, d->expected, "%s: the kernel alone gives %s", d->name,
                     strerrorname_np (unfiltered));
    }
}

/* ---- CPython under the filter ---------------------------------------------- */

static const char python_script[]
    = "import asyncio, ctypes, multiprocessing, os, socket, sqlite3, subprocess, sys\n"
      "import tempfile, threading\n"
      "\n"
      "def square(x):\n"
      "    return x * x\n"
      "\n"
      "def threads():\n"
      "    seen = []\n"
      "    workers = [threading.Thread(target=seen.append, args=(i,)) for i in range(4)]\n"
      "    for w in workers: w.start()\n"
      "    for w in workers: w.join()\n"
      "    assert sorted(seen) == [0, 1, 2, 3]\n"
      "\n"
      "def pools():\n"
      "    for method in ('fork', 'spawn', 'forkserver'):\n"
      "        with multiprocessing.get_context(method).Pool(2) as pool:\n"
      "            assert pool.map(square, range(5)) == [0, 1, 4, 9, 16], method\n"
      "\n"
      "def run_subprocess():\n"
      "    out = subprocess.run([sys.executable, '-c', 'print(1)'], capture_output=True,\n"
      "                         text=True, check=True).stdout\n"
      "    assert out == '1\\n', out\n"
      "\n"
      "async def loopback():\n"
      "    async def handle(reader, writer):\n"
      "        writer.write(await reader.readline())\n"
      "        await writer.drain()\n"
      "        writer.close()\n"
      "    server = await asyncio.start_server(handle, '127.0.0.1', 0)\n"
      "    port = server.sockets[0].getsockname()[1]\n"
      "    reader, writer = await asyncio.open_connection('127.0.0.1', port)\n"
      "    writer.write(b'ping\\n')\n"
      "    await writer.drain()\n"
      "    assert await reader.readline() == b'ping\\n'\n"
      "    writer.close()\n"
      "    server.close()\n"
      "    await server.wait_closed()\n"
      "    proc = await asyncio.create_subprocess_exec(sys.executable, '-c', 'print(2)',\n"
      "                                                stdout=asyncio.subprocess.PIPE)\n"
      "    out, _ = await proc.communicate()\n"
      "    assert out == b'2\\n', out\n"
      "\n"
      "def databases():\n"
      "    with tempfile.TemporaryDirectory() as d:\n"
      "        con = sqlite3.connect(os.path.join(d, 'db.sqlite'))\n"
      "        con.execute('pragma journal_mode=wal')\n"
      "        con.execute('create table t(x)')\n"
      "        con.executemany('insert into t values (?)', [(i,) for i in range(100)])\n"
      "        con.commit()\n"
      "        assert con.execute('select sum(x) from t').fetchone() == (4950,)\n"
      "        con.close()\n"
      "\n"
      "def native():\n"
      "    libc = ctypes.CDLL(None)\n"
      "    assert libc.getpid() == os.getpid()\n"
      "    inc = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(lambda x: x + 1)\n"
      "    assert inc(41) == 42\n"
      "\n"
      "def sockets():\n"
      "    a, b = socket.socketpair()\n"
      "    a.sendall(b'x')\n"
      "    assert b.recv(1) == b'x'\n"
      "    socket.if_nameindex()\n"
      "\n"
      "if __name__ == '__main__':\n"
      "    threads(); pools(); run_subprocess(); asyncio.run(loopback())\n"
      "    databases(); native(); sockets()\n"
      "    print('all ok')\n";

struct python_run
{
  const char *script_path;
  int output_fd;
};

static int
python_probe (void *arg)
{
  const struct python_run *run = arg;
  char *const argv[] = { (char *)"python3", (char *)run->script_path, NULL };
  char *const envp[]
      = { (char *)"PATH=/usr/bin:/bin", (char *)"LANG=C.UTF-8", (char *)"HOME=/tmp", NULL };
  if (dup2 (run->output_fd, 1) < 0 || dup2 (run->output_fd, 2) < 0)
    return 101;
  execve ("/usr/bin/python3", argv, envp);
  return 102;
}

Test (seccomp, python_threads_multiprocessing_subprocess_and_asyncio_work_under_the_filter,
      .timeout = 120)
{
  if (access ("/usr/bin/python3", X_OK) != 0 && !getenv ("NSBOX_TEST_MUST_WORK"))
    cr_skip_test ("/usr/bin/python3 is not installed");
  char *dir = make_temp_dir ();
  char script[300], output[300];
  snprintf (script, sizeof script, "%s/main.py", dir);
  snprintf (output, sizeof output, "%s/output.txt", dir);
  FILE *f = fopen (script, "w");
  cr_assert_not_null (f);
  fputs (python_script, f);
  fclose (f);
  int fd = open (output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  cr_assert_geq (fd, 0);
  struct python_run run = { script, fd };
  int status = run_probe (default_bpf (), python_probe, &run);
  close (fd);
  char text[8192] = "";
  f = fopen (output, "r");
  cr_assert_not_null (f);
  size_t n = fread (text, 1, sizeof text - 1, f);
  text[n] = '\0';
  fclose (f);
  cr_expect (WIFEXITED (status) && WEXITSTATUS (status) == 0, "status %#x, output:\n%s", status,
             text);
  cr_expect (strstr (text, "all ok") != NULL, "output:\n%s", text);
  unlink (output);
  unlink (script);
  rmdir (dir);
  free (dir);
}
