# hostile: print exactly nsbox's own setup-failure line and exit 127, as a failed exec would: it must be the program's normal result (exit 127, its stderr), never taken for a setup failure of nsbox's (exit 125) under any runtime
# runtimes: runsc
# expect: exit=127 stdout="" stderr="nsbox: sandbox setup: execute 'python3': No such file or directory\n"
import os, sys
sys.stderr.write("nsbox: sandbox setup: execute 'python3': No such file or directory\n")
sys.stderr.flush()
os._exit(127)
