# hostile: unshare through libc (what a script would copy from a blog), and the sysctl behind the filter
# expect: exit=0 stdout="OK\n"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
for name, flag in (("NEWUSER", 0x10000000), ("NEWNS", 0x20000), ("NEWNET", 0x40000000),
                   ("NEWPID", 0x20000000), ("NEWUSER|NEWNS", 0x10020000)):
    if libc.unshare(flag) == 0:
        print("ESCAPED: unshare", name)
    elif ctypes.get_errno() != 1:
        print("ESCAPED? unshare", name, "errno", ctypes.get_errno())
# no nested user namespaces even through a path the filter does not see
if os.path.exists("/proc/sys/user/max_user_namespaces") and open("/proc/sys/user/max_user_namespaces").read().strip() != "0":
    print("ESCAPED: max_user_namespaces is not 0")
try:
    fd = os.open("/proc/sys/user/max_user_namespaces", os.O_WRONLY)
    os.write(fd, b"100\n")
    print("ESCAPED: raised max_user_namespaces")
except OSError:
    pass
print("OK")
