# hostile: allocate and touch 1 GiB under --memory 128m: killed by the memory limit, the host untouched
# args: --memory 128m --timeout 20s
# expect: exit=137 oom_killed=true max_seconds=15
# expect[rlimit]: exit=nonzero max_seconds=15 because="an unprivileged caller may only have rlimits here (no writable cgroup): MemoryError, not a kill"
b = []
while True:
    b.append(bytearray(16 << 20))
