# hostile: 60 MiB of code on stdin (a model told to paste a huge blob): runs, nsbox stays near 2x the code
# pad: 60m
# args: --timeout 30s --memory 512m
# expect: exit=0 stdout="OK\n" max_seconds=30 max_rss_kb=200000
print("OK")
