# hostile: CVE-2019-5736: overwrite the interpreter through /proc/self/exe and the launcher through /proc/1/exe
# expect: exit=0 stdout="OK\n"
import os
for path in ("/proc/self/exe", "/proc/1/exe"):
    for flags in (os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_TRUNC):
        try:
            fd = os.open(path, flags)
            print("ESCAPED: opened", path, "for writing")
            os.close(fd)
        except OSError:
            pass
# an O_PATH fd re-opened for writing through /proc/self/fd
fd = os.open("/proc/self/exe", os.O_PATH)
try:
    os.close(os.open("/proc/self/fd/%d" % fd, os.O_WRONLY))
    print("ESCAPED: reopened exe for writing")
except OSError:
    pass
try:
    os.listdir("/proc/1/root")
    if os.getpid() != 1:
        print("ESCAPED: init's root is readable")
except OSError:
    pass
print("OK")
