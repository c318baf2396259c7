"""The synchronous client: single runs, streamed runs and live sandboxes,
locally through the nsbox CLI or on an nsbox serve."""

from __future__ import annotations

import os
import re
import threading
import warnings
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Union

from ._errors import Error, SandboxLost, UsageError
from ._http import (
    LEARN_TIMEOUT,
    LONGEST_RUN,
    MAX_ANSWER_BYTES,
    REQUEST_MARGIN,
    Bounds,
    HttpTransport,
    StreamLine,
    read_token,
    result_of,
    run_body,
    sandbox_body,
    check,
    json_object,
    with_retries,
)
from ._local import InputValue, LocalCli, PrivateServer
from ._result import Result

__all__ = ["Client", "Sandbox"]

OutputCallback = Callable[[str], None]


def _deliver(
    events: Iterator[StreamLine], on_stdout: Optional[OutputCallback], on_stderr: Optional[OutputCallback]
) -> Result:
    for e in events:
        if isinstance(e, Result):
            return e
        cb = on_stdout if e.stream == "stdout" else on_stderr
        if cb is not None:
            cb(e.data)
    raise Error("the stream ended without a result")


def setup(
    server: Optional[str],
    token: Optional[str],
    token_file: Optional[str],
    retries: int,
    nsbox: Optional[str],
    config: Optional[str],
    keys: Mapping[str, Any],
) -> "tuple[Optional[LocalCli], Optional[str]]":
    """The local CLI's configuration (no server), or the server's token:
    what Client and AsyncClient check alike."""
    if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
        raise UsageError("retries must be an integer of 0 or more")
    if server is None:
        if token is not None or token_file is not None:
            raise UsageError("a token is for a server: Client(server, token=...)")
        return LocalCli(nsbox, config, keys), None
    if keys or config is not None or nsbox is not None:
        names = ", ".join(sorted(keys)) or ("config" if config is not None else "nsbox")
        raise UsageError(f"{names}: a server's configuration is its profiles'; give per-run keys to run()")
    return None, read_token(token, token_file)


def local_bound(bounds: Bounds) -> float:
    """A local run's bound when it gives no timeout: the CLI enforces the
    configured one, at most nsbox's longest."""
    return bounds.explicit if bounds.explicit is not None else LONGEST_RUN + REQUEST_MARGIN


class Client:
    """Runs code in nsbox sandboxes.

    Client() runs locally through the installed nsbox CLI; its keyword
    arguments are configuration keys with underscores (rootfs=DIR,
    memory="128m"), and config= a YAML file (default $NSBOX_CONFIG).
    Client("unix:/run/nsbox/nsbox.sock") or Client("http://HOST:PORT",
    token=... or token_file=...) talks to an nsbox serve, whose profiles
    hold the configuration. retries= retries a 503 or 429 that many times,
    after the server's Retry-After; request_timeout= bounds a request whose
    run gives no timeout (one that does gets its timeout and 30 s; without
    either, the profile's timeout and 30 s). https:// checks the server's
    certificate against the system's trust or cafile=; a token is never
    sent in clear beyond loopback unless insecure=True. An answer larger
    than max_answer_bytes is an Error."""

    def __init__(
        self,
        server: Optional[str] = None,
        *,
        token: Optional[str] = None,
        token_file: Optional[str] = None,
        retries: int = 0,
        request_timeout: Optional[float] = None,
        cafile: Optional[str] = None,
        insecure: bool = False,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
        nsbox: Optional[str] = None,
        config: Optional[str] = None,
        **keys: Any,
    ) -> None:
        self._cli, t = setup(server, token, token_file, retries, nsbox, config, keys)
        self.retries = retries
        self._bounds = Bounds(request_timeout)
        self._lock = threading.Lock()
        self._private: Optional[PrivateServer] = None
        self._http: Optional[HttpTransport] = None
        if server is not None:
            self._http = HttpTransport(
                server, t, max_answer_bytes=max_answer_bytes, cafile=cafile, insecure=insecure
            )

    @property
    def local(self) -> bool:
        return self._cli is not None

    @property
    def request_timeout(self) -> float:
        """The bound of a request that is not a run."""
        return self._bounds.plain

    def _bound(self, http: HttpTransport, keys: Mapping[str, Any], profile: Optional[str]) -> float:
        if self._bounds.known(keys, profile) is None and self._bounds.wanted(profile):
            try:
                a = http.request("GET", "/v1/health", None, LEARN_TIMEOUT)
                self._bounds.learn(json_object(a.body, "health"))
            except Error:
                pass
        return self._bounds.run(keys, profile)

    def _server(self) -> HttpTransport:
        if self._http is not None:
            return self._http
        assert self._cli is not None
        with self._lock:
            if self._private is None or not self._private.alive():
                if self._private is not None:
                    self._private.close()
                self._private = PrivateServer(self._cli)
            return self._private.transport

    def run(
        self,
        code: str,
        *,
        inputs: Optional[Mapping[str, InputValue]] = None,
        output_dir: Optional["str | os.PathLike[str]"] = None,
        on_stdout: Optional[OutputCallback] = None,
        on_stderr: Optional[OutputCallback] = None,
        profile: Optional[str] = None,
        **keys: Any,
    ) -> Result:
        """Runs code in a fresh, single-use sandbox. keys are per-run
        configuration keys (timeout="2s", max_output_bytes=4096, session=...;
        locally, any key). on_stdout/on_stderr get the output as it comes."""
        if on_stdout is not None or on_stderr is not None:
            if inputs or output_dir is not None:
                raise UsageError("a streamed run takes no inputs or output_dir")
            return _deliver(self.run_stream(code, profile=profile, **keys), on_stdout, on_stderr)
        if self._cli is not None:
            if profile is not None:
                raise UsageError("profile names a server's profile; a local client has none")
            cli = self._cli
            bound = local_bound(self._bounds)
            return with_retries(self.retries, lambda: cli.run(code, keys, inputs, output_dir, bound))
        if inputs or output_dir is not None:
            raise UsageError("inputs and output_dir name this host's files: a server takes neither")
        http = self._server()
        body = run_body(code, dict(keys, profile=profile))
        limit = self._bound(http, keys, profile)
        return with_retries(
            self.retries, lambda: result_of(http.request("POST", "/v1/runs", body, limit), "run")
        )

    def run_stream(self, code: str, *, profile: Optional[str] = None, **keys: Any) -> Iterator[StreamLine]:
        """Runs code and yields its output as it comes (Output), then its
        Result. Leaving the loop early kills the run."""
        if self._cli is not None and profile is not None:
            raise UsageError("profile names a server's profile; a local client has none")
        body = run_body(code, dict(keys, profile=profile))
        http = self._server()
        return http.stream("/v1/runs", body, self._bound(http, keys, profile), "run")

    def sandbox(
        self,
        *,
        profile: Optional[str] = None,
        session: Optional[str] = None,
        idle_timeout: Union[str, int, float, None] = None,
        max_lifetime: Union[str, int, float, None] = None,
        max_runs: Optional[int] = None,
    ) -> "Sandbox":
        """Opens a live sandbox: one interpreter whose variables, imports,
        files and processes survive between its runs. Close it (or use it
        in a with block)."""
        http = self._server()
        body = sandbox_body(
            profile, session, {"idle_timeout": idle_timeout, "max_lifetime": max_lifetime, "max_runs": max_runs}
        )
        answer = with_retries(
            self.retries,
            lambda: check(http.request("POST", "/v1/sandboxes", body, self.request_timeout), "open sandbox"),
        )
        return Sandbox(self, http, json_object(answer.body, "open sandbox"))

    def health(self) -> Dict[str, Any]:
        """The server's /v1/health (locally: the private server's)."""
        http = self._server()
        a = http.request("GET", "/v1/health", None, self.request_timeout)
        if a.status not in (200, 503):
            check(a, "health")
        return json_object(a.body, "health")

    def close(self) -> None:
        """Closes the connections, and stops a private server (its live
        sandboxes end with it)."""
        if self._http is not None:
            self._http.close()
        with self._lock:
            if self._private is not None:
                self._private.close()
                self._private = None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SandboxState:
    """What a live sandbox's client knows of it, sync or async: its id,
    profile and expiry as opened, and whether it was closed or lost."""

    def __init__(self, info: Mapping[str, Any]) -> None:
        sid = info.get("id")
        # NODE.HEX from a server (the node that holds it), HEX locally.
        if not isinstance(sid, str) or not re.fullmatch(r"(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)?[0-9a-f]{32}", sid):
            raise Error("open sandbox: the server's answer has no sandbox id (NODE.HEX)")
        self.id: str = sid
        self.profile: Optional[str] = info.get("profile") if isinstance(info.get("profile"), str) else None
        self.expires_at: Optional[str] = info.get("expires_at") if isinstance(info.get("expires_at"), str) else None
        self._closed = False
        self._lost: Optional[str] = None
        self._owner = os.getpid()

    def _forked(self) -> bool:
        """In a child of fork, the sandbox is still its parent's: closing
        it here only lets go of it."""
        if os.getpid() == self._owner:
            return False
        self._closed = True
        return True

    @property
    def closed(self) -> bool:
        return self._closed

    def _path(self, tail: str = "") -> str:
        return f"/v1/sandboxes/{self.id}{tail}"

    def _usable(self) -> None:
        if self._closed:
            raise SandboxLost(f"sandbox {self.id}: closed", "closed")
        if self._lost is not None:
            raise SandboxLost(f"sandbox {self.id}: {self._lost}", self._lost)

    def _seen(self, r: Result) -> Result:
        if r.sandbox_lost:
            self._lost = f"its state was lost in run {r.sandbox_run}"
        return r

    def _closed_now(self, status: int) -> bool:
        """After a DELETE: gone (204), or gone already (404, 410)."""
        return status in (204, 404, 410)

    def _delete_now(self, http: HttpTransport) -> None:
        """A finalizer's close: on a connection of its own (it may run in
        the middle of another exchange of this thread), errors dropped."""
        if self._forked():
            return
        try:
            http.request("DELETE", self._path(), None, 5.0, fresh=True)
        except Error:
            pass


class Sandbox(SandboxState):
    """A live sandbox of one client: sb.run("x = 1"); sb.run("x + 1").value
    == "2". Closed by close(), at the end of a with block, or (with a
    ResourceWarning) when garbage-collected."""

    def __init__(self, client: Client, http: HttpTransport, info: Mapping[str, Any]) -> None:
        super().__init__(info)
        self._client = client
        self._http = http

    def run(
        self,
        code: str,
        *,
        on_stdout: Optional[OutputCallback] = None,
        on_stderr: Optional[OutputCallback] = None,
        **keys: Any,
    ) -> Result:
        """Runs code in the sandbox, in the same __main__ as its earlier
        runs. value is the repr of a last expression (None otherwise)."""
        self._usable()
        if on_stdout is not None or on_stderr is not None:
            return _deliver(self.run_stream(code, **keys), on_stdout, on_stderr)
        body = run_body(code, keys)
        c = self._client
        limit = c._bound(self._http, keys, self.profile)
        r = with_retries(
            c.retries,
            lambda: result_of(self._http.request("POST", self._path("/runs"), body, limit), "run", self.id),
        )
        return self._seen(r)

    def run_stream(self, code: str, **keys: Any) -> Iterator[StreamLine]:
        """As Client.run_stream, in this sandbox."""
        self._usable()
        body = run_body(code, keys)
        limit = self._client._bound(self._http, keys, self.profile)
        for e in self._http.stream(self._path("/runs"), body, limit, "run"):
            if isinstance(e, Result):
                self._seen(e)
            yield e

    def info(self) -> Dict[str, Any]:
        """Its state as the server has it: runs, age_ms, idle_ms, busy,
        warm, memory_bytes, expires_at."""
        self._usable()
        a = self._http.request("GET", self._path(), None, self._client.request_timeout)
        return json_object(check(a, f"sandbox {self.id}", self.id).body, "sandbox")

    def close(self) -> None:
        """Destroys the sandbox: every process, file and cgroup of it.
        Closing twice, or a sandbox that already ended, is not an error."""
        if self._closed or self._forked():
            return
        a = self._http.request("DELETE", self._path(), None, self._client.request_timeout)
        if not self._closed_now(a.status):
            check(a, f"close sandbox {self.id}", self.id)
        self._closed = True  # only now: a close that failed can be tried again

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_closed", True):
            return
        warnings.warn(f"nsbox sandbox {self.id} was not closed; closing it now", ResourceWarning, stacklevel=2)
        self._closed = True
        self._delete_now(self._http)
