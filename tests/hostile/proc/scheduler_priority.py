# hostile: real-time scheduling, negative nice and real-time I/O priority to starve the host
# expect: exit=0 stdout="OK\n"
# expect[runsc]: exit=0 stdout="nice -20 (gVisor's own)\nOK\n" because="gVisor emulates priorities inside the Sentry; the host threads of the sandbox keep theirs"
import os, ctypes
try:
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(50))
    print("ESCAPED: SCHED_FIFO")
except OSError:
    pass
try:
    os.setpriority(os.PRIO_PROCESS, 0, -20)
    print("nice -20 (gVisor's own)" if os.uname().release == "4.4.0" else "ESCAPED: nice -20")
except OSError:
    pass
libc = ctypes.CDLL(None, use_errno=True)
if libc.syscall(251, 1, 0, (1 << 13) | 0) == 0:   # ioprio_set(WHO_PROCESS, self, IOPRIO_CLASS_RT)
    print("ESCAPED: real-time I/O class")
print("OK")
