# hostile: invalid UTF-8 (overlong, surrogates, stray continuation, > U+10FFFF) in stdout and stderr: valid JSON with U+FFFD
# expect: exit=0 stdout_contains="a\ufffd" stdout_contains="z\n" stderr_contains="\ufffd"
import os
os.write(1, b"a\xff\xfe\xc0\x80\xed\xa0\x80\xf4\x90\x80\x80\x80\xbfz\n")
os.write(2, b"\xc3(\xe2\x82\n")
