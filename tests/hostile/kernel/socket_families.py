# hostile: socket families outside unix/inet/inet6/netlink-route: AF_ALG (Copy Fail), AF_VSOCK, AF_PACKET, AF_KEY, ...
# prelude: trysys
# expect: exit=0 stdout="OK\n"
for fam in (38, 40, 17, 15, 29, 30, 21, 31, 44, 3, 4, 5, 9, 36, 42):  # ALG VSOCK PACKET KEY CAN TIPC RDS BLUETOOTH XDP AX25 IPX APPLETALK X25 IEEE802154 QIPCRTR
    blocked("socket", "EAFNOSUPPORT", fam, 1, 0)
    blocked("socket", "EAFNOSUPPORT", fam | (1 << 32), 1, 0)
# netlink: only NETLINK_ROUTE; not netfilter, uevents, audit, xfrm, generic.
# The kernel reads the protocol as int and so does the filter: high bits
# cannot turn a refused protocol into an allowed one.
for proto in (12, 15, 9, 6, 16, 4, 12 | (1 << 32)):
    blocked("socket", "EAFNOSUPPORT", 16, 3, proto)
# the same families through Python's socket module
import socket
for fam in (38, 40, 17):
    try:
        socket.socket(fam, socket.SOCK_SEQPACKET if fam == 38 else socket.SOCK_STREAM)
        print("ESCAPED: socket family", fam)
    except OSError:
        pass
done()
