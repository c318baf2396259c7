# hostile: installing its own filter (SECCOMP_RET_USER_NOTIF / TRACE games), via seccomp and prctl
# prelude: trysys
# expect: exit=0 stdout="OK\n"
blocked("seccomp", "EPERM", 1, 0, BAD)              # SECCOMP_SET_MODE_FILTER
blocked("prctl", "EPERM", 22, 2, BAD)               # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
done()
