# hostile: the new mount API (CVE-2021-41133: flatpak's filter missed it)
# prelude: trysys
# expect: exit=0 stdout="OK\n"
blocked("open_tree", "ENOSYS", BADFD, BAD, 0)
blocked("move_mount", "ENOSYS", BADFD, BAD, BADFD, BAD, 0)
blocked("fsopen", "ENOSYS", BAD, 0)
blocked("fsconfig", "ENOSYS", BADFD, 0, BAD, BAD, 0)
blocked("fsmount", "ENOSYS", BADFD, 0, 0)
blocked("fspick", "ENOSYS", BADFD, BAD, 0)
blocked("mount_setattr", "ENOSYS", BADFD, BAD, 0, BAD, 32)
done()
