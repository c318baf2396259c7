# hostile: kernel memory, interrupt and timing files: Docker's masked /proc paths (interrupts, kcore, keys, latency_stats, sched_debug, timer_list, timer_stats, acpi, asound, scsi) and kallsyms, each empty or absent
# runtimes: native
# expect: exit=0 stdout="OK\n"
import os
for p in ("/proc/interrupts", "/proc/kcore", "/proc/keys", "/proc/timer_list",
          "/proc/sched_debug", "/proc/kallsyms", "/proc/latency_stats", "/proc/timer_stats"):
    try:
        data = open(p, "rb").read(4096)
    except OSError:
        continue
    if data:
        print("ESCAPED: %s gave %d bytes" % (p, len(data)))
for d in ("/proc/acpi", "/proc/scsi", "/proc/asound"):
    try:
        if os.listdir(d):
            print("ESCAPED: %s is not empty" % d)
    except OSError:
        pass
print("OK")
