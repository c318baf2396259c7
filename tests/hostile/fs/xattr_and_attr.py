# hostile: security.* and trusted.* xattrs (file capabilities), /proc/self/attr, oom_score_adj below 0
# expect: exit=0 stdout="OK\n"
# expect[runsc]: exit=0 stdout="lowered oom_score_adj (gVisor's own)\nOK\n" because="gVisor emulates oom_score_adj inside the Sentry; the host's value of the sandbox is untouched"
import os
open("/tmp/f", "w").close()
for name in ("security.capability", "trusted.x"):
    try:
        os.setxattr("/tmp/f", name, b"\x01\x00\x00\x02" + b"\xff" * 16)
        print("ESCAPED: set", name)
    except OSError:
        pass
try:
    fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
    os.write(fd, b"-1000")
    print("lowered oom_score_adj (gVisor's own)" if os.uname().release == "4.4.0" else "ESCAPED: lowered oom_score_adj")
except OSError:
    pass
print("OK")
