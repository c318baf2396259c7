# hostile: find host processes: /proc lists only the sandbox; the launcher is not visible (ppid 1 is init)
# expect: exit=0 stdout="OK\n"
# expect[runsc]: exit=0 stdout="pid 1\n" because="under gVisor the program itself is PID 1 of the sandbox (no nsbox init inside), so /proc/1 is the program"
import os
if os.getpid() == 1:
    print("pid 1")
    raise SystemExit
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
            print("ESCAPED: read", p)
        if data and f == "cmdline" and data.strip(b"\0"):
            print("ESCAPED: init's cmdline shows", data[:80])
    except OSError:
        pass
print("OK")
