"""MCP tool discovery: ask a remote MCP server for its tools, safely.

The operator (API.md, Semantics 9) lists the tools of every ``url`` MCP server of
a Skill. This module does the talking, with the official ``mcp`` SDK and no
Kubernetes in sight:

* ``list_tools`` opens one session (streamable HTTP or SSE), runs the
  ``initialize`` handshake, follows ``tools/list`` pages through ``nextCursor``
  and returns a ``DiscoveryResult``.
* ``watch_tools`` keeps a session open for servers announcing
  ``tools.listChanged`` that open a notification stream, and re-lists on every
  ``notifications/tools/list_changed``, reconnecting with exponential backoff
  when the connection is lost. Stateless servers announce the capability but
  never open the stream; they are listed at once and polled.
* ``DiscoveryCache`` shares results between Skills naming the same server and
  coalesces concurrent refreshes into one connection.

The servers are untrusted input, so every connection is fenced in:

* an ``EgressGuard`` decides which hosts may be contacted at all; it is checked
  before connecting and again on every HTTP request the SDK makes;
* a wrapping httpx transport (``_FencedTransport``) sees every request and
  response: it refuses redirects (a 3xx is an error, never followed, not even
  the same-origin ones the SDK would follow itself), meters response bytes
  against ``DiscoveryLimits.max_response_bytes`` and aborts the stream as soon
  as the limit is crossed, and refuses compressed bodies (the limit is meant for
  what is parsed, and ``Accept-Encoding: identity`` is requested);
* connect and total timeouts bound each step;
* header values (credentials from ``headersFrom``) go on the wire only: errors
  name the URL without userinfo or query, messages from the server are redacted,
  and cache keys carry a keyed hash of the headers.

Every failure is a ``DiscoveryError`` with a machine-readable ``reason`` and a
one-line message of bounded length. The SDK's own log records (tracebacks
included) are relayed as one-line DEBUG records, never printed: the error says
what happened, once.

Protocol era: mcp 2.x speaks both the handshake era (``initialize``, up to
2025-11-25) and the 2026-07-28 era (``server/discover``, where change
notifications only flow on ``subscriptions/listen`` streams). Discovery pins the
handshake era, which every current server speaks, so ``tools.listChanged`` and
``notifications/tools/list_changed`` mean what API.md says they mean.
"""

from __future__ import annotations

import asyncio
import fnmatch
import functools
import hashlib
import logging
import math
import os
import re
import secrets
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, NoReturn

import anyio
import httpx2
import mcp_types as types
from mcp.client.session import ClientSession, IncomingMessage, MessageHandlerFnT
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from skillop.model.names import server_tool_name_problem

__all__ = [
    "DEFAULT_EGRESS_PATTERNS",
    "DiscoveredTool",
    "DiscoveryCache",
    "DiscoveryError",
    "DiscoveryLimits",
    "DiscoveryResult",
    "EgressGuard",
    "ErrorReason",
    "McpTransport",
    "discovered_tool",
    "display_url",
    "list_tools",
    "watch_tools",
]

logger = logging.getLogger(__name__)

McpTransport = Literal["streamable-http", "sse"]
ErrorReason = Literal[
    "URLNotAllowed",
    "Timeout",
    "ConnectFailed",
    "TooManyTools",
    "ResponseTooLarge",
    "Redirected",
    "ProtocolError",
    "HTTPError",
    "TLSError",
]

DEFAULT_EGRESS_PATTERNS: Final[tuple[str, ...]] = ("*.svc", "*.svc.cluster.local")

_ANNOTATION_KEYS: Final = (
    "title",
    "readOnlyHint",
    "destructiveHint",
    "idempotentHint",
    "openWorldHint",
)
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_CLIENT_INFO: Final = types.Implementation(name="skillop-discovery", version="0.1.0")
# Header values shorter than this are not secrets worth redacting (and would
# shred messages: a value "1" would erase every digit).
_MIN_SECRET_LEN: Final = 4
_MAX_DETAIL_LEN: Final = 300
_CONTROL_RUNS: Final = re.compile(r"[\s\x00-\x1f\x7f-\x9f\u2028\u2029]+")
#: Loggers of the SDK's client side and of its HTTP client; see ``_quiet_sdk_loggers``.
_SDK_LOGGERS: Final = ("mcp.client", "mcp.shared", "client", "httpx2")


def one_line(text: str, limit: int = _MAX_DETAIL_LEN) -> str:
    """``text`` as one printable line of at most ``limit`` characters.

    Servers answer with error pages, tracebacks and JSON spread over many lines;
    a condition message, an Event or a CLI error must stay one line.
    """
    flat = _CONTROL_RUNS.sub(" ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 3].rstrip() + "..."


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


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class DiscoveredTool:
    """One tool as the server listed it; ``annotations`` keeps the MCP hint keys present."""

    name: str
    title: str | None
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    annotations: dict[str, Any]
    #: ``Tool.execution`` (MCP 2025-11-25), e.g. ``{"taskSupport": "optional"}``.
    execution: dict[str, Any] | None = None


@dataclass(frozen=True)
class DiscoveryLimits:
    """Bounds on one discovery: seconds, tool count, response bytes and pages."""

    connect_timeout: float = 5.0
    total_timeout: float = 30.0
    max_tools: int = 1000
    max_response_bytes: int = 4 * 1024 * 1024
    max_pages: int = 100

    def __post_init__(self) -> None:
        for name in (
            "connect_timeout",
            "total_timeout",
            "max_tools",
            "max_response_bytes",
            "max_pages",
        ):
            if not getattr(self, name) > 0:
                raise ValueError(f"DiscoveryLimits.{name} must be positive")


_DEFAULT_LIMITS: Final = DiscoveryLimits()


@dataclass(frozen=True)
class DiscoveryResult:
    """All tools of a server; ``list_changed`` is its ``tools.listChanged`` capability.

    ``notifications``: a watch holds a notification stream the server opened,
    so a change reaches the watch without polling. A server may announce
    ``listChanged`` and never open one (stateless streamable HTTP): then this is
    False and the server has to be polled. Always False from ``list_tools``.
    ``skipped``: one line per tool left out because its name cannot be used.
    """

    tools: tuple[DiscoveredTool, ...]
    list_changed: bool
    notifications: bool = False
    skipped: tuple[str, ...] = ()


class DiscoveryError(Exception):
    """Discovery failed; ``reason`` is one of ``ErrorReason``, ``url`` is safe to print.

    The message names the URL (without userinfo, query or fragment) and never
    contains header values.
    """

    def __init__(self, reason: ErrorReason, url: str, detail: str) -> None:
        self.reason: ErrorReason = reason
        self.url = one_line(url, 2048)
        self.detail = one_line(detail)
        super().__init__(f"MCP discovery at {self.url} failed ({reason}): {self.detail}")

    def __reduce__(self) -> tuple[type[DiscoveryError], tuple[ErrorReason, str, str]]:
        # Exceptions rebuild from args when copied or pickled; ours has three.
        return (DiscoveryError, (self.reason, self.url, self.detail))


# --------------------------------------------------------------------------- URLs


def _parse(url: str | httpx2.URL) -> httpx2.URL | None:
    # httpx's parser, not urllib's: the guard must see the host httpx connects to.
    try:
        return url if isinstance(url, httpx2.URL) else httpx2.URL(url)
    except (httpx2.InvalidURL, TypeError, ValueError):
        return None


def _display_url(url: str | httpx2.URL) -> str:
    """The URL without userinfo, query and fragment: what errors and logs may show."""
    parsed = _parse(url)
    if parsed is None:
        return "<invalid URL>"
    return str(parsed.copy_with(userinfo=b"", query=None, fragment=None))


def display_url(url: str) -> str:
    """What a caller may print of a server URL (see ``_display_url``)."""
    return _display_url(url)


def _redirect_target(base: httpx2.URL, location: str | None) -> str:
    """``host[:port]`` a redirect points to, for the error message (never its path or query)."""
    try:
        url = base.join(location) if location else None
    except (httpx2.InvalidURL, TypeError, ValueError):
        url = None
    if url is None:
        return "an invalid location"
    host = url.host or "?"
    return f"host {host}" if url.port is None else f"host {host}:{url.port}"


def _target(url: str | httpx2.URL) -> tuple[str, str, int] | None:
    """The (scheme, host, port) a request to ``url`` connects to; None unless http(s)."""
    parsed = _parse(url)
    if parsed is None:
        return None
    scheme = parsed.scheme.lower()
    try:
        host = parsed.raw_host.decode("ascii").lower()  # IDNA form: the name resolved
    except UnicodeDecodeError:
        return None
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    port = parsed.port if parsed.port is not None else _DEFAULT_PORTS[scheme]
    if not 0 < port < 65536:
        return None
    return scheme, host, port


@dataclass(frozen=True)
class _Pattern:
    scheme: str | None
    host: str
    port: str | None

    @classmethod
    def parse(cls, text: str) -> _Pattern:
        raw = text.strip().lower()
        scheme, sep, rest = raw.partition("://")
        if not sep:
            scheme, rest = "", raw
        if scheme and scheme not in _DEFAULT_PORTS:
            raise ValueError(f"egress pattern {text!r}: scheme must be http or https")
        host, port = _split_host_port(rest.rstrip("/"))
        if not host:
            raise ValueError(f"egress pattern {text!r} has no host")
        return cls(scheme or None, host, port)

    def matches(self, scheme: str, host: str, port: int) -> bool:
        if self.scheme is not None and self.scheme != scheme:
            return False
        if self.port is not None and not fnmatch.fnmatchcase(str(port), self.port):
            return False
        return fnmatch.fnmatchcase(host, self.host)


def _split_host_port(text: str) -> tuple[str, str | None]:
    if text.startswith("["):  # IPv6 literal, e.g. [::1]:8080
        host, _, tail = text[1:].partition("]")
        return host, (tail[1:] or None) if tail.startswith(":") else None
    host, sep, port = text.rpartition(":")
    if sep and ":" not in host:
        return host, port or None
    return text, None


class EgressGuard:
    """Which MCP server URLs discovery may contact.

    Patterns are ``fnmatch`` globs, matched case-insensitively, in the form
    ``[scheme://]host[:port]``:

    * ``*.svc`` - any host ending in ``.svc`` (``*`` also spans dots), any port,
      http or https;
    * ``127.0.0.1:8080`` - that host and port only (the port may be a glob too);
    * ``https://*.example.com`` - https only;
    * ``[::1]`` - an IPv6 literal, in brackets.

    A URL is allowed when any pattern matches its scheme, host and port (the
    scheme's default port when the URL names none). Only ``http`` and ``https``
    URLs are ever allowed. The host is compared as written in the URL, before
    any DNS resolution; proxies from the environment are never used, so the
    host checked is the host connected to.
    """

    def __init__(self, patterns: Sequence[str] = DEFAULT_EGRESS_PATTERNS) -> None:
        if isinstance(patterns, str):
            raise TypeError("EgressGuard takes a sequence of patterns, not one string")
        self.patterns: tuple[str, ...] = tuple(patterns)
        self._compiled = tuple(_Pattern.parse(p) for p in self.patterns)

    def __repr__(self) -> str:
        return f"EgressGuard({list(self.patterns)!r})"

    def allows(self, url: str | httpx2.URL) -> bool:
        target = _target(url)
        return target is not None and any(p.matches(*target) for p in self._compiled)

    def check(self, url: str) -> None:
        """Raise ``DiscoveryError(reason="URLNotAllowed")`` unless ``url`` may be contacted."""
        if not self.allows(url):
            raise DiscoveryError(
                "URLNotAllowed",
                _display_url(url),
                "the URL is not http(s) or its host is not in the egress allow-list "
                f"{list(self.patterns)}",
            )


# --------------------------------------------------------------------------- secrets


class _Redactor:
    """Removes header values from text that may have come back from the server."""

    def __init__(self, headers: Mapping[str, str]) -> None:
        values = {v for v in headers.values() if len(v) >= _MIN_SECRET_LEN}
        # Longest first, so a value containing another is removed whole.
        self._values = sorted(values, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for value in self._values:
            text = text.replace(value, "[redacted]")
        return text[:_MAX_DETAIL_LEN]


_KEY_SALT: Final = secrets.token_bytes(16)


def _server_digest(url: str, headers: Mapping[str, str] | None) -> str:
    """A keyed hash of the raw URL and the headers: equal servers give equal digests, nothing leaks.

    The raw URL is hashed too because its userinfo or query (left out of
    printable URLs) may select a different tenant.
    """
    pairs = sorted((k.lower(), v) for k, v in (headers or {}).items())
    canonical = "\n".join([url, *(f"{k}\0{v}" for k, v in pairs)])
    return hashlib.blake2b(canonical.encode(), key=_KEY_SALT, digest_size=16).hexdigest()


# --------------------------------------------------------------------------- the HTTP fence


class _Wire:
    """What the HTTP layer saw on one connection.

    The SDK turns HTTP trouble into many shapes (JSON-RPC errors, exception
    groups from its task groups, log lines); the fence records the first fatal
    fact here, and that fact wins when the failure is classified.
    """

    def __init__(
        self,
        url: str,
        transport: McpTransport,
        guard: EgressGuard,
        limits: DiscoveryLimits,
        tls: ssl.SSLContext | None = None,
    ):
        self.display_url = _display_url(url)
        self.tls = tls if tls is not None else trust_context(url, ())
        self.transport = transport
        self.guard = guard
        self.max_bytes = limits.max_response_bytes
        self.bytes = 0
        self.failure: DiscoveryError | None = None
        self.http_status: int | None = None
        self.open_event_streams = 0
        self.event_stream_seen = False
        #: The server gave an ``mcp-session-id``: only then does the SDK open the
        #: streamable-HTTP notification stream (GET) at all.
        self.session_seen = False
        self.event_stream_settled = anyio.Event()
        self.wake: Callable[[], None] | None = None  # lets a watch notice a failure at once

    def fail(self, reason: ErrorReason, detail: str) -> NoReturn:
        error = DiscoveryError(reason, self.display_url, detail)
        if self.failure is None:
            self.failure = error
            if self.wake is not None:
                self.wake()
        raise error

    def raise_if_failed(self) -> None:
        if self.failure is not None:
            raise self.failure

    def count(self, size: int) -> None:
        self.bytes += size
        if self.bytes > self.max_bytes:
            self.fail("ResponseTooLarge", f"responses exceeded {self.max_bytes} bytes")

    def check_request(self, request: httpx2.Request) -> None:
        if not self.guard.allows(request.url):
            self.fail("URLNotAllowed", f"refused a request to {_display_url(request.url)}")

    def check_response(self, request: httpx2.Request, response: httpx2.Response) -> None:
        status = response.status_code
        if 300 <= status < 400:
            target = _redirect_target(request.url, response.headers.get("location"))
            self.fail("Redirected", f"HTTP {status} redirect to {target} was not followed")
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            self.fail("ProtocolError", f"compressed response ({encoding}) refused")
        if status >= 400 and self._status_matters(request):
            self.http_status = status

    def _status_matters(self, request: httpx2.Request) -> bool:
        # The streamable-HTTP notification GET may be refused (405) by servers
        # that never push; only the POSTs carry the answers that count there.
        return request.method == "POST" or (self.transport == "sse" and request.method == "GET")

    def is_event_stream(self, request: httpx2.Request, response: httpx2.Response) -> bool:
        content_type = response.headers.get("content-type", "")
        return (
            request.method == "GET"
            and response.status_code == 200
            and (content_type.startswith("text/event-stream"))
        )

    def event_stream_opened(self) -> None:
        self.open_event_streams += 1
        self.event_stream_seen = True

    def event_stream_closed(self) -> None:
        self.open_event_streams -= 1


class _MeteredStream(httpx2.AsyncByteStream):
    """A response body that counts its bytes into the wire and tells when it closes."""

    def __init__(
        self, inner: httpx2.AsyncByteStream, wire: _Wire, on_close: Callable[[], None] | None
    ) -> None:
        self._inner = inner
        self._wire = wire
        self._on_close = on_close
        self._is_event_stream = on_close is not None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            try:
                self._wire.count(len(chunk))
            except DiscoveryError:
                if not self._is_event_stream:
                    raise  # a request's answer: fail it at once
                # An event stream just ends: the SDK logs a raised error with a
                # traceback, and the failure is on the wire record anyway.
                return
            yield chunk

    async def aclose(self) -> None:
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()
        await self._inner.aclose()


class _FencedTransport(httpx2.AsyncBaseTransport):
    """The httpx transport under the SDK: egress check, no redirects, byte meter."""

    def __init__(self, wire: _Wire, inner: httpx2.AsyncBaseTransport) -> None:
        self._wire = wire
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        wire = self._wire
        wire.check_request(request)
        try:
            response = await self._inner.handle_async_request(request)
        finally:
            if request.method == "GET":
                wire.event_stream_settled.set()
        try:
            wire.check_response(request, response)
        except DiscoveryError:
            await response.aclose()
            raise
        if response.headers.get("mcp-session-id"):
            wire.session_seen = True
        on_close = None
        if wire.is_event_stream(request, response):
            wire.event_stream_opened()
            on_close = wire.event_stream_closed
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = _MeteredStream(response.stream, wire, on_close)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def _http_client(
    wire: _Wire, headers: Mapping[str, str], limits: DiscoveryLimits
) -> httpx2.AsyncClient:
    # Reads are unbounded here because the notification stream idles for long;
    # every request is bounded by an anyio deadline instead.
    timeout = httpx2.Timeout(limits.total_timeout, connect=limits.connect_timeout, read=None)
    return httpx2.AsyncClient(
        transport=_FencedTransport(
            wire, httpx2.AsyncHTTPTransport(trust_env=False, verify=wire.tls)
        ),
        headers={"accept-encoding": "identity", **headers},
        timeout=timeout,
        follow_redirects=False,
        trust_env=False,
    )


# --------------------------------------------------------------------------- trust


def trust_context(url: str, ca_bundles: Sequence[str]) -> ssl.SSLContext:
    """What https connections trust: the system's CAs, plus ``ca_bundles`` (PEM texts).

    Private CAs are the rule inside companies; ``SSL_CERT_FILE`` and the like are
    not read (``trust_env`` is off, as for proxies), so trust is what the caller
    configures: per server and operator-wide in the operator, ``--ca-file`` in
    the CLI. A bundle that is not PEM certificates is a ``TLSError`` naming ``url``.
    Contexts are built once per distinct set of bundles and shared: loading the
    system store costs tens of ms of CPU, once per connection otherwise.
    """
    try:
        return _context(tuple(ca_bundles))
    except (ssl.SSLError, ValueError) as err:
        raise DiscoveryError(
            "TLSError", _display_url(url),
            f"the CA bundle is not PEM certificates ({type(err).__name__})") from None


@functools.lru_cache(maxsize=32)
def _context(ca_bundles: tuple[str, ...]) -> ssl.SSLContext:
    # The system store at OpenSSL's compiled-in paths, not the SSL_CERT_* variables.
    paths = ssl.get_default_verify_paths()
    context = ssl.create_default_context(
        cafile=paths.openssl_cafile if os.path.isfile(paths.openssl_cafile) else None,
        capath=paths.openssl_capath if os.path.isdir(paths.openssl_capath) else None,
    )
    for pem in ca_bundles:
        if "-----BEGIN CERTIFICATE-----" not in pem:
            raise ValueError("no PEM certificate")
        context.load_verify_locations(cadata=pem)
    return context


# --------------------------------------------------------------------------- sessions


@asynccontextmanager
async def _session(
    url: str,
    transport: McpTransport,
    headers: Mapping[str, str],
    wire: _Wire,
    limits: DiscoveryLimits,
    message_handler: MessageHandlerFnT | None = None,
) -> AsyncIterator[ClientSession]:
    """An initialized MCP session over the fenced HTTP client."""
    async with AsyncExitStack() as stack:
        if transport == "sse":

            def factory(
                headers: dict[str, str] | None = None,
                timeout: httpx2.Timeout | None = None,
                auth: httpx2.Auth | None = None,
            ) -> httpx2.AsyncClient:
                # The SDK's timeout (300 s reads) gives way to the discovery limits.
                return _http_client(wire, headers or {}, limits)

            streams = sse_client(url, headers=dict(headers), httpx_client_factory=factory)
        else:
            client = await stack.enter_async_context(_http_client(wire, headers, limits))
            streams = streamable_http_client(
                url, http_client=client, max_sse_event_size=limits.max_response_bytes
            )
        read, write = await stack.enter_async_context(streams)
        session = ClientSession(
            read,
            write,
            read_timeout_seconds=limits.total_timeout,
            message_handler=message_handler,
            client_info=_CLIENT_INFO,
        )
        await stack.enter_async_context(session)
        # Callers hold the deadline: entering SDK task groups inside a deadline
        # scope of our own here would break anyio's scope nesting.
        await session.initialize()
        yield session


def _convert(tool: types.Tool) -> DiscoveredTool:
    annotations: dict[str, Any] = {}
    if tool.annotations is not None:
        dumped = tool.annotations.model_dump(by_alias=True, exclude_none=True, mode="json")
        annotations = {k: dumped[k] for k in _ANNOTATION_KEYS if k in dumped}
    return DiscoveredTool(
        name=tool.name,
        title=tool.title,
        description=tool.description or "",
        input_schema=dict(tool.input_schema),
        output_schema=dict(tool.output_schema) if tool.output_schema is not None else None,
        annotations=annotations,
        execution=(tool.execution.model_dump(by_alias=True, exclude_none=True, mode="json")
                   if tool.execution is not None else None),
    )


def _announces_list_changed(session: ClientSession) -> bool:
    caps = session.server_capabilities
    return bool(caps is not None and caps.tools is not None and caps.tools.list_changed)


async def _list_all(
    session: ClientSession, wire: _Wire, limits: DiscoveryLimits
) -> DiscoveryResult:
    """Every page of ``tools/list``; tools repeated across pages keep their first listing."""
    tools: dict[str, DiscoveredTool] = {}
    skipped: list[str] = []
    cursors: set[str] = set()
    cursor: str | None = None
    for _ in range(limits.max_pages):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        page = await session.list_tools(params=params)
        wire.raise_if_failed()
        for tool in page.tools:
            if (problem := server_tool_name_problem(tool.name)) is not None:
                skipped.append(f"tool {one_line(repr(tool.name), 140)} skipped: {problem}")
                continue
            tools.setdefault(tool.name, _convert(tool))
        if len(tools) > limits.max_tools:
            wire.fail("TooManyTools", f"the server lists more than {limits.max_tools} tools")
        cursor = page.next_cursor
        if cursor is None:
            return DiscoveryResult(tuple(tools.values()), _announces_list_changed(session),
                                   skipped=tuple(skipped))
        if cursor in cursors:
            wire.fail("ProtocolError", "tools/list repeated a cursor (pagination loop)")
        cursors.add(cursor)
    wire.fail("TooManyTools", f"tools/list has more than {limits.max_pages} pages")


# --------------------------------------------------------------------------- failures


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    """The exceptions inside (nested) exception groups, in order."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


def _first(
    exc: BaseException, kind: type[BaseException] | tuple[type[BaseException], ...]
) -> BaseException | None:
    return next((leaf for leaf in _leaves(exc) if isinstance(leaf, kind)), None)


def _classify(exc: BaseException, wire: _Wire, redact: _Redactor) -> DiscoveryError:
    """Turn whatever the SDK raised into one DiscoveryError; fence findings win."""
    if wire.failure is not None:
        return wire.failure
    url = wire.display_url
    if (own := _first(exc, DiscoveryError)) is not None:
        assert isinstance(own, DiscoveryError)
        return own
    if (tls := _tls_failure(exc)) is not None:
        return DiscoveryError("TLSError", url, tls)
    if _first(exc, (TimeoutError, httpx2.TimeoutException)) is not None:
        return DiscoveryError("Timeout", url, "no complete answer in time")
    if (connect := _first(exc, httpx2.ConnectError)) is not None:
        return DiscoveryError("ConnectFailed", url, f"cannot connect: {redact(str(connect))}")
    if (status := _first(exc, httpx2.HTTPStatusError)) is not None:
        assert isinstance(status, httpx2.HTTPStatusError)
        return DiscoveryError("HTTPError", url, _status_detail(status.response.status_code, wire))
    if wire.http_status is not None:
        return DiscoveryError("HTTPError", url, _status_detail(wire.http_status, wire))
    if (sse := _first(exc, httpx2.SSEError)) is not None:
        return DiscoveryError("ProtocolError", url, f"not an SSE endpoint: {redact(str(sse))}")
    if _first(exc, (httpx2.RemoteProtocolError, httpx2.DecodingError)) is not None:
        return DiscoveryError("ProtocolError", url, "the server's answer is not valid HTTP")
    if (
        lost := _first(
            exc, (httpx2.TransportError, anyio.ClosedResourceError, anyio.BrokenResourceError)
        )
    ) is not None:
        return DiscoveryError("ConnectFailed", url, f"connection lost: {type(lost).__name__}")
    if (rpc := _first(exc, MCPError)) is not None:
        assert isinstance(rpc, MCPError)
        return _classify_rpc(rpc, url, redact)
    leaf = next(_leaves(exc))
    return DiscoveryError("ProtocolError", url, f"{type(leaf).__name__}: {redact(str(leaf))}")


def _status_detail(status: int, wire: _Wire) -> str:
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


def _classify_rpc(rpc: MCPError, url: str, redact: _Redactor) -> DiscoveryError:
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
    limits: DiscoveryLimits = _DEFAULT_LIMITS,
    ca_bundles: Sequence[str] = (),
) -> DiscoveryResult:
    """Connect, initialize, list every page of tools, disconnect.

    ``ca_bundles``: PEM CA certificates trusted besides the system's (see
    ``trust_context``). Raises ``DiscoveryError``; ``URLNotAllowed`` (and
    ``TLSError`` for a bundle that is not PEM) before any connection is attempted.
    """
    guard.check(url)
    headers = dict(headers or {})
    wire = _Wire(url, transport, guard, limits, trust_context(url, ca_bundles))
    try:
        with anyio.fail_after(limits.total_timeout):
            async with _session(url, transport, headers, wire, limits) as session:
                result = await _list_all(session, wire, limits)
    except Exception as exc:
        error = _classify(exc, wire, _Redactor(headers))
        logger.debug("discovery failed: %s", error)
        raise error from None
    logger.debug("discovered %d tools at %s", len(result.tools), wire.display_url)
    return result


# --------------------------------------------------------------------------- watch_tools


class _Flag:
    """A resettable anyio event: set by notifications, cleared before each re-list."""

    def __init__(self) -> None:
        self._event = anyio.Event()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        if self._event.is_set():
            self._event = anyio.Event()

    def is_set(self) -> bool:
        return self._event.is_set()

    async def wait(self) -> None:
        await self._event.wait()


class _NoStream(Exception):
    """The server opened no notification stream: the caller polls it instead."""


class _CallbackFailed(Exception):
    """Carries an exception raised by on_change through the SDK's task groups."""


class _Backoff:
    def __init__(self, first: float, cap: float) -> None:
        self._first, self._cap = first, cap
        self._next = first

    def reset(self) -> None:
        self._next = self._first

    def take(self) -> float:
        delay, self._next = self._next, min(self._next * 2, self._cap)
        return delay


async def watch_tools(
    url: str,
    *,
    transport: McpTransport = "streamable-http",
    headers: Mapping[str, str] | None = None,
    guard: EgressGuard,
    limits: DiscoveryLimits = _DEFAULT_LIMITS,
    on_change: Callable[[DiscoveryResult], Awaitable[None]],
    on_error: Callable[[DiscoveryError], Awaitable[None]],
    reconnect_backoff: tuple[float, float] = (0.5, 30.0),
    ping_interval: float = 15.0,
    only_if_announced: bool = False,
    ca_bundles: Sequence[str] = (),
) -> None:
    """Keep a session open and call ``on_change`` with the full list on every change.

    With ``only_if_announced``, a server that opens no notification stream (it
    does not announce ``tools.listChanged``, or it is a stateless streamable-HTTP
    server that announces it but never opens the stream) is listed once on the
    same connection and the call returns, so a caller can start every server
    this way (one connection each) and poll those that return. Without it, such
    a server is listed again every ``ping_interval`` seconds.

    Lists once per connection (without waiting for a stream that cannot come),
    then again on every ``notifications/tools/list_changed``; ``on_change`` gets
    ``DiscoveryResult.notifications`` telling whether the stream is open. Every
    ``ping_interval`` seconds of quiet it pings the server and checks that the
    notification stream is still open; a lost connection calls ``on_error`` and reconnects after an
    exponential backoff (``reconnect_backoff`` = (first delay, cap); reset after
    a successful listing). A reconnect always lists again, so no change is
    missed across an outage. Runs until cancelled.

    ``URLNotAllowed`` for ``url`` itself is raised at once (retrying cannot
    help). Exceptions raised by ``on_change`` or ``on_error`` end the watch.
    """
    guard.check(url)
    tls = trust_context(url, ca_bundles)
    backoff = _Backoff(*reconnect_backoff)
    while True:
        try:
            await _watch_session(
                url,
                transport,
                dict(headers or {}),
                guard,
                limits,
                tls,
                on_change,
                backoff,
                ping_interval,
                only_if_announced,
            )
        except _NoStream:
            return
        except DiscoveryError as error:
            logger.debug("watch interrupted: %s", error)
            await on_error(error)
        await anyio.sleep(backoff.take())


async def _watch_session(
    url: str,
    transport: McpTransport,
    headers: dict[str, str],
    guard: EgressGuard,
    limits: DiscoveryLimits,
    tls: ssl.SSLContext,
    on_change: Callable[[DiscoveryResult], Awaitable[None]],
    backoff: _Backoff,
    ping_interval: float,
    only_if_announced: bool = False,
) -> None:
    """One connection of a watch; returns never, raises DiscoveryError when it ends."""
    changed = _Flag()

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    wire = _Wire(url, transport, guard, limits, tls)
    wire.wake = changed.set
    try:
        # One scope whose deadline bounds connecting only: anyio forbids leaving
        # a deadline scope while the SDK's task groups opened inside it live on.
        with anyio.CancelScope(deadline=anyio.current_time() + limits.total_timeout) as connecting:
            async with _session(url, transport, headers, wire, limits, on_message) as session:
                connecting.deadline = math.inf
                await _serve_watch(
                    session, wire, changed, limits, on_change, backoff, ping_interval,
                    only_if_announced,
                )
        raise TimeoutError("connecting took too long")
    except Exception as exc:
        if _first(exc, _NoStream) is not None:
            raise _NoStream() from None
        if (carrier := _first(exc, _CallbackFailed)) is not None:
            raise (carrier.__cause__ or carrier) from None
        raise _classify(exc, wire, _Redactor(headers)) from None


async def _serve_watch(
    session: ClientSession,
    wire: _Wire,
    changed: _Flag,
    limits: DiscoveryLimits,
    on_change: Callable[[DiscoveryResult], Awaitable[None]],
    backoff: _Backoff,
    ping_interval: float,
    only_if_announced: bool = False,
) -> NoReturn:
    """List, hand the list over, wait for a change; again and again."""
    announced = _announces_list_changed(session)
    if announced and _stream_coming(wire):
        await _wait_event_stream(wire, limits)
    while True:
        wire.raise_if_failed()
        changed.clear()
        wire.bytes = 0  # the byte limit applies to each listing
        with anyio.fail_after(limits.total_timeout):
            result = await _list_all(session, wire, limits)
        live = announced and wire.open_event_streams > 0
        backoff.reset()
        try:
            await on_change(replace(result, notifications=live))
        except Exception as exc:
            raise _CallbackFailed() from exc
        if only_if_announced and not live:
            raise _NoStream()
        await _idle_until_changed(session, wire, changed, ping_interval, limits, live=live)


def _stream_coming(wire: _Wire) -> bool:
    """Whether a notification stream may still open on this connection.

    On SSE the stream is the transport itself. On streamable HTTP the SDK opens
    it (a GET) only when the server gave a session id: a stateless server gives
    none and never will, so waiting for its stream would only cost the connect
    timeout.
    """
    return wire.transport == "sse" or wire.session_seen


async def _wait_event_stream(wire: _Wire, limits: DiscoveryLimits) -> None:
    """Let the notification stream open before the first listing, so no change slips between.

    A server answers the GET at once (200 with an event stream, or 405 when it
    never pushes); only a hung one costs the connect timeout here.
    """
    with anyio.move_on_after(limits.connect_timeout):
        await wire.event_stream_settled.wait()


async def _idle_until_changed(
    session: ClientSession,
    wire: _Wire,
    changed: _Flag,
    ping_interval: float,
    limits: DiscoveryLimits,
    *,
    live: bool,
) -> None:
    """Wait for a change notification, checking the connection every ``ping_interval``.

    Without a notification stream (``live`` False) nothing will ever notify:
    return after ``ping_interval``, so the caller lists again (a poll).
    """
    while True:
        with anyio.move_on_after(ping_interval):
            await changed.wait()
        if changed.is_set() or not live:
            return
        wire.raise_if_failed()
        with anyio.fail_after(limits.total_timeout):
            await session.send_ping()
        # The SDK re-opens a dropped notification stream only a few times, then
        # gives up silently; a stream that existed and is gone means deafness.
        if wire.event_stream_seen and wire.open_event_streams == 0:
            wire.fail("ConnectFailed", "the notification stream closed")


# --------------------------------------------------------------------------- cache


@dataclass(frozen=True)
class _Entry:
    result: DiscoveryResult
    fetched_at: float


class DiscoveryCache:
    """Discovery results shared per server, with concurrent refreshes coalesced.

    A server is keyed by URL, transport and a keyed hash of its headers (two
    Skills with different credentials for one URL are two servers). ``get``
    returns the cached result while it is younger than ``max_age``; otherwise
    it connects, and every concurrent ``get`` for that server waits for that
    same connection. A failed refresh raises and leaves the last good result in
    place (``last_good``). For asyncio (the operator's loop).
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._entries: dict[str, _Entry] = {}
        self._inflight: dict[str, asyncio.Future[DiscoveryResult]] = {}
        self.connections_made = 0

    @staticmethod
    def key(
        url: str,
        transport: McpTransport = "streamable-http",
        headers: Mapping[str, str] | None = None,
    ) -> str:
        """The cache key of a server: printable, without header values."""
        return f"{transport} {_display_url(url)} {_server_digest(url, headers)}"

    async def get(
        self,
        url: str,
        *,
        transport: McpTransport = "streamable-http",
        headers: Mapping[str, str] | None = None,
        guard: EgressGuard,
        limits: DiscoveryLimits = _DEFAULT_LIMITS,
        max_age: float,
    ) -> DiscoveryResult:
        """The server's tools, from cache when fresh, else from one shared connection."""
        key = self.key(url, transport, headers)
        entry = self._entries.get(key)
        if entry is not None and self._clock() - entry.fetched_at <= max_age:
            return entry.result
        pending = self._inflight.get(key)
        if pending is None:
            pending = asyncio.ensure_future(
                self._refresh(
                    key, url, transport=transport, headers=headers, guard=guard, limits=limits
                )
            )
            self._inflight[key] = pending
            pending.add_done_callback(lambda done: self._settle(key, done))
        # A caller giving up must not cancel the connection the others wait for.
        return await asyncio.shield(pending)

    def last_good(
        self,
        url: str,
        *,
        transport: McpTransport = "streamable-http",
        headers: Mapping[str, str] | None = None,
    ) -> DiscoveryResult | None:
        """The last successful result for this server, however old, or None."""
        entry = self._entries.get(self.key(url, transport, headers))
        return entry.result if entry is not None else None

    async def _refresh(
        self,
        key: str,
        url: str,
        *,
        transport: McpTransport,
        headers: Mapping[str, str] | None,
        guard: EgressGuard,
        limits: DiscoveryLimits,
    ) -> DiscoveryResult:
        self.connections_made += 1
        result = await list_tools(
            url, transport=transport, headers=headers, guard=guard, limits=limits
        )
        self._entries[key] = _Entry(result, self._clock())
        return result

    def _settle(self, key: str, done: asyncio.Future[DiscoveryResult]) -> None:
        if self._inflight.get(key) is done:
            del self._inflight[key]
        # Retrieve the outcome so an error nobody awaited any more is not reported as lost.
        if not done.cancelled():
            done.exception()


def discovered_tool(tool: types.Tool) -> DiscoveredTool:
    """One listed tool as discovery records it (its MCP hint annotations only):
    what ``mcp_tools.info_digest`` digests, for anyone comparing a live listing."""
    return _convert(tool)
