# hostile: a daemon: double fork, setsid, close stdio, ignore SIGHUP/SIGTERM, sleep; the run must end now and kill it
# expect: exit=0 stdout="OK\n" max_seconds=5
import os, signal, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for s in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
            signal.signal(s, signal.SIG_IGN)
        os.closerange(0, 3)
        time.sleep(1000)
    os._exit(0)
os.wait()
print("OK")
