# hostile: pin memory with mlock/mlockall so the host cannot reclaim it, from a launcher whose own RLIMIT_MEMLOCK was raised (the harness raises it): nsbox's own limit (64 KiB) holds
# runtimes: native runsc
# expect: exit=0 stdout="OK\n"
import ctypes, mmap, resource
libc = ctypes.CDLL(None, use_errno=True)
limit = resource.getrlimit(resource.RLIMIT_MEMLOCK)
if limit != (64 << 10, 64 << 10):
    print("ESCAPED: RLIMIT_MEMLOCK is %r, not nsbox's (65536, 65536)" % (limit,))
m = mmap.mmap(-1, 64 << 20)
addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
if libc.mlock(ctypes.c_void_p(addr), ctypes.c_size_t(64 << 20)) == 0:
    print("ESCAPED: locked 64 MiB")
if libc.mlock(ctypes.c_void_p(addr), ctypes.c_size_t(1 << 20)) == 0:
    print("ESCAPED: locked 1 MiB")
if libc.mlockall(3) == 0:
    print("ESCAPED: mlockall")
try:
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (1 << 20, 1 << 20))
    print("ESCAPED: raised RLIMIT_MEMLOCK")
except (ValueError, OSError):
    pass
print("OK")
