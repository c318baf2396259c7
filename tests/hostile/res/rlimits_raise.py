# hostile: raise hard rlimits (core, nofile, nproc, memlock, rtprio)
# expect: exit=0 stdout="OK\n"
import resource
for name in ("RLIMIT_CORE", "RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_MEMLOCK", "RLIMIT_RTPRIO", "RLIMIT_STACK"):
    r = getattr(resource, name)
    soft, hard = resource.getrlimit(r)
    if hard == resource.RLIM_INFINITY:
        continue
    try:
        resource.setrlimit(r, (hard + 1, hard + 1))
        print("ESCAPED: raised", name)
    except (ValueError, OSError):
        pass
print("OK")
