# hostile: spin on every CPU: the cpus quota (0.5) holds the program to about half a CPU
# args: --cpus 0.5 --timeout 10s
# expect: exit=0 stdout="OK\n" max_cpu_share=0.7
# expect[runsc]: exit=0 stdout_contains="OK\n" max_cpu_share=0.7 because="gVisor's process_time inside is not the host's CPU time; the host side (cpu_ms of the result) is what the quota holds"
# expect[cpu-none]: exit=0 stdout_contains="OK\n" because="no CPU quota could be enforced (the result says cpus: none): an honest report is the contained outcome"
# expect[runsc,cpu-none]: exit=0 stdout_contains="OK\n" because="under gVisor without a CPU quota (unprivileged: cpus none), nothing holds the share; the result says so"
import os, threading, time
def spin(until):
    while time.monotonic() < until:
        pass
until = time.monotonic() + 2.0
ts = [threading.Thread(target=spin, args=(until,)) for _ in range(4)]
t0, c0 = time.monotonic(), time.process_time()
for t in ts: t.start()
for t in ts: t.join()
ratio = (time.process_time() - c0) / (time.monotonic() - t0)
if ratio > 0.8:
    print("EXCEEDED: used %.2f CPUs under cpus=0.5" % ratio)
print("OK")
