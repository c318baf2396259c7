# hostile: positive control: reading interfaces and addresses (getifaddrs over NETLINK_ROUTE) works
# expect: exit=0 stdout="OK lo\n"
import socket
print("OK", " ".join(n for _, n in socket.if_nameindex()))
