# hostile: the host's SysV shared memory, semaphores, message queues (IPC namespace)
# expect: exit=0 stdout="OK\n"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
r = libc.shmat(@SHMID@, None, 0)
if r not in (None, ctypes.c_void_p(-1).value):
    print("ESCAPED: attached the host's segment @SHMID@")
for f in ("/proc/sysvipc/shm", "/proc/sysvipc/sem", "/proc/sysvipc/msg"):
    if os.path.exists(f) and open(f).read().splitlines()[1:]:
        print("ESCAPED: entries in", f)
print("OK")
