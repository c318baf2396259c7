# hostile: a controlling terminal to inject keystrokes into (TIOCSTI): there is none
# expect: exit=0 stdout="OK\n"
import os
if os.getsid(0) != os.getpid():
    print("not a session leader")
try:
    os.open("/dev/tty", os.O_RDWR)
    print("ESCAPED: /dev/tty opened")
except OSError:
    pass
for fd in (0, 1, 2):
    if os.isatty(fd):
        print("ESCAPED: fd", fd, "is a tty")
print("OK")
