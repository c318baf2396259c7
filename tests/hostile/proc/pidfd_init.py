# hostile: pidfds to init: steal its fds (pidfd_getfd) or signal it
# expect: exit=0 stdout="OK\n"
import os, ctypes, signal
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.syscall(434, 1, 0)      # pidfd_open(1)
if fd >= 0:
    for target in range(0, 8):
        if libc.syscall(438, fd, target, 0) >= 0:
            print("ESCAPED: took init's fd", target)
    libc.syscall(424, fd, signal.SIGKILL, None, 0)
print("OK")
