# hostile: many threads each touching memory, so the kill has to take the whole process at once
# args: --memory 128m --timeout 20s
# expect: exit=nonzero max_seconds=15
# expect[rlimit]: exit=any stdout_lacks=ESCAPED max_seconds=15 because="in rlimit mode (no writable cgroup for the caller) each thread gets MemoryError from RLIMIT_AS and the program carries on"
import threading
def eat():
    x = []
    try:
        while True:
            x.append(bytearray(4 << 20))
    except MemoryError:
        pass
ts = [threading.Thread(target=eat) for _ in range(8)]
for t in ts: t.start()
for t in ts: t.join()
print("survived")
