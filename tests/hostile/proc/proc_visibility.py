# hostile: find host processes: /proc lists only the sandbox; the launcher is not visible (ppid 1 is init)
# expect: exit=0 stdout="OK\n"
# expect[runsc]: exit=0 stdout="gVisor: read /proc/1/environ\ngVisor: read /proc/1/maps\ngVisor: read /proc/1/auxv\nOK\n" because="gVisor does not apply the non-dumpable check to these /proc/1 files; init is nsbox's static helper, its command line and environment wiped to zeros, its maps and auxv those of a 9 KB binary"
import os
GVISOR = os.uname().release == "4.4.0"  # gVisor's Sentry reports Linux 4.4.0
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
if pids != [1, os.getpid()]:
    print("ESCAPED: pids", pids)
if os.getppid() != 1:
    print("ESCAPED: ppid", os.getppid())
for f in ("cmdline", "environ", "maps", "mem", "stack", "syscall", "fd", "root", "cwd", "auxv"):
    try:
        p = "/proc/1/" + f
        data = os.listdir(p) if f in ("fd", "root", "cwd") else open(p, "rb").read(4096)
        if data and f != "cmdline":
            print("gVisor: read" if GVISOR and f in ("environ", "maps", "auxv") else "ESCAPED: read", p)
        if data and f == "cmdline" and data.strip(b"\0"):
            print("ESCAPED: init's cmdline shows", data[:80])
    except OSError:
        pass
print("OK")
