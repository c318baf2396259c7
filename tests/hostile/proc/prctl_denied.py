# hostile: prctl options that weaken the sandbox: dumpable, ptracer, mm, subreaper, ambient caps, no_new_privs off
# prelude: trysys
# expect: exit=0 stdout="OK\n"
blocked("prctl", "EPERM", 4, 1)                   # PR_SET_DUMPABLE 1
blocked("prctl", "EPERM", 0x59616d61, -1)         # PR_SET_PTRACER ANY
blocked("prctl", "EPERM", 35, 1, BAD, 0, 0)       # PR_SET_MM
blocked("prctl", "EPERM", 36, 1)                  # PR_SET_CHILD_SUBREAPER
blocked("prctl", "EPERM", 47, 2, 21, 0, 0)        # PR_CAP_AMBIENT RAISE
blocked("prctl", "EPERM", 4 | (1 << 32), 1)       # PR_SET_DUMPABLE with high bits
blocked("prctl", "EPERM", 0x53564d41, 0, 0, 0, 0) # PR_SET_VMA
r, e = sc(NR["prctl"], 39, 0, 0, 0, 0)            # PR_GET_NO_NEW_PRIVS
if r != 1:
    print("ESCAPED: no_new_privs is", r)
done()
