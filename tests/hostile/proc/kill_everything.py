# hostile: kill(-1, SIGKILL) and kill of every pid it can guess: only the sandbox may be affected
# expect: exit=137 signal=SIGKILL oom_killed=false timed_out=false stdout=""
import os, signal
pid = os.fork()
if pid == 0:
    try:
        os.kill(-1, signal.SIGKILL)   # everything but itself and init
    except ProcessLookupError:
        pass
    for p in range(2, 4096):
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    os._exit(0)
os.waitpid(pid, 0)
print("survived kill(-1)")
