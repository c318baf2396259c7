"""The seed's five behaviours through the three transports: the same
Result from each, and each protection checked from the host."""

from __future__ import annotations

import os
import secrets
import socket
import time
from typing import Dict

import nsbox
import pytest
from conftest import ROOTFS, comparable, host_processes_with, scaled, wait_until


def same_everywhere(results: Dict[str, nsbox.Result]) -> nsbox.Result:
    first = results["local"]
    for name, r in results.items():
        assert comparable(r) == comparable(first), f"{name} differs from local"
        assert r.text == first.text
    return first


def test_45(three: Dict[str, nsbox.Client]) -> None:
    results = {k: c.run("print(sum(range(10)))") for k, c in three.items()}
    r = same_everywhere(results)
    assert r.ok and r.stdout == "45\n" and r.exit_code == 0 and r.stderr == ""


def test_network_is_blocked(three: Dict[str, nsbox.Client]) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.settimeout(0.5)
        port = listener.getsockname()[1]
        code = (
            "import socket\n"
            "for host in ('127.0.0.1', '10.0.2.2', '1.1.1.1'):\n"
            "    try:\n"
            f"        socket.create_connection((host, {port}), timeout=1)\n"
            "        print('reached', host)\n"
            "    except OSError as e:\n"
            "        print('blocked', host, type(e).__name__)\n"
        )
        results = {k: c.run(code) for k, c in three.items()}
        with pytest.raises(socket.timeout):
            listener.accept()  # the host's listener saw no one
    r = same_everywhere(results)
    assert "reached" not in r.stdout and r.stdout.count("blocked") == 3


def test_the_root_is_read_only(three: Dict[str, nsbox.Client]) -> None:
    for k, c in three.items():
        name = f"nsbox-py-probe-{secrets.token_hex(6)}"
        r = c.run(f"open('/usr/{name}', 'w').write('x')")
        assert not os.path.exists(os.path.join(ROOTFS, "usr", name)), k
        assert r.exit_code == 1 and "Read-only file system" in r.stderr, (k, r.stderr)


def test_an_infinite_loop_is_timed_out_and_gone(three: Dict[str, nsbox.Client]) -> None:
    results = {}
    for k, c in three.items():
        tag = f"nsbox-py-loop-{secrets.token_hex(6)}"
        code = f"import os, sys\nos.execv(sys.executable, [sys.executable, '-c', 'while True: pass', '{tag}'])\n"
        started = time.monotonic()
        results[k] = r = c.run(code, timeout="1s")
        assert time.monotonic() - started < scaled(10), k
        assert wait_until(lambda: not host_processes_with(tag), 5), f"{k}: the loop still runs on the host"
    r = same_everywhere(results)
    assert r.timed_out and r.exit_code == 137 and r.signal == "SIGKILL" and not r.ok
    assert r.text.splitlines()[:2] == ["exit code: 137", "timed out after 1s"]


def test_output_is_capped(three: Dict[str, nsbox.Client]) -> None:
    code = "import sys\nsys.stdout.write('x' * 1000000)\nprint('end')\n"
    results = {k: c.run(code, max_output_bytes=4096) for k, c in three.items()}
    r = same_everywhere(results)
    assert r.stdout_truncated and len(r.stdout.encode()) <= 4096 + 45
    assert r.stdout.startswith("x" * 2048) and r.stdout.endswith("end\n")
    assert r.stdout_omitted_bytes == 1000004 - 4096
