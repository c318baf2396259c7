# hostile: kernel memory in pipe buffers: many pipes grown to the maximum and filled
# args: --memory 128m --timeout 15s
# expect: exit=any max_seconds=25
import os, fcntl
F_SETPIPE_SZ = 1031
pipes = []
try:
    while True:
        r, w = os.pipe2(os.O_NONBLOCK)
        try:
            fcntl.fcntl(w, F_SETPIPE_SZ, 1 << 20)
        except OSError:
            pass
        try:
            while True:
                os.write(w, b"x" * 65536)
        except BlockingIOError:
            pass
        pipes.append((r, w))
except OSError as e:
    print("stopped after", len(pipes), "pipes:", e.strerror)
