# hostile: Dirty COW pattern: write a read-only private file mapping of the rootfs through /proc/self/mem
# expect: exit=0 stdout="OK\n"
import mmap, os
path = os.path.realpath("/etc/os-release")
before = open(path, "rb").read()
fd = os.open(path, os.O_RDONLY)
m = mmap.mmap(fd, 0, mmap.MAP_PRIVATE, mmap.PROT_READ)
# the mapping's address from /proc/self/maps
for line in open("/proc/self/maps"):
    if line.rstrip().endswith(path):
        start = int(line.split("-")[0], 16)
        break
try:
    with open("/proc/self/mem", "r+b", buffering=0) as mem:
        mem.seek(start)
        mem.write(b"PWNED")
except OSError:
    pass
os.close(fd)
if open(path, "rb").read() != before:
    print("ESCAPED: the file behind the mapping changed")
print("OK")
