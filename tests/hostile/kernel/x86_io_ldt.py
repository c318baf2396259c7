# hostile: iopl, ioperm, modify_ldt (x86 hardware surface; CVE-2015-5157 class)
# prelude: trysys
# expect: exit=0 stdout="OK\n"
blocked("iopl", "EPERM", 3)
blocked("ioperm", "EPERM", 0x80, 1, 1)
blocked("modify_ldt", "EPERM", 1, BAD, 16)
done()
