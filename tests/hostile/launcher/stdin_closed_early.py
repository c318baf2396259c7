# hostile: closes its stdin at once (EPIPE/SIGPIPE on nsbox's side of the pipe)
# pad: 20m
# args: -- python3 -c "import os; os.close(0); print('OK')"
# expect: exit=0 stdout="OK\n" max_seconds=10 max_rss_kb=100000
