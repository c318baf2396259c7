# hostile: ptrace, process_vm_*, kcmp, pidfd_getfd (CVE-2016-9962 pattern)
# prelude: trysys
# expect: exit=0 stdout="OK\n"
blocked("ptrace", "EPERM", 16, 1, 0, 0)             # PTRACE_ATTACH to init
blocked("ptrace", "EPERM", 0, 0, 0, 0)              # PTRACE_TRACEME
blocked("process_vm_readv", "EPERM", 1, BAD, 1, BAD, 1, 0)
blocked("process_vm_writev", "EPERM", 1, BAD, 1, BAD, 1, 0)
blocked("kcmp", "EPERM", 1, os.getpid(), 0, 0, 0)
blocked("pidfd_getfd", "EPERM", BADFD, 0, 0)
blocked("process_madvise", "EPERM", BADFD, BAD, 1, 0, 0)
done()
