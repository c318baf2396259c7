# hostile: NUL bytes in stdout (C strings end there: a truncated result would hide what follows)
# expect: exit=0 stdout="before\x00after\x00\n"
import os
os.write(1, b"before\0after\0\n")
