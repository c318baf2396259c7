"""Fixtures of the Python package's tests: the nsbox CLI and rootfs the
suite was given, and real `nsbox serve` servers started per test (a unix
socket; TCP on loopback with a token file)."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "src" / "python"))

import nsbox  # noqa: E402

NSBOX_BIN = os.environ.get("NSBOX_BIN", str(HERE.parent.parent / "build" / "nsbox"))
ROOTFS = os.environ.get("NSBOX_TEST_ROOTFS", "")
# Time bounds scale with the machine's load: the median of three trivial
# runs against 50 ms (what one takes on a quiet machine, with margin),
# measured once when the suite starts; at least 1, at most 8.
SCALE = 1.0


def scaled(seconds: float) -> float:
    return seconds * SCALE


def _calibrate() -> float:
    times = []
    for _ in range(3):
        began = time.monotonic()
        subprocess.run([NSBOX_BIN, "run", "--rootfs", ROOTFS], input=b"pass\n", capture_output=True, timeout=120)
        times.append(time.monotonic() - began)
    return min(8.0, max(1.0, sorted(times)[1] / 0.05))


def pytest_configure(config: pytest.Config) -> None:
    if not ROOTFS or not os.path.isdir(ROOTFS):
        raise pytest.UsageError("NSBOX_TEST_ROOTFS must name the test rootfs (tests/fixtures/rootfs.sh)")
    if not os.access(NSBOX_BIN, os.X_OK):
        raise pytest.UsageError(f"NSBOX_BIN {NSBOX_BIN!r} is not an executable nsbox")
    global SCALE
    SCALE = _calibrate()
    print(f"tests/python: time scale {SCALE:.2f}", file=sys.stderr)


class Server:
    """A real nsbox serve of this test."""

    def __init__(self, directory: Path, args: List[str], tcp: bool) -> None:
        self.directory = directory
        self.log_path = directory / "serve.log"
        self.token: Optional[str] = None
        self.token_file: Optional[str] = None
        if tcp:
            self.token = secrets.token_hex(24)
            tf = directory / "token"
            tf.write_text(self.token + "\n")
            tf.chmod(0o600)
            self.token_file = str(tf)
            port = free_port()
            self.address = f"http://127.0.0.1:{port}"
            listen = ["--listen", f"tcp:127.0.0.1:{port}", "--token-file", self.token_file]
        else:
            self.socket = str(directory / "s" / "nsbox.sock")
            self.address = f"unix:{self.socket}"
            listen = ["--listen", f"unix:{self.socket}"]
        argv = [NSBOX_BIN, "serve", *listen, "--rootfs", ROOTFS, *args]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + scaled(30)
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nsbox serve exited {self.proc.returncode}: {self.log()}")
            try:
                if self.client().health().get("status") == "ok":
                    return
            except nsbox.Error:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"nsbox serve not ready: {self.log()}")
            time.sleep(0.02)

    def client(self, **kw: object) -> nsbox.Client:
        if self.token is not None and "token" not in kw and "token_file" not in kw:
            kw["token"] = self.token
        return nsbox.Client(self.address, **kw)  # type: ignore[arg-type]

    def async_client(self, **kw: object) -> nsbox.AsyncClient:
        if self.token is not None and "token" not in kw and "token_file" not in kw:
            kw["token"] = self.token
        return nsbox.AsyncClient(self.address, **kw)  # type: ignore[arg-type]

    def metrics(self) -> str:
        import urllib.request

        if self.token is None:
            c = self.client()
            a = c._server().request("GET", "/metrics", None, 10)  # the same transport, GET
            return a.body.decode()
        req = urllib.request.Request(self.address + "/metrics", headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return str(r.read().decode())

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=scaled(30))
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _starter(base: Path) -> "tuple[Callable[..., Server], List[Server]]":
    servers: List[Server] = []

    def start(*args: str, tcp: bool = False) -> Server:
        d = base / f"server{len(servers)}"
        d.mkdir()
        s = Server(d, list(args), tcp)
        servers.append(s)
        return s

    return start, servers


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    start, servers = _starter(tmp_path)
    yield start
    for s in servers:
        s.stop()


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, nsbox.Client]]:
    """One client per transport: local, a unix-socket server, a TCP one."""
    start, servers = _starter(tmp_path_factory.mktemp("three"))
    clients = {
        "local": nsbox.Client(nsbox=NSBOX_BIN, rootfs=ROOTFS),
        "unix": start().client(),
        "tcp": start(tcp=True).client(),
    }
    yield clients
    for c in clients.values():
        c.close()
    for s in servers:
        s.stop()


@pytest.fixture
def local() -> Iterator[nsbox.Client]:
    c = nsbox.Client(nsbox=NSBOX_BIN, rootfs=ROOTFS)
    yield c
    c.close()


TRANSPORTS = ("local", "unix", "tcp")


@pytest.fixture(params=TRANSPORTS)
def client(request: pytest.FixtureRequest, start_server: Callable[..., Server]) -> Iterator[nsbox.Client]:
    """The same client API over each of the three transports."""
    if request.param == "local":
        c = nsbox.Client(nsbox=NSBOX_BIN, rootfs=ROOTFS)
    else:
        c = start_server(tcp=request.param == "tcp").client()
    yield c
    c.close()


def host_processes_with(tag: str) -> List[int]:
    """Host pids whose command line holds tag, read from /proc (not from
    nsbox)."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                if tag.encode() in f.read():
                    found.append(int(d))
        except OSError:
            continue
    return [p for p in found if p != os.getpid()]


def wait_until(pred: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + scaled(seconds)
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def comparable(r: nsbox.Result) -> Dict[str, object]:
    """A Result without what differs from run to run (timings, memory, how
    it was served)."""
    d = {k: getattr(r, k) for k in r.__dataclass_fields__ if k != "raw"}
    for k in ("duration_ms", "cpu_ms", "memory_peak_bytes", "served"):
        d.pop(k)
    return d


def cli_json(code: str, *args: str) -> Dict[str, object]:
    p = subprocess.run([NSBOX_BIN, "run", "--json", "--rootfs", ROOTFS, *args], input=code.encode(),
                       capture_output=True, timeout=scaled(60))
    obj = json.loads(p.stdout)
    assert isinstance(obj, dict)
    return obj
