# hostile: host paths in /proc/self/mountinfo (where the rootfs lives, the host's mounts)
# expect: exit=0 stdout="OK\n"
# (under runsc, /mnt holds nsbox's seccomp helper and its report file, and /sys is an empty
# read-only tmpfs)
mounts = [l.split() for l in open("/proc/self/mountinfo")]
points = sorted(m[4] for m in mounts)
for p in points:
    if not (p in ("/", "/tmp", "/dev", "/dev/shm", "/proc", "/sys", "/mnt", "/mnt/.nsbox-report") or p.startswith("/dev/") or p.startswith("/proc/")):
        print("ESCAPED: host mount point visible:", p)
for bad in ("/root", "/home", "/work", "/run", "/var/lib/docker"):
    if bad in points:
        print("ESCAPED:", bad, "mounted")
print("OK")
