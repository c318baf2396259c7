"""Errors: each a clear exception of the one hierarchy, none a hang; a
program's own failure is a Result."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Callable, List

import nsbox
import pytest
from conftest import NSBOX_BIN, ROOTFS, Server, scaled, wait_until


def test_a_programs_failure_is_a_result(client: nsbox.Client) -> None:
    r = client.run("import sys; sys.exit(7)")
    assert r.exit_code == 7 and not r.ok


@pytest.mark.parametrize("transport", ["local", "unix", "tcp"])
def test_running_out_of_memory_is_a_result(transport: str, start_server: Callable[..., Server]) -> None:
    # Near its memory limit a cgroup reclaims page cache before the OOM
    # killer acts, which on a loaded machine takes seconds: the limit on
    # time is generous so that the run ends by memory, not by the clock.
    if transport == "local":
        c = nsbox.Client(nsbox=NSBOX_BIN, rootfs=ROOTFS, timeout="60s")
    else:
        c = start_server("--timeout", "60s", tcp=transport == "tcp").client()
    with c:
        r = c.run("x = bytearray(400 << 20); x[::4096] = b'1' * len(x[::4096])")
    # A memory cgroup kills it; an rlimit alone (no cgroup for this user)
    # makes it a MemoryError: a Result either way.
    assert not r.ok and ((r.oom_killed and r.exit_code == 137) or "MemoryError" in r.stderr)


def test_bad_keys_and_values_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(nsbox.UsageError, match="unknown configuration key 'bogus'"):
        nsbox.Client(nsbox=NSBOX_BIN, rootfs=ROOTFS, bogus=1)
    c = nsbox.Client(nsbox=NSBOX_BIN, rootfs=ROOTFS, memory="12x")
    with pytest.raises(nsbox.UsageError, match="invalid value for 'memory': '12x'"):
        c.run("1")
    with pytest.raises(nsbox.UsageError, match="rootfs"):
        nsbox.Client(nsbox=NSBOX_BIN, rootfs=str(tmp_path / "none")).run("1")
    with pytest.raises(nsbox.UsageError, match="timeout"):
        nsbox.Client(nsbox=NSBOX_BIN, rootfs=ROOTFS).run("1", timeout="soon")
    with pytest.raises(nsbox.UsageError):
        nsbox.Client("ftp://x")
    with pytest.raises(nsbox.UsageError):
        nsbox.Client("unix:/run/x.sock", memory="1g")


def test_a_server_refuses_bad_requests_with_usage_errors(start_server) -> None:  # type: ignore[no-untyped-def]
    c = start_server().client()
    with pytest.raises(nsbox.UsageError, match="memory"):
        c.run("1", memory="1g")
    with pytest.raises(nsbox.UsageError, match="profile"):
        c.run("1", profile="nope")
    with pytest.raises(nsbox.UsageError, match="inputs"):
        c.run("1", inputs={"a": b"x"})


def test_a_quota_refusal_raises_quota_exceeded(start_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    c = start_server("--quota-runs-per-minute", "1").client()
    assert c.run("print(1)", session="q").ok
    with pytest.raises(nsbox.QuotaExceeded) as e:
        c.run("print(1)", session="q")
    assert e.value.retry_after >= 1 and e.value.result.quota_refusal is not None
    assert e.value.result.quota_refusal.quota == "runs-per-minute"
    assert e.value.result.text.startswith("refused: this session's quota runs-per-minute")
    # Locally (the CLI's exit 75) the same.
    local = nsbox.Client(nsbox=NSBOX_BIN, rootfs=ROOTFS, store=str(tmp_path / "store"),
                         quota_runs_per_minute=1, session="lq")
    assert local.run("print(1)").ok
    with pytest.raises(nsbox.QuotaExceeded) as e2:
        local.run("print(1)")
    assert e2.value.retry_after > 0


def _busy(c: nsbox.Client, started: threading.Event, out: List[Any]) -> None:
    started.set()
    out.append(c.run("import time; time.sleep(%f)" % scaled(2)))


def test_a_server_at_capacity_gives_server_busy_and_retries_wait(start_server) -> None:  # type: ignore[no-untyped-def]
    s = start_server("--max-concurrent", "1", "--max-queue", "0", "--timeout", "30s")
    out: List[Any] = []
    started = threading.Event()
    t = threading.Thread(target=_busy, args=(s.client(), started, out))
    t.start()
    started.wait()
    c = s.client()
    deadline = time.monotonic() + scaled(10)
    while time.monotonic() < deadline and c.health()["running"] < 1:
        time.sleep(0.02)
    with pytest.raises(nsbox.ServerBusy) as e:
        c.run("print(1)")
    assert e.value.retry_after == 1
    began = time.monotonic()
    r = s.client(retries=10).run("print('after')")
    assert r.stdout == "after\n" and time.monotonic() - began >= 0.9
    t.join()
    assert out and out[0].ok


def test_a_wrong_token_is_unauthorized(start_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    s = start_server(tcp=True)
    with pytest.raises(nsbox.Unauthorized):
        nsbox.Client(s.address, token="wrong-token-of-24-chars!").run("1")
    with pytest.raises(nsbox.Unauthorized):
        nsbox.Client(s.address).run("1")
    assert s.client(token_file=s.token_file).run("print(2)").stdout == "2\n"
    with pytest.raises(nsbox.UsageError, match="token file"):
        nsbox.Client(s.address, token_file=str(tmp_path / "missing"))


def test_a_dead_socket_is_a_connection_error(tmp_path: Path) -> None:
    began = time.monotonic()
    with pytest.raises(nsbox.ConnectionError):
        nsbox.Client(f"unix:{tmp_path}/none.sock").run("1")
    with pytest.raises(ConnectionError):  # the builtin too
        nsbox.Client("http://127.0.0.1:1").run("1")
    assert time.monotonic() - began < scaled(5)


def test_a_server_killed_mid_run_is_a_connection_error(start_server) -> None:  # type: ignore[no-untyped-def]
    s = start_server("--timeout", "60s")
    c = s.client()
    threading.Timer(scaled(1), lambda: os.kill(s.proc.pid, signal.SIGKILL)).start()
    began = time.monotonic()
    with pytest.raises(nsbox.ConnectionError):
        c.run("import time; time.sleep(50)")
    assert time.monotonic() - began < scaled(10)


def all_stopped(pid: int) -> bool:
    states = []
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/stat") as f:
                states.append(f.read().rsplit(") ", 1)[1][0])
        except OSError:
            continue
    return bool(states) and all(st == "T" for st in states)


def test_a_stopped_server_times_out_on_the_client(start_server) -> None:  # type: ignore[no-untyped-def]
    s = start_server()
    c = s.client(request_timeout=2)
    assert c.health()["status"] == "ok"
    os.kill(s.proc.pid, signal.SIGSTOP)
    try:
        # A thread busy in the kernel (a pooled sandbox's clone) stops a
        # little later: wait until every thread of the server has.
        assert wait_until(lambda: all_stopped(s.proc.pid), 5)
        began = time.monotonic()
        with pytest.raises(nsbox.ConnectionError, match="no answer within 2 s"):
            c.health()
        assert time.monotonic() - began < 5
    finally:
        os.kill(s.proc.pid, signal.SIGCONT)
    # A run's own timeout gives its request that and 30 s.
    from nsbox._http import request_timeout

    assert request_timeout({"timeout": "1s"}, 2) == 31 and request_timeout({}, 2) == 2
