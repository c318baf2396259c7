# hostile: kernel keyrings of the launcher's uid through /proc/keys and /proc/key-users
# expect: exit=0 stdout="OK\n"
import os
if os.path.exists("/proc/keys") and open("/proc/keys").read():
    print("ESCAPED: /proc/keys has content")
for line in (open("/proc/key-users") if os.path.exists("/proc/key-users") else []):
    uid = int(line.split(":")[0])
    if uid not in (0, 65534):
        print("ESCAPED? key-users shows uid", uid)
print("OK")
