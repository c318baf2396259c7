# hostile: abstract unix sockets belong to the network namespace (CVE-2020-15257, containerd-shim)
# expect: exit=0 stdout="OK\n"
import socket
for t in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_SEQPACKET):
    s = socket.socket(socket.AF_UNIX, t)
    try:
        s.connect("\0@ABSTRACT@")
        print("ESCAPED: reached the host's abstract socket")
    except OSError:
        pass
# well-known host sockets by path: none exist in the sandbox
import os
for p in ("/run/docker.sock", "/var/run/docker.sock", "/run/containerd/containerd.sock",
          "/run/systemd/private", "/run/dbus/system_bus_socket", "/tmp/.X11-unix/X0"):
    if os.path.exists(p):
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(p)
            print("ESCAPED: connected to", p)
        except OSError:
            pass
print("OK")
