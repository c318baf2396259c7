# hostile: host-global state: clock, hostname via syscall, swap, acct, quota, syslog
# prelude: trysys
# expect: exit=0 stdout="OK\n"
blocked("settimeofday", "EPERM", BAD, BAD)
blocked("clock_settime", "EPERM", 0, BAD)
blocked("clock_adjtime", "EPERM", 0, BAD)
blocked("adjtimex", "EPERM", BAD)
blocked("sethostname", "EPERM", BAD, 4)
blocked("setdomainname", "EPERM", BAD, 4)
blocked("swapon", "EPERM", BAD, 0)
blocked("swapoff", "EPERM", BAD)
blocked("acct", "EPERM", BAD)
blocked("quotactl", "EPERM", 0, BAD, 0, BAD)
blocked("syslog", "EPERM", 3, BAD, 100)             # SYSLOG_ACTION_READ_ALL
blocked("lookup_dcookie", ("EPERM", "ENOSYS"), 0, BAD, 16)
blocked("uselib", ("EPERM", "ENOSYS"), BAD)
blocked("ustat", ("EPERM", "ENOSYS"), 0, BAD)
blocked("sysfs", ("EPERM", "ENOSYS"), 2, 0, BAD)
blocked("_sysctl", ("EPERM", "ENOSYS"), BAD)
blocked("nfsservctl", ("EPERM", "ENOSYS"), 0, BAD, BAD)
done()
