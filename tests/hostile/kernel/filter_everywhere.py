# hostile: looking for an unfiltered context: a thread, a forked child, a freshly exec'd python
# prelude: trysys
# expect: exit=0 stdout="OK\n"
import threading, subprocess
t = threading.Thread(target=lambda: blocked("keyctl", "EPERM", 0, -3, 0, 0, 0)); t.start(); t.join()
pid = os.fork()
if pid == 0:
    blocked("unshare", "EPERM", 0x10000000)
    os._exit(1 if FAILED else 0)
assert os.waitpid(pid, 0)[1] == 0
out = subprocess.run([sys.executable, "-c",
    "import ctypes; l=ctypes.CDLL(None, use_errno=True); r=l.syscall(250,0,-3,0,0,0); "
    "print(r, ctypes.get_errno())"], capture_output=True, text=True).stdout.split()
if out != ["-1", "1"]:
    print("ESCAPED: keyctl after execve gave", out)
st = open("/proc/self/status").read()
if ("Seccomp:" in st and "Seccomp:\t2" not in st) or ("NoNewPrivs:" in st and "NoNewPrivs:\t1" not in st):
    print("ESCAPED: no seccomp filter or no_new_privs")
done()
