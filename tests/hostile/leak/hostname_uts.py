# hostile: the host's name and domain through uname and /proc/sys/kernel
# expect: exit=0 stdout="nsbox nsbox (none)\n"
import os, socket
print(os.uname().nodename, socket.gethostname(), open("/proc/sys/kernel/domainname").read().strip())
