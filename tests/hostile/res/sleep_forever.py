# hostile: never ends: the timeout kills it on time
# args: --timeout 700ms
# expect: exit=124 timed_out=true max_seconds=5 min_seconds=0.6
import time
time.sleep(100000)
