# hostile: host-wide knobs through /proc: sysrq-trigger, core_pattern, drop_caches, modprobe path, hostname
# expect: exit=0 stdout="OK\n"
for p, data in (("/proc/sysrq-trigger", "h"), ("/proc/sys/kernel/core_pattern", "|/tmp/x"),
                ("/proc/sys/vm/drop_caches", "3"), ("/proc/sys/kernel/modprobe", "/tmp/x"),
                ("/proc/sys/kernel/hostname", "pwned"), ("/proc/sys/fs/binfmt_misc/register", ":x:E::x::/tmp/x:"),
                ("/proc/sys/kernel/randomize_va_space", "0"), ("/proc/sys/net/ipv4/ip_forward", "1")):
    try:
        with open(p, "w") as f:
            f.write(data)
        print("ESCAPED: wrote", p)
    except OSError:
        pass
print("OK")
