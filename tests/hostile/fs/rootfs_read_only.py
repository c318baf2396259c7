# hostile: write, create, delete, chmod, rename and xattr in the shared rootfs (the host's image)
# expect: exit=0 stdout="OK\n"
# expect[runsc]: exit=0 stdout_contains="OK\n" stdout_lacks="honoured" stdout_lacks="executed" because="gVisor's statvfs reports no nosuid/nodev flags (its mounts are configured nosuid,nodev; the set-id and noexec behaviour itself is checked)"
import os, errno
def denied(what, f, *a):
    try:
        f(*a)
        print("ESCAPED:", what)
    except OSError as e:
        if e.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
            print("ESCAPED?", what, e)
denied("write python", open, "/usr/bin/python3", "ab")
denied("create /pwned", open, "/pwned", "w")
denied("write /etc/passwd", open, "/etc/passwd", "a")
denied("unlink /etc/hostname", os.unlink, "/etc/os-release")
denied("chmod /usr/bin", os.chmod, "/usr/bin", 0o777)
denied("rename /etc", os.rename, "/etc/os-release", "/etc/x")
denied("mkdir /usr/x", os.mkdir, "/usr/x")
denied("symlink /x", os.symlink, "/tmp", "/x")
denied("utime", os.utime, "/etc/os-release", (0, 0))
denied("setxattr", os.setxattr, "/etc/os-release", "user.x", b"1")
denied("truncate", os.truncate, "/etc/os-release", 0)
st = os.statvfs("/")
if not (st.f_flag & os.ST_RDONLY and st.f_flag & os.ST_NOSUID and st.f_flag & os.ST_NODEV):
    print("flags: / is not ro,nosuid,nodev", st.f_flag)
print("OK")
