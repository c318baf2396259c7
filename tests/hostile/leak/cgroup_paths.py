# hostile: the host's cgroup layout (paths name the host, the user, the service) through /proc/self/cgroup
# expect: exit=0 stdout="OK\n"
for line in open("/proc/self/cgroup"):
    path = line.rstrip("\n").split(":", 2)[2]
    if path != "/":
        print("ESCAPED: cgroup path", line.strip())
print("OK")
