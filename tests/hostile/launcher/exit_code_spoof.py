# hostile: exits 124 to look like a timeout and 125 to look like an nsbox failure: JSON says otherwise
# expect: exit=124 timed_out=false oom_killed=false signal=null stdout="OK\n"
import sys
print("OK")
sys.exit(124)
