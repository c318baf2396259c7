# hostile: SysV shared memory touched, then detached (no longer in the address space), 512 MiB under --memory 128m
# args: --memory 128m --timeout 20s
# expect: exit=137 oom_killed=true max_seconds=20
# expect[rlimit]: exit=0 stdout="EXCEEDED: stored 512 MiB\n" max_seconds=20 because="KNOWN HOLE, reported: in rlimit mode detached SysV segments are counted by nothing (shmall/shmmax of the sandbox's IPC namespace are the kernel's defaults); the segments go with the namespace when the run ends. This line fails once it is fixed"
# expect[runsc]: exit=nonzero max_seconds=20 because="the Sentry's memory is in the run's cgroup"
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
total = 0
while total < (512 << 20):
    sid = libc.shmget(0, 64 << 20, 0o1600)       # IPC_PRIVATE, IPC_CREAT | 0600
    if sid < 0:
        print("shmget errno", ctypes.get_errno())
        break
    addr = libc.shmat(sid, None, 0)
    if addr in (None, ctypes.c_void_p(-1).value):
        print("shmat errno", ctypes.get_errno())
        break
    ctypes.memset(addr, 1, 64 << 20)
    libc.shmdt(ctypes.c_void_p(addr))
    total += 64 << 20
print("EXCEEDED: stored %d MiB" % (total >> 20))
