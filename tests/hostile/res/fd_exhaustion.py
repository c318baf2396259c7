# hostile: open files until EMFILE, then raise the limit, from a launcher whose own RLIMIT_NOFILE was raised (the harness raises it): nsbox's own limit (1024 soft, 4096 hard) holds
# runtimes: native runsc
# expect: exit=0 stdout="OK\n"
import os, resource, errno
limit = resource.getrlimit(resource.RLIMIT_NOFILE)
if limit != (1024, 4096):
    print("ESCAPED: RLIMIT_NOFILE is %r, not nsbox's (1024, 4096)" % (limit,))
soft, hard = limit
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
if len(fds) > 4096:
    print("ESCAPED: %d fds" % len(fds))
print("OK")
