# hostile: abort and SIGSEGV with RLIMIT_CORE raised: no core file (core_pattern could pipe to a host helper)
# expect: exit=0 stdout="OK\n"
import os, resource, signal, subprocess, sys
soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
if hard != 0:
    print("ESCAPED: RLIMIT_CORE hard limit", hard)
try:
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    print("ESCAPED: raised RLIMIT_CORE")
except (ValueError, OSError):
    pass
r = subprocess.run([sys.executable, "-c", "import os; os.chdir('/tmp'); os.abort()"])
if r.returncode != -signal.SIGABRT:
    print("unexpected", r.returncode)
if any(n.startswith("core") for n in os.listdir("/tmp")):
    print("ESCAPED: a core file was written")
print("OK")
