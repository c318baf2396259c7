# hostile: privileged ports and socket options (IP_TRANSPARENT, SO_MARK, SO_DEBUG, SO_PRIORITY > 6)
# expect: exit=0 stdout="OK\n"
# expect[runsc]: exit=0 stdout_contains="bound port 80\n" stdout_contains="OK\n" because="gVisor's netstack (network none: its own loopback only) does not check CAP_NET_BIND_SERVICE or CAP_NET_ADMIN for these; nothing reaches the host"
import os, socket
s = socket.socket()
try:
    s.bind(("127.0.0.1", 80))
    print("bound port 80") if os.uname().release == "4.4.0" else print("ESCAPED: bound port 80")
except OSError:
    pass
for level, opt, val in ((socket.SOL_IP, 19, 1), (socket.SOL_SOCKET, 36, 1), (socket.SOL_SOCKET, 12, 7)):
    try:
        socket.socket().setsockopt(level, opt, val)
        print("ESCAPED: setsockopt", level, opt) if os.uname().release != "4.4.0" else print("setsockopt", level, opt)
    except OSError:
        pass
print("OK")
