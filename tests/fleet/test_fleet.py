"""A fleet of three nsbox serve nodes behind HAProxy (conftest.py). The
tests share one fleet and run in this order: the drain and the kill leave
their node stopped, and the last test brings it back."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from conftest import (
    HEALTH_INTERVAL_S, NODES, NSBOX_BIN, QUOTA_PER_MINUTE, Answer, Fleet, Http, alive, correct, descendants, loader,
    scaled, wait_until,
)


def run(http: Http, code: str, headers: Optional[Dict[str, str]] = None, profile: str = "default") -> Answer:
    return http.request("POST", "/v1/runs", {"code": code, "profile": profile}, headers)


def test_single_runs_are_spread_over_every_node(fleet: Fleet) -> None:
    before = {n: fleet.nodes[n].runs_answered() for n in NODES}
    done, joiner = loader(fleet.http, 300, 8)
    joiner.join(timeout=scaled(300))
    assert not joiner.is_alive(), "300 runs did not end"
    assert len(done) == 300
    bad = [(i, a.status, a.body[:200]) for i, a in done if not correct(i, a)]
    assert not bad, f"{len(bad)} of 300 runs wrong: {bad[:5]}"
    # Every node served a share: each node's own count, not HAProxy's.
    served = {n: fleet.nodes[n].runs_answered() - before[n] for n in NODES}
    assert sum(served.values()) == 300, served
    assert all(v >= 30 for v in served.values()), f"a node got less than a tenth: {served}"
    # And each answer names the node that ran it.
    by_header: Dict[str, int] = {}
    for _, a in done:
        by_header[a.node or "?"] = by_header.get(a.node or "?", 0) + 1
    assert by_header == {n: int(v) for n, v in served.items()}, (by_header, served)


def test_each_sandbox_is_reached_on_its_own_node(fleet: Fleet) -> None:
    n_sandboxes, n_runs = 30, 5
    ids: List[str] = []
    tags: Dict[str, str] = {}
    nodes_seen: Dict[str, set] = {}
    http = fleet.http()
    for _ in range(n_sandboxes):
        a = http.request("POST", "/v1/sandboxes", {})
        assert a.status == 201, a.body
        sid = str(a.json()["id"])
        assert sid.split(".")[0] == a.node, (sid, a.node)
        ids.append(sid)
        tags[sid] = secrets.token_hex(8)
        nodes_seen[sid] = {str(a.node)}
    assert len({sid.split(".")[0] for sid in ids}) == 3, f"sandboxes not on every node: {ids}"
    # Interleaved: run k of every sandbox, then run k + 1, from 6 threads.
    lock = threading.Lock()
    wrong: List[str] = []

    def one(job: Tuple[str, int]) -> None:
        sid, k = job
        h = fleet.http()
        code = f"x = {tags[sid]!r}" if k == 0 else "print(x)"
        a = h.request("POST", f"/v1/sandboxes/{sid}/runs", {"code": code})
        h.close()
        with lock:
            nodes_seen[sid].add(str(a.node))
            if a.status != 200:
                wrong.append(f"{sid} run {k}: {a.status} {a.body[:200]!r}")
            elif k > 0 and a.json().get("stdout") != tags[sid] + "\n":
                wrong.append(f"{sid} run {k} saw {a.json().get('stdout')!r}, not its own {tags[sid]}")

    with ThreadPoolExecutor(6) as ex:
        for k in range(n_runs):
            list(ex.map(one, [(sid, k) for sid in ids]))
    assert not wrong, wrong[:5]
    for sid in ids:
        assert nodes_seen[sid] == {sid.split(".")[0]}, f"{sid} reached {nodes_seen[sid]}"
    for sid in ids:
        assert http.request("DELETE", f"/v1/sandboxes/{sid}").status == 204
    http.close()


def test_a_session_quota_holds_fleet_wide(fleet: Fleet) -> None:
    session = f"fleet-{secrets.token_hex(6)}"
    statuses: List[int] = []
    lock = threading.Lock()

    def client(_: int) -> None:
        h = fleet.http()
        for _ in range(10):
            a = run(h, "pass", {"X-Nsbox-Session": session}, profile="quota")
            with lock:
                statuses.append(a.status)
        h.close()

    began = time.monotonic()
    with ThreadPoolExecutor(4) as ex:
        list(ex.map(client, range(4)))
    elapsed = time.monotonic() - began
    assert len(statuses) == 40 and set(statuses) <= {200, 429}, statuses
    # The bucket refills one run every 60/20 s: a slower burst may have
    # earned that many more (none in the usual second or two).
    refilled = int(elapsed / (60 / QUOTA_PER_MINUTE))
    admitted = statuses.count(200)
    assert QUOTA_PER_MINUTE <= admitted <= QUOTA_PER_MINUTE + refilled, (admitted, elapsed, statuses)


def test_the_python_client_routes_a_session_to_one_node(fleet: Fleet) -> None:
    """nsbox.Client names a run's session in the X-Nsbox-Session header
    too, which HAProxy hashes on: the quota holds across the fleet."""
    import nsbox

    assert fleet.haproxy is not None
    session = f"fleet-py-{secrets.token_hex(6)}"
    outcomes: List[str] = []
    lock = threading.Lock()

    def client(_: int) -> None:
        with nsbox.Client(f"http://{fleet.haproxy.address}", token=fleet.token) as c:  # type: ignore[union-attr]
            for _ in range(10):
                try:
                    r = c.run("pass", profile="quota", session=session)
                    outcome = "ok" if r.ok else f"failed {r.exit_code}"
                except nsbox.QuotaExceeded:
                    outcome = "quota"
                with lock:
                    outcomes.append(outcome)

    began = time.monotonic()
    with ThreadPoolExecutor(4) as ex:
        list(ex.map(client, range(4)))
    refilled = int((time.monotonic() - began) / (60 / QUOTA_PER_MINUTE))
    assert len(outcomes) == 40 and set(outcomes) <= {"ok", "quota"}, outcomes
    assert QUOTA_PER_MINUTE <= outcomes.count("ok") <= QUOTA_PER_MINUTE + refilled, outcomes


def test_nsbox_run_routes_a_session_to_one_node(fleet: Fleet) -> None:
    """`nsbox run --server` sends --session as X-Nsbox-Session too."""
    assert fleet.haproxy is not None
    session = f"fleet-cli-{secrets.token_hex(6)}"
    argv = [NSBOX_BIN, "run", "--server", f"http://{fleet.haproxy.address}", "--token-file",
            fleet.nodes["nsbox-0"].token_file, "--profile", "quota", "--session", session]
    codes: List[int] = []
    lock = threading.Lock()

    def client(_: int) -> None:
        for _ in range(10):
            p = subprocess.run(argv, input=b"pass\n", capture_output=True, timeout=scaled(60))
            with lock:
                codes.append(p.returncode)

    began = time.monotonic()
    with ThreadPoolExecutor(4) as ex:
        list(ex.map(client, range(4)))
    refilled = int((time.monotonic() - began) / (60 / QUOTA_PER_MINUTE))
    # 0: ran; 75: refused by the quota (nsbox(1)).
    assert len(codes) == 40 and set(codes) <= {0, 75}, codes
    assert QUOTA_PER_MINUTE <= codes.count(0) <= QUOTA_PER_MINUTE + refilled, (codes, refilled)


def open_on(fleet: Fleet, node: str) -> Tuple[str, List[str]]:
    """A live sandbox on that node (opened through HAProxy until one lands
    there); the others opened on the way are returned to be deleted."""
    http = fleet.http()
    others: List[str] = []
    try:
        for _ in range(60):
            a = http.request("POST", "/v1/sandboxes", {})
            assert a.status == 201, a.body
            sid = str(a.json()["id"])
            if sid.startswith(node + "."):
                return sid, others
            others.append(sid)
    finally:
        http.close()
    raise AssertionError(f"no sandbox landed on {node}")


def test_a_node_that_cannot_start_sandboxes_keeps_its_live_ones(fleet: Fleet) -> None:
    """Its health check says 503 and why: HAProxy sends it no new work, but
    its live sandboxes still reach it; 200 again once it can start them."""
    assert fleet.haproxy is not None
    node = fleet.nodes["nsbox-0"]
    bin_dir = Path(node.rootfs) / "usr" / "bin"
    sid, others = open_on(fleet, "nsbox-0")
    http = fleet.http()
    assert http.request("POST", f"/v1/sandboxes/{sid}/runs", {"code": "w = 3"}).status == 200
    probe = node.http(token=False)
    os.rename(bin_dir / "python3", bin_dir / "python3.hidden")
    try:
        # Its pooled sandboxes take runs (they had started already); the
        # pool's next one cannot start.
        direct = node.http()
        assert wait_until(lambda: direct.request("POST", "/v1/runs", {"code": "pass"}) is not None
                          and probe.request("GET", "/v1/health").status == 503, scaled(30))
        a = probe.request("GET", "/v1/health")
        assert a.json()["status"] == "failing" and a.json()["reason"] == "a pool cannot start sandboxes", a.body
        assert a.headers.get("x-nsbox-retryable") == "true"
        # With the token, the reason says what failed.
        detail = direct.request("GET", "/v1/health").json()
        assert "cannot start sandboxes" in str(detail["reason"]) and "default" in str(detail["reason"]), detail
        assert wait_until(lambda: fleet.haproxy is not None and fleet.haproxy.state("nsbox-0") == "DOWN", scaled(10))
        # No new work goes there; its live sandbox still does.
        before = node.runs_answered()
        for _ in range(10):
            r = run(http, "print(1)")
            assert r.status == 200 and r.node != "nsbox-0", (r.status, r.node, r.body[:200])
        a = http.request("POST", f"/v1/sandboxes/{sid}/runs", {"code": "print(w)"})
        assert a.status == 200 and a.node == "nsbox-0" and a.json().get("stdout") == "3\n", (a.status, a.body)
        assert node.runs_answered() == before + 1
    finally:
        os.rename(bin_dir / "python3.hidden", bin_dir / "python3")
    assert wait_until(lambda: probe.request("GET", "/v1/health").status == 200, scaled(60)), probe.request("GET", "/v1/health").body
    assert wait_until(lambda: fleet.haproxy is not None and fleet.haproxy.state("nsbox-0") == "UP", scaled(10))
    for other in others + [sid]:
        assert http.request("DELETE", f"/v1/sandboxes/{other}").status == 204
    http.close()


def test_a_drained_node_loses_no_run(fleet: Fleet) -> None:
    node = fleet.nodes["nsbox-1"]
    assert node.proc is not None
    sid, others = open_on(fleet, "nsbox-1")
    http = fleet.http()
    assert http.request("POST", f"/v1/sandboxes/{sid}/runs", {"code": "y = 5"}).status == 200
    # A probe's connection, kept alive across the drain: 200, then 503.
    probe = node.http(token=False)
    a = probe.request("GET", "/v1/health")
    assert a.status == 200 and a.json() == {"status": "ok", "node": "nsbox-1", "draining": False}, a.body
    done, joiner = loader(fleet.http, 200, 8)
    assert wait_until(lambda: len(done) >= 40, scaled(120))
    node.proc.send_signal(signal.SIGTERM)
    # Until the signal is taken, the node still says ok.
    draining = probe.request("GET", "/v1/health")
    until = time.monotonic() + scaled(5)
    while draining.status == 200 and time.monotonic() < until:
        time.sleep(0.01)
        draining = probe.request("GET", "/v1/health")
    joiner.join(timeout=scaled(300))
    assert not joiner.is_alive()
    bad = [(i, a.status, a.body[:200]) for i, a in done if not correct(i, a)]
    assert not bad, f"{len(bad)} of 200 runs failed across the drain: {bad[:5]}"
    assert draining.status == 503 and draining.json().get("status") == "draining", draining.body
    assert draining.headers.get("x-nsbox-retryable") == "true"
    assert node.proc.wait(timeout=scaled(60)) == 0, node.log()
    # Its sandbox: gone, said so, and never another node's answer.
    assert wait_until(lambda: fleet.haproxy is not None and fleet.haproxy.state("nsbox-1", "node-nsbox-1") == "DOWN", scaled(10))
    a = http.request("POST", f"/v1/sandboxes/{sid}/runs", {"code": "y"})
    assert a.status == 410 and "nsbox-1" in a.json()["error"], (a.status, a.body)
    assert a.node is None, "another node answered for nsbox-1's sandbox"
    for other in others:
        if not other.startswith("nsbox-1."):
            assert http.request("DELETE", f"/v1/sandboxes/{other}").status == 204
    http.close()


def test_a_killed_node_takes_only_itself_down(fleet: Fleet) -> None:
    assert fleet.haproxy is not None
    node = fleet.nodes["nsbox-2"]
    assert node.proc is not None
    sid, others = open_on(fleet, "nsbox-2")
    http = fleet.http()
    assert http.request("POST", f"/v1/sandboxes/{sid}/runs", {"code": "z = 1"}).status == 200
    tree = descendants(node.proc.pid)
    assert tree, "the node has no sandbox processes to lose"
    done, joiner = loader(fleet.http, 200, 8)
    assert wait_until(lambda: len(done) >= 40, scaled(120))
    killed_at = time.monotonic()
    with_node_3 = len(done)
    node.proc.kill()
    node.proc.wait()
    # HAProxy marks it down within its health interval (two failed checks
    # a second apart), or at once on a failed connection.
    assert wait_until(lambda: fleet.haproxy is not None and fleet.haproxy.state("nsbox-2") == "DOWN", HEALTH_INTERVAL_S + 1.5, 0.02), (
        f"still {fleet.haproxy.state('nsbox-2')} after {time.monotonic() - killed_at:.1f} s")
    marked_down = len(done)
    joiner.join(timeout=scaled(300))
    assert not joiner.is_alive()
    # (position in the order the runs ended, status, body) of each failure.
    failed = [(p, a.status, a.body[:120]) for p, (i, a) in enumerate(done) if not correct(i, a)]
    # Only runs that were on nsbox-2 when it died may fail (at most the
    # 8 in flight: HAProxy's 502, never sent again), and none after it was
    # marked down.
    assert len(failed) <= 8, failed
    assert all(s in (0, 502, 504) for _, s, _ in failed), failed
    late = [f for f in failed if f[0] >= marked_down + 8]
    assert not late, f"runs after nsbox-2 was marked down failed: {late}"
    assert with_node_3 >= 40
    # Its sandbox: 410 from HAProxy, with why.
    assert wait_until(lambda: fleet.haproxy is not None and fleet.haproxy.state("nsbox-2", "node-nsbox-2") == "DOWN", scaled(10))
    a = http.request("POST", f"/v1/sandboxes/{sid}/runs", {"code": "z"})
    assert a.status == 410 and "nsbox-2" in a.json()["error"] and a.node is None, (a.status, a.body)
    # Nothing of it is left on the host: every process it had is gone.
    assert wait_until(lambda: not any(alive(p) for p in tree), scaled(10)), [p for p in tree if alive(p)]
    for other in others:
        if not other.startswith("nsbox-2."):
            assert http.request("DELETE", f"/v1/sandboxes/{other}").status == 204
    http.close()


def test_restarted_nodes_rejoin(fleet: Fleet) -> None:
    assert fleet.haproxy is not None
    for name in ("nsbox-1", "nsbox-2"):
        fleet.nodes[name].start()
    assert wait_until(lambda: fleet.haproxy is not None and all(fleet.haproxy.state(n) == "UP" for n in NODES), scaled(15))
    before = {n: fleet.nodes[n].runs_answered() for n in NODES}
    done, joiner = loader(fleet.http, 60, 6)
    joiner.join(timeout=scaled(120))
    assert all(correct(i, a) for i, a in done) and len(done) == 60
    served = {n: fleet.nodes[n].runs_answered() - before[n] for n in NODES}
    assert served["nsbox-1"] > 0 and served["nsbox-2"] > 0, served
