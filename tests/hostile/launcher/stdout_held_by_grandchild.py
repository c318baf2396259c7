# hostile: a grandchild keeps stdout and stderr open after the program exits: the run ends with the program
# args: --timeout 10s
# expect: exit=0 stdout="OK\n" timed_out=false max_seconds=4
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(60)
        os.write(1, b"ESCAPED: grandchild outlived the run\n")
    os._exit(0)
print("OK", flush=True)
