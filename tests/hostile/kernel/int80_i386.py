# hostile: the i386 ABI through int 0x80 (getpid, keyctl, socketcall(AF_ALG) hidden from the filter): SIGSYS, or no i386 ABI at all (gVisor answers with an error)
# expect: exit=0 stdout="OK\n"
# expect[runsc]: exit=0 stdout="no i386 ABI\nOK\n" because="gVisor has no i386 syscall ABI: int 0x80 fails with an error instead of reaching a filter"
import ctypes, mmap, os, signal, struct
def int80(eax, ebx=0, ecx=0):
    # mov eax, imm32; mov ebx, imm32; mov ecx, imm32; int 0x80; ret
    code = (b"\xb8" + struct.pack("<I", eax) + b"\xbb" + struct.pack("<I", ebx)
            + b"\xb9" + struct.pack("<I", ecx) + b"\xcd\x80\xc3")
    m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    m.write(code)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    return ctypes.CFUNCTYPE(ctypes.c_int)(addr)()
def probe(eax, ebx=0):
    """'sigsys', 'error' (negative return) or 'returned' (the call ran)."""
    pid = os.fork()
    if pid == 0:
        r = -1
        try:
            r = int80(eax, ebx)
        finally:
            os._exit(100 if r < 0 else 101)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGSYS:
        return "sigsys"
    return "error" if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 100 else "returned %#x" % status
first = probe(20)                      # getpid cannot fail where the ABI exists
if first == "error":
    print("no i386 ABI")
elif first != "sigsys":
    print("ESCAPED: int 0x80 getpid", first)
else:
    for eax, ebx in ((288, 0), (102, 1)):   # keyctl, socketcall(SYS_SOCKET)
        if probe(eax, ebx) != "sigsys":
            print("ESCAPED: int 0x80 eax=%d was not killed" % eax)
print("OK")
