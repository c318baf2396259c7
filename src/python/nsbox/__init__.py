"""nsbox: run untrusted Python in a fresh, single-use Linux sandbox, locally
through the nsbox CLI or on an nsbox serve, with the same Result either way.

    import nsbox
    result = nsbox.Client().run("print(6 * 7)")
    assert result.stdout == "42\\n"
"""

from ._aio import AsyncClient, AsyncSandbox
from ._client import Client, Sandbox
from ._errors import (
    ConnectionError,
    Error,
    QuotaExceeded,
    SandboxLost,
    ServerBusy,
    Unauthorized,
    UsageError,
)
from ._http import Output
from ._result import FileInfo, FileRefused, QuotaRefusal, Result
from ._tool import tool_call, tool_schema

__version__ = "0.1.0"

__all__ = [
    "AsyncClient",
    "AsyncSandbox",
    "Client",
    "ConnectionError",
    "Error",
    "FileInfo",
    "FileRefused",
    "Output",
    "QuotaExceeded",
    "QuotaRefusal",
    "Result",
    "Sandbox",
    "SandboxLost",
    "ServerBusy",
    "Unauthorized",
    "UsageError",
    "__version__",
    "tool_call",
    "tool_schema",
]
