# hostile: closes stdout and stderr, then writes: the launcher still reports the exit
# expect: exit=120 stdout="" stderr=""
import os
os.close(1)
os.close(2)
print("lost")
