# hostile: /sys (cgroupfs release_agent CVE-2022-0492, firmware, kernel knobs): nothing there, and no way to mount it
# expect: exit=0 stdout="OK\n"
import os, ctypes
if os.path.isdir("/sys") and os.listdir("/sys"):
    print("ESCAPED: /sys has", os.listdir("/sys")[:5])
libc = ctypes.CDLL(None, use_errno=True)
for fstype in (b"sysfs", b"cgroup", b"cgroup2", b"proc", b"tmpfs"):
    if libc.mount(fstype, b"/tmp", fstype, 0, None) == 0:
        print("ESCAPED: mounted", fstype)
for p in ("/sys/fs/cgroup/release_agent", "/sys/kernel/uevent_helper", "/sys/fs/cgroup/cgroup.procs"):
    if os.path.exists(p):
        print("ESCAPED: found", p)
print("OK")
