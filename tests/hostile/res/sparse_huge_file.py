# hostile: a sparse 1 TiB file in /tmp and reading it back
# args: --tmp-size 16m
# expect: exit=0 stdout="OK\n"
import os
fd = os.open("/tmp/sparse", os.O_CREAT | os.O_RDWR)
os.ftruncate(fd, 1 << 40)
n = 0
try:
    n = os.pwrite(fd, b"x" * (32 << 20), 1 << 39)
except OSError:
    pass
if n > (16 << 20):
    print("ESCAPED: %d bytes stored in a 16 MiB /tmp" % n)
os.pread(fd, 1 << 20, 1 << 30)
print("OK")
