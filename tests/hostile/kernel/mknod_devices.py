# hostile: mknod of character and block devices (raw disk, /dev/mem), also with mode bits beyond S_IFMT
# prelude: trysys
# expect: exit=0 stdout="OK\n"
import stat
AT_FDCWD = -100
for kind in (stat.S_IFCHR, stat.S_IFBLK):
    for extra in (0, 1 << 16, 1 << 32):
        blocked("mknodat", "EPERM", AT_FDCWD, BAD, kind | 0o666 | extra, os.makedev(1, 1))
# FIFOs and regular files are fine
os.mkfifo("/tmp/fifo")
os.mknod("/tmp/reg", 0o600 | stat.S_IFREG)
try:
    os.mknod("/tmp/mem", 0o600 | stat.S_IFCHR, os.makedev(1, 1))
    print("ESCAPED: created /dev/mem")
except OSError as e:
    assert e.errno == errno.EPERM, e
done()
