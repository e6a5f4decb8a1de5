"""Listing one MCP server: a session over the fenced client, every page of
``tools/list``, and whatever goes wrong turned into one ``DiscoveryError``.

``list_tools`` opens one session (streamable HTTP or SSE), runs the
``initialize`` handshake, follows ``tools/list`` pages through ``nextCursor``
and returns a ``DiscoveryResult``; ``mcp_watch`` reuses the same pieces for a
session that stays open.

Header values (credentials from ``headersFrom``) go on the wire only: errors
name the URL without userinfo or query, and messages from the server are
redacted. The SDK turns HTTP trouble into many shapes (JSON-RPC errors,
exception groups from its task groups, log lines); ``classify`` picks one
reason, and the fence's own findings win. The SDK's own log records (tracebacks
included) are relayed as one-line DEBUG records, never printed: the error says
what happened, once.

A listed tool becomes an ``McpToolInfo`` here (``tool_info``), the one
conversion from the SDK's ``Tool``: discovery and the gateway's live digests
both use it, so they digest the same fields.

Protocol era: mcp 2.x speaks both the handshake era (``initialize``, up to
2025-11-25) and the 2026-07-28 era (``server/discover``, where change
notifications only flow on ``subscriptions/listen`` streams). Discovery pins the
handshake era, which every current server speaks, so ``tools.listChanged`` and
``notifications/tools/list_changed`` mean what docs/api.md (Semantics 9) says they mean.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, Final, NoReturn, Protocol

import anyio
import httpx2
import mcp_types as types
from mcp.client.session import ClientSession, MessageHandlerFnT
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from skillop import __version__
from skillop.model.names import server_tool_name_problem
from skillop.sources.egress import EgressGuard
from skillop.sources.mcp_discovery import (
    DEFAULT_LIMITS,
    DiscoveryError,
    DiscoveryLimits,
    DiscoveryResult,
    ErrorReason,
    McpTransport,
    one_line,
)
from skillop.sources.mcp_tools import McpToolInfo
from skillop.sources.mcp_transport import Wire, http_client
from skillop.sources.mcp_trust import SYSTEM_TRUST, Trust
from skillop.sources.redaction import Redactor

__all__ = ["Redactor", "classify", "list_pages", "list_tools", "open_session", "tool_info"]

logger = logging.getLogger(__name__)

_ANNOTATION_KEYS: Final = (
    "title",
    "readOnlyHint",
    "destructiveHint",
    "idempotentHint",
    "openWorldHint",
)
_CLIENT_INFO: Final = types.Implementation(name="skillop-discovery", version=__version__)
#: Loggers of the SDK's client side and of its HTTP client; see ``_quiet_sdk_loggers``.
_SDK_LOGGERS: Final = ("mcp.client", "mcp.shared", "client", "httpx2")


class _SdkRelay(logging.Handler):
    """Re-emits the SDK's log records as one-line DEBUG records of our own.

    The SDK logs what it also raises (``logger.exception`` with a traceback,
    ``logger.error`` for a bad content type): on a CLI without logging set up,
    Python's last-resort handler prints those to stderr, and in the operator they
    land in the log beside our one-line error. The failure itself reaches the
    caller as a ``DiscoveryError``; the SDK's account of it is debug detail.
    """

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record must not break discovery
            message = str(record.msg)
        _sdk_log.debug("%s: %s", record.name, one_line(message))


_sdk_log = logging.getLogger(f"{__name__}.sdk")


def _quiet_sdk_loggers() -> None:
    relay = _SdkRelay()
    for name in _SDK_LOGGERS:
        sdk = logging.getLogger(name)
        sdk.propagate = False
        if not any(isinstance(h, _SdkRelay) for h in sdk.handlers):
            sdk.addHandler(relay)


_quiet_sdk_loggers()


@asynccontextmanager
async def open_session(
    url: str,
    transport: McpTransport,
    headers: Mapping[str, str],
    wire: Wire,
    limits: DiscoveryLimits,
    message_handler: MessageHandlerFnT | None = None,
    *,
    client_info: types.Implementation = _CLIENT_INFO,
    read_timeout: float | None = None,
) -> AsyncIterator[ClientSession]:
    """An initialized MCP session over the fenced HTTP client. ``read_timeout``
    bounds each request (default: the limits' total timeout)."""
    async with AsyncExitStack() as stack:
        if transport == "sse":

            def factory(
                headers: dict[str, str] | None = None,
                timeout: httpx2.Timeout | None = None,
                auth: httpx2.Auth | None = None,
            ) -> httpx2.AsyncClient:
                # The SDK's timeout (300 s reads) gives way to the discovery limits.
                return http_client(wire, headers or {}, limits)

            streams = sse_client(url, headers=dict(headers), httpx_client_factory=factory)
        else:
            client = await stack.enter_async_context(http_client(wire, headers, limits))
            streams = streamable_http_client(
                url, http_client=client, max_sse_event_size=limits.max_response_bytes
            )
        read, write = await stack.enter_async_context(streams)
        session = ClientSession(
            read,
            write,
            read_timeout_seconds=limits.total_timeout if read_timeout is None else read_timeout,
            message_handler=message_handler,
            client_info=client_info,
        )
        await stack.enter_async_context(session)
        # Callers hold the deadline: entering SDK task groups inside a deadline
        # scope of our own here would break anyio's scope nesting.
        await session.initialize()
        yield session


def tool_info(tool: types.Tool, redact: Redactor) -> McpToolInfo:
    """One listed tool as discovery records it (its MCP hint annotations only):
    what ``mcp_tools.info_digest`` digests, for anyone comparing a live listing.

    What the server wrote is redacted with the values of the headers it was sent
    (``redact``; its name is left as it is, and skipped if it carries one): a
    listing goes into status, ConfigMaps and the agent's tool list, and a server
    that templates its descriptions from the request would copy a credential
    there."""
    annotations: dict[str, Any] = {}
    if tool.annotations is not None:
        dumped = tool.annotations.model_dump(by_alias=True, exclude_none=True, mode="json")
        annotations = {k: dumped[k] for k in _ANNOTATION_KEYS if k in dumped}
    return McpToolInfo(
        name=tool.name,
        title=redact(tool.title) if tool.title is not None else None,
        description=redact(tool.description or ""),
        input_schema=redact.json(dict(tool.input_schema)),
        output_schema=(redact.json(dict(tool.output_schema)) if tool.output_schema is not None
                       else None),
        annotations=redact.json(annotations),
        execution=(tool.execution.model_dump(by_alias=True, exclude_none=True, mode="json")
                   if tool.execution is not None else None),
    )


def announces_list_changed(session: ClientSession) -> bool:
    caps = session.server_capabilities
    return bool(caps is not None and caps.tools is not None and caps.tools.list_changed)


class Bounds(Protocol):
    """Where a listing's failures go: a ``Wire`` (HTTP), or ``Unfenced`` (stdio)."""

    def fail(self, reason: ErrorReason, detail: str) -> NoReturn: ...

    def raise_if_failed(self) -> None: ...


class Unfenced:
    """``Bounds`` for a session with no HTTP under it (a stdio child of the gateway)."""

    def __init__(self, label: str) -> None:
        self.label = label

    def fail(self, reason: ErrorReason, detail: str) -> NoReturn:
        raise DiscoveryError(reason, self.label, detail)

    def raise_if_failed(self) -> None:
        return None


async def list_pages(
    session: ClientSession, bounds: Bounds, limits: DiscoveryLimits, redact: Redactor
) -> tuple[dict[str, types.Tool], tuple[str, ...]]:
    """Every page of ``tools/list``: the tools by name (a tool repeated across pages
    keeps its first listing) and one line per tool skipped for its name (one that
    carries a value ``redact`` knows too: a name is not rewritten). Fails
    (``bounds.fail``) on a repeated cursor, more than ``max_tools`` tools or more
    than ``max_pages`` pages: discovery and the gateway list the same way."""
    tools: dict[str, types.Tool] = {}
    skipped: list[str] = []
    cursors: set[str] = set()
    cursor: str | None = None
    for _ in range(limits.max_pages):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        page = await session.list_tools(params=params)
        bounds.raise_if_failed()
        for tool in page.tools:
            problem = server_tool_name_problem(tool.name)
            if problem is None and redact(tool.name) != tool.name:
                problem = "the name carries a value of the headers the server was sent"
            if problem is not None:
                skipped.append(f"tool {redact.line(repr(tool.name), 140)} skipped: {problem}")
                continue
            tools.setdefault(tool.name, tool)
        if len(tools) > limits.max_tools:
            bounds.fail("TooManyTools", f"the server lists more than {limits.max_tools} tools")
        cursor = page.next_cursor
        if cursor is None:
            return tools, tuple(skipped)
        if cursor in cursors:
            bounds.fail("ProtocolError", "tools/list repeated a cursor (pagination loop)")
        cursors.add(cursor)
    bounds.fail("TooManyTools", f"tools/list has more than {limits.max_pages} pages")


async def list_all(
    session: ClientSession, wire: Wire, limits: DiscoveryLimits, redact: Redactor
) -> DiscoveryResult:
    """``list_pages`` as discovery records it (redacted with ``redact``: ``tool_info``)."""
    tools, skipped = await list_pages(session, wire, limits, redact)
    return DiscoveryResult(tuple(tool_info(t, redact) for t in tools.values()),
                           announces_list_changed(session), skipped=skipped)


# --------------------------------------------------------------------------- failures


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    """The exceptions inside (nested) exception groups, in order."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


def first(
    exc: BaseException, kind: type[BaseException] | tuple[type[BaseException], ...]
) -> BaseException | None:
    return next((leaf for leaf in _leaves(exc) if isinstance(leaf, kind)), None)


def classify(exc: BaseException, wire: Wire | Unfenced, redact: Redactor) -> DiscoveryError:
    """Turn whatever the SDK raised into one DiscoveryError; fence findings win.
    Discovery and the gateway explain failures with this one classifier.

    Its detail is redacted whole, whatever made it: the fence quotes headers the
    server sent (a redirect's host, a content coding), the SDK quotes them too
    (a content type, lowercased), and so may any error raised inside."""
    error = _classified(exc, wire, redact)
    detail = redact.line(error.detail)
    return error if detail == error.detail else DiscoveryError(error.reason, error.url, detail)


def _classified(exc: BaseException, wire: Wire | Unfenced, redact: Redactor) -> DiscoveryError:
    if isinstance(wire, Wire) and wire.failure is not None:
        return wire.failure
    url = wire.display_url if isinstance(wire, Wire) else wire.label
    if (own := first(exc, DiscoveryError)) is not None:
        assert isinstance(own, DiscoveryError)
        return own
    if (tls := _tls_failure(exc)) is not None:
        return DiscoveryError("TLSError", url, tls)
    if first(exc, (TimeoutError, httpx2.TimeoutException)) is not None:
        return DiscoveryError("Timeout", url, "no complete answer in time")
    if (connect := first(exc, httpx2.ConnectError)) is not None:
        return DiscoveryError("ConnectFailed", url, f"cannot connect: {redact(str(connect))}")
    if isinstance(wire, Wire):
        if (status := first(exc, httpx2.HTTPStatusError)) is not None:
            assert isinstance(status, httpx2.HTTPStatusError)
            return DiscoveryError("HTTPError", url,
                                  _status_detail(status.response.status_code, wire))
        if wire.http_status is not None:
            return DiscoveryError("HTTPError", url, _status_detail(wire.http_status, wire))
    if (sse := first(exc, httpx2.SSEError)) is not None:
        return DiscoveryError("ProtocolError", url, f"not an SSE endpoint: {redact(str(sse))}")
    if first(exc, (httpx2.RemoteProtocolError, httpx2.DecodingError)) is not None:
        return DiscoveryError("ProtocolError", url, "the server's answer is not valid HTTP")
    if (
        lost := first(exc, (httpx2.TransportError, anyio.ClosedResourceError,
                            anyio.BrokenResourceError, anyio.EndOfStream))
    ) is not None:
        return DiscoveryError("ConnectFailed", url, f"connection lost: {type(lost).__name__}")
    if (rpc := first(exc, MCPError)) is not None:
        assert isinstance(rpc, MCPError)
        return _classify_rpc(rpc, url, redact)
    leaf = next(_leaves(exc))
    return DiscoveryError("ProtocolError", url, f"{type(leaf).__name__}: {redact(_said(leaf))}")


def _said(leaf: BaseException) -> str:
    """What ``leaf`` says, whole: pydantic cuts the values it quotes to their ends (a
    value cut so is no longer recognised by the redactor), so a validation error is
    told by where and why, without the values."""
    if not isinstance(leaf, ValidationError):
        return str(leaf)
    errors = leaf.errors(include_input=False, include_url=False)
    where = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'the value'}: {e['msg']}"
                      for e in errors[:3])
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return f"{leaf.title}: {where}{more}"


def _status_detail(status: int, wire: Wire) -> str:
    """``HTTP <status>``, with a hint when the status says "wrong endpoint"."""
    if status not in (404, 405):
        return f"HTTP {status}"
    other = "sse" if wire.transport == "streamable-http" else "streamable-http"
    return (f"HTTP {status}: no {wire.transport} MCP endpoint at this URL"
            f" (if the server speaks {other}, set transport: {other})")


def _tls_failure(exc: BaseException) -> str | None:
    """What went wrong in a TLS handshake, when that is why ``exc`` happened."""
    for leaf in _leaves(exc):
        seen: set[int] = set()
        cause: BaseException | None = leaf
        while cause is not None and id(cause) not in seen:
            seen.add(id(cause))
            if isinstance(cause, ssl.SSLCertVerificationError):
                why = cause.verify_message or cause.reason or "certificate verify failed"
                return (f"the server's certificate is not trusted ({why}); give its CA"
                        " with tls.caConfigMapRef or tls.caSecretRef (CLI: --ca-file)")
            if isinstance(cause, ssl.SSLError):
                return f"TLS handshake failed ({cause.reason or type(cause).__name__})"
            cause = cause.__cause__ or cause.__context__
    return None


def _classify_rpc(rpc: MCPError, url: str, redact: Redactor) -> DiscoveryError:
    # The SDK reports transport trouble as JSON-RPC errors with reserved codes.
    if rpc.code == types.CONNECTION_CLOSED:
        return DiscoveryError("ConnectFailed", url, "connection lost")
    if rpc.code == types.REQUEST_TIMEOUT:
        return DiscoveryError("Timeout", url, "no answer in time")
    if rpc.code == types.PARSE_ERROR:
        return DiscoveryError("ProtocolError", url, "the server's answer is not valid JSON-RPC")
    return DiscoveryError("ProtocolError", url, f"MCP error {rpc.code}: {redact(rpc.message)}")


# --------------------------------------------------------------------------- list_tools


async def list_tools(
    url: str,
    *,
    transport: McpTransport = "streamable-http",
    headers: Mapping[str, str] | None = None,
    guard: EgressGuard,
    limits: DiscoveryLimits = DEFAULT_LIMITS,
    ca_bundles: Sequence[str] = (),
    trust: Trust = SYSTEM_TRUST,
) -> DiscoveryResult:
    """Connect, initialize, list every page of tools, disconnect.

    ``ca_bundles``: PEM CA certificates trusted besides the system's (see
    ``trust_context``), besides ``trust`` (passed whole). Raises
    ``DiscoveryError``; ``URLNotAllowed`` (and
    ``TLSError`` for a bundle that is not PEM) before any connection is attempted.
    """
    guard.check(url)
    headers = dict(headers or {})
    redact = Redactor(headers.values())
    wire = Wire(url, transport, guard, limits, trust.adding(ca_bundles).context(url))
    try:
        with anyio.fail_after(limits.total_timeout):
            async with open_session(url, transport, headers, wire, limits) as session:
                result = await list_all(session, wire, limits, redact)
    except Exception as exc:
        error = classify(exc, wire, redact)
        logger.debug("discovery failed: %s", error)
        raise error from None
    logger.debug("discovered %d tools at %s", len(result.tools), wire.display_url)
    return result
