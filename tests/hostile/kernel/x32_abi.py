# hostile: the x32 ABI (syscall number | 0x40000000) walks around an x86_64 filter: the process must die of SIGSYS
# expect: exit=0 stdout="OK\n"
import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
for nr in (39, 250, 0x40000000 + 272 - 0x40000000):   # getpid, keyctl, unshare
    pid = os.fork()
    if pid == 0:
        libc.syscall(ctypes.c_long(0x40000000 | nr), 0, 0, 0)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if not os.WIFSIGNALED(status) or os.WTERMSIG(status) != signal.SIGSYS:
        print("ESCAPED: x32 syscall", nr, "status", status)
print("OK")
