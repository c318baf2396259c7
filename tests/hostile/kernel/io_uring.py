# hostile: io_uring (bypasses the socket filter; kCTF's top source of bugs)
# prelude: trysys
# expect: exit=0 stdout="OK\n"
blocked("io_uring_setup", "ENOSYS", 8, BAD)
blocked("io_uring_enter", "ENOSYS", BADFD, 1, 1, 0, 0, 0)
blocked("io_uring_register", "ENOSYS", BADFD, 0, BAD, 1)
done()
