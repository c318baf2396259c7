"""Result.text is byte for byte what nsbox_result_to_text gives: the same
program through `nsbox run --format text` and through `--json` parsed by
the package."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import List

import nsbox
import pytest
from conftest import NSBOX_BIN, ROOTFS, cli_json, scaled

CASES = [
    ("ok", "print('hello')\n", []),
    ("no-output", "pass\n", []),
    ("error", "import sys\nprint('out', end='')\nsys.stderr.write('bad\\n')\nsys.exit(3)\n", []),
    ("traceback", "raise ValueError('boom')\n", []),
    ("timeout", "while True: pass\n", ["--timeout", "700ms"]),
    ("timeout-s", "import time\ntime.sleep(9)\n", ["--timeout", "1s"]),
    ("oom", "x = bytearray(64 << 20)\nx[::4096] = b'1' * len(x[::4096])\n", ["--memory", "32m"]),
    ("signal", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n", []),
    ("rt-signal", "import os, signal\nos.kill(os.getpid(), signal.SIGRTMIN + 2)\n", []),
    ("flood", "import sys\nsys.stderr.write('e' * 100000)\nraise ValueError('tail')\n", ["--max-output-bytes", "64"]),
    ("head", "print('y' * 500)\n", ["--max-output-bytes", "10", "--output-capture", "head"]),
    ("controls", "import sys\nsys.stdout.buffer.write(b'a\\x00b\\x1b[1m\\xff\\xfe\\xe2\\x82 c\\td')\n", []),
    ("unicode", "print('h\\u00e9llo \\u2603 \\U0001F600')\n", []),
]


def text_of(code: str, args: List[str]) -> bytes:
    p = subprocess.run([NSBOX_BIN, "run", "--format", "text", "--rootfs", ROOTFS, *args], input=code.encode(),
                       capture_output=True, timeout=scaled(60))
    return p.stdout


@pytest.mark.parametrize("name,code,args", CASES, ids=[c[0] for c in CASES])
def test_text_is_the_c_text(name: str, code: str, args: List[str]) -> None:
    r = nsbox.Result.from_json(cli_json(code, *args))
    assert r.text.encode() == text_of(code, args)


def test_files_collected_and_refused(tmp_path: Path) -> None:
    code = (
        "import os\n"
        "open('/tmp/out/a.txt', 'w').write('abc')\n"
        "open('/tmp/out/b\\nc.bin', 'wb').write(b'12345')\n"
        "os.symlink('/etc/passwd', '/tmp/out/link')\n"
        "os.mkdir('/tmp/out/dir')\n"
    )
    r = nsbox.Result.from_json(cli_json(code, "--output-dir", str(tmp_path / "one")))
    assert [f.name for f in r.files] == ["a.txt"] and len(r.files_refused) == 3
    assert r.text.encode() == text_of(code, ["--output-dir", str(tmp_path / "two")])
    assert "file: /tmp/out/a.txt (3 bytes)\n" in r.text and "file not collected: /tmp/out/b?c.bin (" in r.text


def test_a_quota_refusal_is_two_lines() -> None:
    r = nsbox.Result.from_json(
        {
            "exit_code": -1, "stdout": "", "stderr": "",
            "quota_refusal": {"quota": "runs-per-minute", "limit": "2 per minute", "retry_after_ms": 2300},
        }
    )
    assert r.text == (
        "refused: this session's quota runs-per-minute (2 per minute) is used up; retry in 3s\n"
        "the code did not run (no sandbox was started)\n"
    )
    assert not r.ok


def test_a_bad_result_is_an_error() -> None:
    for bad in ("[]", "{}", '{"exit_code": "1", "stdout": "", "stderr": ""}', "not json"):
        with pytest.raises(nsbox.Error):
            nsbox.Result.from_json(bad)
