# hostile: a program that never reads its stdin while nsbox still has 50 MiB to write: no deadlock
# pad: 50m
# args: --timeout 20s -- python3 -c "print('OK')"
# expect: exit=0 stdout="OK\n" max_seconds=15 max_rss_kb=200000
