# hostile: syscalls the policy does not know: future numbers and recent additions default to ENOSYS
# prelude: trysys
# expect: exit=0 stdout="OK\n"
for nr in (463, 470, 500, 1000, 0x3fffffff):
    blocked(nr, "ENOSYS", BAD, BAD, BAD)
for name in ("landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
             "statmount", "listmount", "lsm_get_self_attr", "cachestat"):
    blocked(name, ("ENOSYS", "EPERM"), BAD, BAD, BAD, BAD)
done()
