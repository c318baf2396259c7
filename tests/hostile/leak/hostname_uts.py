# hostile: the host's name and domain through uname and /proc/sys/kernel
# expect: exit=0 stdout="nsbox nsbox (none)\n"
import os, socket
dom = open("/proc/sys/kernel/domainname").read().strip() if os.path.exists("/proc/sys/kernel/domainname") else "(none)"
print(os.uname().nodename, socket.gethostname(), dom)
