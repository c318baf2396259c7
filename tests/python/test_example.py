"""src/python/examples/agent_tool.py runs its whole loop: locally, on a
server, and in a live sandbox."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
from conftest import HERE, NSBOX_BIN, ROOTFS, scaled

SCRIPT = HERE.parent.parent / "src" / "python" / "examples" / "agent_tool.py"


def run(args: List[str], tmp_path: Path) -> "subprocess.CompletedProcess[bytes]":
    config = tmp_path / "nsbox.yaml"
    config.write_text(f"rootfs: {ROOTFS}\n")
    env = dict(os.environ, NSBOX_CONFIG=str(config), NSBOX_BIN=NSBOX_BIN,
               PYTHONPATH=str(HERE.parent.parent / "src" / "python"))
    return subprocess.run([sys.executable, str(SCRIPT), *args], env=env, capture_output=True, timeout=scaled(120))


@pytest.mark.parametrize("mode", ["local", "server", "stateful"])
def test_the_loop_answers(mode: str, start_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    args: List[str] = []
    if mode != "local":
        s = start_server(tcp=True)
        args = ["--server", s.address, "--token-file", str(s.token_file)]
    if mode == "stateful":
        args.append("--stateful")
    p = run(args, tmp_path)
    assert p.returncode == 0, p.stderr.decode()
    assert p.stdout.decode() == "The mean is 3.875.\n"
    err = p.stderr.decode()
    assert "NameError: name 'numbrs' is not defined" in err and "--- run_python (c2) ---\nexit code: 0" in err
