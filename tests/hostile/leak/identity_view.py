# hostile: what the sandbox can tell about its identity: uid/gid inside, groups, maps
# expect: exit=0 stdout_contains="ids 65534 65534 []\n"
# expect[runsc]: exit=0 stdout_contains="ids 65534 65534 []\n" because="same ids under gVisor"
import os
print("ids", os.getuid(), os.getgid(), os.getgroups())
print(open("/proc/self/uid_map").read().split())
