# hostile: every byte value on stdout, 64 times: the JSON stays valid and the count right
# expect: exit=0 stdout_contains="\u0000\u0001" stdout_contains="\ufffd"
import os
os.write(1, bytes(range(256)) * 64)
