# hostile: raw IP sockets, packet sockets, ICMP sockets (sniffing, spoofing)
# expect: exit=0 stdout="OK\n"
import socket
for fam, typ, proto in ((socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
                        (socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW),
                        (socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6),
                        (17, socket.SOCK_RAW, 0x0300), (17, socket.SOCK_DGRAM, 0x0300)):
    try:
        socket.socket(fam, typ, proto)
        print("ESCAPED: socket", fam, typ, proto)
    except OSError:
        pass
print("OK")
