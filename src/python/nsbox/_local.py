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
_COMMAND_OPTIONS = frozenset({"config", "json", "format", "server", "profile", "token-file", "input"})
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


def _failure(message: str) -> Error:
    """The CLI refused before any sandbox (a bad key, value, file or
    rootfs): UsageError; a sandbox that could not be set up: Error."""
    if "sandbox setup" in message or "create sandbox" in message or "out of memory" in message:
        return Error(message)
    return UsageError(message)


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

    def flags(self, keys: Mapping[str, Any]) -> List[str]:
        out: List[str] = []
        for name, v in keys.items():
            key = name.replace("_", "-")
            if v is None:
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
        argv = [self.nsbox, "run", "--json", *self.base, *self.flags(keys)]
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
    raise _failure(_nsbox_message(err))


_WATCHER = r"""
read _ignored || :
kill -TERM "$1" 2>/dev/null
i=0
while kill -0 "$1" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
kill -KILL "$1" 2>/dev/null
rm -rf -- "$2"
"""


def _stop(server: "subprocess.Popen[bytes]", watcher: "subprocess.Popen[bytes]", directory: str) -> None:
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    if watcher.stdin is not None:
        try:
            watcher.stdin.close()
        except OSError:
            pass
    try:
        watcher.wait(timeout=10)
    except subprocess.TimeoutExpired:
        watcher.kill()
        watcher.wait()
    shutil.rmtree(directory, ignore_errors=True)


class PrivateServer:
    """An `nsbox serve` of the client's own, configured as its local runs,
    on a unix socket in a private directory. A watcher shell holds the
    other end of a pipe: when this process ends, however it ends, the
    watcher stops the server and removes the directory."""

    def __init__(self, cli: LocalCli, ready_timeout: float = 60.0) -> None:
        self.directory = tempfile.mkdtemp(prefix="nsbox-py-")
        self.socket = os.path.join(self.directory, "nsbox.sock")
        log_path = os.path.join(self.directory, "serve.log")
        argv = [cli.nsbox, "serve", "--listen", f"unix:{self.socket}", "--pool-size", "1", *cli.base]
        with open(log_path, "wb") as log:
            try:
                self._server = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True
                )
            except OSError as e:
                shutil.rmtree(self.directory, ignore_errors=True)
                raise ConnectionError(f"could not start nsbox serve: {e.strerror}") from None
        self._watcher = subprocess.Popen(
            ["/bin/sh", "-c", _WATCHER, "sh", str(self._server.pid), self.directory],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._finalizer = weakref.finalize(self, _stop, self._server, self._watcher, self.directory)
        self.transport = HttpTransport(f"unix:{self.socket}")
        deadline = time.monotonic() + ready_timeout
        while True:
            if self._server.poll() is not None:
                message = self._log(log_path)
                self.close()
                raise _failure(message) if message.startswith("nsbox") else Error(
                    f"nsbox serve exited ({self._server.returncode}): {message}"
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
        return self._server.poll() is None

    def close(self) -> None:
        self.transport.close()
        self._finalizer()
