# hostile: an fd the launcher inherited without O_CLOEXEC (a root-only host file, and /root itself): CVE-2024-21626 style
# expect: exit=0 stdout="OK\n"
import os
fds = sorted(int(n) for n in os.listdir("/proc/self/fd"))
if fds != [0, 1, 2, 3]:
    print("ESCAPED: open fds", fds)
for fd in (@LEAKED_FD@, @LEAKED_DIRFD@) + tuple(range(3, 256)):
    try:
        os.fstat(fd)
    except OSError:
        continue
    if fd > 2:
        print("ESCAPED: fd", fd, "is open:", os.readlink("/proc/self/fd/%d" % fd))
for fd in (@LEAKED_FD@, @LEAKED_DIRFD@):
    for how in ("/proc/self/fd/%d", "/dev/fd/%d", "/proc/1/fd/%d"):
        try:
            print("ESCAPED:", how % fd, open(how % fd, "rb").read(64))
        except OSError:
            pass
    try:
        print("ESCAPED: openat through leaked dirfd", os.listdir(os.open("..", os.O_RDONLY, dir_fd=fd)))
    except OSError:
        pass
print("OK")
