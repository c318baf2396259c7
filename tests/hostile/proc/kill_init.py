# hostile: SIGKILL/SIGTERM/SIGSTOP to the sandbox's init (pid 1) from inside: ignored by the kernel
# expect: exit=0 stdout="OK\n"
# expect[runsc]: exit=137 signal=SIGKILL because="nsbox's init inside gVisor ignores every signal it can, but gVisor does not shield a PID namespace's init from SIGKILL sent inside it as Linux does: the program ends its own sandbox, nothing else"
import os, signal
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGSTOP, signal.SIGKILL, signal.SIGSEGV):
    try:
        os.kill(1, sig)
    except OSError:
        pass
print("OK")
