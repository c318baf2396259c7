# hostile: the launcher's environment (it holds a canary secret) through os.environ, /proc/self/environ, /proc/1/environ, auxv
# expect: exit=0 stdout_lacks=NSBOX_HOSTILE_SECRET
import os
print(sorted(os.environ))
print(open("/proc/self/environ", "rb").read())
for p in ("/proc/1/environ", "/proc/1/cmdline"):
    try:
        print(p, open(p, "rb").read())
    except OSError as e:
        print(p, e.strerror)
