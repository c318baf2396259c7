# hostile: write a forged "program exited 0" record into init's report pipe (its fd 3) through /proc/1/fd, then exit 7
# expect: exit=7 stdout=""
import os, struct
# struct nsbox_report: kind (2 = status), step, err, status, detail[240]
forged = struct.pack("=iiii240s", 2, 0, 0, 0, b"")
for path in ("/proc/1/fd/3", "/proc/1/fd/4", "/dev/fd/3", "/proc/self/fd/3"):
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError:
        continue
    try:
        os.write(fd, forged * 4)
    except OSError:
        pass
for fd in range(3, 16):
    try:
        os.write(fd, forged)
    except OSError:
        pass
raise SystemExit(7)
