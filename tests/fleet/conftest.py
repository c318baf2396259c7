"""The fleet pass (make check-fleet): three real `nsbox serve` nodes on
TCP on 127.0.0.2, .3 and .4 (one token file), HAProxy from Debian with the
shipped configuration (policies/deploy/haproxy/nsbox.cfg, only its
addresses given, through the environment) in front on 127.0.0.1. Every
process is started and stopped here; traffic stays on loopback.

What a test asserts comes from the nodes themselves (their /metrics, the
X-Nsbox-Node of each answer, /proc), never from HAProxy's word, except
where HAProxy's own state is the point (a node marked down)."""

from __future__ import annotations

import http.client
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO / "src" / "python"))
# The configuration under test (another one only to check that a test can fail).
CONFIG = Path(os.environ.get("NSBOX_FLEET_HAPROXY_CFG", str(REPO / "policies" / "deploy" / "haproxy" / "nsbox.cfg")))
NSBOX_BIN = os.environ.get("NSBOX_BIN", str(REPO / "build" / "nsbox"))
ROOTFS = os.environ.get("NSBOX_TEST_ROOTFS", "")
HAPROXY = os.environ.get("NSBOX_HAPROXY", "/usr/sbin/haproxy")
NODES = ("nsbox-0", "nsbox-1", "nsbox-2")
HOSTS = {"nsbox-0": "127.0.0.2", "nsbox-1": "127.0.0.3", "nsbox-2": "127.0.0.4"}
# Each node's quota: a session's runs per minute (the quota test).
QUOTA_PER_MINUTE = 20
# HAProxy's health check (the shipped configuration): every second, down
# after two failures.
HEALTH_INTERVAL_S = 2.0
SCALE = 1.0


def scaled(seconds: float) -> float:
    return seconds * SCALE


def pytest_configure(config: pytest.Config) -> None:
    if not ROOTFS or not os.path.isdir(ROOTFS):
        raise pytest.UsageError("NSBOX_TEST_ROOTFS must name the test rootfs (tests/fixtures/rootfs.sh)")
    if not os.access(NSBOX_BIN, os.X_OK):
        raise pytest.UsageError(f"NSBOX_BIN {NSBOX_BIN!r} is not an executable nsbox")
    if not os.access(HAPROXY, os.X_OK):
        raise pytest.UsageError(f"no HAProxy at {HAPROXY} (tests/fixtures/deps.sh installs it)")
    times = []
    for _ in range(3):
        began = time.monotonic()
        subprocess.run([NSBOX_BIN, "run", "--rootfs", ROOTFS], input=b"pass\n", capture_output=True, timeout=120)
        times.append(time.monotonic() - began)
    global SCALE
    SCALE = min(8.0, max(1.0, sorted(times)[1] / 0.05))
    print(f"tests/fleet: time scale {SCALE:.2f}", file=sys.stderr)


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def wait_until(pred: Callable[[], bool], seconds: float, step: float = 0.05) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return pred()


class Answer:
    def __init__(self, status: int, headers: Dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def node(self) -> Optional[str]:
        return self.headers.get("x-nsbox-node")

    def json(self) -> Dict[str, object]:
        value = json.loads(self.body)
        assert isinstance(value, dict), self.body
        return value


class Http:
    """One kept-alive HTTP/1.1 connection (http.client), like a client of
    the fleet: its own, so that what HAProxy or a node answers is read as
    sent."""

    def __init__(self, address: str, token: Optional[str], timeout: float = 120) -> None:
        host, port = address.rsplit(":", 1)
        self.host, self.port, self.token, self.timeout = host, int(port), token, timeout
        self.conn: Optional[http.client.HTTPConnection] = None

    def request(
        self, method: str, path: str, body: Optional[object] = None, headers: Optional[Dict[str, str]] = None
    ) -> Answer:
        data = None if body is None else json.dumps(body).encode()
        h = {"Content-Type": "application/json"} if data is not None else {}
        if self.token is not None:
            h["Authorization"] = f"Bearer {self.token}"
        h.update(headers or {})
        for attempt in (1, 2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self.conn.request(method, path, body=data, headers=h)
                r = self.conn.getresponse()
                answer = Answer(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
                if r.will_close:
                    self.close()
                return answer
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                # A kept-alive connection the other side had closed before
                # this request: only then is it sent again.
                self.close()
                if attempt == 2 or method != "GET":
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def loader(
    make_http: Callable[[], Http], n: int, concurrency: int
) -> Tuple[List[Tuple[int, Answer]], threading.Thread]:
    """n single runs, `concurrency` at a time, each on a connection of
    make_http's (through HAProxy, or straight to a node), in the
    background: each prints a number of its own (correct() checks it);
    (i, answer) as they end, and the thread that ends when all have."""
    done: List[Tuple[int, Answer]] = []
    lock = threading.Lock()
    todo = iter(range(n))

    def worker() -> None:
        http = make_http()
        while True:
            with lock:
                i = next(todo, None)
            if i is None:
                http.close()
                return
            try:
                a = http.request("POST", "/v1/runs", {"code": f"print({i} * {i})"})
            except OSError as e:
                a = Answer(0, {}, repr(e).encode())
                http.close()
            with lock:
                done.append((i, a))

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()

    def join() -> None:
        for t in threads:
            t.join()

    joiner = threading.Thread(target=join)
    joiner.start()
    return done, joiner


def correct(i: int, a: Answer) -> bool:
    if a.status != 200:
        return False
    r = a.json()
    return r.get("exit_code") == 0 and r.get("stdout") == f"{i * i}\n"


def descendants(pid: int) -> List[Tuple[int, str]]:
    """(pid, start time) of every process under pid, from /proc."""
    children: Dict[int, List[int]] = {}
    start: Dict[int, str] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(d))
        start[int(d)] = fields[19]
    out: List[Tuple[int, str]] = []
    todo = [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append((c, start[c]))
            todo.append(c)
    return out


def alive(proc: Tuple[int, str]) -> bool:
    try:
        with open(f"/proc/{proc[0]}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[19] == proc[1] and fields[0] != "Z"


class Node:
    """One `nsbox serve` of the fleet, on its own loopback address."""

    def __init__(self, name: str, directory: Path, token_file: str, token: str, host: Optional[str] = None) -> None:
        self.name = name
        self.host = host or HOSTS[name]
        self.rootfs = ROOTFS
        self.port = free_port(self.host)
        self.address = f"{self.host}:{self.port}"
        self.directory = directory
        self.token_file = token_file
        self.token = token
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        log = open(self.directory / f"{self.name}.{self.starts}.log", "wb")
        argv = [
            NSBOX_BIN, "serve", "--listen", f"tcp:{self.address}", "--token-file", self.token_file,
            "--node-name", self.name, "--rootfs", self.rootfs, "--max-concurrent", "2", "--max-queue", "64",
            "--pool-size", "2", "--timeout", "30s", "--drain-grace", "3s", "--max-connections-per-peer", "256", "--profile", f"quota={self.quota_profile()}",
        ]
        with log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        ok = wait_until(self._ready, scaled(30))
        if not ok:
            self.stop()
            raise RuntimeError(f"node {self.name} not ready: {self.log()}")

    def quota_profile(self) -> str:
        """A profile `quota`: a session's runs per minute are limited."""
        path = self.directory / f"{self.name}-quota.yaml"
        path.write_text(f"rootfs: {self.rootfs}\nquota-runs-per-minute: {QUOTA_PER_MINUTE}\n")
        return str(path)

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"node {self.name} exited {self.proc.returncode}: {self.log()}")
        try:
            return self.http().request("GET", "/v1/health").status == 200
        except OSError:
            return False

    def http(self, token: bool = True) -> Http:
        return Http(self.address, self.token if token else None, timeout=30)

    def log(self) -> str:
        try:
            return (self.directory / f"{self.name}.{self.starts}.log").read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def metric(self, name: str, **labels: str) -> float:
        """The sum of a metric's samples whose labels include these, read
        from the node's own /metrics."""
        text = self.http().request("GET", "/metrics").body.decode()
        total = 0.0
        for line in text.splitlines():
            m = re.match(r"^([a-z_]+)(\{[^}]*\})? ([0-9.e+-]+)$", line)
            if not m or m.group(1) != name:
                continue
            have = dict(re.findall(r'([a-z_]+)="([^"]*)"', m.group(2) or ""))
            if all(have.get(k) == v for k, v in labels.items()):
                total += float(m.group(3))
        return total

    def runs_answered(self) -> float:
        return self.metric("nsbox_runs_total")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=scaled(60))
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Haproxy:
    """HAProxy with the shipped configuration, addresses from the
    environment; a second file adds only a runtime socket for the tests."""

    def __init__(self, directory: Path, nodes: Dict[str, Node]) -> None:
        self.address = f"127.0.0.1:{free_port('127.0.0.1')}"
        self.admin = str(directory / "haproxy-admin.sock")
        extra = directory / "haproxy-test.cfg"
        extra.write_text(f"global\n    stats socket {self.admin} mode 600 level admin\n")
        env = dict(os.environ, NSBOX_FRONTEND=self.address)
        for i, name in enumerate(NODES):
            env[f"NSBOX_NODE_{i}"] = nodes[name].address
        self.log_path = directory / "haproxy.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [HAPROXY, "-db", "-f", str(CONFIG), "-f", str(extra)],
                env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            )
        if not wait_until(lambda: all(self.state(n) == "UP" for n in NODES), scaled(30)):
            text = self.log_path.read_text(errors="replace")
            self.stop()
            raise RuntimeError(f"HAProxy did not see every node up: {text[-2000:]}")

    def command(self, cmd: str) -> str:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(5)
            s.connect(self.admin)
            s.sendall(cmd.encode() + b"\n")
            out = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
        return out.decode()

    def state(self, node: str, backend: str = "runs") -> str:
        """HAProxy's view of a node in a backend (UP, DOWN, ...): `runs`,
        or `node-NAME`, its live sandboxes' own."""
        if self.proc.poll() is not None:
            raise RuntimeError(f"HAProxy exited {self.proc.returncode}")
        try:
            csv = self.command("show stat")
        except OSError:
            return "?"
        for line in csv.splitlines():
            f = line.split(",")
            if len(f) > 17 and f[0] == backend and f[1] == node:
                return f[17].split(" ")[0]
        return "?"

    def http(self, token: Optional[str]) -> Http:
        return Http(self.address, token)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGUSR1)  # soft stop
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Fleet:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.token = secrets.token_hex(24)
        tf = directory / "token"
        tf.write_text(self.token + "\n")
        tf.chmod(0o600)
        self.nodes = {name: Node(name, directory, str(tf), self.token) for name in NODES}
        self.haproxy: Optional[Haproxy] = None

    def http(self) -> Http:
        assert self.haproxy is not None
        return self.haproxy.http(self.token)


@pytest.fixture(scope="session")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    f = Fleet(tmp_path_factory.mktemp("fleet"))
    # nsbox-0's rootfs is a copy by hard links, which a test breaks (its
    # python renamed) and mends, leaving the shared one alone.
    breakable = f.directory / "rootfs-nsbox-0"
    subprocess.run(["cp", "-al", ROOTFS, str(breakable)], check=True)
    f.nodes["nsbox-0"].rootfs = str(breakable)
    try:
        for n in f.nodes.values():
            n.start()
        f.haproxy = Haproxy(f.directory, f.nodes)
        yield f
    finally:
        if f.haproxy is not None:
            f.haproxy.stop()
        for n in f.nodes.values():
            n.stop()
