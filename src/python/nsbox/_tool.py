"""The run_python tool, for hosts that call models with function calling:
its definition (the one `nsbox mcp` declares) and a call's model-facing
text."""

from __future__ import annotations

import base64
import binascii
import copy
import math
import os
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Union

from ._errors import QuotaExceeded, UsageError

if TYPE_CHECKING:
    from ._client import Client, Sandbox

__all__ = ["tool_call", "tool_schema"]

_SINGLE = (
    "Runs Python 3 code in a fresh, single-use, isolated sandbox and returns its exit "
    "code, stdout and stderr (long output keeps its head and tail). Nothing persists "
    "between calls. The sandbox has a read-only root, a small writable /tmp, limited "
    "memory and CPU time, and no network unless the server allows it."
)
_LIVE = (
    "Runs Python 3 code in an isolated sandbox kept for this session and returns its "
    "exit code, stdout, stderr and the value of its last expression, as a Python REPL "
    "shows it (long output keeps its head and tail). State persists between calls: "
    "variables, functions, imports, the working directory and files in /tmp from "
    "earlier calls are still there. Call reset to start over in a fresh sandbox. The "
    "sandbox has a read-only root, a small writable /tmp, limited memory and CPU time, "
    "and no network unless the server allows it."
)
_FILES_SINGLE = (
    "input files, each {name, content (base64)}, read-only in the sandbox as "
    "/mnt/in/NAME; files the program leaves in /tmp/out are returned (images as images)"
)
_FILES_LIVE = (
    "input files, each {name, content (base64)}, copied into the sandbox as "
    "/tmp/in/NAME (replacing a file of that name); the files the program leaves "
    "in /tmp/out are returned after the call (images as images) and removed from it"
)


def tool_schema(stateful: bool = False) -> Dict[str, Any]:
    """The run_python tool's definition as `nsbox mcp` declares it (its
    mcp-state: per-session one when stateful): name, title, description,
    inputSchema (a JSON schema) and annotations. A new dict each call."""
    return copy.deepcopy(
        {
            "name": "run_python",
            "title": "Run Python",
            "description": _LIVE if stateful else _SINGLE,
            "inputSchema": {
                "type": "object",
                "properties": {
                    "code": {
                        "type": "string",
                        "description": "Python 3 source, run as `python -` (the program reads it from stdin)",
                    },
                    "timeout": {
                        "type": "number",
                        "exclusiveMinimum": 0,
                        "description": "seconds the program may run; capped at the server's configured timeout",
                    },
                    "files": {
                        "type": "array",
                        "maxItems": 64,
                        "items": {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string"},
                                "content": {"type": "string", "contentEncoding": "base64"},
                            },
                            "required": ["name", "content"],
                        },
                        "description": _FILES_LIVE if stateful else _FILES_SINGLE,
                    },
                },
                "required": ["code"],
                "additionalProperties": False,
            },
            "annotations": {
                "readOnlyHint": False,
                "destructiveHint": False,
                "idempotentHint": False,
                "openWorldHint": False,
            },
        }
    )


def _check(arguments: Mapping[str, Any]) -> Union[str, Dict[str, Any]]:
    """The run's keyword arguments, or why the call is refused (in the
    words nsbox mcp uses)."""
    if not isinstance(arguments, Mapping):
        return "the arguments must be an object"
    for key in arguments:
        if key not in ("code", "timeout", "files"):
            return f"unknown argument '{str(key)[:64]}' (known: code, timeout, files)"
    if "code" not in arguments:
        return "missing required argument 'code' (the Python source to run)"
    code = arguments["code"]
    if not isinstance(code, str):
        return "argument 'code' must be a string"
    out: Dict[str, Any] = {"code": code}
    if "timeout" in arguments:
        t = arguments["timeout"]
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not t > 0 or not math.isfinite(t):
            return "argument 'timeout' must be a positive number of seconds"
        t = min(t, 86400)  # nsbox's most; the client's own limit still applies
        out["timeout"] = f"{max(1, int(t * 1000 + 0.5))}ms"
    files = arguments.get("files")
    if files is not None:
        if not isinstance(files, list) or len(files) > 64:
            return "argument 'files' must be an array of at most 64 {name, content} objects"
        inputs: Dict[str, bytes] = {}
        for i, f in enumerate(files):
            if not isinstance(f, dict) or not isinstance(f.get("name"), str) or not isinstance(f.get("content"), str):
                return f"argument 'files': item {i} must be {{name, content}} strings"
            name = f["name"]
            if not name or name in (".", "..") or any(c in name for c in "/:") or any(
                ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or 0xD800 <= ord(c) <= 0xDFFF for c in name
            ):
                return f"argument 'files': item {i}: a bad name (no /, :, control characters, . or ..)"
            try:
                inputs[name] = base64.b64decode(f["content"], validate=True)
            except (binascii.Error, ValueError):
                return f"argument 'files': item {i}: content is not base64"
        if inputs:
            out["inputs"] = inputs
    return out


def tool_call(
    target: "Union[Client, Sandbox]",
    arguments: Mapping[str, Any],
    *,
    output_dir: Optional["str | os.PathLike[str]"] = None,
) -> str:
    """Runs one run_python call (its arguments as the model gave them) with
    a Client, or in a live Sandbox, and returns the text the model reads:
    the result's text, the quota's refusal, or why the arguments are
    refused. A failure of nsbox itself (no server, ...) raises."""
    from ._client import Sandbox

    checked = _check(arguments)
    if isinstance(checked, str):
        return checked
    code = checked.pop("code")
    asked = arguments.get("timeout")
    if isinstance(target, Sandbox):
        if "inputs" in checked:
            return "argument 'files': this sandbox takes no files; run without files"
    elif "inputs" in checked and not target.local:
        return "argument 'files': this client's server takes no files; run without files"

    def run(keys: Dict[str, Any]) -> str:
        if isinstance(target, Sandbox):
            return target.run(code, **keys).text
        return target.run(code, output_dir=output_dir, **keys).text

    try:
        try:
            return run(checked)
        except UsageError as e:
            # A model's timeout above the configured one (the server's or
            # the CLI's refusal): capped, as nsbox mcp caps it.
            if "timeout" not in checked or "may only shorten it" not in str(e):
                raise
        del checked["timeout"]
        return f"timeout: capped at the configured maximum ({asked:g} s asked for)\n" + run(checked)
    except QuotaExceeded as e:
        return e.result.text
    except UsageError as e:
        return f"the call was refused: {e}"
