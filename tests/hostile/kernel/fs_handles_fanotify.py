# hostile: open_by_handle_at (the 2014 "shocker" Docker escape), name_to_handle_at, fanotify
# prelude: trysys
# expect: exit=0 stdout="OK\n"
blocked("open_by_handle_at", "EPERM", BADFD, BAD, 0)
blocked("name_to_handle_at", "EPERM", BADFD, BAD, BAD, BAD, 0)
blocked("fanotify_init", "EPERM", 0, 0)
blocked("memfd_secret", "EPERM", 0)
done()
