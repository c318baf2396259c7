# hostile: ignores every catchable signal and spins in threads: killed at the timeout
# args: --timeout 1s
# expect: exit=124 timed_out=true max_seconds=8
import signal, threading
for s in range(1, 65):
    try:
        signal.signal(s, signal.SIG_IGN)
    except (OSError, ValueError, RuntimeError):
        pass
def spin():
    while True:
        pass
for _ in range(4):
    threading.Thread(target=spin, daemon=True).start()
spin()
