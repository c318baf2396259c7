# hostile: positive control: sqlite3 in memory and on /tmp (file locks, journal)
# expect: exit=0 stdout="OK 4950 4950\n"
import sqlite3
res = []
for path in (":memory:", "/tmp/db.sqlite"):
    c = sqlite3.connect(path)
    c.execute("create table t (x int)")
    c.executemany("insert into t values (?)", [(i,) for i in range(100)])
    c.commit()
    res.append(c.execute("select sum(x) from t").fetchone()[0])
print("OK", *res)
