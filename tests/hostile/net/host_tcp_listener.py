# hostile: reach the harness's TCP listener on the host's 127.0.0.1, ::1, 0.0.0.0 and the host's other addresses
# expect: exit=0 stdout="OK\n"
import socket
for fam, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET, "0.0.0.0"), (socket.AF_INET, "127.0.1.1"),
                  (socket.AF_INET6, "::1"), (socket.AF_INET6, "::ffff:127.0.0.1")):
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect((addr, @PORT@))
        print("ESCAPED: connected to", addr)
    except OSError:
        pass
    s.close()
print("OK")
