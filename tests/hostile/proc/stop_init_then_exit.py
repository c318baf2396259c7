# hostile: stop the sandbox's init (SIGSTOP to pid 1), then exit: a stopped init would never report the program's end, turning a finished run into a timeout. Natively the kernel ignores SIGSTOP to a PID namespace's init from inside it; under runsc init runs under a uid the program does not have and the signal is refused
# runtimes: runsc
# args: --timeout 10s
# expect: exit=0 stdout="OK\n" timed_out=false max_seconds=5
import os, signal
for sig in (signal.SIGSTOP, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU):
    try:
        os.kill(1, sig)
    except OSError:
        pass
# A child that keeps trying while the program exits.
if os.fork() == 0:
    for _ in range(200):
        try:
            os.kill(1, signal.SIGSTOP)
        except OSError:
            pass
    os._exit(0)
print("OK")
