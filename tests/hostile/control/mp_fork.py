# hostile: positive control: multiprocessing with fork (Pool, Queue, Manager-free)
# expect: exit=0 stdout="OK 285\n"
import multiprocessing as mp
def sq(x):
    return x * x
ctx = mp.get_context("fork")
with ctx.Pool(4) as p:
    s = sum(p.map(sq, range(10)))
q = ctx.Queue()
pr = ctx.Process(target=q.put, args=(s,))
pr.start(); pr.join()
print("OK", q.get())
