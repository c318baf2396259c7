# hostile: stdout duplicated onto hundreds of fds and made non-blocking, flooded from many children
# args: --timeout 10s --pids-limit 64
# expect: exit=0 stdout_truncated=true max_seconds=12
import os, fcntl
fl = fcntl.fcntl(1, fcntl.F_GETFL)
fcntl.fcntl(1, fcntl.F_SETFL, fl | os.O_NONBLOCK)
for fd in range(10, 400):
    os.dup2(1, fd)
kids = []
for i in range(16):
    pid = os.fork()
    if pid == 0:
        for _ in range(2000):
            try:
                os.write(10 + i, b"x" * 4096)
            except BlockingIOError:
                pass
        os._exit(0)
    kids.append(pid)
for k in kids:
    os.waitpid(k, 0)
