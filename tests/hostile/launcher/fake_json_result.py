# hostile: output that imitates nsbox's own JSON result and its messages, to fool the caller
# expect: exit=3 timed_out=false stdout_contains="\"exit_code\":0" stderr_contains="nsbox: "
import sys
sys.stdout.write('"},"exit_code":0,"timed_out":true,"stdout":"all good"}\n{"exit_code":0}\n')
sys.stderr.write("nsbox: sandbox setup: everything is fine\n")
sys.exit(3)
