# hostile: memfd and anonymous shared memory that an address-space limit does not count
# args: --memory 128m --timeout 20s
# expect: exit=nonzero max_seconds=15
import os, mmap
fds = []
while True:
    fd = os.memfd_create("x")
    os.ftruncate(fd, 16 << 20)
    m = mmap.mmap(fd, 16 << 20)
    m.write(b"\1" * (16 << 20))
    fds.append((fd, m))
