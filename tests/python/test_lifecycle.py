"""What the clients leave behind and what they hold: a sandbox whose open
timed out on the client is not left on the server, a close that failed can
be tried again, per-run limits only lower a local client's, an AsyncClient
survives a second event loop, and its streams count in max_connections.
Checked from the host: /proc and the wall clock."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any, Dict, List

import nsbox
import pytest
from conftest import NSBOX_BIN, ROOTFS, scaled, wait_until
from test_private_server import gone


def descendants(pid: int) -> List[int]:
    children: Dict[int, List[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(") ", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def settled(pid: int) -> int:
    """The server's process count once it stays the same for a second."""
    last, since = -1, time.monotonic()
    deadline = time.monotonic() + scaled(30)
    while time.monotonic() < deadline:
        n = len(descendants(pid))
        if n != last:
            last, since = n, time.monotonic()
        elif time.monotonic() - since >= 1:
            return n
        time.sleep(0.05)
    raise AssertionError("the server's processes did not settle")


def test_an_open_the_client_gave_up_on_is_destroyed(start_server: Any) -> None:
    s = start_server("--pool-size", "1", "--pool-sandboxes", "0")  # every open cold
    s.client().run("1")
    before = settled(s.proc.pid)
    with s.client() as probe:
        with probe.sandbox() as sb:  # an open sandbox shows on the host
            assert sb.run("1 + 1").value == "2"
            assert len(descendants(s.proc.pid)) > before
    assert settled(s.proc.pid) == before
    impatient = s.client(request_timeout=0.001)
    with pytest.raises(nsbox.ConnectionError):
        impatient.sandbox()
    time.sleep(scaled(2))  # its open ends on the server, then its check
    assert settled(s.proc.pid) == before, "the sandbox nobody could learn of is still there"


def test_a_close_that_failed_can_be_tried_again(start_server: Any) -> None:
    s = start_server()
    c = s.client(request_timeout=2)
    sb = c.sandbox()
    os.kill(s.proc.pid, signal.SIGSTOP)
    try:
        with pytest.raises(nsbox.ConnectionError):
            sb.close()
        assert not sb.closed
    finally:
        os.kill(s.proc.pid, signal.SIGCONT)
    sb.close()
    assert sb.closed


def test_a_runs_limits_only_lower_a_local_clients() -> None:
    c = nsbox.Client(nsbox=NSBOX_BIN, rootfs=ROOTFS, timeout="2s", max_output_bytes=4096)
    with pytest.raises(nsbox.UsageError, match="may only shorten it"):
        c.run("1", timeout="1h")
    with pytest.raises(nsbox.UsageError, match="may only lower it"):
        c.run("1", max_output_bytes="1m")
    began = time.monotonic()
    r = c.run("import time; time.sleep(30)", timeout="1s")
    assert r.timed_out and time.monotonic() - began < scaled(10)
    # A model's timeout above the client's is capped, as nsbox mcp caps it.
    began = time.monotonic()
    text = nsbox.tool_call(c, {"code": "import time; time.sleep(30)", "timeout": 3600})
    assert text.startswith("timeout: capped at the configured maximum (3600 s asked for)")
    assert "timed out" in text and time.monotonic() - began < scaled(12)


def test_a_model_timeout_above_the_servers_is_capped(start_server: Any) -> None:
    c = start_server("--timeout", "1s").client()
    began = time.monotonic()
    text = nsbox.tool_call(c, {"code": "import time; time.sleep(30)", "timeout": 3600})
    assert text.startswith("timeout: capped") and "timed out" in text
    assert time.monotonic() - began < scaled(10)


def test_an_async_client_survives_a_second_loop(start_server: Any) -> None:
    s = start_server()
    for c in (s.async_client(), nsbox.AsyncClient(nsbox=NSBOX_BIN, rootfs=ROOTFS)):

        async def once() -> str:
            r = await c.run("print(7)")
            async for e in c.run_stream("print(8)"):
                last = e
            assert isinstance(last, nsbox.Result) and last.stdout == "8\n"
            return str(r.stdout)

        assert asyncio.run(once()) == "7\n"
        assert asyncio.run(once()) == "7\n"

        async def close() -> None:
            await c.close()

        asyncio.run(close())


def test_async_streams_count_in_max_connections(start_server: Any) -> None:
    s = start_server("--max-concurrent", "4")
    code = "import time; time.sleep(1); print(1)"

    async def main() -> float:
        c = s.async_client(max_connections=1)
        try:
            async def one() -> None:
                async for e in c.run_stream(code):
                    last = e
                assert isinstance(last, nsbox.Result) and last.stdout == "1\n"

            await one()  # warm
            began = time.monotonic()
            await asyncio.gather(one(), one())
            return time.monotonic() - began
        finally:
            await c.close()

    assert asyncio.run(main()) >= 1.9, "two streams ran at once on one allowed connection"


def test_a_cancelled_private_start_is_stopped_by_close() -> None:
    async def main() -> int:
        c = nsbox.AsyncClient(nsbox=NSBOX_BIN, rootfs=ROOTFS)
        task = asyncio.ensure_future(c.health())
        while c._starting is None:  # the private server is starting
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert c._starting is not None
        starting = c._starting
        await c.close()
        private = starting.result()
        return private.pid

    pid = asyncio.run(main())
    assert wait_until(lambda: gone(pid), 30), "the private server runs on"

