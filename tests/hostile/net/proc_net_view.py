# hostile: /proc/net of the host (listening sockets, unix sockets) through the sandbox's /proc
# expect: exit=0 stdout="OK\n"
port = "%04X" % @PORT@
for f in ("/proc/net/tcp", "/proc/net/tcp6"):
    for line in open(f).read().splitlines()[1:]:
        if (":" + port + " ") in line:
            print("ESCAPED: host listener visible in", f)
if "@ABSTRACT@" in open("/proc/net/unix").read():
    print("ESCAPED: host abstract socket visible")
print("OK")
