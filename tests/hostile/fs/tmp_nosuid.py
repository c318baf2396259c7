# hostile: a set-user-ID copy of python in /tmp and /dev/shm (nosuid, noexec) does not change ids
# expect: exit=0 stdout="OK\n"
# expect[runsc]: exit=0 stdout_contains="OK\n" stdout_lacks="honoured" stdout_lacks="executed" because="gVisor's statvfs reports no nosuid/nodev flags (its mounts are configured nosuid,nodev; the set-id and noexec behaviour itself is checked)"
import os, shutil, subprocess, sys, stat
shutil.copy(sys.executable, "/tmp/spy")
os.chmod("/tmp/spy", 0o6755)
out = subprocess.run(["/tmp/spy", "-c", "import os; print(os.geteuid(), os.getegid())"],
                     capture_output=True, text=True).stdout.split()
if out != [str(os.getuid()), str(os.getgid())]:
    print("ESCAPED: set-id bit honoured", out)
for p in ("/tmp", "/dev/shm"):
    f = os.statvfs(p).f_flag
    if not (f & os.ST_NOSUID and f & os.ST_NODEV):
        print("flags:", p, "is not nosuid,nodev")
shutil.copy(sys.executable, "/dev/shm/py")
os.chmod("/dev/shm/py", 0o755)
try:
    subprocess.run(["/dev/shm/py", "-c", "1"])
    print("ESCAPED: executed from /dev/shm")
except PermissionError:
    pass
print("OK")
