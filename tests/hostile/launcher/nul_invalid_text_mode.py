# hostile: NUL and invalid UTF-8 without --json: passed through byte for byte
# mode: text
# expect: exit=0 stdout="x\x00\xff\xfey\n"
import os
os.write(1, b"x\0\xff\xfey\n")
