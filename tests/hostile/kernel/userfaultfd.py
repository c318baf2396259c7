# hostile: userfaultfd widens kernel race windows (exploit staple)
# prelude: trysys
# expect: exit=0 stdout="OK\n"
blocked("userfaultfd", "EPERM", 0)
blocked("userfaultfd", "EPERM", 1)                  # UFFD_USER_MODE_ONLY
done()
