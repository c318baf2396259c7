"""The package installs offline with pip (into a venv, nothing fetched) and
with make install, is typed, and is versioned with nsbox."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import HERE, NSBOX_BIN, scaled

REPO = HERE.parent.parent
SRC = REPO / "src" / "python"


def nsbox_version() -> str:
    out = subprocess.run([NSBOX_BIN, "--version"], capture_output=True, timeout=30).stdout.decode()
    m = re.fullmatch(r"nsbox (\S+)\n", out)
    assert m, out
    return m.group(1)


def test_pip_installs_it_offline(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(SRC, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", str(venv)], check=True, timeout=scaled(120))
    p = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-index", "--no-cache-dir", str(src)],
                       capture_output=True, timeout=scaled(300), cwd=tmp_path)
    assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()
    p = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import nsbox, os; print(nsbox.__version__); print(os.path.dirname(nsbox.__file__))"],
        capture_output=True, timeout=60, cwd="/",
    )
    version, where = p.stdout.decode().split()
    assert version == nsbox_version()
    assert where.startswith(str(venv)) and (Path(where) / "py.typed").is_file()


def test_make_install_puts_it_in_site_packages(tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    for prefix, site in (("/usr", "usr/lib/python3/dist-packages"),
                         ("/usr/local", f"usr/local/lib/python3.{sys.version_info[1]}/dist-packages")):
        p = subprocess.run(["make", "-C", str(REPO), "--no-print-directory", "install-python",
                            f"DESTDIR={dest}", f"PREFIX={prefix}", "PYTHON=/usr/bin/python3"],
                           capture_output=True, timeout=120)
        assert p.returncode == 0, p.stderr.decode()
        assert (dest / site / "nsbox" / "__init__.py").is_file() and (dest / site / "nsbox" / "py.typed").is_file()


def test_the_versions_agree() -> None:
    import nsbox

    pyproject = (SRC / "pyproject.toml").read_text()
    m = re.search(r'^version = "([^"]+)"$', pyproject, re.M)
    assert m and m.group(1) == nsbox.__version__ == nsbox_version()
    make = (REPO / "GNUmakefile").read_text()
    assert re.search(r"^VERSION := (\S+)$", make, re.M).group(1) == nsbox.__version__  # type: ignore[union-attr]
