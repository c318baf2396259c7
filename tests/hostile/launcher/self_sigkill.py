# hostile: kills itself with SIGKILL to look like the memory limit
# expect: exit=137 oom_killed=false timed_out=false signal=SIGKILL
import os, signal
os.kill(os.getpid(), signal.SIGKILL)
