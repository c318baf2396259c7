# hostile: a fork bomb: contained by pids-limit, ended by the timeout, nothing left on the host
# args: --timeout 2s --pids-limit 32
# expect: exit=124 timed_out=true max_seconds=10
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
