"""The run_python tool: tool_schema() is what nsbox mcp declares, and
tool_call() gives the model-facing text."""

from __future__ import annotations

import base64
import json
import subprocess
from typing import Any, Dict, List

import nsbox
import pytest
from conftest import NSBOX_BIN, ROOTFS, scaled


def mcp_tools(*args: str) -> List[Dict[str, Any]]:
    """tools/list of a real nsbox mcp, spoken to over its stdio."""
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "nsbox-python-test", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    p = subprocess.run([NSBOX_BIN, "mcp", "--rootfs", ROOTFS, "--pool-size", "0", *args],
                       input="".join(json.dumps(m) + "\n" for m in msgs).encode(),
                       capture_output=True, timeout=scaled(60))
    for line in p.stdout.decode().splitlines():
        obj = json.loads(line)
        if obj.get("id") == 2:
            tools = obj["result"]["tools"]
            assert isinstance(tools, list)
            return tools
    raise AssertionError(f"no tools/list answer: {p.stdout!r} {p.stderr!r}")


@pytest.mark.parametrize("stateful", [False, True])
def test_the_schema_is_nsbox_mcps(stateful: bool) -> None:
    tools = mcp_tools(*(["--mcp-state", "per-session"] if stateful else []))
    declared = next(t for t in tools if t["name"] == "run_python")
    declared.pop("outputSchema", None)
    assert nsbox.tool_schema(stateful=stateful) == declared
    s = nsbox.tool_schema()
    s["name"] = "changed"
    assert nsbox.tool_schema()["name"] == "run_python"


def test_a_call_gives_the_text(local: nsbox.Client) -> None:
    text = nsbox.tool_call(local, {"code": "print(6 * 7)"})
    assert text == "exit code: 0\n--- stdout ---\n42\n--- stderr ---\n(empty)\n"
    text = nsbox.tool_call(local, {"code": "while True: pass", "timeout": 0.5})
    assert text.startswith("exit code: 137\ntimed out after 500ms\n")
    data = base64.b64encode(b"a,b\n1,2\n").decode()
    text = nsbox.tool_call(local, {"code": "print(open('/mnt/in/t.csv').read().split()[1])",
                                   "files": [{"name": "t.csv", "content": data}]})
    assert "--- stdout ---\n1,2\n" in text


def test_bad_arguments_are_told_to_the_model(local: nsbox.Client) -> None:
    assert nsbox.tool_call(local, {}) == "missing required argument 'code' (the Python source to run)"
    assert nsbox.tool_call(local, {"code": 1}) == "argument 'code' must be a string"
    assert nsbox.tool_call(local, {"code": "1", "x": 2}) == "unknown argument 'x' (known: code, timeout, files)"
    assert nsbox.tool_call(local, {"code": "1", "timeout": -1}) == "argument 'timeout' must be a positive number of seconds"
    assert "not base64" in nsbox.tool_call(local, {"code": "1", "files": [{"name": "a", "content": "!!"}]})


def test_a_call_in_a_sandbox_keeps_state(start_server) -> None:  # type: ignore[no-untyped-def]
    with start_server().client() as c, c.sandbox() as sb:
        nsbox.tool_call(sb, {"code": "n = 5"})
        assert nsbox.tool_call(sb, {"code": "n * 2"}).endswith("--- value ---\n10\n")
