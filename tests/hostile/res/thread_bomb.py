# hostile: threads until the pids limit stops them; the program carries on
# args: --pids-limit 32
# expect: exit=0 stdout="OK\n" max_seconds=15
import threading, time
ev = threading.Event()
n = 0
try:
    while n < 10000:
        threading.Thread(target=ev.wait).start()
        n += 1
except RuntimeError:
    pass
ev.set()
if n >= 64:
    print("ESCAPED: %d threads under pids-limit 32" % n)
print("OK")
