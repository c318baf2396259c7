#!/usr/bin/python3
"""The Python package's overhead (make bench): print(1), interleaved pair by
pair, median and p90 of N each.

  unix:  nsbox.Client("unix:SOCK").run("print(1)") in this process (kept-
         alive connection) against the same request made by the C client,
         `nsbox run --server unix:SOCK`, a process per run: the same
         nsbox serve (pool of 2) answers both. Target <= 1.1.
  local: nsbox.Client(rootfs=...).run("print(1)") against `nsbox run
         --rootfs ... --json` started directly from this process with
         subprocess. Target <= 1.1.

Usage: python.py NSBOX_BIN ROOTFS [N]"""

import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "python"))
import nsbox  # noqa: E402

CODE = "print(1)\n"


def timed(fn):
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def row(name, a, b, target):
    ma, mb = statistics.median(a), statistics.median(b)
    q = lambda xs: sorted(xs)[int(len(xs) * 0.9) - 1]  # noqa: E731
    ratio = ma / mb
    print(f"{name:6} python {ma * 1000:7.2f} ms (p90 {q(a) * 1000:7.2f})   "
          f"baseline {mb * 1000:7.2f} ms (p90 {q(b) * 1000:7.2f})   "
          f"ratio {ratio:.2f} (target <= {target}: {'met' if ratio <= target else 'MISSED'})")
    return ratio <= target


def main():
    nsbox_bin, rootfs = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    ok = True
    with tempfile.TemporaryDirectory(prefix="nsbox-pybench-") as d:
        sock = os.path.join(d, "s", "nsbox.sock")
        server = subprocess.Popen([nsbox_bin, "serve", "--listen", f"unix:{sock}", "--rootfs", rootfs,
                                   "--pool-size", "2"], stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            client = nsbox.Client(f"unix:{sock}")
            deadline = time.monotonic() + 30
            while True:
                try:
                    if client.health()["status"] == "ok":
                        break
                except nsbox.Error:
                    if time.monotonic() > deadline:
                        raise
                time.sleep(0.02)

            def c_client():
                p = subprocess.run([nsbox_bin, "run", "--server", f"unix:{sock}"], input=CODE.encode(),
                                   capture_output=True)
                assert p.stdout == b"1\n", p

            def py_client():
                assert client.run(CODE).stdout == "1\n"

            for _ in range(3):  # warm both
                c_client()
                py_client()
            py, c = [], []
            for _ in range(n):
                py.append(timed(py_client))
                c.append(timed(c_client))
            ok &= row("unix", py, c, 1.1)
        finally:
            server.terminate()
            server.wait()
    local = nsbox.Client(nsbox=nsbox_bin, rootfs=rootfs)

    def direct():
        p = subprocess.run([nsbox_bin, "run", "--json", "--rootfs", rootfs], input=CODE.encode(),
                           capture_output=True)
        assert b'"stdout":"1\\n"' in p.stdout, p

    def py_local():
        assert local.run(CODE).stdout == "1\n"

    for _ in range(3):
        direct()
        py_local()
    py, c = [], []
    for _ in range(n):
        py.append(timed(py_local))
        c.append(timed(direct))
    ok &= row("local", py, c, 1.1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
