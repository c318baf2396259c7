# hostile: a fork bomb: contained by pids-limit, taken down with the program, nothing left on the host
# args: --pids-limit 32 --memory 1g
# expect: max_tasks=32 exit=0 stdout="COUNTED\n" max_seconds=10
# expect[runsc]: stdout_lacks=ESCAPED exit=0 stdout="COUNTED\n" max_seconds=10 because="the host cannot see gVisor's tasks (the Sentry runs them): only the case's own count in gVisor's /proc, which prints ESCAPED beyond 32"
# The first process counts the sandbox's tasks (init included, as the limit
# counts it) in /proc while the rest of it forks, until it has seen 32 and
# no more for half a second (2 s at most), then exits at once: the sandbox,
# bomb and all, must go with it. The bomb runs at nice 19, so that the
# counter gets the CPU quota it shares with it. The counts come first in the
# expectations, and memory is ample (under runsc the run's memory cgroup
# holds gVisor, about 5 MB a task): a bomb beyond the limit must meet the
# count before anything else ends it.
import os, time
def tasks():
    n = 0
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                n += len(os.listdir("/proc/%s/task" % p))
            except OSError:
                pass
    return n
if os.fork() == 0:
    os.nice(19)
    while True:
        try:
            os.fork()
        except OSError:
            pass
most = 0
start = grew = time.monotonic()
while True:
    n, now = tasks(), time.monotonic()
    if n > most:
        most, grew = n, now
        if n > 32:
            print("ESCAPED: %d tasks under pids-limit 32" % n, flush=True)
    if (most >= 32 and now - grew >= 0.5) or now - start >= 2:
        break
print("COUNTED", flush=True)
os._exit(0)
