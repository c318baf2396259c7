# hostile: NUMA memory policy calls (move_pages info leak, mbind bugs)
# prelude: trysys
# expect: exit=0 stdout="OK\n"
blocked("mbind", "EPERM", BAD, 4096, 0, BAD, 64, 0)
blocked("set_mempolicy", "EPERM", 0, BAD, 64)
blocked("get_mempolicy", "EPERM", BAD, BAD, 64, BAD, 0)
blocked("migrate_pages", "EPERM", 1, 64, BAD, BAD)
blocked("move_pages", "EPERM", 1, 1, BAD, BAD, BAD, 0)
done()
