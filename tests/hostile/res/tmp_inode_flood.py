# hostile: exhaust inodes in /tmp with empty files (kernel memory a size limit does not count)
# args: --tmp-size 16m --timeout 20s
# expect: exit=any max_seconds=20
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
if n > 200000:
    print("ESCAPED: created %d inodes in a 16 MiB /tmp" % n)
print("OK")
