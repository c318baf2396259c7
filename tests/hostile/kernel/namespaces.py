# hostile: nested namespaces (CVE-2022-0185, CVE-2022-0492 start with unshare(CLONE_NEWUSER))
# prelude: trysys
# expect: exit=0 stdout="OK\n"
for flag in (0x10000000, 0x00020000, 0x20000000, 0x40000000, 0x08000000, 0x04000000,
             0x02000000, 0x00000080):     # USER NS PID NET IPC UTS CGROUP TIME
    blocked("unshare", "EPERM", flag)
blocked("setns", "EPERM", BADFD, 0)
# clone with a namespace flag: denied before the kernel looks at anything
blocked("clone", "EPERM", 0x10000000 | 17, BAD, BAD, BAD, 0)
blocked("clone", "EPERM", 0x20000000 | 17, BAD, BAD, BAD, 0)
# clone3 hides its flags in memory: always ENOSYS (glibc falls back to clone)
blocked("clone3", "ENOSYS", BAD, 88)
done()
