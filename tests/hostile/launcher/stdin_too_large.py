# hostile: code beyond the 64 MiB stdin cap: refused with a message, never truncated and run
# pad: 65m
# expect: exit=125 max_seconds=30 max_rss_kb=200000
print("ESCAPED: ran truncated code")
