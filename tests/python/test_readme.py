"""Every example of README.md's "Python" section runs as written: each in
a fresh interpreter, in a directory of its own, with NSBOX_CONFIG naming
the test rootfs (the local client's configuration) and the nsbox under test
first on PATH. The only change made to an example is the server it names:
unix:/run/nsbox/nsbox.sock, http://127.0.0.1:8080 and /etc/nsbox/token
become this test's servers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
from conftest import HERE, NSBOX_BIN, ROOTFS, scaled

README = HERE.parent.parent / "README.md"


def examples() -> List[str]:
    text = README.read_text()
    section = text.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```python\n(.*?)^```$", section, re.S | re.M)


def test_the_section_has_its_examples() -> None:
    found = examples()
    assert len(found) >= 8
    for code in found:
        assert len(code.strip().splitlines()) <= 14, code


@pytest.mark.parametrize("index", range(len(examples())))
def test_example_runs_as_written(index: int, start_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    code = examples()[index]
    unix = start_server()
    tcp = start_server(tcp=True)
    code = (
        code.replace("unix:/run/nsbox/nsbox.sock", unix.address)
        .replace("http://127.0.0.1:8080", tcp.address)
        .replace("/etc/nsbox/token", str(tcp.token_file))
    )
    config = tmp_path / "nsbox.yaml"
    config.write_text(f"rootfs: {ROOTFS}\n")
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ)
    env["NSBOX_CONFIG"] = str(config)
    env["PATH"] = os.path.dirname(os.path.abspath(NSBOX_BIN)) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(HERE.parent.parent / "src" / "python")
    env.pop("NSBOX_BIN", None)
    p = subprocess.run([sys.executable, "-W", "error::ResourceWarning", "-c", code], cwd=work, env=env,
                       capture_output=True, timeout=scaled(120))
    assert p.returncode == 0, f"example {index + 1} failed:\n{code}\n{p.stderr.decode()}"
