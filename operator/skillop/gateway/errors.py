"""What can go wrong between the gateway and an upstream, as one hierarchy.

Every failure is an ``UpstreamError`` with two texts, both safe to show:
``str(exc)``, the agent's (it may quote the upstream, redacted and bounded),
and ``audit``, the gateway's own words only (the audit line never carries what
an upstream wrote). Its kinds:

- ``UpstreamUnavailable``: no usable connection (cannot connect, no listing);
  ``ConnectTimedOut`` when none came within the connect timeout.
- ``CallFailed``: a forwarded call got no usable answer; ``ConnectionLost`` (the
  connection dropped or the answer was unreadable: the client drops the
  connection), ``RpcError`` (the upstream's JSON-RPC error), ``BadAnswer`` (an
  answer that is no tool result, off its output schema, or asking for input).
- ``SessionLost``: the upstream forgot the session (HTTP 404): nothing ran, the
  caller may connect again and retry.

The library's exceptions (the SDK's, httpx's, anyio's, the OS's and the
gateway's own HTTP client's) become these at the transport seam only, in
``mapped`` (a call) and ``explain`` (a connection), as httpx maps the
exceptions of the layers under it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Final

import anyio
import httpx2
import mcp_types as types
from mcp.client.extension import UnexpectedClaimedResult
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from skillop.gateway.secrets import SecretMissing
from skillop.sources.mcp_discovery import ErrorReason
from skillop.sources.mcp_session import Unfenced, classify, first
from skillop.sources.mcp_transport import Wire
from skillop.sources.redaction import Redactor


class UpstreamError(Exception):
    """A failure with two safe texts: ``str`` for the agent and ``audit``, the
    gateway's own words alone, for the audit line."""

    def __init__(self, message: str = "", *, audit: str | None = None) -> None:
        super().__init__(message)
        self.audit = audit if audit is not None else message


class UpstreamUnavailable(UpstreamError):
    """The upstream cannot be reached or answered badly."""


class ConnectTimedOut(UpstreamUnavailable):
    """No connection, or no listing, within the connect timeout."""


class CallFailed(UpstreamError):
    """A forwarded call got no usable answer."""


class ConnectionLost(CallFailed):
    """The call's connection failed under it: the connection is given up."""


class RpcError(CallFailed):
    """The upstream answered the call with a JSON-RPC error."""


class BadAnswer(CallFailed):
    """The upstream answered, with something the gateway does not pass on."""


class SessionLost(UpstreamError):
    """The upstream no longer knows the session (HTTP 404): nothing ran."""


class Unreachable(UpstreamError):
    """The gateway's HTTP client got no answer. ``str`` may quote the upstream
    (redact it before showing it); ``audit`` is the client's own words."""


class RpcFailed(Exception):
    """The gateway's HTTP client got the upstream's JSON-RPC error (its text is
    the upstream's: ``mapped`` redacts it)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def not_a_result(label: str) -> BadAnswer:
    return BadAnswer(f"upstream {label} answered something that is not a tool result")


def off_schema(label: str) -> BadAnswer:
    return BadAnswer(f"upstream {label} answered structured content that does not match its"
                     " output schema")


def asks_input(label: str) -> BadAnswer:
    return BadAnswer(f"upstream {label} asked for more input (input_required), which the"
                     " gateway does not relay")


def _rpc_error(label: str, redactor: Redactor, code: int, message: str) -> RpcError:
    """The upstream's text for the agent, redacted before it is bounded (a bound
    first could leave part of a value); the code alone for the audit line."""
    said = f"upstream {label} answered MCP error {code}"
    return RpcError(f"{said}: {redactor.line(message, 200)}", audit=said)


class Mapped:
    """Around a forwarded call: whatever the layers under it raise, as a ``CallFailed``
    (or ``SessionLost``) naming upstream ``label``, its texts redacted with
    ``redactor`` (``mapped``, which the transports call in their ``except``, so
    that a call that succeeds makes nothing of it)."""

    __slots__ = ("_also", "_label", "_redactor")

    def __init__(self, label: str, redactor: Redactor, *, also: Redactor | None = None) -> None:
        """``also``: this call's own values besides (a caller's exchanged token)."""
        self._label = label
        self._redactor = redactor
        self._also = also

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if exc is not None and isinstance(exc, Exception):
            mapped_to = mapped(exc, self._label, self._redactor, also=self._also)
            if mapped_to is not None:
                raise mapped_to from None


def mapped(exc: Exception, label: str, redactor: Redactor, *,
           also: Redactor | None = None) -> UpstreamError | None:
    """What ``exc``, raised by a forwarded call to upstream ``label``, is to the
    gateway, its texts redacted with ``redactor`` and ``also`` (this call's own
    values: a caller's exchanged token), or None for what is already the gateway's
    own."""

    def own(text: str) -> str:  # before any bound cuts one of its values
        return also(text) if also is not None else text

    lost = f"upstream {label} unavailable: connection lost"
    if isinstance(exc, Unreachable):  # it may quote the upstream (a content type)
        said = f"upstream {label} unavailable"
        return ConnectionLost(f"{said}: {redactor.line(own(str(exc)), 120)}",
                              audit=f"{said}: {exc.audit}")
    if isinstance(exc, UpstreamError):
        return None
    if isinstance(exc, RpcFailed):
        return _rpc_error(label, redactor, exc.code, own(exc.message))
    if isinstance(exc, RuntimeError):  # the SDK's client checked the output schema
        return off_schema(label)
    if isinstance(exc, UnexpectedClaimedResult | ValidationError):
        return not_a_result(label)
    if isinstance(exc, MCPError):
        if exc.code == types.CONNECTION_CLOSED:
            return ConnectionLost(lost)
        return _rpc_error(label, redactor, exc.code, own(exc.error.message))
    if isinstance(exc, httpx2.TransportError | anyio.ClosedResourceError
                  | anyio.BrokenResourceError | anyio.EndOfStream | OSError):
        return ConnectionLost(lost)
    return None


def explain(exc: BaseException, bounds: Wire | Unfenced, redactor: Redactor, *,
            command: str | None = None) -> tuple[str, str]:
    """Two safe lines for why a connection failed: ``classify``'s finding (the one
    discovery reports too) for the agent and stderr, which may quote the upstream
    redacted; and the gateway's own words alone, for the audit line. ``command``:
    a stdio upstream's program (not found or not executable: it cannot start)."""
    found = first(exc, (SecretMissing, FileNotFoundError, PermissionError))
    if isinstance(found, SecretMissing):
        return str(found), str(found)
    if found is not None and command is not None:
        started = f"cannot start {command!r}"
        return started, started
    error = classify(exc, bounds, redactor)
    if error.reason == "TLSError" and "not trusted" in error.detail:
        return _UNTRUSTED, _UNTRUSTED
    return _WORDS.get(error.reason) or error.detail, _AUDIT_WORDS[error.reason]


#: The audit line's words for what ``classify`` found: the reason, never the detail
#: (which may quote the upstream).
_AUDIT_WORDS: Final[Mapping[ErrorReason, str]] = {
    "URLNotAllowed": "the URL is not in the gateway's egress allow-list",
    "Timeout": "no answer in time",
    "ConnectFailed": "cannot connect, or the connection was lost",
    "TooManyTools": "it lists more tools or pages than the gateway reads",
    "ResponseTooLarge": "its answer is larger than the gateway reads",
    "Redirected": "it answered with a redirect, which is not followed",
    "ProtocolError": "its answer is not MCP over HTTP as the transport defines it",
    "HTTPError": "it answered an HTTP error status",
    "TLSError": "the TLS handshake failed",
}

#: The gateway's words for what ``classify`` found, where discovery's would mislead.
_WORDS: Final[Mapping[str, str]] = {
    "URLNotAllowed": "the URL is not in the gateway's egress allow-list",
    "Timeout": "no answer in time",
}

_UNTRUSTED: Final = ("TLS: the server's certificate is not trusted (trust its CA with the"
                     " server's tls.caConfigMapRef or caSecretRef, or --ca-file)")
