# hostile: become root or another user: setuid(0), setresuid, setgroups, setfsuid, capabilities
# expect: exit=0 stdout="OK\n"
import os
for f, a in ((os.setuid, (0,)), (os.setgid, (0,)), (os.setresuid, (0, 0, 0)), (os.setgroups, ([0],)),
             (os.setreuid, (0, 0)), (os.seteuid, (1000,))):
    try:
        f(*a)
        print("ESCAPED:", f.__name__, a)
    except OSError:
        pass
st = open("/proc/self/status").read()
for field in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
    lines = [l for l in st.splitlines() if l.startswith(field)]
    if not lines:
        continue
    line = lines[0]
    if int(line.split()[1], 16) != 0:
        print("ESCAPED:", line)
if os.getuid() == 0 or os.geteuid() == 0:
    print("ESCAPED: root")
print("OK")
