# hostile: the program stops itself with SIGSTOP: the launcher must not wait forever
# args: --timeout 1s
# expect: exit=124 timed_out=true max_seconds=8
import os, signal
print("stopping", flush=True)
os.kill(os.getpid(), signal.SIGSTOP)
print("ESCAPED: continued")
