"""Streaming: the first chunk of a program that prints, sleeps 1 s and
prints again arrives before the sleep ends, in the sync and async
clients; callbacks see the same; leaving a stream early kills its run."""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import List, Tuple

import nsbox
import pytest
from conftest import NSBOX_BIN, ROOTFS, host_processes_with, wait_until

CODE = "import time\nprint('first', flush=True)\ntime.sleep(1)\nprint('second')\n"


def check_timeline(seen: List[Tuple[float, object]]) -> None:
    outputs = [(t, e) for t, e in seen if isinstance(e, nsbox.Output)]
    end, result = seen[-1]
    assert isinstance(result, nsbox.Result) and result.ok
    assert result.stdout == "first\nsecond\n"
    first_t, first = outputs[0]
    assert isinstance(first, nsbox.Output) and first.stream == "stdout" and "first".startswith(first.data[:5])
    # The sleep is 1 s: the first chunk came at least 0.8 s before the end.
    assert end - first_t >= 0.8, f"the first chunk came {end - first_t:.2f} s before the result"
    assert "".join(e.data for _, e in outputs if isinstance(e, nsbox.Output)) == "first\nsecond\n"


def test_sync_stream(client: nsbox.Client) -> None:
    seen: List[Tuple[float, object]] = [(time.monotonic(), e) for e in client.run_stream(CODE)]
    check_timeline(seen)


def test_callbacks(client: nsbox.Client) -> None:
    seen: List[Tuple[float, object]] = []
    r = client.run(CODE, on_stdout=lambda d: seen.append((time.monotonic(), nsbox.Output("stdout", d))))
    seen.append((time.monotonic(), r))
    check_timeline(seen)


def test_sandbox_stream(client: nsbox.Client) -> None:
    with client.sandbox() as sb:
        sb.run("n = 41")
        seen: List[Tuple[float, object]] = [(time.monotonic(), e) for e in sb.run_stream(CODE)]
        check_timeline(seen)
        errs: List[str] = []
        r = sb.run("import sys\nsys.stderr.write('e\\n')\nn + 1", on_stderr=errs.append)
        assert r.value == "42" and "".join(errs) == "e\n"


def test_async_stream(start_server) -> None:  # type: ignore[no-untyped-def]
    s = start_server()

    async def main(c: nsbox.AsyncClient) -> List[Tuple[float, object]]:
        async with c:
            return [(time.monotonic(), e) async for e in c.run_stream(CODE)]

    check_timeline(asyncio.run(main(s.async_client())))
    check_timeline(asyncio.run(main(nsbox.AsyncClient(nsbox=NSBOX_BIN, rootfs=ROOTFS))))


@pytest.mark.parametrize("transport", ["local", "unix", "tcp"])
def test_leaving_a_stream_early_kills_its_run(transport: str, start_server) -> None:  # type: ignore[no-untyped-def]
    # A run allowed a minute: only the hang-up can end it within the wait.
    if transport == "local":
        client = nsbox.Client(nsbox=NSBOX_BIN, rootfs=ROOTFS, timeout="60s")
    else:
        client = start_server("--timeout", "60s", tcp=transport == "tcp").client()
    tag = f"nsbox-py-left-{secrets.token_hex(6)}"
    code = (
        "import os, sys\nprint('up', flush=True)\n"
        f"os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(600)', '{tag}'])\n"
    )
    stream = client.run_stream(code, timeout="60s")
    assert next(iter(stream)) == nsbox.Output("stdout", "up\n")
    assert wait_until(lambda: bool(host_processes_with(tag)), 5)
    stream.close()  # type: ignore[attr-defined]
    assert wait_until(lambda: not host_processes_with(tag), 10), "the abandoned run still runs"
    client.close()
