# hostile: never reads stdin and sleeps: the timeout still fires on time while nsbox blocks on a full pipe
# pad: 20m
# args: --timeout 1s -- sleep 100
# expect: exit=124 timed_out=true max_seconds=8 max_rss_kb=100000
