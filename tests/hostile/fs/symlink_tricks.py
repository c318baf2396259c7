# hostile: symlinks and hard links from the writable /tmp to escape or reach the rootfs for writing
# expect: exit=0 stdout="OK\n"
import os, errno
os.symlink("/proc/1/root", "/tmp/r1")
os.symlink("../../../../../../", "/tmp/up")
for p in ("/tmp/r1@CANARY_TMP@", "/tmp/up@CANARY_TMP@", "/tmp/up@CANARY_ROOT@"):
    try:
        open(p, "rb").read(1)
        print("ESCAPED: read through symlink", p)
    except OSError:
        pass
try:
    os.link("/usr/bin/python3", "/tmp/py")
    print("ESCAPED: hard link into the rootfs")
except OSError as e:
    assert e.errno in (errno.EXDEV, errno.EPERM), e
os.symlink("/usr/bin/python3", "/tmp/py")
try:
    open("/tmp/py", "ab")
    print("ESCAPED: wrote python through a symlink")
except OSError:
    pass
print("OK")
