# hostile: fill /dev/shm (a second tmpfs) and POSIX shared memory beyond its size
# args: --tmp-size 16m
# expect: exit=0 stdout="OK\n"
import errno
try:
    with open("/dev/shm/fill", "wb") as f:
        for _ in range(64):
            f.write(b"\0" * (1 << 20))
    print("ESCAPED: wrote 64 MiB into /dev/shm")
except OSError as e:
    assert e.errno == errno.ENOSPC, e
print("OK")
