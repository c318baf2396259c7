/* The filesystem view: a read-only rootfs, a size-capped /tmp, a masked
 * /proc, no /sys, and nothing of the host reachable through inherited
 * file descriptors. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

MODE_TEST (fs, rootfs_is_read_only, .timeout = 30)
{
  char host_path[PATH_MAX];
  snprintf (host_path, sizeof host_path, "%s/hacked.txt", harness_rootfs ());
  struct run_out out;
  run_mode (*mode,
            "try:\n"
            "    with open('/hacked.txt', 'w') as f:\n"
            "        f.write('pwned')\n"
            "    print('written')\n"
            "except OSError as e:\n"
            "    print('errno', e.errno)\n",
            NULL, &out);
  bool appeared = access (host_path, F_OK) == 0;
  if (appeared)
    unlink (host_path);
  assert_prints (&out, "errno 30\n"); /* EROFS */
  RUN_ASSERT (&out, !appeared, "'%s' appeared on the host", host_path);
  run_out_free (&out);
}

MODE_TEST (fs, tmp_is_writable, .timeout = 30)
{
  struct run_out out;
  run_mode (*mode,
            "with open('/tmp/note', 'w') as f:\n"
            "    f.write('kept')\n"
            "print(open('/tmp/note').read())\n",
            NULL, &out);
  assert_prints (&out, "kept\n");
  run_out_free (&out);
}

MODE_TEST (fs, write_beyond_tmp_size_gets_enospc, .timeout = 30)
{
  struct run_out out;
  const char *const args[] = { "--tmp-size", "1m", NULL };
  run_mode (*mode,
            "try:\n"
            "    with open('/tmp/big', 'wb') as f:\n"
            "        f.write(b'x' * (2 << 20))\n"
            "    print('written')\n"
            "except OSError as e:\n"
            "    print('errno', e.errno)\n",
            args, &out);
  assert_prints (&out, "errno 28\n"); /* ENOSPC */
  RUN_ASSERT (&out, strcmp (run_json_limit (&out, "tmp"), "tmpfs") == 0,
              "expected limits.tmp tmpfs");
  run_out_free (&out);
}

/* The harness opens a root-only file without O_CLOEXEC before starting the
 * launcher: the launcher inherits it; the sandbox must not. */
MODE_TEST (fs, inherited_host_fd_is_not_reachable, .timeout = 30)
{
  char canary[96];
  snprintf (canary, sizeof canary, "nsbox-canary-%d-%ld", (int)getpid (), (long)random ());
  char *path = canary_file (canary);
  int fd = open_inheritable (path);
  const char *code = "import os\n"
                     "fds = sorted(int(n) for n in os.listdir('/proc/self/fd'))\n"
                     "print('fds', fds)\n"
                     "seen = []\n"
                     "for fd in range(3, 1024):\n"
                     "    try:\n"
                     "        os.lseek(fd, 0, 0)\n"
                     "        seen.append((fd, os.read(fd, 4096)))\n"
                     "    except OSError:\n"
                     "        pass\n"
                     "for n in fds:\n"
                     "    if n > 2:\n"
                     "        try:\n"
                     "            seen.append((n, open('/proc/self/fd/%d' % n, 'rb').read(4096)))\n"
                     "        except OSError:\n"
                     "            pass\n"
                     "print('seen', seen)\n";
  struct run_out out;
  run_mode (*mode, code, NULL, &out);
  close (fd);
  remove_canary (path);
  RUN_ASSERT (&out, out.exit_status == 0, "expected exit status 0");
  const char *s = run_stdout (&out, NULL);
  RUN_ASSERT (&out, strstr (s, canary) == NULL, "the sandbox read the host file through an fd");
  /* 3 is the descriptor listdir itself held. */
  RUN_ASSERT (&out, strstr (s, "fds [0, 1, 2, 3]\n") != NULL,
              "expected only stdin, stdout and stderr open");
  RUN_ASSERT (&out, strstr (s, "seen []\n") != NULL, "expected no readable fd beyond 2");
  run_out_free (&out);
}

MODE_TEST (fs, sensitive_proc_files_are_masked, .timeout = 30)
{
  /* Docker's masked files (and kallsyms). */
  static const char *const masked[]
      = { "/proc/interrupts",  "/proc/kcore",    "/proc/keys",          "/proc/timer_list",
          "/proc/sched_debug", "/proc/kallsyms", "/proc/latency_stats", "/proc/timer_stats" };
  const char *code = "import os, stat\n"
                     "for p in ['/proc/interrupts', '/proc/kcore', '/proc/keys',\n"
                     "          '/proc/timer_list', '/proc/sched_debug', '/proc/kallsyms',\n"
                     "          '/proc/latency_stats', '/proc/timer_stats']:\n"
                     "    try:\n"
                     "        st = os.stat(p)\n"
                     "    except FileNotFoundError:\n"
                     "        print(p, 'absent')\n"
                     "        continue\n"
                     "    null = stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == 1 "
                     "and os.minor(st.st_rdev) == 3\n"
                     "    print(p, 'masked' if null and open(p, 'rb').read(64) == b'' "
                     "else 'VISIBLE')\n"
                     "for p in ['/proc/acpi', '/proc/scsi', '/proc/asound']:\n"
                     "    if os.path.isdir(p):\n"
                     "        print(p, 'masked' if os.listdir(p) == [] else 'VISIBLE')\n";
  struct run_out out;
  run_mode (*mode, code, NULL, &out);
  RUN_ASSERT (&out, out.exit_status == 0, "expected exit status 0");
  const char *s = run_stdout (&out, NULL);
  RUN_ASSERT (&out, strstr (s, "VISIBLE") == NULL, "a sensitive /proc path is not masked");
  /* gVisor's /proc has none of these files: absent there is as good as
   * masked (VISIBLE still fails above). */
  for (size_t i = 0; i < sizeof masked / sizeof masked[0] && !harness_is_runsc (); i++)
    if (access (masked[i], F_OK) == 0)
      {
        char line[64];
        snprintf (line, sizeof line, "%s masked\n", masked[i]);
        RUN_ASSERT (&out, strstr (s, line) != NULL, "expected '%s' masked", masked[i]);
      }
  run_out_free (&out);
}

MODE_TEST (fs, sys_is_absent, .timeout = 30)
{
  struct run_out out;
  run_mode (*mode,
            "import os\n"
            "print(os.path.exists('/sys/kernel'), os.path.exists('/sys/fs/cgroup'),\n"
            "      os.listdir('/sys') if os.path.isdir('/sys') else [])\n",
            NULL, &out);
  assert_prints (&out, "False False []\n");
  run_out_free (&out);
}

/* Docker's read-only /proc paths are read-only mounts. A failed write alone
 * would prove nothing: their files belong to the host's root, unmapped in
 * the sandbox, so permissions refuse its user even on a writable mount. The
 * program reports each path's mount options (mountinfo) and statvfs flag. */
static const char *const proc_readonly[]
    = { "/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs" };

MODE_TEST (fs, proc_sys_sysrq_irq_bus_fs_are_read_only_mounts, .timeout = 30)
{
  struct run_out out;
  run_mode (*mode,
            "import errno, os, socket\n"
            "top = {}\n"
            "for line in open('/proc/self/mountinfo'):\n"
            "    f = line.split()\n"
            "    top[f[4]] = f[5].split(',')\n"
            "for p in ['/proc/sys', '/proc/sysrq-trigger', '/proc/irq', '/proc/bus',\n"
            "          '/proc/fs']:\n"
            "    if not os.path.exists(p):\n"
            "        print(p, 'absent')\n"
            "        continue\n"
            "    mount = ('ro' if 'ro' in top[p] else 'rw') if p in top else 'no-mount'\n"
            "    try:\n"
            "        flag = 'ro' if os.statvfs(p).f_flag & os.ST_RDONLY else 'rw'\n"
            "    except OSError as e:\n"
            "        flag = errno.errorcode[e.errno]\n"
            "    print(p, mount, flag)\n"
            "for p in ['/proc/sys/kernel/hostname', '/proc/sys/kernel/domainname',\n"
            "          '/proc/sys/vm/drop_caches', '/proc/sysrq-trigger']:\n"
            "    try:\n"
            "        with open(p, 'w') as f:\n"
            "            f.write('x\\n')\n"
            "        print(p, 'WRITTEN')\n"
            "    except OSError as e:\n"
            "        print(p, 'refused')\n"
            "print(socket.gethostname())\n",
            NULL, &out);
  RUN_ASSERT (&out, out.exit_status == 0, "expected exit status 0");
  const char *s = run_stdout (&out, NULL);
  for (size_t i = 0; i < sizeof proc_readonly / sizeof proc_readonly[0]; i++)
    {
      char line[96];
      if (harness_is_runsc ())
        /* gVisor's /proc is the Sentry's own: no mount of its own for
         * /proc/sys (writes there reach the Sentry's emulation, never the
         * host's kernel, and are refused as above), and no sysrq-trigger,
         * irq, bus or fs at all. */
        snprintf (line, sizeof line, "%s %s", proc_readonly[i], i == 0 ? "no-mount " : "absent\n");
      else if (access (proc_readonly[i], F_OK) != 0)
        /* Not on this host's /proc (sysrq-trigger without
         * CONFIG_MAGIC_SYSRQ): not in the sandbox's either. */
        snprintf (line, sizeof line, "%s absent\n", proc_readonly[i]);
      else
        snprintf (line, sizeof line, "%s ro ro\n", proc_readonly[i]);
      RUN_ASSERT (&out, strstr (s, line) != NULL, "expected \"%s\" in the report", line);
    }
  RUN_ASSERT (&out, strstr (s, "WRITTEN") == NULL, "a /proc/sys file was writable");
  RUN_ASSERT (&out, strstr (s, "\nnsbox\n") != NULL, "the hostname changed");
  run_out_free (&out);
}
