# hostile: device nodes: raw disks, /dev/mem, /dev/kmsg, tty, fuse, net/tun must not exist; /dev is read-only
# expect: exit=0 stdout="OK\n"
# expect[runsc]: exit=0 stdout_contains="opened /dev/fuse" stdout_contains="OK\n" because="gVisor adds its own /dev/fuse and /dev/net/tun (Sentry implementations, not host devices; reported as extra Sentry surface)"
import os
have = sorted(os.listdir("/dev"))
want = sorted(["null", "zero", "full", "random", "urandom", "fd", "stdin", "stdout", "stderr", "shm"])
gvisor = "/dev/fuse" in have or "fuse" in have
for extra in set(have) - set(want) - {"pts", "ptmx", "mqueue", "tty", "console"}:
    print("unexpected /dev entry", extra)
for p in ("/dev/mem", "/dev/kmem", "/dev/port", "/dev/kmsg", "/dev/sda", "/dev/vda", "/dev/fuse",
          "/dev/net/tun", "/dev/tty", "/dev/console", "/dev/loop0", "/dev/cpu/0/msr"):
    try:
        os.close(os.open(p, os.O_RDONLY))
        print("opened", p if p in ("/dev/fuse", "/dev/net/tun") else "ESCAPED: " + p)
    except OSError:
        pass
try:
    open("/dev/x", "w")
    print("ESCAPED: created a file in /dev")
except OSError:
    pass
open("/dev/null", "w").write("x")
assert len(open("/dev/urandom", "rb").read(16)) == 16
print("OK")
