"""Live sandboxes through the client: state kept between runs, closed at
the end of a with block and at garbage collection (checked from the host:
no process of it remains)."""

from __future__ import annotations

import gc
import secrets
import warnings

import nsbox
import pytest
from conftest import host_processes_with, wait_until

BACKGROUND = (
    "import subprocess, sys\n"
    "keep = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', '{tag}'])\n"
)


def test_state_is_kept_and_the_block_closes_it(client: nsbox.Client) -> None:
    tag = f"nsbox-py-bg-{secrets.token_hex(6)}"
    with client.sandbox() as sb:
        assert len(sb.id.rsplit(".", 1)[-1]) == 32
        assert sb.run("x = 1\nimport json").value is None
        r = sb.run("x + 1")
        assert r.value == "2" and r.sandbox_id == sb.id and r.sandbox_run == 2
        assert sb.run("def f(): return json.dumps([x])\nf()").value == "'[1]'"
        r = sb.run("open('/tmp/kept', 'w').write('k')\nraise KeyError('oops')")
        assert r.exit_code == 1 and "KeyError: 'oops'" in r.stderr
        assert sb.run("open('/tmp/kept').read() + str(x)").value == "'k1'"
        sb.run(BACKGROUND.format(tag=tag))
        assert wait_until(lambda: bool(host_processes_with(tag)), 5), "the background process never started"
        assert sb.run("keep.poll() is None").value == "True"
        info = sb.info()
        assert info["id"] == sb.id and info["runs"] == 7
    assert sb.closed
    assert wait_until(lambda: not host_processes_with(tag), 5), "a process of the closed sandbox remains"
    with pytest.raises(nsbox.SandboxLost):
        sb.run("x")


def test_garbage_collection_closes_it_with_a_warning(client: nsbox.Client) -> None:
    tag = f"nsbox-py-gc-{secrets.token_hex(6)}"
    sb = client.sandbox()
    sb.run(BACKGROUND.format(tag=tag))
    assert wait_until(lambda: bool(host_processes_with(tag)), 5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del sb
        gc.collect()
    assert any(issubclass(w.category, ResourceWarning) and "not closed" in str(w.message) for w in caught)
    assert wait_until(lambda: not host_processes_with(tag), 5), "a process of the collected sandbox remains"


def test_two_sandboxes_share_nothing(client: nsbox.Client) -> None:
    with client.sandbox() as a, client.sandbox() as b:
        a.run("x = 'a'")
        b.run("x = 'b'")
        assert a.run("x").value == "'a'" and b.run("x").value == "'b'"
        assert a.id != b.id


def test_a_lost_sandbox_says_so(client: nsbox.Client) -> None:
    with client.sandbox() as sb:
        r = sb.run("import os\nos._exit(0)")
        assert r.sandbox_lost and "sandbox lost" in r.text
        with pytest.raises(nsbox.SandboxLost):
            sb.run("1")


def test_another_tokens_sandbox_is_not_found(start_server) -> None:  # type: ignore[no-untyped-def]
    s = start_server(tcp=True)
    with s.client() as c, c.sandbox() as sb:
        sb.run("secret = 7")
        other = nsbox.Client(s.address, token="x" * 32)
        with pytest.raises(nsbox.Unauthorized):
            other.run("1")
        # The same token but a forged sandbox object of another id: not found.
        ghost = nsbox.Sandbox(c, c._server(), {"id": "0" * 32})
        with pytest.raises(nsbox.SandboxLost):
            ghost.run("secret")
        ghost._closed = True
