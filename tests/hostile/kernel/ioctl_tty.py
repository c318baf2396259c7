# hostile: TIOCSTI/TIOCLINUX/TIOCSETD with and without high bits (CVE-2017-5226, CVE-2019-10063)
# prelude: trysys
# expect: exit=0 stdout="OK\n"
for cmd in (0x5412, 0x541C, 0x5423):
    for high in (0, 1 << 32, 0xffffffff << 32):
        blocked("ioctl", "EPERM", BADFD, cmd | high, BAD)
        blocked("ioctl", "EPERM", 0, cmd | high, BAD)
# an ioctl the policy does not list: the default
blocked("ioctl", "ENOSYS", BADFD, 0x5401 + 0x10000, BAD)
# TCGETS is allowed: the kernel answers (EBADF for a bad fd)
r, e = sc(NR["ioctl"], BADFD, 0x5401, BAD)
if errno.errorcode.get(e) != "EBADF":
    print("ESCAPED? TCGETS on a bad fd gave", errno.errorcode.get(e, e))
done()
