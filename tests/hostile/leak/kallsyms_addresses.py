# hostile: kernel addresses (KASLR) from /proc/kallsyms, /proc/modules, /proc/self/stack, /proc/iomem
# expect: exit=0 stdout="OK\n"
import re
for p in ("/proc/kallsyms", "/proc/modules", "/proc/self/stack", "/proc/iomem", "/proc/ioports"):
    try:
        data = open(p).read()
    except OSError:
        continue
    if re.search(r"\b(ffff[0-9a-f]{12})\b", data) and not re.search(r"\b0000000000000000\b", data):
        print("ESCAPED: kernel addresses in", p)
print("OK")
