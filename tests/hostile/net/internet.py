# hostile: exfiltration over TCP, UDP and ICMP to the internet and to link-local metadata services
# expect: exit=0 stdout="OK\n"
import socket, errno
for addr in (("1.1.1.1", 443), ("8.8.8.8", 53), ("169.254.169.254", 80), ("10.0.2.2", 22)):
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect(addr)
        print("ESCAPED: connected to", addr)
    except OSError as e:
        if e.errno not in (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ECONNREFUSED):
            print("unexpected", addr, e)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u.sendto(b"x", ("8.8.8.8", 53))
    print("ESCAPED: udp sent")
except OSError:
    pass
try:
    socket.socket(socket.AF_INET6).connect(("2606:4700:4700::1111", 443))
    print("ESCAPED: ipv6")
except OSError:
    pass
print("OK")
