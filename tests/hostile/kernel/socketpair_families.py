# hostile: socketpair with a family other than AF_UNIX (AF_TIPC has a working socketpair; every family runs its create path and may load a module): the filter answers EAFNOSUPPORT, where the kernel would answer EOPNOTSUPP (inet, netlink) or EFAULT (the bad result pointer)
# runtimes: native runsc
# prelude: trysys
# expect: exit=0 stdout="OK\n"
for fam, typ in ((2, 1), (10, 1), (2, 2), (30, 5), (16, 3), (38, 5), (40, 1), (17, 3), (2 | (1 << 32), 1)):
    blocked("socketpair", "EAFNOSUPPORT", fam, typ, 0, BAD)
# AF_UNIX keeps working: multiprocessing and subprocess need it.
import socket
a, b = socket.socketpair()
a.sendall(b"ping")
assert b.recv(4) == b"ping"
done()
