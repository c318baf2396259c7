# hostile: the i386 ABI through int 0x80 (getpid, keyctl, socketcall(AF_ALG) hidden from the filter): SIGSYS, or -ENOSYS where there is no i386 ABI at all (gVisor)
# expect: exit=0 stdout="OK\n"
import ctypes, mmap, os, signal, struct
def int80(eax, ebx=0, ecx=0):
    # mov eax, imm32; mov ebx, imm32; mov ecx, imm32; int 0x80; ret
    code = (b"\xb8" + struct.pack("<I", eax) + b"\xbb" + struct.pack("<I", ebx)
            + b"\xb9" + struct.pack("<I", ecx) + b"\xcd\x80\xc3")
    m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    m.write(code)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    return ctypes.CFUNCTYPE(ctypes.c_long)(addr)()
for eax, ebx in ((20, 0), (288, 0), (102, 1)):    # getpid, keyctl, socketcall(SYS_SOCKET)
    pid = os.fork()
    if pid == 0:
        r = -1
        try:
            r = int80(eax, ebx)
        finally:
            os._exit(100 if r == -38 else 101)
    _, status = os.waitpid(pid, 0)
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 100:
        continue
    if not os.WIFSIGNALED(status) or os.WTERMSIG(status) != signal.SIGSYS:
        print("ESCAPED: int 0x80 eax=%d status %#x" % (eax, status))
print("OK")
