# hostile: a gigabyte on stdout and stderr at once: capped, drained, nsbox's memory stays small
# args: --timeout 30s
# expect: exit=0 stdout_truncated=true stderr_truncated=true max_seconds=30
import os
chunk = b"A" * (1 << 20)
for _ in range(512):
    os.write(1, chunk)
    os.write(2, chunk)
