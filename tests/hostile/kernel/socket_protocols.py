# hostile: rarely used protocols behind AF_INET/AF_INET6 (SCTP, DCCP, L2TP, MPTCP, UDP-Lite, SMC, raw IP), by number or as protocol 0 of another socket type (SOCK_SEQPACKET is SCTP, SOCK_DCCP DCCP, where the kernel answers ESOCKTNOSUPPORT without their modules): the filter answers EPROTONOSUPPORT, where the kernel would create the socket (MPTCP, UDP-Lite), refuse raw sockets without CAP_NET_RAW with EPERM, or answer EINVAL (a raw protocol above 255)
# runtimes: native runsc
# prelude: trysys
# expect: exit=0 stdout="OK\n"
SOCK_STREAM, SOCK_DGRAM, SOCK_RAW = 1, 2, 3
for fam in (2, 10):
    for typ, proto in ((SOCK_RAW, 132), (SOCK_RAW, 33), (SOCK_RAW, 115), (SOCK_RAW, 4),
                       (SOCK_RAW, 262), (SOCK_STREAM, 262), (SOCK_DGRAM, 136),
                       (SOCK_STREAM, 256), (SOCK_STREAM, 6 | (1 << 32) | (1 << 8))):
        blocked("socket", "EPROTONOSUPPORT", fam, typ, proto)
    # SOCK_RDM, SOCK_SEQPACKET, SOCK_DCCP, SOCK_PACKET, with SOCK_CLOEXEC too
    for typ in (4, 5, 6, 10, 5 | 0o2000000):
        blocked("socket", "EPROTONOSUPPORT", fam, typ, 0)
# The protocols the standard library uses still work.
import socket
for fam in (socket.AF_INET, socket.AF_INET6):
    for typ, proto in ((socket.SOCK_STREAM, 0), (socket.SOCK_STREAM, socket.IPPROTO_TCP),
                       (socket.SOCK_DGRAM, 0), (socket.SOCK_DGRAM, socket.IPPROTO_UDP)):
        socket.socket(fam, typ, proto).close()
done()
