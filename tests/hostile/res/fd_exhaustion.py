# hostile: open files until EMFILE, then raise the limit: RLIMIT_NOFILE holds
# expect: exit=0 stdout="OK\n"
import os, resource, errno
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
try:
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard + 1, hard + 1))
    print("ESCAPED: raised RLIMIT_NOFILE beyond", hard)
except (ValueError, OSError):
    pass
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
fds = []
try:
    while True:
        fds.append(os.open("/dev/null", os.O_RDONLY))
except OSError as e:
    assert e.errno == errno.EMFILE, e
if len(fds) > 1 << 20:
    print("ESCAPED: %d fds" % len(fds))
print("OK")
