# hostile: exhaust inodes in /tmp with empty files: kernel memory that tmp-size does not count and, in rlimit mode, nothing else does (was: 474000 inodes in 8 s as an unprivileged caller)
# args: --tmp-size 16m --timeout 20s
# expect: exit=0 stdout="OK\n" max_seconds=20
# expect[runsc]: exit=any max_seconds=20 because="gVisor's tmpfs takes no nr_inodes; its inodes are Sentry memory, charged to the run's memory cgroup"
import os, errno, time
n, t0 = 0, time.time()
os.mkdir("/tmp/d")
try:
    while time.time() - t0 < 8:
        for _ in range(1000):
            os.close(os.open("/tmp/d/%d" % n, os.O_CREAT | os.O_WRONLY))
            n += 1
except OSError as e:
    assert e.errno in (errno.ENOSPC, errno.ENOMEM), e
if n > 16384:
    print("EXCEEDED: created %d inodes in a 16 MiB /tmp" % n)
print("OK")
