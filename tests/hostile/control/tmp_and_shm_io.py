# hostile: positive control: write and read files in /tmp and /dev/shm, POSIX shared memory
# expect: exit=0 stdout="OK\n"
import os
from multiprocessing import shared_memory
for d in ("/tmp", "/dev/shm"):
    p = os.path.join(d, "f")
    with open(p, "wb") as f:
        f.write(os.urandom(1 << 20))
    assert os.path.getsize(p) == 1 << 20
    os.unlink(p)
sm = shared_memory.SharedMemory(create=True, size=4096)
sm.buf[:3] = b"abc"
other = shared_memory.SharedMemory(sm.name)
assert bytes(other.buf[:3]) == b"abc"
other.close(); sm.close(); sm.unlink()
print("OK")
