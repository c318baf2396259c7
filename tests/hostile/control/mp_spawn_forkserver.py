# hostile: positive control: multiprocessing spawn and forkserver, code in a file under /tmp run by python
# expect: exit=0 stdout="spawn 285\nforkserver 285\n"
import subprocess, sys
prog = '''
import multiprocessing as mp, sys
def sq(x):
    return x * x
if __name__ == "__main__":
    ctx = mp.get_context(sys.argv[1])
    with ctx.Pool(2) as p:
        print(sys.argv[1], sum(p.map(sq, range(10))))
'''
open("/tmp/x.py", "w").write(prog)
for method in ("spawn", "forkserver"):
    r = subprocess.run([sys.executable, "/tmp/x.py", method], capture_output=True, text=True, timeout=60)
    sys.stdout.write(r.stdout or r.stderr)
