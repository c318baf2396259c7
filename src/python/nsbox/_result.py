"""The result of one run, as nsbox's JSON result describes it (nsbox(1),
"THE JSON RESULT"), and its model-facing text (nsbox_result_to_text)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

from ._errors import Error

__all__ = ["FileInfo", "FileRefused", "QuotaRefusal", "Result"]


@dataclass(frozen=True)
class FileInfo:
    """A file collected from /tmp/out into the output directory."""

    name: str
    size: int
    sha256: str


@dataclass(frozen=True)
class FileRefused:
    """What /tmp/out held and was not collected, and why."""

    name: str
    reason: str


@dataclass(frozen=True)
class QuotaRefusal:
    """Which quota of the session refused a run, and when to retry."""

    quota: str
    limit: str
    retry_after_ms: int


@dataclass(frozen=True)
class Result:
    """One run: every member of the JSON result, in its order, then the
    live sandbox's four (None, or False, for a single run)."""

    exit_code: int
    signal: Optional[str]
    timed_out: bool
    oom_killed: bool
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    stdout_omitted_bytes: int
    stderr_omitted_bytes: int
    duration_ms: int
    cpu_ms: int
    memory_peak_bytes: int
    timeout_ms: int
    memory_limit_bytes: int
    limits: Mapping[str, str]
    runtime: Optional[str]
    served: str
    files: Tuple[FileInfo, ...]
    files_refused: Tuple[FileRefused, ...]
    quota_refusal: Optional[QuotaRefusal]
    egress: Optional[Mapping[str, Any]]
    value: Optional[str] = None
    sandbox_id: Optional[str] = None
    sandbox_run: Optional[int] = None
    sandbox_lost: bool = False
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def ok(self) -> bool:
        """The program ran and exited 0: not timed out, not killed, not
        refused, its sandbox not lost."""
        return (
            self.exit_code == 0
            and not self.timed_out
            and not self.oom_killed
            and self.quota_refusal is None
            and not self.sandbox_lost
        )

    @property
    def text(self) -> str:
        """The result as plain text for a model: byte for byte what
        nsbox_result_to_text (nsbox run --format text) gives."""
        return result_text(self)

    @classmethod
    def from_json(cls, data: "str | bytes | Mapping[str, Any]") -> "Result":
        """A Result from nsbox's JSON result (a string, bytes or a parsed
        object); Error when it is not one."""
        if isinstance(data, (str, bytes)):
            try:
                obj = json.loads(data)
            except ValueError as e:
                raise Error(f"not a JSON result: {e}") from None
        else:
            obj = data
        if not isinstance(obj, dict):
            raise Error("not a JSON result: not an object")
        try:
            return _from_object(obj)
        except (KeyError, TypeError, ValueError) as e:
            raise Error(f"not a JSON result: bad or missing member {e}") from None


def _int(obj: Dict[str, Any], key: str, default: Optional[int] = 0) -> int:
    v = obj.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError(key)
    return v


def _bool(obj: Dict[str, Any], key: str) -> bool:
    v = obj.get(key, False)
    if not isinstance(v, bool):
        raise TypeError(key)
    return v


def _opt_str(obj: Dict[str, Any], key: str) -> Optional[str]:
    v = obj.get(key)
    if v is not None and not isinstance(v, str):
        raise TypeError(key)
    return v


def _from_object(obj: Dict[str, Any]) -> Result:
    stdout = obj["stdout"]
    stderr = obj["stderr"]
    if not isinstance(stdout, str) or not isinstance(stderr, str):
        raise TypeError("stdout/stderr")
    limits = obj.get("limits") or {}
    if not isinstance(limits, dict):
        raise TypeError("limits")
    files = tuple(
        FileInfo(str(f["name"]), int(f["size"]), str(f["sha256"])) for f in obj.get("files") or ()
    )
    refused = tuple(FileRefused(str(f["name"]), str(f["reason"])) for f in obj.get("files_refused") or ())
    q = obj.get("quota_refusal")
    quota = (
        QuotaRefusal(str(q["quota"]), str(q["limit"]), int(q["retry_after_ms"]))
        if isinstance(q, dict)
        else None
    )
    egress = obj.get("egress")
    if egress is not None and not isinstance(egress, dict):
        raise TypeError("egress")
    run = obj.get("sandbox_run")
    if run is not None and (not isinstance(run, int) or isinstance(run, bool)):
        raise TypeError("sandbox_run")
    return Result(
        exit_code=_int(obj, "exit_code", None),
        signal=_opt_str(obj, "signal"),
        timed_out=_bool(obj, "timed_out"),
        oom_killed=_bool(obj, "oom_killed"),
        stdout=stdout,
        stderr=stderr,
        stdout_truncated=_bool(obj, "stdout_truncated"),
        stderr_truncated=_bool(obj, "stderr_truncated"),
        stdout_omitted_bytes=_int(obj, "stdout_omitted_bytes"),
        stderr_omitted_bytes=_int(obj, "stderr_omitted_bytes"),
        duration_ms=_int(obj, "duration_ms"),
        cpu_ms=_int(obj, "cpu_ms"),
        memory_peak_bytes=_int(obj, "memory_peak_bytes"),
        timeout_ms=_int(obj, "timeout_ms"),
        memory_limit_bytes=_int(obj, "memory_limit_bytes"),
        limits={str(k): str(v) for k, v in limits.items()},
        runtime=_opt_str(obj, "runtime"),
        served=str(obj.get("served", "cold")),
        files=files,
        files_refused=refused,
        quota_refusal=quota,
        egress=egress,
        value=_opt_str(obj, "value"),
        sandbox_id=_opt_str(obj, "sandbox_id"),
        sandbox_run=run,
        sandbox_lost=_bool(obj, "sandbox_lost"),
        raw=obj,
    )


# Linux's signal names as glibc's sigabbrev_np gives them (nsbox's names);
# 32 and 33 are glibc's own, SIGRTMIN is 34.
_SIGNALS = (
    "HUP INT QUIT ILL TRAP ABRT BUS FPE KILL USR1 SEGV USR2 PIPE ALRM TERM STKFLT "
    "CHLD CONT STOP TSTP TTIN TTOU URG XCPU XFSZ VTALRM PROF WINCH POLL PWR SYS"
).split()
_SIGRTMIN = 34


def _signal_number(name: str) -> int:
    if name == "SIGRTMIN":
        return _SIGRTMIN
    if name.startswith("SIGRTMIN+") and name[9:].isdigit():
        return _SIGRTMIN + int(name[9:])
    if name.startswith("SIG") and name[3:].isdigit():
        return int(name[3:])
    try:
        return _SIGNALS.index(name[3:]) + 1
    except ValueError:
        return 0


def format_size(n: int) -> str:
    """A byte count as the size keys write it (256m, 65536)."""
    for i in range(3, -1, -1):
        factor = 1 << (10 * (i + 1))
        if n > 0 and n % factor == 0:
            return f"{n // factor}{'kmgt'[i]}"
    return str(n)


def format_duration(ms: int) -> str:
    """Milliseconds as the duration keys write them (5s, 1500ms)."""
    for suffix, unit in (("h", 3600000), ("m", 60000), ("s", 1000)):
        if ms > 0 and ms % unit == 0:
            return f"{ms // unit}{suffix}"
    return f"{ms}ms"


def _printable(text: str) -> str:
    """On one line: C0 controls, DEL and C1 controls as '?'."""
    return "".join("?" if ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F else c for c in text)


def _stream(name: str, text: str) -> str:
    if not text:
        return f"--- {name} ---\n(empty)\n"
    body = text.replace("\0", "\ufffd")
    return f"--- {name} ---\n{body}" + ("" if body.endswith("\n") else "\n")


_EGRESS_REFUSALS_SHOWN = 5


def _egress(e: Mapping[str, Any]) -> str:
    connections = e.get("connections", 0)
    out = [f"egress: {connections} connection{'' if connections == 1 else 's'}, {e.get('refused', 0)} refused\n"]
    shown = 0
    for rec in e.get("log") or ():
        if not isinstance(rec, dict) or rec.get("decision") != "refused":
            continue
        reason = rec.get("reason")
        if not isinstance(reason, str):
            continue
        if shown == _EGRESS_REFUSALS_SHOWN:
            out.append("egress refused: (more)\n")
            break
        shown += 1
        out.append(f"egress refused: {_printable(reason)}\n")
    limit = e.get("limit")
    if isinstance(limit, str):
        out.append(f"egress limit reached: {_printable(limit)}\n")
    return "".join(out)


def result_text(r: Result) -> str:
    q = r.quota_refusal
    if q is not None:
        wait = q.retry_after_ms if q.retry_after_ms else 1
        if wait >= 1000:
            wait = (wait + 999) // 1000 * 1000
        return (
            f"refused: this session's quota {q.quota} ({q.limit}) is used up; retry in "
            f"{format_duration(wait)}\nthe code did not run (no sandbox was started)\n"
        )
    out = [f"exit code: {r.exit_code}\n"]
    if r.timed_out:
        out.append(f"timed out after {format_duration(r.timeout_ms)}\n" if r.timeout_ms else "timed out\n")
    elif r.oom_killed:
        m = format_size(r.memory_limit_bytes) + " " if r.memory_limit_bytes else ""
        out.append(f"killed: memory limit {m}exceeded\n")
    elif r.signal:
        out.append(f"killed by signal {_signal_number(r.signal)} ({r.signal})\n")
    if r.sandbox_lost:
        out.append("sandbox lost: its variables, files and processes are gone\n")
    if r.stdout_truncated:
        out.append(f"output truncated: {r.stdout_omitted_bytes} bytes omitted from stdout\n")
    if r.stderr_truncated:
        out.append(f"output truncated: {r.stderr_omitted_bytes} bytes omitted from stderr\n")
    for f in r.files:
        out.append(f"file: /tmp/out/{_printable(f.name)} ({f.size} bytes)\n")
    for x in r.files_refused:
        where = "" if x.name.startswith("/") else "/tmp/out/"
        out.append(f"file not collected: {where}{_printable(x.name)} ({_printable(x.reason)})\n")
    if r.egress is not None:
        out.append(_egress(r.egress))
    out.append(_stream("stdout", r.stdout))
    out.append(_stream("stderr", r.stderr))
    if r.value is not None:
        out.append(_stream("value", r.value))
    return "".join(out)
