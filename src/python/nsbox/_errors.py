"""The one exception hierarchy of the nsbox package.

A program's own failure (a non-zero exit, a timeout, a memory kill) is a
normal Result, never an exception: these say that nsbox could not run the
code, or refused to.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from ._result import Result


class Error(Exception):
    """Anything nsbox itself could not do: the base of every nsbox error."""


class UsageError(Error, ValueError):
    """A bad option, key, value or request, refused before anything ran
    (the CLI's exit 125 for a bad flag, a server's 400)."""


class Unauthorized(Error):
    """The server refused the bearer token (401): a missing or wrong one."""


class QuotaExceeded(Error):
    """A quota of the run's session refused it: nothing ran.

    retry_after is in seconds; result is the refusal's Result (its
    quota_refusal names the quota)."""

    def __init__(self, message: str, retry_after: float, result: "Result") -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.result = result


class ServerBusy(Error):
    """The server is at capacity or draining (503): try again after
    retry_after seconds (the server's Retry-After)."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ConnectionError(Error, builtins.ConnectionError):
    """The server could not be reached, went away mid-request, or did not
    answer within the client's timeout; also a private server or CLI that
    could not be started."""


class SandboxLost(Error):
    """The live sandbox is gone (it ended, was deleted, or its server
    lost it); reason says why when the server said."""

    def __init__(self, message: str, reason: Optional[str] = None) -> None:
        super().__init__(message)
        self.reason = reason
