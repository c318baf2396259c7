"""nsbox serve's HTTP API (nsbox-serve(8)): the requests the clients make,
what the answers mean, and the synchronous transport on http.client
(HTTP/1.1, keep-alive, a unix socket or TCP)."""

from __future__ import annotations

import asyncio
import http.client
import json
import math
import select
import socket
import threading
import time
import urllib.parse
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple, TypeVar, Union

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

    @classmethod
    def parse(cls, text: str) -> "Address":
        if text.startswith("unix:"):
            path = text[5:]
            if not path.startswith("/"):
                raise UsageError(f"server address {text!r}: unix:PATH needs an absolute PATH")
            if len(path.encode()) >= 108:
                raise UsageError(f"server address {text!r}: the socket path is too long")
            return cls(text, path, "localhost", 0)
        if text.startswith("https://"):
            raise UsageError(
                f"server address {text!r}: https is not spoken here; use http:// to a "
                "loopback server or a TLS proxy's local side"
            )
        if text.startswith("http://"):
            u = urllib.parse.urlsplit(text)
            if u.path not in ("", "/") or u.query or u.fragment or u.username or not u.hostname:
                raise UsageError(f"server address {text!r}: expected http://HOST:PORT")
            try:
                port = u.port or 80
            except ValueError:
                raise UsageError(f"server address {text!r}: bad port") from None
            return cls(text, None, u.hostname, port)
        raise UsageError(f"server address {text!r}: expected unix:PATH or http://HOST:PORT")

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


def run_body(code: str, keys: Mapping[str, Any]) -> bytes:
    if not isinstance(code, str):
        raise UsageError("code must be a str")
    body: Dict[str, Any] = {"code": code}
    for k, v in keys.items():
        if v is not None:
            body[k.replace("_", "-")] = json_value(v)
    return json.dumps(body).encode()


def sandbox_body(profile: Optional[str], session: Optional[str], keys: Mapping[str, Any]) -> bytes:
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
    return json.dumps(body).encode()


def request_timeout(keys: Mapping[str, Any], default: float) -> float:
    """A client-side bound larger than the run's own timeout."""
    t = keys.get("timeout")
    if isinstance(t, (int, float)) and not isinstance(t, bool):
        return float(t) + REQUEST_MARGIN
    if isinstance(t, str):
        seconds = parse_duration(t)
        if seconds is not None:
            return seconds + REQUEST_MARGIN
    return default


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


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self._path)
        except BaseException:
            s.close()
            raise
        self.sock = s


def _stale(conn: http.client.HTTPConnection) -> bool:
    """A kept-alive connection the server has closed (or that holds
    unread bytes) must not carry the next request."""
    sock = conn.sock
    if sock is None:
        return True
    try:
        r, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(r)


class HttpTransport:
    """Requests to one server, each thread on its own kept-alive
    connection; a stream on a connection of its own."""

    def __init__(self, address: str, token: Optional[str] = None) -> None:
        self.address = Address.parse(address)
        self._token = token
        self._local = threading.local()
        self._conns: "weakref.WeakSet[http.client.HTTPConnection]" = weakref.WeakSet()
        self._lock = threading.Lock()

    def _new(self, timeout: float) -> http.client.HTTPConnection:
        a = self.address
        conn: http.client.HTTPConnection
        if a.unix_path is not None:
            conn = _UnixConnection(a.unix_path, timeout)
        else:
            conn = http.client.HTTPConnection(a.host, a.port, timeout=timeout)
        with self._lock:
            self._conns.add(conn)
        return conn

    def _headers(self, body: Optional[bytes], accept: str) -> Dict[str, str]:
        h = {"Host": self.address.host_header, "Accept": accept, "User-Agent": _USER_AGENT}
        if body is not None:
            h["Content-Type"] = "application/json"
            h["Content-Length"] = str(len(body))
        if self._token is not None:
            h["Authorization"] = f"Bearer {self._token}"
        return h

    def _send(
        self, conn: http.client.HTTPConnection, method: str, path: str, body: Optional[bytes], accept: str, timeout: float
    ) -> http.client.HTTPResponse:
        if conn.sock is None:
            conn.connect()
        assert conn.sock is not None
        conn.sock.settimeout(timeout)
        conn.request(method, path, body=body, headers=self._headers(body, accept))
        return conn.getresponse()

    def request(self, method: str, path: str, body: Optional[bytes], timeout: float) -> Answer:
        conn: Optional[http.client.HTTPConnection] = getattr(self._local, "conn", None)
        if conn is not None and _stale(conn):
            conn.close()
        if conn is None:
            conn = self._new(timeout)
            self._local.conn = conn
        try:
            resp = self._send(conn, method, path, body, "application/json", timeout)
            if resp.status < 200:  # no endpoint answers 1xx: the framing is lost
                raise http.client.HTTPException(f"an interim answer {resp.status}")
            data = resp.read()
            headers = {k.lower(): v for k, v in resp.getheaders()}
            if resp.will_close:
                conn.close()
            return Answer(resp.status, headers, data)
        except socket.timeout:
            conn.close()
            raise ConnectionError(
                f"{method} {path} on {self.address.text}: no answer within {timeout:.0f} s"
            ) from None
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise ConnectionError(f"{method} {path} on {self.address.text}: {why(e)}") from None

    def stream(self, path: str, body: bytes, timeout: float, what: str) -> Iterator[StreamLine]:
        conn = self._new(timeout)
        try:
            try:
                resp = self._send(conn, "POST", path, body, NDJSON, timeout)
                if resp.status != 200 or NDJSON not in (resp.getheader("content-type") or ""):
                    data = resp.read()
                    check(Answer(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data), what)
                    raise Error(f"{what}: the server did not stream (HTTP {resp.status})")
                while True:
                    line = resp.readline()
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
            except (OSError, http.client.HTTPException) as e:
                raise ConnectionError(f"{what} on {self.address.text}: {why(e)}") from None
        finally:
            conn.close()

    def close(self) -> None:
        with self._lock:
            conns: List[http.client.HTTPConnection] = list(self._conns)
        for c in conns:
            c.close()


def why(e: BaseException) -> str:
    """A transport failure in words."""
    if isinstance(e, http.client.RemoteDisconnected):
        return "the server closed the connection without answering"
    if isinstance(e, (http.client.IncompleteRead, asyncio.IncompleteReadError)):
        return "the server closed the connection mid-answer"
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return str(e) or type(e).__name__


def split_keys(keys: Mapping[str, Any], names: Tuple[str, ...]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    inside = {k: v for k, v in keys.items() if k in names}
    rest = {k: v for k, v in keys.items() if k not in names}
    return inside, rest
