# hostile: SIGKILL/SIGTERM/SIGSTOP to the sandbox's init (pid 1) from inside: ignored by the kernel
# expect: exit=0 stdout="OK\n"
# expect[runsc]: exit=143 signal=SIGTERM because="under gVisor the program itself is PID 1 of the sandbox (no nsbox init inside), so /proc/1 is the program: the first signal, SIGTERM, is its own"
import os, signal
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGSTOP, signal.SIGKILL, signal.SIGSEGV):
    try:
        os.kill(1, sig)
    except OSError:
        pass
print("OK")
