# hostile: a sparse 1 TiB file in /tmp and reading it back
# args: --tmp-size 16m
# expect: exit=0 stdout="OK\n"
import os
fd = os.open("/tmp/sparse", os.O_CREAT | os.O_RDWR)
os.ftruncate(fd, 1 << 40)
try:
    os.pwrite(fd, b"x" * (32 << 20), 1 << 39)
except OSError:
    pass
if os.fstat(fd).st_blocks * 512 > (16 << 20):
    print("ESCAPED: %d bytes stored in a 16 MiB /tmp" % (os.fstat(fd).st_blocks * 512))
os.pread(fd, 1 << 20, 1 << 30)
print("OK")
