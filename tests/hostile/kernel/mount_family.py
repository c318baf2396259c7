# hostile: mount, umount, pivot_root, chroot from inside the sandbox
# prelude: trysys
# expect: exit=0 stdout="OK\n"
blocked("mount", "EPERM", BAD, BAD, BAD, 0, 0)
blocked("umount2", "EPERM", BAD, 0)
blocked("pivot_root", "EPERM", BAD, BAD)
blocked("chroot", "EPERM", BAD)
done()
