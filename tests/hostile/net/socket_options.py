# hostile: socket options with a record of kernel exploits (TCP_ULP/kTLS CVE-2023-0461, TCP_REPAIR, TCP_MD5SIG, socket filters, TCP_ZEROCOPY_RECEIVE, XFRM policies, IPV6_ADDRFORM): the filter answers ENOPROTOOPT where the kernel would answer ENOENT, ENOTCONN, EPERM, EINVAL or EFAULT; options off the list (multicast membership, netfilter, other levels) get ENOSYS; the options the standard library sets keep working
# runtimes: native runsc
# expect: exit=0 stdout="OK\n"
import errno, socket, struct
bad = []
def refused(desc, want, f):
    try:
        f()
        bad.append(desc); print("ESCAPED: %s succeeded" % desc)
    except OSError as e:
        if e.errno != want:
            bad.append(desc); print("ESCAPED: %s: %s, want %s" % (desc, errno.errorcode.get(e.errno, e.errno), errno.errorcode[want]))
tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
tcp6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
E = errno.ENOPROTOOPT
refused("TCP_ULP tls", E, lambda: tcp.setsockopt(6, 31, b"tls"))
refused("TCP_REPAIR", E, lambda: tcp.setsockopt(6, 19, 1))
refused("TCP_REPAIR_QUEUE", E, lambda: tcp.setsockopt(6, 20, 1))
refused("TCP_MD5SIG", E, lambda: tcp.setsockopt(6, 14, b"\0" * 4))
refused("TCP_FASTOPEN_KEY", E, lambda: tcp.setsockopt(6, 33, b"\0" * 3))
refused("getsockopt TCP_ZEROCOPY_RECEIVE", E, lambda: tcp.getsockopt(6, 35, 64))
refused("SO_ATTACH_FILTER", E, lambda: tcp.setsockopt(1, 26, b"\0" * 3))
refused("SO_ATTACH_BPF", E, lambda: tcp.setsockopt(1, 50, -1))
refused("SO_ATTACH_REUSEPORT_CBPF", E, lambda: udp.setsockopt(1, 51, b"\0" * 3))
refused("SO_PEEK_OFF", E, lambda: tcp.setsockopt(1, 42, 1))
refused("SO_ZEROCOPY", E, lambda: tcp.setsockopt(1, 60, 1))
refused("IP_XFRM_POLICY", E, lambda: udp.setsockopt(0, 17, b"\0" * 3))
refused("IP_IPSEC_POLICY", E, lambda: udp.setsockopt(0, 16, b"\0" * 3))
refused("IPV6_ADDRFORM", E, lambda: tcp6.setsockopt(41, 1, 2))
refused("IPV6_XFRM_POLICY", E, lambda: tcp6.setsockopt(41, 35, b"\0" * 3))
# Off the allowlist: the default answer.
refused("IP_ADD_MEMBERSHIP on TCP", errno.ENOSYS, lambda: tcp.setsockopt(0, 35, b"\0" * 8))
refused("MCAST_JOIN_GROUP", errno.ENOSYS, lambda: udp.setsockopt(0, 42, b"\0" * 136))
refused("IPT_SO_SET_REPLACE", errno.ENOSYS, lambda: udp.setsockopt(0, 64, b"\0" * 3))
refused("SOL_TLS TLS_TX", errno.ENOSYS, lambda: tcp.setsockopt(282, 1, b"\0" * 3))
refused("SOL_PACKET", errno.ENOSYS, lambda: udp.setsockopt(263, 1, b"\0" * 3))
# What the standard library, glibc's resolver and urllib3 set still works.
tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
tcp.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
tcp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 30)
tcp6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
udp.setsockopt(socket.SOL_IP, 11, 1)          # IP_RECVERR, glibc's resolver
udp.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
assert tcp.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
assert tcp.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE) == socket.SOCK_STREAM
print("OK" if not bad else "FAILED %d" % len(bad))
