# hostile: CVE-2024-21626: a working directory outside the new root; climb with .. from cwd, /proc/self/cwd, /proc/1/cwd
# expect: exit=0 stdout="OK\n"
import os
root = os.stat("/")
if os.getcwd() != "/":
    print("ESCAPED: cwd is", os.getcwd())
for p in ("..", "../../../..", "/proc/self/cwd/..", "/proc/self/root/..", "/proc/self/cwd/../../.."):
    try:
        st = os.stat(p)
        if (st.st_dev, st.st_ino) != (root.st_dev, root.st_ino):
            print("ESCAPED:", p, "is not /")
    except OSError:
        pass
try:
    os.chdir("/proc/1/cwd")
    if os.getpid() == 1:
        print("entered init's cwd (itself)")
    else:
        print("ESCAPED: entered init's cwd", os.listdir("."))
except OSError:
    pass
for fd in range(3, 64):
    try:
        os.fchdir(fd)
        print("ESCAPED: fchdir to inherited fd", fd, os.getcwd())
    except OSError:
        pass
print("OK")
