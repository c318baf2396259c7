"""The local transport: each run through the installed nsbox CLI
(`nsbox run --json`), and, for streamed runs and live sandboxes, a private
`nsbox serve` on a unix socket in a directory of the client's own."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import weakref
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Set, Tuple, Union

from ._errors import ConnectionError, Error, QuotaExceeded, UsageError
from ._http import HttpTransport, request_timeout
from ._result import Result

__all__ = ["LocalCli", "PrivateServer", "InputValue"]

InputValue = Union[str, "os.PathLike[str]", bytes]

# Options of `nsbox run` that are not configuration keys.
_COMMAND_OPTIONS = frozenset(
    {"config", "json", "format", "server", "profile", "token-file", "input", "run-timeout", "run-max-output-bytes"}
)
# A run's own limits: they may only lower the configured ones, as on a server.
_PER_RUN = {"timeout": "run-timeout", "max-output-bytes": "run-max-output-bytes"}
_HELP_FLAG = re.compile(r"^  --([a-z0-9-]+)( VALUE)?(\s|$)")
_known_keys: Dict[str, Tuple[FrozenSet[str], FrozenSet[str]]] = {}


def _keys_of(nsbox: str) -> Tuple[FrozenSet[str], FrozenSet[str]]:
    """The configuration keys the CLI knows (from `nsbox run --help`): the
    ones that take a value, and the boolean ones."""
    if nsbox not in _known_keys:
        try:
            p = subprocess.run([nsbox, "run", "--help"], stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ConnectionError(f"could not run {nsbox!r}: {e}") from None
        valued: Set[str] = set()
        flags: Set[str] = set()
        for line in (p.stdout + p.stderr).decode("utf-8", "replace").splitlines():
            m = _HELP_FLAG.match(line)
            if m and m.group(1) not in _COMMAND_OPTIONS:
                (valued if m.group(2) else flags).add(m.group(1))
        if not valued:
            raise Error(f"{nsbox!r} listed no configuration keys: is it nsbox?")
        _known_keys[nsbox] = (frozenset(valued), frozenset(flags))
    return _known_keys[nsbox]


def find_nsbox(nsbox: Optional[str]) -> str:
    name = nsbox or os.environ.get("NSBOX_BIN") or "nsbox"
    path = shutil.which(name) if os.sep not in name else name
    if not path or not os.access(path, os.X_OK):
        raise ConnectionError(f"the nsbox CLI {name!r} is not installed or not executable (see README.md)")
    return os.path.abspath(path)


def _nsbox_message(stderr: bytes) -> str:
    lines = [line for line in stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("nsbox"):
            return line
    return lines[-1] if lines else "no message"




class LocalCli:
    """The configuration of local runs, as the CLI's flags."""

    def __init__(self, nsbox: Optional[str], config: Optional[str], keys: Mapping[str, Any]) -> None:
        self.nsbox = find_nsbox(nsbox)
        self.valued, self.booleans = _keys_of(self.nsbox)
        config = config if config is not None else os.environ.get("NSBOX_CONFIG") or None
        self.base: List[str] = ["--config", config] if config else []
        self.base += self.flags(keys)
        t = keys.get("timeout")
        self.timeout_keys: Dict[str, Any] = {"timeout": t} if t is not None else {}

    def flags(self, keys: Mapping[str, Any], per_run: bool = False) -> List[str]:
        """The flags of keys: the client's configuration, or (per_run) a
        run's, whose timeout and output cap may only lower it."""
        out: List[str] = []
        for name, v in keys.items():
            key = name.replace("_", "-")
            if v is None:
                continue
            if per_run and key in _PER_RUN:
                out += [f"--{_PER_RUN[key]}", str(v)]
                continue
            if key in self.booleans:
                if not isinstance(v, bool):
                    raise UsageError(f"invalid value for '{key}': {v!r} (expected True or False)")
                if v:
                    out.append(f"--{key}")
                continue
            if key not in self.valued:
                raise UsageError(f"unknown configuration key '{key}' (keyword argument {name!r}; see nsbox run --help)")
            values = v if isinstance(v, (list, tuple)) else [v]
            for one in values:
                if isinstance(one, bool):
                    one = "true" if one else "false"
                elif not isinstance(one, (str, int, float)):
                    raise UsageError(f"invalid value for '{key}': {one!r}")
                out += [f"--{key}", str(one)]
        return out

    def prepare(
        self,
        code: str,
        keys: Mapping[str, Any],
        inputs: Optional[Mapping[str, InputValue]],
        output_dir: Optional["str | os.PathLike[str]"],
        default_timeout: float,
    ) -> Tuple[List[str], float, Optional[str]]:
        """The argv of one run, its client-side time bound, and a scratch
        directory of inputs given as bytes (the caller removes it)."""
        if not isinstance(code, str):
            raise UsageError("code must be a str")
        argv = [self.nsbox, "run", "--json", *self.base, *self.flags(keys, per_run=True)]
        scratch: Optional[str] = None
        try:
            for i, (name, value) in enumerate((inputs or {}).items()):
                if not isinstance(name, str) or not name:
                    raise UsageError(f"input name {name!r}: expected a non-empty str")
                if isinstance(value, bytes):
                    if scratch is None:
                        scratch = tempfile.mkdtemp(prefix="nsbox-inputs-")
                    path = os.path.join(scratch, str(i))
                    with open(path, "xb") as f:
                        f.write(value)
                else:
                    path = os.fspath(value)
                argv += ["--input", f"{path}:{name}"]
        except BaseException:
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
            raise
        if output_dir is not None:
            argv += ["--output-dir", os.fspath(output_dir)]
        limit = request_timeout(keys, request_timeout(self.timeout_keys, default_timeout))
        return argv, limit, scratch

    def run(
        self,
        code: str,
        keys: Mapping[str, Any],
        inputs: Optional[Mapping[str, InputValue]],
        output_dir: Optional["str | os.PathLike[str]"],
        default_timeout: float,
    ) -> Result:
        argv, limit, scratch = self.prepare(code, keys, inputs, output_dir, default_timeout)
        try:
            try:
                p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            except OSError as e:
                raise ConnectionError(f"could not run {self.nsbox!r}: {e.strerror}") from None
            try:
                out, err = p.communicate(code.encode("utf-8", "surrogateescape"), timeout=limit)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                raise ConnectionError(f"nsbox run gave no result within {limit:.0f} s") from None
            except BaseException:
                p.kill()
                p.wait()
                raise
        finally:
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
        return cli_result(p.returncode, out, err)


def cli_result(status: int, out: bytes, err: bytes) -> Result:
    """The Result of `nsbox run --json`: its JSON whatever the status (a
    program may exit 125 itself), else the CLI's own error."""
    obj: Any = None
    if out.strip():
        try:
            obj = json.loads(out)
        except ValueError:
            obj = None
    if isinstance(obj, dict) and isinstance(obj.get("error"), str) and "exit_code" not in obj:
        message = f"nsbox: {obj['error']}"
        # input: refused before any sandbox (as a server's 400); run: the
        # sandbox could not be set up or run (a server's 500).
        raise UsageError(message) if obj.get("stage") == "input" else Error(message)
    if isinstance(obj, dict) and "exit_code" in obj:
        result = Result.from_json(obj)
        q = result.quota_refusal
        if q is not None:
            raise QuotaExceeded(
                f"this session's quota {q.quota} ({q.limit}) is used up", q.retry_after_ms / 1000, result
            )
        return result
    if status < 0:
        raise Error(f"nsbox run was killed by signal {-status}")
    raise Error(_nsbox_message(err))


# The watcher starts the server as its own child (so no moment exists when
# the server runs unwatched), tells its pid, and stops it when told to or
# when its stdin ends: the owner closed it, or died however it died. The
# server is signalled only before the watcher's wait has reaped it (so
# never a reused pid); past 30 s the watcher kills itself, and setpriv's
# death signal kills the server with it.
_WATCHER = r"""
dir=$1; shift
setpriv --pdeathsig KILL -- "$@" </dev/null >/dev/null 2>"$dir/serve.log" &
pid=$!
echo "$pid"
exec >/dev/null
read _line || :
kill -TERM "$pid" 2>/dev/null
( sleep 30; kill -KILL $$ ) &
late=$!
wait "$pid"
kill "$late" 2>/dev/null
rm -rf -- "$dir"
"""

_live: "weakref.WeakSet[PrivateServer]" = weakref.WeakSet()


def _stop(owner: int, watcher: "subprocess.Popen[bytes]", directory: str) -> None:
    if os.getpid() != owner:  # a child of fork: the server is its parent's
        return
    if watcher.stdin is not None:
        try:
            watcher.stdin.write(b"stop\n")
            watcher.stdin.close()
        except OSError:
            pass
    try:
        watcher.wait(timeout=40)
    except subprocess.TimeoutExpired:
        watcher.kill()  # the server gets its SIGTERM from setpriv
        watcher.wait()
    shutil.rmtree(directory, ignore_errors=True)


def _zombie_or_gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return True
    return stat[stat.rfind(b")") + 2 :][:1] in (b"Z", b"X")


class PrivateServer:
    """An `nsbox serve` of the client's own, configured as its local runs,
    on a unix socket in a private directory. A watcher shell starts it and
    holds the other end of a pipe: when this process ends, however it
    ends, the watcher stops the server and removes the directory."""

    def __init__(self, cli: LocalCli, ready_timeout: float = 60.0) -> None:
        self.directory = tempfile.mkdtemp(prefix="nsbox-py-")
        self.socket = os.path.join(self.directory, "nsbox.sock")
        self._owner = os.getpid()
        argv = [cli.nsbox, "serve", "--listen", f"unix:{self.socket}", "--pool-size", "1", *cli.base]
        try:
            self._watcher = subprocess.Popen(
                ["/bin/sh", "-c", _WATCHER, "sh", self.directory, *argv],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as e:
            shutil.rmtree(self.directory, ignore_errors=True)
            raise ConnectionError(f"could not start nsbox serve: {e.strerror}") from None
        self._finalizer = weakref.finalize(self, _stop, self._owner, self._watcher, self.directory)
        assert self._watcher.stdout is not None
        line = self._watcher.stdout.readline()
        self._watcher.stdout.close()
        if not line.strip().isdigit():
            self.close()
            raise Error("the private nsbox serve's watcher did not start it")
        self.pid = int(line)
        _live.add(self)
        self.transport = HttpTransport(f"unix:{self.socket}")
        deadline = time.monotonic() + ready_timeout
        while True:
            if not self.alive():
                message = self._log(os.path.join(self.directory, "serve.log"))
                self.close()
                raise UsageError(message) if message.startswith("nsbox") else Error(
                    f"nsbox serve exited: {message}"
                )
            if os.path.exists(self.socket):
                try:
                    if self.transport.request("GET", "/v1/health", None, 5.0).status == 200:
                        return
                except ConnectionError:
                    pass
            if time.monotonic() > deadline:
                self.close()
                raise ConnectionError(f"the private nsbox serve was not ready within {ready_timeout:.0f} s")
            time.sleep(0.01)

    @staticmethod
    def _log(path: str) -> str:
        try:
            with open(path, "rb") as f:
                return _nsbox_message(f.read()).replace("nsbox serve: ", "nsbox: ", 1)
        except OSError:
            return "no message"

    def alive(self) -> bool:
        """Serving this process: not exited, not a parent's (after fork)."""
        return os.getpid() == self._owner and self._watcher.poll() is None and not _zombie_or_gone(self.pid)

    def close(self) -> None:
        if os.getpid() == self._owner and hasattr(self, "transport"):
            self.transport.close()
        self._finalizer()

    def _forget(self) -> None:
        """In a child of fork: let go of the parent's pipe end, so that the
        parent's exit still stops its server."""
        if self._watcher.stdin is not None:
            try:
                self._watcher.stdin.close()  # this process's copy only
            except OSError:
                pass
        self._finalizer.detach()


def _after_fork_in_child() -> None:
    for server in list(_live):
        server._forget()


os.register_at_fork(after_in_child=_after_fork_in_child)
