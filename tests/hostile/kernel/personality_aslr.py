# hostile: personality(ADDR_NO_RANDOMIZE / READ_IMPLIES_EXEC) then exec: ASLR off, W^X off
# prelude: trysys
# expect: exit=0 stdout="OK\n"
for persona in (0x0040000, 0x0400000, 0x0040000 | 0x0400000, 0x0008, 0x1_0000_0000 | 0x0040000):
    blocked("personality", ("ENOSYS", "EPERM"), persona)
r, e = sc(NR["personality"], 0xffffffff)
if r >= 0 and (r & 0x0040000):
    print("ESCAPED: personality query", r, e)
done()
