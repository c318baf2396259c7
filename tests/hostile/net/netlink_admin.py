# hostile: rtnetlink writes (add an address, bring lo down, add a veth) need CAP_NET_ADMIN; netfilter netlink is refused
# expect: exit=0 stdout="OK\n"
import socket, struct, errno
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
s.bind((0, 0))
# RTM_NEWLINK for a veth pair: nlmsghdr + ifinfomsg + IFLA_IFNAME + IFLA_LINKINFO/kind veth
def attr(t, data):
    l = 4 + len(data)
    return struct.pack("=HH", l, t) + data + b"\0" * ((4 - l % 4) % 4)
kind = attr(1, b"veth\0")
body = struct.pack("=BxHiII", 0, 0, 0, 0, 0) + attr(3, b"pwn0\0") + attr(18, kind)
msg = struct.pack("=IHHII", 16 + len(body), 16, 0x1 | 0x4 | 0x400 | 0x200, 1, 0) + body
s.send(msg)
reply = s.recv(65536)
err = struct.unpack("=i", reply[16:20])[0]
if err == 0:
    print("ESCAPED: created a veth")
for proto in (12, 9, 10, 0x10):   # NETFILTER, AUDIT, FIB_LOOKUP, GENERIC
    try:
        socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, proto)
        print("ESCAPED: netlink protocol", proto)
    except OSError:
        pass
import fcntl
SIOCSIFFLAGS = 0x8914
try:
    fcntl.ioctl(socket.socket(), SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", 0))
    print("ESCAPED: brought lo down")
except OSError:
    pass
print("OK")
