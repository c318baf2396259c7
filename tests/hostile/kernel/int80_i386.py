# hostile: the i386 ABI through int 0x80 (getpid, keyctl, socketcall(AF_ALG) hidden from the filter): each call is killed by the filter, or, where the kernel has no i386 entry, the trap itself faults; a call that ran is an escape. Under gVisor int 0x80 is a 64-bit system call, which must pass the same filter. A control (int 0x81, never a system call gate) shows that a faulting trap is told apart from any other fault
# runtimes: native runsc
# expect: exit=0 stdout="int 0x81 control: fault at the trap\nint 0x80: fault at the trap (no i386 entry in this kernel)\nOK\n"
# expect[native,i386]: exit=0 stdout="int 0x81 control: fault at the trap\nint 0x80: SIGSYS (the filter)\nOK\n" because="the host kernel runs int 0x80 from a 64-bit process (the harness probed it): the filter must kill every call"
# expect[runsc,i386]: exit=0 stdout="int 0x81 control: fault at the trap\nint 0x80: a 64-bit system call (gVisor): getpid answered, unshare(CLONE_NEWUSER) EPERM (the filter)\nOK\n" because="gVisor has no i386 ABI: where the host kernel hands it int 0x80, it takes it as a 64-bit system call, and the filter must decide it as any other (gVisor itself would allow the unshare)"
import ctypes, errno, mmap, os, signal, struct

# One executable page: a stub that loads the call number and two arguments
# for both ABIs (eax; rdi/rsi for x86_64, ebx/ecx for i386; rbx is
# callee-saved) and traps, and a signal handler that exits with 100 +
# signal when the fault is at the trap instruction, 150 + signal elsewhere.
page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
base = ctypes.addressof(ctypes.c_char.from_buffer(page))
TRAP_AT = base + 36
HANDLER_AT = base + 64
result = mmap.mmap(-1, 8)    # shared with the probing child

def load(vector, nr, a1, a2):
    stub = (b"\x53"                                         # push rbx
            + b"\x48\xbf" + struct.pack("<q", a1)            # mov rdi, a1
            + b"\x48\xbe" + struct.pack("<q", a2)            # mov rsi, a2
            + b"\xbb" + struct.pack("<i", a1 & 0x7fffffff)   # mov ebx, a1
            + b"\xb9" + struct.pack("<i", a2 & 0x7fffffff)   # mov ecx, a2
            + b"\xb8" + struct.pack("<I", nr)                # mov eax, nr
            + bytes((0xcd, vector))                         # int vector (offset 36)
            + b"\x5b\xc3")                                   # pop rbx; ret
    page.seek(0)
    page.write(stub)

handler = (b"\x48\x8b\x82\xa8\x00\x00\x00"              # mov rax, [rdx+0xa8]: uc_mcontext rip
           + b"\x48\xb9" + struct.pack("<Q", TRAP_AT)   # mov rcx, TRAP_AT
           + b"\x48\x39\xc8"                            # cmp rax, rcx
           + b"\xb8\x64\x00\x00\x00"                    # mov eax, 100
           + b"\xb9\x96\x00\x00\x00"                    # mov ecx, 150
           + b"\x0f\x45\xc1"                            # cmovne eax, ecx
           + b"\x01\xc7"                                # add edi, eax (edi: the signal)
           + b"\xb8\xe7\x00\x00\x00\x0f\x05")           # exit_group(edi)
page.seek(64)
page.write(handler)

class Sigaction(ctypes.Structure):
    _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_ulong * 16),
                ("flags", ctypes.c_int), ("restorer", ctypes.c_void_p)]

libc = ctypes.CDLL(None, use_errno=True)

def probe(vector, nr, a1=0, a2=0):
    """('sigsys'|'fault'|'returned'|'other', value or description)"""
    load(vector, nr, a1, a2)
    pid = os.fork()
    if pid == 0:
        act = Sigaction(handler=HANDLER_AT, flags=4)    # SA_SIGINFO
        for sig in (signal.SIGSEGV, signal.SIGILL, signal.SIGBUS):
            libc.sigaction(sig, ctypes.byref(act), None)
        r = ctypes.CFUNCTYPE(ctypes.c_long)(base)()
        result.seek(0)
        result.write(struct.pack("<q", r - os.getpid() if r == os.getpid() else r))
        os._exit(20 if r == os.getpid() else 21)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        if os.WTERMSIG(status) == signal.SIGSYS:
            return "sigsys", None
        return "other", "killed by signal %d" % os.WTERMSIG(status)
    code = os.WEXITSTATUS(status)
    if code in (20, 21):
        result.seek(0)
        value = struct.unpack("<q", result.read(8))[0]
        return "returned", "pid" if code == 20 else value
    if code - 100 in (signal.SIGSEGV, signal.SIGILL, signal.SIGBUS):
        return "fault", None
    return "other", "exit %d" % code

kind, _ = probe(0x81, 20)
print("int 0x81 control:", "fault at the trap" if kind == "fault" else "%s %s" % probe(0x81, 20))

I386 = ((20, 0, 0), (288, 0, 0), (102, 1, 0))     # getpid, keyctl, socketcall(SYS_SOCKET)
kinds = [probe(0x80, *call) for call in I386]
if all(k == ("sigsys", None) for k in kinds):
    print("int 0x80: SIGSYS (the filter)")
elif all(k == ("fault", None) for k in kinds):
    print("int 0x80: fault at the trap (no i386 entry in this kernel)")
elif kinds[0] == ("returned", "pid"):
    print("ESCAPED: int 0x80 ran i386 getpid")
else:
    # Not the i386 ABI: is it a 64-bit entry (gVisor)? Then the filter
    # must decide it: unshare(CLONE_NEWUSER) gets the filter's EPERM.
    if probe(0x80, 39) == ("returned", "pid"):
        r = probe(0x80, 272, 0x10000000)
        if r == ("returned", -errno.EPERM):
            print("int 0x80: a 64-bit system call (gVisor): getpid answered, "
                  "unshare(CLONE_NEWUSER) EPERM (the filter)")
        else:
            print("ESCAPED: int 0x80 unshare(CLONE_NEWUSER) was not refused by the filter:", r)
    else:
        print("int 0x80: unexplained outcomes", kinds)
print("OK")
