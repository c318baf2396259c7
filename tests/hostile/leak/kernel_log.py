# hostile: the kernel log (addresses, other containers' messages): dmesg, /dev/kmsg, /proc/kmsg
# expect: exit=0 stdout="OK\n"
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(4096)
if libc.klogctl(3, buf, 4096) > 0:
    print("ESCAPED: read the kernel log")
for p in ("/dev/kmsg", "/proc/kmsg"):
    try:
        with open(p, "rb") as f:
            if f.read(1):
                print("ESCAPED: read", p)
    except OSError:
        pass
print("OK")
