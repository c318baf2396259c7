# hostile: hundreds of zombies and orphans left behind for init to reap
# args: --pids-limit 64 --timeout 20s
# expect: exit=0 stdout="OK\n" max_seconds=20
import os, time
for i in range(100):
    try:
        pid = os.fork()
    except OSError:
        time.sleep(0.01)
        continue
    if pid == 0:
        try:
            os.fork()
        except OSError:
            pass
        os._exit(0)
time.sleep(0.2)
print("OK")
