# hostile: positive control: a 50 MB numeric workload (array of doubles, bytearray) within the default limits
# args: --timeout 30s
# expect: exit=0 stdout="OK 6553600\n" max_seconds=30
from array import array
n = 50 * 1024 * 1024 // 8
a = array("d", range(n))
b = bytearray(50 * 1024 * 1024)
b[::4096] = b"\1" * len(b[::4096])
s = sum(a[::100])
assert s == sum(range(0, n, 100))
print("OK", n)
