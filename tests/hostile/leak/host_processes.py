# hostile: host processes and their command lines through /proc, /proc/*/task, and pid guessing
# expect: exit=0 stdout="OK\n"
import os
seen = [p for p in os.listdir("/proc") if p.isdigit()]
if len(seen) > 2:
    print("ESCAPED: processes", seen)
for pid in range(2, 4096):
    if str(pid) == str(os.getpid()):
        continue
    if os.path.exists("/proc/%d/cmdline" % pid):
        print("ESCAPED: /proc/%d exists" % pid)
        break
print("OK")
