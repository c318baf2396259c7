# hostile: open the host's canary files by their host paths, directly and through /proc/*/root
# expect: exit=0 stdout="OK\n"
import os
paths = ["@CANARY_ROOT@", "@CANARY_TMP@", "@CANARY_PUBLIC@"]
for p in list(paths):
    paths += ["/proc/self/root" + p, "/proc/1/root" + p, "/proc/self/cwd/../.." + p]
for p in paths:
    try:
        data = open(p, "rb").read()
        print("ESCAPED: read", p, len(data))
    except OSError:
        pass
    if os.path.exists(p):
        print("ESCAPED: can see", p)
# Only nsbox's own empty /tmp/out (native runtime) may be there.
left = sorted(os.listdir("/tmp"))
if left not in ([], ["out"]) or (left == ["out"] and os.listdir("/tmp/out")):
    print("ESCAPED: /tmp is not empty:", left)
print("OK")
