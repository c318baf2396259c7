# hostile: SIGKILL/SIGTERM/SIGSTOP to the sandbox's init (pid 1) from inside: ignored by the kernel natively; under runsc (gVisor does not shield a PID namespace's init) refused, as init runs under a uid the program does not have
# runtimes: runsc
# expect: exit=0 stdout="OK\n"
import os, signal
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGSTOP, signal.SIGKILL, signal.SIGSEGV):
    try:
        os.kill(1, sig)
    except OSError:
        pass
print("OK")
