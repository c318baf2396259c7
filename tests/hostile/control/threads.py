# hostile: positive control: 16 threads with locks and a ThreadPoolExecutor
# expect: exit=0 stdout="OK 16000\n"
# expect[rlimit]: exit=1 stderr_contains="can't start new thread" because="KNOWN LIMITATION, reported: with memory enforced by RLIMIT_AS 256m (no writable cgroup) python fits about 6 threads (8 MiB stacks, 64 MiB malloc arenas each); this line fails once it is fixed"
import threading
from concurrent.futures import ThreadPoolExecutor
total, lock = 0, threading.Lock()
def work():
    global total
    for _ in range(1000):
        with lock:
            total += 1
ts = [threading.Thread(target=work) for _ in range(16)]
for t in ts: t.start()
for t in ts: t.join()
with ThreadPoolExecutor(8) as ex:
    assert sum(ex.map(lambda x: x * x, range(100))) == 328350
print("OK", total)
