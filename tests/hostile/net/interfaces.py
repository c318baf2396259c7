# hostile: look for a way out: interfaces other than lo, routes, neighbours
# expect: exit=0 stdout="OK\n"
import socket
names = [n for _, n in socket.if_nameindex()]
if names != ["lo"]:
    print("ESCAPED: interfaces", names)
routes = open("/proc/net/route").read().splitlines()[1:]
if routes:
    print("ESCAPED: routes", routes)
if open("/proc/net/arp").read().splitlines()[1:]:
    print("ESCAPED: arp entries")
print("OK")
