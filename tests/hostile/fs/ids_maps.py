# hostile: rewriting its own uid_map/gid_map/setgroups to become root of the namespace
# expect: exit=0 stdout="OK\n"
for f, data in (("uid_map", "0 0 4294967295"), ("gid_map", "0 0 4294967295"), ("setgroups", "allow")):
    for pid in ("self", "1"):
        try:
            with open("/proc/%s/%s" % (pid, f), "w") as fh:
                fh.write(data)
            print("ESCAPED: wrote /proc/%s/%s" % (pid, f))
        except OSError:
            pass
print("OK")
