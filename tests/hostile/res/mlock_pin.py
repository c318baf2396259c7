# hostile: pin memory with mlock/mlockall so the host cannot reclaim it
# expect: exit=0 stdout="OK\n"
import ctypes, mmap, resource
libc = ctypes.CDLL(None, use_errno=True)
soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
m = mmap.mmap(-1, 64 << 20)
addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
if libc.mlock(ctypes.c_void_p(addr), ctypes.c_size_t(64 << 20)) == 0 and hard < (64 << 20):
    print("ESCAPED: locked 64 MiB beyond RLIMIT_MEMLOCK", hard)
if libc.mlockall(3) == 0 and hard < (64 << 20):
    print("ESCAPED: mlockall")
print("OK")
