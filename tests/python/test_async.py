"""AsyncClient: the same results as Client, live sandboxes, 100 calls at
once, cancellation, and the errors."""

from __future__ import annotations

import asyncio
import gc
import secrets
import warnings
from pathlib import Path
from typing import Any, List

import nsbox
import pytest
from conftest import NSBOX_BIN, ROOTFS, comparable, host_processes_with, scaled, wait_until


def clients(start_server: Any) -> List[nsbox.AsyncClient]:
    return [
        nsbox.AsyncClient(nsbox=NSBOX_BIN, rootfs=ROOTFS),
        start_server().async_client(),
        start_server(tcp=True).async_client(),
    ]


def test_runs_and_sandboxes(start_server: Any) -> None:
    sync = nsbox.Client(nsbox=NSBOX_BIN, rootfs=ROOTFS)
    want = comparable(sync.run("print(sum(range(10)))"))

    async def main(c: nsbox.AsyncClient) -> None:
        async with c:
            assert comparable(await c.run("print(sum(range(10)))")) == want
            r = await c.run("import sys; sys.exit(3)")
            assert r.exit_code == 3
            async with c.sandbox() as sb:
                await sb.run("x = 20")
                assert (await sb.run("x * 2 + 2")).value == "42"
                assert (await sb.info())["runs"] == 2
            assert sb.closed
            sb2 = await c.sandbox()
            await sb2.close()
            with pytest.raises(nsbox.SandboxLost):
                await sb2.run("1")

    for c in clients(start_server):
        asyncio.run(main(c))


def test_a_hundred_calls_at_once(start_server: Any) -> None:
    s = start_server("--max-concurrent", "2", "--max-queue", "16")

    async def main() -> List[Any]:
        async with s.async_client() as c:
            calls = [c.run(f"print({i})") for i in range(100)]
            return await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), scaled(120))

    outcomes = asyncio.run(main())
    assert len(outcomes) == 100
    done = [o for o in outcomes if isinstance(o, nsbox.Result)]
    busy = [o for o in outcomes if isinstance(o, nsbox.ServerBusy)]
    assert len(done) + len(busy) == 100, [o for o in outcomes if not isinstance(o, (nsbox.Result, nsbox.ServerBusy))]
    assert done, "no call ran"
    for i, o in enumerate(outcomes):
        if isinstance(o, nsbox.Result):
            assert o.stdout == f"{i}\n"
    # With retries, all of them run.
    async def patient() -> List[nsbox.Result]:
        async with s.async_client(retries=100) as c:
            return list(await asyncio.wait_for(asyncio.gather(*[c.run(f"print({i})") for i in range(100)]), scaled(240)))

    assert [r.stdout for r in asyncio.run(patient())] == [f"{i}\n" for i in range(100)]


def test_cancelling_a_call_kills_its_run(start_server: Any) -> None:
    # Runs allowed a minute: only the cancellation can end them within the wait.
    for c in [start_server("--timeout", "60s").async_client(),
              nsbox.AsyncClient(nsbox=NSBOX_BIN, rootfs=ROOTFS, timeout="60s")]:
        tag = f"nsbox-py-cancel-{secrets.token_hex(6)}"
        code = f"import os, sys\nos.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(600)', '{tag}'])\n"

        async def main() -> None:
            async with c:
                task = asyncio.ensure_future(c.run(code, timeout="60s"))
                for _ in range(int(scaled(100))):
                    await asyncio.sleep(0.05)
                    if host_processes_with(tag):
                        break
                assert host_processes_with(tag), "the run never started"
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task

        asyncio.run(main())
        assert wait_until(lambda: not host_processes_with(tag), 10), "the cancelled run still runs"


def test_errors(start_server: Any, tmp_path: Path) -> None:
    busy = start_server("--max-concurrent", "1", "--max-queue", "0", "--timeout", "60s")
    tcp = start_server("--quota-runs-per-minute", "1", tcp=True)

    async def main() -> None:
        async with busy.async_client() as c:
            first = asyncio.ensure_future(c.run("import time; time.sleep(%f)" % scaled(2)))
            while (await c.health())["running"] < 1:
                await asyncio.sleep(0.02)
            with pytest.raises(nsbox.ServerBusy) as e:
                await c.run("1")
            assert e.value.retry_after == 1
            assert (await first).ok
        async with nsbox.AsyncClient(tcp.address, token="not-the-token-at-all") as bad:
            with pytest.raises(nsbox.Unauthorized):
                await bad.run("1")
        async with tcp.async_client() as c:
            await c.run("1", session="s")
            with pytest.raises(nsbox.QuotaExceeded) as q:
                await c.run("1", session="s")
            assert q.value.retry_after >= 1
        async with nsbox.AsyncClient(f"unix:{tmp_path}/none.sock") as dead:
            with pytest.raises(nsbox.ConnectionError):
                await dead.run("1")

    asyncio.run(main())


def test_garbage_collection_closes_a_sandbox(start_server: Any) -> None:
    s = start_server()
    tag = f"nsbox-py-agc-{secrets.token_hex(6)}"

    async def main() -> None:
        c = s.async_client()
        sb = await c.sandbox()
        await sb.run(f"import subprocess, sys\nk = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', '{tag}'])")
        assert wait_until(lambda: bool(host_processes_with(tag)), 5)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            del sb
            gc.collect()
        assert any(issubclass(w.category, ResourceWarning) for w in caught)
        await c.close()

    asyncio.run(main())
    assert wait_until(lambda: not host_processes_with(tag), 5), "a process of the collected sandbox remains"
