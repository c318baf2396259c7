# hostile: one 96 MiB write with no newline
# args: --timeout 30s
# expect: exit=0 stdout_truncated=true max_seconds=30
import sys
sys.stdout.buffer.write(b"B" * (96 << 20))
