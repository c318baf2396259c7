"""The asyncio client: the methods of Client as coroutines, on asyncio's
own streams and subprocesses (no thread per call)."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
import warnings
from typing import Any, AsyncIterator, Callable, Dict, List, Mapping, Optional, Tuple, TypeVar, Union

from ._client import SandboxState, local_bound, setup
from ._errors import ConnectionError, Error, QuotaExceeded, ServerBusy, UsageError
from ._http import (
    LEARN_TIMEOUT,
    MAX_ANSWER_BYTES,
    NDJSON,
    Address,
    Answer,
    Bounds,
    HttpTransport,
    StreamLine,
    check,
    check_token_path,
    json_object,
    result_of,
    run_body,
    sandbox_body,
    session_of,
    stream_line,
    tls_context,
    why,
)
from ._local import InputValue, PrivateServer, cli_result
from ._result import Result

__all__ = ["AsyncClient", "AsyncSandbox"]

_HEAD_LIMIT = 64 * 1024
_IDLE_REUSE = 30.0  # seconds: past this an idle connection is not reused
T = TypeVar("T")


class _BadAnswer(Exception):
    pass


async def _line(reader: asyncio.StreamReader) -> bytes:
    try:
        return await reader.readline()
    except ValueError:  # past the reader's limit
        raise _BadAnswer("a line of the server's answer is too long") from None


async def _read_head(reader: asyncio.StreamReader) -> Tuple[int, Dict[str, str], str]:
    line = await _line(reader)
    if not line:
        raise _BadAnswer("the server closed the connection without answering")
    parts = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise _BadAnswer("the server's status line is not HTTP/1.x")
    headers: Dict[str, str] = {}
    size = len(line)
    while True:
        h = await _line(reader)
        size += len(h)
        if size > _HEAD_LIMIT:
            raise _BadAnswer("the server's headers are too long")
        if not h.endswith(b"\n"):
            raise _BadAnswer("the server closed the connection mid-headers")
        if h in (b"\r\n", b"\n"):
            break
        name, sep, value = h.decode("latin-1").partition(":")
        if not sep:
            raise _BadAnswer("a header line without a colon")
        headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers, parts[0]


async def _chunks(reader: asyncio.StreamReader, most: int, whole: bool = True) -> AsyncIterator[bytes]:
    """The data of a chunked body, chunk by chunk, strictly framed: no
    chunk over `most` bytes, and (whole) not the body either."""
    total = 0
    while True:
        line = await _line(reader)
        if not line.endswith(b"\n"):
            raise _BadAnswer("the server closed the connection mid-body")
        size_text = line.split(b";", 1)[0].strip()
        if not size_text or len(size_text) > 16 or any(c not in b"0123456789abcdefABCDEF" for c in size_text):
            raise _BadAnswer("a bad chunk size")
        size = int(size_text, 16)
        total += size if whole else 0
        if size > most or total > most:
            raise _BadAnswer(f"the server's answer exceeds {most} bytes")
        if size == 0:
            while True:
                t = await _line(reader)
                if not t.endswith(b"\n"):
                    raise _BadAnswer("the server closed the connection mid-trailers")
                if t in (b"\r\n", b"\n"):
                    return
        data = await reader.readexactly(size)
        if await reader.readexactly(2) != b"\r\n":
            raise _BadAnswer("a chunk not ended by CRLF")
        yield data


async def _body(
    reader: asyncio.StreamReader, headers: Mapping[str, str], status: int, method: str, most: int
) -> Tuple[bytes, bool]:
    """The body (at most `most` bytes), and whether the connection may
    carry another request."""
    if status < 200:  # no endpoint answers 1xx: the framing is lost
        raise _BadAnswer(f"an interim answer {status}")
    if method == "HEAD" or status in (204, 304):
        return b"", True
    te = headers.get("transfer-encoding")
    if te is not None:
        if te.lower() != "chunked":
            raise _BadAnswer(f"a transfer-encoding of {te!r}")
        return b"".join([c async for c in _chunks(reader, most)]), True
    cl = headers.get("content-length")
    if cl is not None:
        if not cl.isdigit():
            raise _BadAnswer("a bad content-length")
        if int(cl) > most:
            raise _BadAnswer(f"the server's answer of {int(cl)} bytes exceeds {most}")
        return await reader.readexactly(int(cl)), True
    data = bytearray()
    while True:
        piece = await reader.read(65536)
        if not piece:
            return bytes(data), False
        data += piece
        if len(data) > most:
            raise _BadAnswer(f"the server's answer exceeds {most} bytes")


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.idle_since = time.monotonic()

    def usable(self) -> bool:
        return (
            not self.reader.at_eof()
            and not self.writer.is_closing()
            and time.monotonic() - self.idle_since < _IDLE_REUSE
        )

    def close(self) -> None:
        self.writer.close()


class _AsyncTransport:
    def __init__(
        self,
        address: str,
        token: Optional[str],
        max_connections: int,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
        cafile: Optional[str] = None,
        insecure: bool = False,
    ) -> None:
        self.address = Address.parse(address)
        check_token_path(self.address, token, insecure)
        self._token = token
        self._max = max_connections
        self._most = max_answer_bytes
        self._tls = tls_context(cafile) if self.address.tls else None
        self._sem: Optional[asyncio.Semaphore] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._idle: List[_Conn] = []

    def _semaphore(self) -> asyncio.Semaphore:
        """The connection bound, of the running loop: a client used from
        another loop (asyncio.run twice) drops what the first one made."""
        loop = asyncio.get_running_loop()
        if self._sem is None or self._loop is not loop:
            self._drop_idle()
            self._sem = asyncio.Semaphore(self._max)
            self._loop = loop
        return self._sem

    def _drop_idle(self) -> None:
        for c in self._idle:
            try:
                c.close()
            except RuntimeError:  # its loop is closed: so is the transport
                pass
        self._idle.clear()

    async def _connect(self) -> _Conn:
        a = self.address
        if a.unix_path is not None:
            r, w = await asyncio.open_unix_connection(a.unix_path, limit=_HEAD_LIMIT * 2)
        else:
            r, w = await asyncio.open_connection(
                a.host, a.port, limit=_HEAD_LIMIT * 2, ssl=self._tls, server_hostname=a.host if self._tls else None
            )
        return _Conn(r, w)

    def _head(self, method: str, path: str, body: Optional[bytes], accept: str) -> bytes:
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.address.host_header}", f"Accept: {accept}",
                 "User-Agent: nsbox-python/0.1.0"]
        if body is not None:
            lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
        if self._token is not None:
            lines.append(f"Authorization: Bearer {self._token}")
        session = session_of(body)
        if session is not None:
            lines.append(f"X-Nsbox-Session: {session}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _exchange(self, conn: _Conn, method: str, path: str, body: Optional[bytes]) -> Tuple[Answer, bool]:
        conn.writer.write(self._head(method, path, body, "application/json") + (body or b""))
        await conn.writer.drain()
        status, headers, version = await _read_head(conn.reader)
        data, framed = await _body(conn.reader, headers, status, method, self._most)
        keep = framed and version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        return Answer(status, headers, data), keep

    async def request(self, method: str, path: str, body: Optional[bytes], timeout: float) -> Answer:
        async with self._semaphore():
            conn: Optional[_Conn] = None
            while self._idle and conn is None:
                c = self._idle.pop()
                if c.usable():
                    conn = c
                else:
                    c.close()
            what = f"{method} {path} on {self.address.text}"
            keep = False
            held: List[_Conn] = [conn] if conn is not None else []

            async def exchange() -> Tuple[Answer, bool]:  # connect and all, in one bound
                if not held:
                    held.append(await self._connect())
                return await self._exchange(held[0], method, path, body)

            try:
                answer, keep = await asyncio.wait_for(exchange(), timeout)
                return answer
            except asyncio.TimeoutError:
                raise ConnectionError(f"{what}: no answer within {timeout:.0f} s") from None
            except (OSError, asyncio.IncompleteReadError, _BadAnswer) as e:
                raise ConnectionError(f"{what}: {why(e)}") from None
            finally:
                conn = held[0] if held else None
                if conn is not None:
                    if keep:
                        conn.idle_since = time.monotonic()
                        self._idle.append(conn)
                    else:
                        conn.close()

    async def stream(self, path: str, body: bytes, timeout: float, what: str) -> AsyncIterator[StreamLine]:
        async with self._semaphore():  # a stream holds a connection too
            async for item in self._stream(path, body, timeout, what):
                yield item

    async def _stream(self, path: str, body: bytes, timeout: float, what: str) -> AsyncIterator[StreamLine]:
        deadline = time.monotonic() + timeout
        conn: Optional[_Conn] = None

        def left() -> float:
            return max(0.001, deadline - time.monotonic())

        try:
            conn = await asyncio.wait_for(self._connect(), left())
            conn.writer.write(self._head("POST", path, body, NDJSON) + body)
            await asyncio.wait_for(conn.writer.drain(), left())
            status, headers, _ = await asyncio.wait_for(_read_head(conn.reader), left())
            if status != 200 or NDJSON not in headers.get("content-type", ""):
                data, _ = await asyncio.wait_for(_body(conn.reader, headers, status, "POST", self._most), left())
                check(Answer(status, headers, data), what)
                raise Error(f"{what}: the server did not stream (HTTP {status})")
            if headers.get("transfer-encoding", "").lower() != "chunked":
                raise Error(f"{what}: the server's stream is not chunked")
            pending = b""
            chunks = _chunks(conn.reader, self._most, whole=False).__aiter__()  # and each line below
            while True:
                try:
                    data = await asyncio.wait_for(chunks.__anext__(), left())
                except StopAsyncIteration:
                    raise ConnectionError(f"{what}: the server ended the stream before the result") from None
                pending += data
                if len(pending) > self._most and b"\n" not in pending:
                    raise _BadAnswer(f"a line of the stream exceeds {self._most} bytes")
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    item = stream_line(line, what)
                    if item is None:
                        continue
                    yield item
                    if isinstance(item, Result):
                        return
        except asyncio.TimeoutError:
            raise ConnectionError(f"{what}: no answer within {timeout:.0f} s") from None
        except (OSError, asyncio.IncompleteReadError, _BadAnswer) as e:
            raise ConnectionError(f"{what} on {self.address.text}: {why(e)}") from None
        finally:
            if conn is not None:
                conn.close()

    def close(self) -> None:
        self._drop_idle()


async def _with_retries(retries: int, call: Callable[[], Any]) -> Any:
    attempt = 0
    while True:
        try:
            return await call()
        except (ServerBusy, QuotaExceeded) as e:
            if attempt >= retries:
                raise
            attempt += 1
            await asyncio.sleep(e.retry_after)


async def _deliver(events: AsyncIterator[StreamLine], on_stdout: Optional[Callable[[str], Any]],
                   on_stderr: Optional[Callable[[str], Any]]) -> Result:
    async for e in events:
        if isinstance(e, Result):
            return e
        cb = on_stdout if e.stream == "stdout" else on_stderr
        if cb is not None:
            ret = cb(e.data)
            if asyncio.iscoroutine(ret):
                await ret
    raise Error("the stream ended without a result")


class AsyncClient:
    """Client's methods as coroutines: await client.run(...), async for in
    client.run_stream(...), async with client.sandbox() as sb. The same
    arguments as Client; max_connections bounds the connections to a server
    (calls past it wait for one). Cancelling a call kills its run."""

    def __init__(
        self,
        server: Optional[str] = None,
        *,
        token: Optional[str] = None,
        token_file: Optional[str] = None,
        retries: int = 0,
        request_timeout: Optional[float] = None,
        max_connections: int = 32,
        cafile: Optional[str] = None,
        insecure: bool = False,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
        nsbox: Optional[str] = None,
        config: Optional[str] = None,
        **keys: Any,
    ) -> None:
        self._cli, t = setup(server, token, token_file, retries, nsbox, config, keys)
        if not isinstance(max_connections, int) or max_connections < 1:
            raise UsageError("max_connections must be an integer of 1 or more")
        self.retries = retries
        self._bounds = Bounds(request_timeout)
        self._closed = False
        self._max = max_connections
        self._http: Optional[_AsyncTransport] = None
        self._sync: Optional[HttpTransport] = None  # for a sandbox's close at garbage collection
        self._private: Optional[PrivateServer] = None
        self._starting: Optional["asyncio.Future[PrivateServer]"] = None
        if server is not None:
            self._http = _AsyncTransport(server, t, max_connections, max_answer_bytes, cafile, insecure)
            self._sync = HttpTransport(server, t, max_answer_bytes=max_answer_bytes, cafile=cafile, insecure=insecure)

    @property
    def local(self) -> bool:
        return self._cli is not None

    @property
    def request_timeout(self) -> float:
        """The bound of a request that is not a run."""
        return self._bounds.plain

    async def _bound(self, http: _AsyncTransport, keys: Mapping[str, Any], profile: Optional[str]) -> float:
        if self._bounds.known(keys, profile) is None and self._bounds.wanted(profile):
            try:
                a = await http.request("GET", "/v1/health", None, LEARN_TIMEOUT)
                self._bounds.learn(json_object(a.body, "health"))
            except Error:
                pass
        return self._bounds.run(keys, profile)

    async def _server(self) -> Tuple[_AsyncTransport, HttpTransport]:
        if self._http is not None and self._sync is not None:
            return self._http, self._sync
        assert self._cli is not None
        if self._closed:
            raise UsageError("this client is closed")
        if self._private is None or not self._private.alive():
            if self._starting is None:
                cli = self._cli
                loop = asyncio.get_running_loop()
                self._starting = asyncio.ensure_future(loop.run_in_executor(None, PrivateServer, cli))
            try:
                private = await asyncio.shield(self._starting)
            finally:
                if self._starting is not None and self._starting.done():
                    self._starting = None
            if self._private is not private:
                if self._private is not None:
                    self._private.close()
                self._private = private
                self._private_http = _AsyncTransport(f"unix:{private.socket}", None, self._max)
        return self._private_http, self._private.transport

    async def _run_cli(self, code: str, keys: Mapping[str, Any], inputs: Optional[Mapping[str, InputValue]],
                       output_dir: Optional["str | os.PathLike[str]"]) -> Result:
        assert self._cli is not None
        argv, limit, scratch = self._cli.prepare(code, keys, inputs, output_dir, local_bound(self._bounds))
        try:
            try:
                p = await asyncio.create_subprocess_exec(
                    *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE)
            except OSError as e:
                raise ConnectionError(f"could not run {argv[0]!r}: {e.strerror}") from None
            try:
                out, err = await asyncio.wait_for(p.communicate(code.encode("utf-8", "surrogateescape")), limit)
            except asyncio.TimeoutError:
                raise ConnectionError(f"nsbox run gave no result within {limit:.0f} s") from None
            finally:
                if p.returncode is None:
                    p.kill()
                    await p.wait()
        finally:
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
        assert p.returncode is not None
        return cli_result(p.returncode, out, err)

    async def run(
        self,
        code: str,
        *,
        inputs: Optional[Mapping[str, InputValue]] = None,
        output_dir: Optional["str | os.PathLike[str]"] = None,
        on_stdout: Optional[Callable[[str], Any]] = None,
        on_stderr: Optional[Callable[[str], Any]] = None,
        profile: Optional[str] = None,
        **keys: Any,
    ) -> Result:
        """As Client.run; the callbacks may be coroutine functions."""
        if on_stdout is not None or on_stderr is not None:
            if inputs or output_dir is not None:
                raise UsageError("a streamed run takes no inputs or output_dir")
            return await _deliver(self.run_stream(code, profile=profile, **keys), on_stdout, on_stderr)
        if self._cli is not None:
            if profile is not None:
                raise UsageError("profile names a server's profile; a local client has none")
            result: Result = await _with_retries(self.retries, lambda: self._run_cli(code, keys, inputs, output_dir))
            return result
        if inputs or output_dir is not None:
            raise UsageError("inputs and output_dir name this host's files: a server takes neither")
        http, _ = await self._server()
        body = run_body(code, dict(keys, profile=profile))
        limit = await self._bound(http, keys, profile)

        async def once() -> Result:
            return result_of(await http.request("POST", "/v1/runs", body, limit), "run")

        result = await _with_retries(self.retries, once)
        return result

    async def run_stream(self, code: str, *, profile: Optional[str] = None, **keys: Any) -> AsyncIterator[StreamLine]:
        """As Client.run_stream: async for event in client.run_stream(code)."""
        if self._cli is not None and profile is not None:
            raise UsageError("profile names a server's profile; a local client has none")
        body = run_body(code, dict(keys, profile=profile))
        http, _ = await self._server()
        limit = await self._bound(http, keys, profile)
        async for e in http.stream("/v1/runs", body, limit, "run"):
            yield e

    def sandbox(self, *, profile: Optional[str] = None, session: Optional[str] = None,
                idle_timeout: Union[str, int, float, None] = None,
                max_lifetime: Union[str, int, float, None] = None,
                max_runs: Optional[int] = None) -> "_Opening":
        """Opens a live sandbox: async with client.sandbox() as sb, or
        sb = await client.sandbox() (then await sb.close())."""
        body = sandbox_body(profile, session,
                            {"idle_timeout": idle_timeout, "max_lifetime": max_lifetime, "max_runs": max_runs})
        return _Opening(self, body)

    async def _open(self, body: bytes) -> "AsyncSandbox":
        http, sync = await self._server()

        async def once() -> Answer:
            return check(await http.request("POST", "/v1/sandboxes", body, self.request_timeout), "open sandbox")

        answer: Answer = await _with_retries(self.retries, once)
        return AsyncSandbox(self, http, sync, json_object(answer.body, "open sandbox"))

    async def health(self) -> Dict[str, Any]:
        http, _ = await self._server()
        a = await http.request("GET", "/v1/health", None, self.request_timeout)
        if a.status not in (200, 503):
            check(a, "health")
        return json_object(a.body, "health")

    async def close(self) -> None:
        """Closes the connections and stops a private server (one still
        starting, for a call that was cancelled, too)."""
        self._closed = True
        if self._http is not None:
            self._http.close()
        if self._sync is not None:
            self._sync.close()
        starting, self._starting = self._starting, None
        if starting is not None:
            try:
                started = await starting
            except Exception:
                started = None
            if started is not None and started is not self._private:
                await asyncio.get_running_loop().run_in_executor(None, started.close)
        if self._private is not None:
            self._private_http.close()
            private, self._private = self._private, None
            await asyncio.get_running_loop().run_in_executor(None, private.close)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class _Opening:
    """What AsyncClient.sandbox() returns: awaitable, or an async context
    manager that closes the sandbox at its end."""

    def __init__(self, client: AsyncClient, body: bytes) -> None:
        self._client, self._body = client, body
        self._sandbox: Optional[AsyncSandbox] = None

    def __await__(self) -> Any:
        return self._client._open(self._body).__await__()

    async def __aenter__(self) -> "AsyncSandbox":
        self._sandbox = await self._client._open(self._body)
        return self._sandbox

    async def __aexit__(self, *exc: object) -> None:
        if self._sandbox is not None:
            await self._sandbox.close()


class AsyncSandbox(SandboxState):
    """A live sandbox of an AsyncClient: await sb.run("x = 1")."""

    def __init__(self, client: AsyncClient, http: _AsyncTransport, sync: HttpTransport, info: Mapping[str, Any]) -> None:
        super().__init__(info)
        self._client, self._http, self._sync = client, http, sync

    async def run(self, code: str, *, on_stdout: Optional[Callable[[str], Any]] = None,
                  on_stderr: Optional[Callable[[str], Any]] = None, **keys: Any) -> Result:
        self._usable()
        if on_stdout is not None or on_stderr is not None:
            return await _deliver(self.run_stream(code, **keys), on_stdout, on_stderr)
        body = run_body(code, keys)
        limit = await self._client._bound(self._http, keys, self.profile)
        path = self._path("/runs")

        async def once() -> Result:
            return result_of(await self._http.request("POST", path, body, limit), "run", self.id)

        result: Result = await _with_retries(self._client.retries, once)
        return self._seen(result)

    async def run_stream(self, code: str, **keys: Any) -> AsyncIterator[StreamLine]:
        self._usable()
        body = run_body(code, keys)
        limit = await self._client._bound(self._http, keys, self.profile)
        async for e in self._http.stream(self._path("/runs"), body, limit, "run"):
            if isinstance(e, Result):
                self._seen(e)
            yield e

    async def info(self) -> Dict[str, Any]:
        self._usable()
        a = await self._http.request("GET", self._path(), None, self._client.request_timeout)
        return json_object(check(a, f"sandbox {self.id}", self.id).body, "sandbox")

    async def close(self) -> None:
        if self._closed or self._forked():
            return
        a = await self._http.request("DELETE", self._path(), None, self._client.request_timeout)
        if not self._closed_now(a.status):
            check(a, f"close sandbox {self.id}", self.id)
        self._closed = True  # only now: a close that failed can be tried again

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __del__(self) -> None:
        if getattr(self, "_closed", True):
            return
        warnings.warn(f"nsbox sandbox {self.id} was not closed; closing it now", ResourceWarning, stacklevel=2)
        self._closed = True
        self._delete_now(self._sync)  # no loop may be running here: a blocking DELETE
