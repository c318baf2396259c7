# hostile: DNS as a side channel (resolver on the host, /etc/resolv.conf)
# expect: exit=0 stdout="OK\n"
import socket
for name in ("example.com", "nsbox-exfil.example.org", "localhost.localdomain"):
    try:
        socket.getaddrinfo(name, 80)
        if name != "localhost.localdomain":
            print("ESCAPED: resolved", name)
    except OSError:
        pass
print("OK")
