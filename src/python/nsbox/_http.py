"""nsbox serve's HTTP API (nsbox-serve(8)): the requests the clients make,
what the answers mean, and the synchronous transport on http.client
(HTTP/1.1, keep-alive, a unix socket or TCP)."""

from __future__ import annotations

import asyncio
import functools
import http.client
import ipaddress
import json
import math
import os
import re
import select
import socket
import ssl
import threading
import time
import urllib.parse
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple, TypeVar, Union

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer, WriteableBuffer

from ._errors import (
    ConnectionError,
    Error,
    QuotaExceeded,
    SandboxLost,
    ServerBusy,
    Unauthorized,
    UsageError,
)
from ._result import Result

__all__ = ["Address", "Answer", "HttpTransport", "Output", "StreamLine"]

# How long a request may take beyond its run's timeout (the server's own
# start-up, queueing and answer), and when a run gives none.
REQUEST_MARGIN = 30.0
DEFAULT_REQUEST_TIMEOUT = 330.0
# The most a server's answer (or one line of a stream) may hold: a result
# carries two capped outputs, JSON-escaped.
MAX_ANSWER_BYTES = 256 << 20
NDJSON = "application/x-ndjson"
SANDBOX_KEYS = ("idle_timeout", "max_lifetime", "max_runs")
_USER_AGENT = "nsbox-python/0.1.0"


@dataclass(frozen=True)
class Output:
    """A piece of a run's output as it was written: stream is "stdout" or
    "stderr"; data the text (valid UTF-8, a character never split)."""

    stream: str
    data: str


StreamLine = Union[Output, Result]


@dataclass(frozen=True)
class Address:
    """Where a server listens: unix:PATH or http://HOST:PORT."""

    text: str
    unix_path: Optional[str]
    host: str
    port: int
    tls: bool = False

    @classmethod
    def parse(cls, text: str) -> "Address":
        if text.startswith("unix:"):
            path = text[5:]
            if not path.startswith("/"):
                raise UsageError(f"server address {text!r}: unix:PATH needs an absolute PATH")
            if len(path.encode()) >= 108:
                raise UsageError(f"server address {text!r}: the socket path is too long")
            return cls(text, path, "localhost", 0)
        for scheme, default_port in (("http", 80), ("https", 443)):
            if text.startswith(scheme + "://"):
                u = urllib.parse.urlsplit(text)
                if u.path not in ("", "/") or u.query or u.fragment or "@" in u.netloc or not u.hostname:
                    raise UsageError(f"server address {text!r}: expected {scheme}://HOST:PORT")
                try:
                    port = u.port or default_port
                except ValueError:
                    raise UsageError(f"server address {text!r}: bad port") from None
                return cls(text, None, u.hostname, port, scheme == "https")
        raise UsageError(f"server address {text!r}: expected unix:PATH, http://HOST:PORT or https://HOST:PORT")

    @property
    def private(self) -> bool:
        """Bytes to it stay on this machine: a unix socket or loopback."""
        if self.unix_path is not None or self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    @property
    def host_header(self) -> str:
        if self.unix_path is not None:
            return "localhost"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def read_token(token: Optional[str], token_file: Optional[str]) -> Optional[str]:
    if token is not None and token_file is not None:
        raise UsageError("give token or token_file, not both")
    if token_file is not None:
        try:
            with open(token_file, encoding="utf-8") as f:
                token = f.readline().rstrip("\r\n")
        except OSError as e:
            raise UsageError(f"token file {token_file!r}: {e.strerror}") from None
    if token is not None and (not token or any(c in token for c in "\r\n")):
        raise UsageError("the token is empty or holds a line break")
    return token


def json_value(v: Any) -> Any:
    """A keyword argument's value in a request body."""
    if isinstance(v, (bool, int, str)) or v is None:
        return v
    if isinstance(v, float):
        return repr(v)
    raise UsageError(f"{v!r}: a value must be a string, a number or a boolean")


class Body(bytes):
    """A request's JSON body, and the session it names: sent as the
    X-Nsbox-Session header too, which a fleet's balancer routes on (so
    that one session's quota is counted on one node)."""

    session: Optional[str] = None


_SESSION = re.compile(r"[A-Za-z0-9._:@+=/-]{1,128}")


def _body(body: Dict[str, Any]) -> Body:
    b = Body(json.dumps(body).encode())
    s = body.get("session")
    # Only a well-formed one goes into a header; the server refuses any
    # other from the body, with its own message.
    if isinstance(s, str) and _SESSION.fullmatch(s):
        b.session = s
    return b


def session_of(body: Optional[bytes]) -> Optional[str]:
    return body.session if isinstance(body, Body) else None


def run_body(code: str, keys: Mapping[str, Any]) -> Body:
    if not isinstance(code, str):
        raise UsageError("code must be a str")
    body: Dict[str, Any] = {"code": code}
    for k, v in keys.items():
        if v is not None:
            body[k.replace("_", "-")] = json_value(v)
    return _body(body)


def sandbox_body(profile: Optional[str], session: Optional[str], keys: Mapping[str, Any]) -> Body:
    body: Dict[str, Any] = {}
    if profile is not None:
        body["profile"] = profile
    if session is not None:
        body["session"] = session
    for k, v in keys.items():
        if v is None:
            continue
        name = k if k.startswith("sandbox_") else "sandbox_" + k
        body[name.replace("_", "-")] = json_value(v)
    return _body(body)


# Locally, with no timeout known: nsbox's longest timeout (a day).
LONGEST_RUN = 86400.0
# A profile's timeout learned from a server bounds a call up to this; a
# longer one needs request_timeout=.
LEARNED_MOST = 3600.0
LEARN_TIMEOUT = 10.0


def run_seconds(keys: Mapping[str, Any]) -> Optional[float]:
    """The timeout a run's keys give, in seconds, or None."""
    t = keys.get("timeout")
    if isinstance(t, (int, float)) and not isinstance(t, bool):
        return float(t)
    if isinstance(t, str):
        return parse_duration(t)
    return None


def request_timeout(keys: Mapping[str, Any], default: float) -> float:
    """A client-side bound larger than the run's own timeout."""
    seconds = run_seconds(keys)
    return default if seconds is None else seconds + REQUEST_MARGIN


class Bounds:
    """How long a client waits for a request: a run's timeout and 30 s;
    without one, request_timeout if it was given, else the profile's
    timeout (its /v1/health) and 30 s."""

    def __init__(self, request_timeout: Optional[float]) -> None:
        if request_timeout is not None and (
            isinstance(request_timeout, bool) or not isinstance(request_timeout, (int, float)) or not request_timeout > 0
        ):
            raise UsageError("request_timeout must be a positive number of seconds")
        self.explicit = None if request_timeout is None else float(request_timeout)
        self.profiles: Dict[str, float] = {}
        self.asked: "set[str]" = set()

    def wanted(self, profile: Optional[str]) -> bool:
        """Whether to ask the server for the profile's timeout: once."""
        name = profile or "default"
        if self.explicit is not None or name in self.profiles or name in self.asked:
            return False
        self.asked.add(name)
        return True

    @property
    def plain(self) -> float:
        """For a request that is not a run (open, close, health)."""
        return self.explicit if self.explicit is not None else DEFAULT_REQUEST_TIMEOUT

    def known(self, keys: Mapping[str, Any], profile: Optional[str]) -> Optional[float]:
        """The bound of a run, or None when the profile's timeout must be
        learned first (learn)."""
        seconds = run_seconds(keys)
        if seconds is not None:
            return seconds + REQUEST_MARGIN
        if self.explicit is not None:
            return self.explicit
        t = self.profiles.get(profile or "default")
        return None if t is None else t + REQUEST_MARGIN

    def learn(self, health: Mapping[str, Any]) -> None:
        profiles = health.get("profiles")
        if isinstance(profiles, dict):
            for name, p in profiles.items():
                t = p.get("timeout_ms") if isinstance(p, dict) else None
                if isinstance(t, int) and not isinstance(t, bool) and t > 0:
                    # The server's word holds a call an hour at most.
                    self.profiles[str(name)] = min(t / 1000, LEARNED_MOST)

    def run(self, keys: Mapping[str, Any], profile: Optional[str]) -> float:
        b = self.known(keys, profile)
        if b is not None:
            return b
        return self.profiles.get(profile or "default", DEFAULT_REQUEST_TIMEOUT - REQUEST_MARGIN) + REQUEST_MARGIN


def parse_duration(text: str) -> Optional[float]:
    for suffix, scale in (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if text.endswith(suffix):
            try:
                return float(text[: -len(suffix)]) * scale
            except ValueError:
                return None
    try:
        return float(text)
    except ValueError:
        return None


def _message(body: bytes, status: int) -> str:
    try:
        obj = json.loads(body)
        if isinstance(obj, dict) and isinstance(obj.get("error"), str):
            return str(obj["error"])
    except ValueError:
        pass
    text = body.decode("utf-8", "replace").strip()
    return text[:200] if text else f"HTTP {status}"


RETRY_AFTER_MAX = 60.0


def clamp_retry(seconds: float) -> float:
    """A server's Retry-After, finite and at most a minute."""
    if not math.isfinite(seconds):
        return RETRY_AFTER_MAX
    return min(RETRY_AFTER_MAX, max(0.0, seconds))


def _retry_after(headers: Mapping[str, str]) -> float:
    try:
        return clamp_retry(float(headers.get("retry-after", "1")))
    except (ValueError, OverflowError):
        return 1.0


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Mapping[str, str]  # lower-case names
    body: bytes


def check(answer: Answer, what: str, sandbox_id: Optional[str] = None) -> Answer:
    """The answer when it is a success; otherwise the error it means."""
    s, body = answer.status, answer.body
    if 200 <= s < 300:
        return answer
    msg = f"{what}: {_message(body, s)}"
    if s == 401:
        raise Unauthorized(f"{what}: the server refused the token (401)")
    if s == 429:
        result = Result.from_json(body)
        q = result.quota_refusal
        after = _retry_after(answer.headers)
        if q is not None:
            msg = f"{what}: this session's quota {q.quota} ({q.limit}) is used up"
        raise QuotaExceeded(msg, after, result)
    if s == 503:
        raise ServerBusy(msg, _retry_after(answer.headers))
    if sandbox_id is not None and s in (404, 410):
        raise SandboxLost(msg, _message(body, s))
    if s in (400, 404, 405, 413, 414, 431, 501):
        raise UsageError(msg)
    raise Error(f"{msg} (HTTP {s})")


def json_object(body: bytes, what: str) -> Dict[str, Any]:
    """A server's JSON object answer; Error when it is not one."""
    try:
        obj = json.loads(body)
    except ValueError:
        raise Error(f"{what}: the server's answer is not JSON") from None
    if not isinstance(obj, dict):
        raise Error(f"{what}: the server's answer is not an object")
    return obj


def result_of(answer: Answer, what: str, sandbox_id: Optional[str] = None) -> Result:
    check(answer, what, sandbox_id)
    return Result.from_json(answer.body)


def stream_line(line: bytes, what: str) -> Optional[StreamLine]:
    """One line of a streamed run: Output, the final Result, None for an
    empty line; Error for the server's error line or a bad one."""
    if not line.strip():
        return None
    try:
        obj = json.loads(line)
    except ValueError:
        raise Error(f"{what}: the server sent a line that is not JSON") from None
    if not isinstance(obj, dict):
        raise Error(f"{what}: the server sent a line that is not an object")
    if "result" in obj:
        result = Result.from_json(obj["result"])
        q = result.quota_refusal
        if q is not None:
            raise QuotaExceeded(
                f"{what}: this session's quota {q.quota} ({q.limit}) is used up",
                clamp_retry(q.retry_after_ms / 1000),
                result,
            )
        return result
    if isinstance(obj.get("error"), str):
        raise Error(f"{what}: {obj['error']}")
    stream, data = obj.get("stream"), obj.get("data")
    if stream in ("stdout", "stderr") and isinstance(data, str):
        return Output(str(stream), data)
    raise Error(f"{what}: the server sent a line of unknown shape")


T = TypeVar("T")


def with_retries(retries: int, call: Callable[[], T], sleep: Callable[[float], None] = time.sleep) -> T:
    """call(), and again after Retry-After on 503 or 429, up to retries
    more times."""
    attempt = 0
    while True:
        try:
            return call()
        except (ServerBusy, QuotaExceeded) as e:
            if attempt >= retries:
                raise
            attempt += 1
            sleep(e.retry_after)


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise socket.timeout("timed out")
    return left


class _DeadlineSocket(socket.socket):
    """A socket whose every read and write ends by one deadline: a server
    that trickles bytes cannot hold a request past its bound."""

    deadline = math.inf

    def recv_into(self, buffer: "WriteableBuffer", nbytes: int = 0, flags: int = 0) -> int:
        self.settimeout(_left(self.deadline))
        return super().recv_into(buffer, nbytes, flags)

    def sendall(self, data: "ReadableBuffer", flags: int = 0) -> None:
        self.settimeout(_left(self.deadline))
        super().sendall(data, flags)


class _DeadlineSSLSocket(ssl.SSLSocket):
    """The same over TLS (the context's sslsocket_class)."""

    deadline = math.inf

    def recv_into(self, buffer: "WriteableBuffer", nbytes: Optional[int] = None, flags: int = 0) -> int:
        self.settimeout(_left(self.deadline))
        return super().recv_into(buffer, nbytes, flags)

    def sendall(self, data: "ReadableBuffer", flags: int = 0) -> None:
        self.settimeout(_left(self.deadline))
        super().sendall(data, flags)


def _tcp_socket(deadline: float, address: Tuple[str, int], timeout: Optional[float], source: Any = None) -> socket.socket:
    """Connected within the request's deadline, every address of the name
    together; what is left of it goes to the TLS handshake."""
    host, port = address
    error: Optional[OSError] = None
    for family, kind, proto, _, addr in socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM):
        s = _DeadlineSocket(family, kind, proto)
        try:
            s.settimeout(_left(deadline))
            s.connect(addr)
            s.settimeout(_left(deadline))
            s.deadline = deadline
            return s
        except OSError as e:
            s.close()
            error = e
    raise error or OSError(f"{host}: no address")


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = _DeadlineSocket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self._path)
        except BaseException:
            s.close()
            raise
        self.sock = s


def tls_context(cafile: Optional[str]) -> ssl.SSLContext:
    """The system's trust (or cafile's), host names checked."""
    try:
        ctx = ssl.create_default_context(cafile=cafile)
    except (OSError, ssl.SSLError) as e:
        raise UsageError(f"cafile {cafile!r}: {why(e)}") from None
    ctx.sslsocket_class = _DeadlineSSLSocket
    return ctx


def _stale(conn: http.client.HTTPConnection) -> bool:
    """A kept-alive connection the server has closed (or that holds
    unread bytes) must not carry the next request."""
    sock = conn.sock
    if sock is None:
        return True
    p = select.poll()
    p.register(sock.fileno(), select.POLLIN)
    try:
        return bool(p.poll(0))
    except OSError:
        return True


def _arm(conn: http.client.HTTPConnection, deadline: float) -> None:
    sock = conn.sock
    if isinstance(sock, (_DeadlineSocket, _DeadlineSSLSocket)):
        sock.deadline = deadline


class HttpTransport:
    """Requests to one server, each thread on its own kept-alive
    connection; a stream on a connection of its own."""

    def __init__(
        self,
        address: str,
        token: Optional[str] = None,
        *,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
        cafile: Optional[str] = None,
        insecure: bool = False,
    ) -> None:
        self.address = Address.parse(address)
        check_token_path(self.address, token, insecure)
        self._token = token
        self._max = max_answer_bytes
        self._tls = tls_context(cafile) if self.address.tls else None
        self._local = threading.local()
        self._conns: "weakref.WeakSet[http.client.HTTPConnection]" = weakref.WeakSet()
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def _new(self, timeout: float) -> http.client.HTTPConnection:
        a = self.address
        conn: http.client.HTTPConnection
        if a.unix_path is not None:
            conn = _UnixConnection(a.unix_path, timeout)
        elif self._tls is not None:
            conn = http.client.HTTPSConnection(a.host, a.port, timeout=timeout, context=self._tls)
        else:
            conn = http.client.HTTPConnection(a.host, a.port, timeout=timeout)
        with self._lock:
            self._conns.add(conn)
        return conn

    def _forked(self) -> None:
        """In a child of fork: the parent's connections are not this
        process's to use (closing a copy leaves the parent's open)."""
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self.close()
            self._local = threading.local()

    def _read(self, resp: http.client.HTTPResponse, what: str) -> bytes:
        """The body, at most max_answer_bytes of it."""
        length = resp.getheader("content-length")
        if length is not None and length.strip().isdigit() and int(length) > self._max:
            raise _TooLarge(f"{what}: the server's answer of {int(length)} bytes exceeds {self._max}")
        data = resp.read(self._max + 1)
        if len(data) > self._max:
            raise _TooLarge(f"{what}: the server's answer exceeds {self._max} bytes")
        return data

    def _headers(self, body: Optional[bytes], accept: str) -> Dict[str, str]:
        h = {"Host": self.address.host_header, "Accept": accept, "User-Agent": _USER_AGENT}
        if body is not None:
            h["Content-Type"] = "application/json"
            h["Content-Length"] = str(len(body))
        if self._token is not None:
            h["Authorization"] = f"Bearer {self._token}"
        session = session_of(body)
        if session is not None:
            h["X-Nsbox-Session"] = session
        return h

    def _send(
        self, conn: http.client.HTTPConnection, method: str, path: str, body: Optional[bytes], accept: str, timeout: float
    ) -> http.client.HTTPResponse:
        deadline = time.monotonic() + timeout
        if conn.sock is None:
            conn.timeout = timeout
            if self.address.unix_path is None:
                conn._create_connection = functools.partial(_tcp_socket, deadline)  # type: ignore[attr-defined]
            conn.connect()
        _arm(conn, deadline)
        conn.request(method, path, body=body, headers=self._headers(body, accept))
        return conn.getresponse()

    def request(self, method: str, path: str, body: Optional[bytes], timeout: float, *, fresh: bool = False) -> Answer:
        """One exchange on this thread's kept-alive connection, or with
        fresh=True on one of its own (a finalizer's, which may run in the
        middle of another exchange of this thread)."""
        self._forked()
        conn: Optional[http.client.HTTPConnection] = None if fresh else getattr(self._local, "conn", None)
        if conn is not None and _stale(conn):
            conn.close()
        if conn is None:
            conn = self._new(timeout)
            if not fresh:
                self._local.conn = conn
        what = f"{method} {path} on {self.address.text}"
        try:
            resp = self._send(conn, method, path, body, "application/json", timeout)
            if resp.status < 200:  # no endpoint answers 1xx: the framing is lost
                raise http.client.HTTPException(f"an interim answer {resp.status}")
            data = self._read(resp, what)
            headers = {k.lower(): v for k, v in resp.getheaders()}
            if resp.will_close or fresh:
                conn.close()
            return Answer(resp.status, headers, data)
        except socket.timeout:
            conn.close()
            raise ConnectionError(f"{what}: no answer within {timeout:.0f} s") from None
        except _TooLarge as e:
            conn.close()
            raise Error(str(e)) from None
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise ConnectionError(f"{what}: {why(e)}") from None

    def stream(self, path: str, body: bytes, timeout: float, what: str) -> Iterator[StreamLine]:
        self._forked()
        conn = self._new(timeout)
        try:
            try:
                resp = self._send(conn, "POST", path, body, NDJSON, timeout)
                if resp.status != 200 or NDJSON not in (resp.getheader("content-type") or ""):
                    data = self._read(resp, what)
                    check(Answer(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data), what)
                    raise Error(f"{what}: the server did not stream (HTTP {resp.status})")
                while True:
                    line = resp.readline(self._max + 1)
                    if len(line) > self._max:
                        raise _TooLarge(f"{what}: a line of the stream exceeds {self._max} bytes")
                    if not line:
                        raise ConnectionError(f"{what}: the server ended the stream before the result")
                    item = stream_line(line, what)
                    if item is None:
                        continue
                    yield item
                    if isinstance(item, Result):
                        return
            except socket.timeout:
                raise ConnectionError(f"{what}: no answer within {timeout:.0f} s") from None
            except _TooLarge as e:
                raise Error(str(e)) from None
            except (OSError, http.client.HTTPException) as e:
                raise ConnectionError(f"{what} on {self.address.text}: {why(e)}") from None
        finally:
            conn.close()

    def close(self) -> None:
        with self._lock:
            conns: List[http.client.HTTPConnection] = list(self._conns)
        for c in conns:
            c.close()


class _TooLarge(Exception):
    pass


def check_token_path(address: Address, token: Optional[str], insecure: bool) -> None:
    """A token never crosses a network in clear unless asked to."""
    if token is not None and not address.tls and not address.private and not insecure:
        raise UsageError(
            f"server address {address.text!r}: the token would cross the network in clear; "
            "use https:// (a TLS proxy in front of nsbox serve), or insecure=True on a network you trust"
        )


def why(e: BaseException) -> str:
    """A transport failure in words."""
    if isinstance(e, http.client.RemoteDisconnected):
        return "the server closed the connection without answering"
    if isinstance(e, (http.client.IncompleteRead, asyncio.IncompleteReadError)):
        return "the server closed the connection mid-answer"
    if isinstance(e, ssl.SSLCertVerificationError):
        return f"TLS: {e.verify_message or e.reason}"
    if isinstance(e, ssl.SSLError):
        return f"TLS: {e.reason or e}"
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return str(e) or type(e).__name__


def split_keys(keys: Mapping[str, Any], names: Tuple[str, ...]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    inside = {k: v for k, v in keys.items() if k in names}
    rest = {k: v for k, v in keys.items() if k not in names}
    return inside, rest
