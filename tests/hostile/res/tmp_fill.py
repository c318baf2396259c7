# hostile: fill /tmp beyond tmp-size: ENOSPC, not the host's disk or memory
# args: --tmp-size 16m
# expect: exit=0 stdout="OK\n"
import errno
try:
    with open("/tmp/fill", "wb") as f:
        for _ in range(64):
            f.write(b"\0" * (1 << 20))
    print("ESCAPED: wrote 64 MiB into a 16 MiB /tmp")
except OSError as e:
    assert e.errno == errno.ENOSPC, e
print("OK")
