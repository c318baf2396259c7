#!/usr/bin/python3
"""A fleet's cost (make bench): three nsbox serve nodes on 127.0.0.2-4
behind HAProxy with the shipped configuration (tests/fleet/conftest.py
starts them), against one node alone, in the same run.

  latency:    HAProxy's added time per request: GET /v1/health, and a run of
              `pass` in one live sandbox, each p50 through HAProxy against
              the same request sent straight to its node, interleaved pair by
              pair on kept-alive connections. Target: added <= 0.3 ms p50.
  throughput: N runs of `print(i * i)` at concurrency 8 through HAProxy to the
              three nodes, against N runs at concurrency 8 straight to one node
              (the same options: --max-concurrent 2, a pool of 2). On a
              2-core machine every node shares the same two cores: this
              measures the fleet's overhead, not scale-out.

Usage: fleet.py NSBOX_BIN ROOTFS [N]"""

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "fleet"))


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    os.environ["NSBOX_BIN"], os.environ["NSBOX_TEST_ROOTFS"] = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    import conftest as fleet_lib  # reads NSBOX_BIN and the rootfs from the environment

    if not os.access(fleet_lib.HAPROXY, os.X_OK):
        print("fleet: HAProxy not installed: skipped")
        return 0
    fleet = fleet_lib.Fleet(Path(tempfile.mkdtemp(prefix="nsbox-bench-fleet.")))
    try:
        for node in fleet.nodes.values():
            node.start()
        fleet.haproxy = fleet_lib.Haproxy(fleet.directory, fleet.nodes)
        return measure(fleet_lib, fleet, n)
    finally:
        if fleet.haproxy is not None:
            fleet.haproxy.stop()
        for node in fleet.nodes.values():
            node.stop()


def p50_ms(xs):
    return statistics.median(xs) * 1000


def measure(fleet_lib, fleet, n: int) -> int:
    node = fleet.nodes["nsbox-0"]
    via, direct = fleet.http(), node.http()
    rows = []
    # A run compared on one node and one live sandbox (opened on nsbox-0,
    # which HAProxy routes its id to): single runs would be spread over
    # three warm pools through HAProxy and drain one node's pool directly.
    opened = direct.request("POST", "/v1/sandboxes", {})
    assert opened.status == 201, opened.body
    sandbox = f"/v1/sandboxes/{opened.json()['id']}"
    for what, method, path, body in (
        ("GET /v1/health", "GET", "/v1/health", None),
        ("sandbox run of pass", "POST", sandbox + "/runs", {"code": "pass"}),
    ):
        reps = max(n * 10, 300) if method == "GET" else max(n * 3, 60)
        a, b = [], []
        for _ in range(5):  # warm both paths
            via.request(method, path, body)
            direct.request(method, path, body)
        for i in range(reps):
            pair = [(via, a), (direct, b)]
            if i % 2:
                pair.reverse()
            for http, out in pair:
                began = time.perf_counter()
                answer = http.request(method, path, body)
                out.append(time.perf_counter() - began)
                assert answer.status == 200, answer.body
        rows.append((what, reps, p50_ms(a), p50_ms(b)))
    direct.request("DELETE", sandbox)
    print("fleet: HAProxy's added latency (p50, interleaved, kept-alive connections)")
    print(f"  {'request':<22} {'pairs':>5} {'via HAProxy':>12} {'direct':>9} {'added':>9}")
    for what, reps, a, b in rows:
        print(f"  {what:<22} {reps:>5} {a:>9.3f} ms {b:>6.3f} ms {a - b:>6.3f} ms")

    runs = max(n * 10, 300)

    def throughput(make_http) -> float:
        began = time.perf_counter()
        done, joiner = fleet_lib.loader(make_http, runs, 8)
        joiner.join()
        elapsed = time.perf_counter() - began
        bad = [(i, a.status) for i, a in done if not fleet_lib.correct(i, a)]
        assert len(done) == runs and not bad, bad[:5]
        return runs / elapsed

    one = throughput(node.http)
    three = throughput(fleet.http)
    one_again = throughput(node.http)
    base = (one + one_again) / 2
    print(f"fleet: {runs} runs of print(i * i) at concurrency 8 ({os.cpu_count()} cores shared by every node)")
    print(f"  one node, direct:          {base:7.1f} runs/s ({one:.1f}, then {one_again:.1f})")
    print(f"  three nodes, via HAProxy:  {three:7.1f} runs/s  ratio {three / base:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
