"""Upstream MCP servers: one pooled client session each, with its live listing.

A ``Link`` owns at most one open session to one upstream (streamable HTTP, SSE
or a stdio command), shared by every call to that server. The session lives in
a task of its own (the SDK's sessions must be closed by the task that opened
them); calls borrow it. On connect, and again on every
``notifications/tools/list_changed``, the link lists the server's tools and
keeps each one's digest (``mcp_tools.info_digest``, what the ToolSet's
``upstreamDigest`` holds), so a call can tell whether the tool it forwards to is
still the one the set was resolved from.

A connection that fails is dropped; the next call opens a new one. Failures are
``UpstreamUnavailable`` with a reason safe to show anyone: it names the server,
never a header value (the same ``EgressGuard`` and no-redirect rule as
discovery apply to every request, docs/mcp.md).

Calls (``Link.call``) to a streamable-HTTP upstream do not go through the SDK
session: ``caller.HttpCaller`` posts them in the session's name over kept-alive
connections (the gateway's hot path, bench/gateway.py); SSE and stdio upstreams
are called through the SDK session.
"""

from __future__ import annotations

import json
import logging
import ssl
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import anyio
import httpx2
import mcp_types as types
from mcp.client.session import ClientSession, IncomingMessage
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError

from skillop.gateway.caller import HttpCaller, RpcFailed, SessionLost, Unreachable
from skillop.gateway.secrets import SecretMissing, ca_bundles, env_of, headers_of
from skillop.gateway.served import ServerKey, Upstream
from skillop.sources.egress import EgressGuard
from skillop.sources.mcp_session import tool_info
from skillop.sources.mcp_tools import info_digest
from skillop.sources.mcp_transport import trust_context

logger = logging.getLogger(__name__)

_CLIENT_INFO: Final = types.Implementation(name="skillop-gateway", version="0.1.0")
_MAX_PAGES: Final = 100
_MIN_SECRET_LEN: Final = 4

Spawn = Callable[[Callable[[], Coroutine[Any, Any, None]]], object]


class UpstreamUnavailable(Exception):
    """The upstream cannot be reached or answered badly; the message is safe to show."""


class CallFailed(Exception):
    """A forwarded call got no usable answer; the message is safe to show."""


__all__ = ["CallFailed", "Link", "Pool", "SessionLost", "Settings", "UpstreamUnavailable"]


@dataclass(frozen=True, slots=True)
class Settings:
    """How links connect: where Secrets are mounted, which hosts may be contacted."""

    secrets_dir: Path
    guard: EgressGuard
    connect_timeout: float = 10.0
    #: Mounted ConfigMaps holding CA bundles (``tls.caConfigMapRef``).
    configmaps_dir: Path = Path("/var/run/skillop/configmaps")
    #: A CA bundle trusted for every https upstream (``--ca-file``).
    ca_file: Path | None = None


class _Fence(httpx2.AsyncBaseTransport):
    """Every request the SDK makes: the egress guard first, and no redirect followed.

    Raising from here surfaces inside the SDK's task groups in many shapes, so the
    refusal is also recorded and wins when the failure is explained."""

    def __init__(self, guard: EgressGuard, tls: ssl.SSLContext) -> None:
        self._guard = guard
        # Idle connections are dropped after a second, well before servers drop
        # them (uvicorn after 5 s): a request on a connection the server is closing
        # fails, and the SDK's client then loses the whole session.
        self._inner = httpx2.AsyncHTTPTransport(
            verify=tls, trust_env=False, limits=httpx2.Limits(keepalive_expiry=1.0))
        self.refusal: str | None = None
        #: The session the server opened (its initialize answer's ``mcp-session-id``).
        self.session_id: str | None = None

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if not self._guard.allows(request.url):
            self.refusal = "the URL is not in the gateway's egress allow-list"
            raise httpx2.ConnectError(self.refusal, request=request)
        response = await self._inner.handle_async_request(request)
        if 300 <= response.status_code < 400:
            await response.aclose()
            self.refusal = f"HTTP {response.status_code} redirect was not followed"
            raise httpx2.ConnectError(self.refusal, request=request)
        session_id = response.headers.get("mcp-session-id")
        if session_id:
            self.session_id = session_id
        if (request.method == "POST"
                and response.headers.get("content-type", "").startswith("text/event-stream")):
            assert isinstance(response.stream, httpx2.AsyncByteStream)
            response.stream = _Drained(response.stream)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Drained(httpx2.AsyncByteStream):
    """A call's SSE answer, read to its end when closed.

    The SDK closes a call's event stream as soon as the answer arrived, before
    the server's last chunk; an HTTP connection closed mid-body cannot be reused,
    so every call would open a new one. The server ends the stream right after
    the answer, so reading on briefly lets the pool keep the connection."""

    _DRAIN_SECONDS: Final = 0.2
    _DRAIN_BYTES: Final = 1024 * 1024

    def __init__(self, inner: httpx2.AsyncByteStream) -> None:
        self._inner = inner
        self._chunks: AsyncIterator[bytes] | None = None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        self._chunks = aiter(self._inner)
        async for chunk in self._chunks:
            yield chunk

    async def aclose(self) -> None:
        if self._chunks is not None:
            drained = 0
            with anyio.move_on_after(self._DRAIN_SECONDS), suppress(Exception):
                async for chunk in self._chunks:
                    drained += len(chunk)
                    if drained > self._DRAIN_BYTES:
                        break
        await self._inner.aclose()


@dataclass(eq=False)
class Connection:
    """One connection attempt of a link, from opening to closing: the SDK session,
    the live listing and, for streamable HTTP, the session's id for ``HttpCaller``."""

    session: ClientSession | None = None
    digests: Mapping[str, str] = field(default_factory=dict)
    #: The live definitions by name (their output schemas validate results).
    tools: Mapping[str, types.Tool] = field(default_factory=dict)
    #: Streamable HTTP only: what ``HttpCaller`` needs to call in the session's name.
    caller: HttpCaller | None = None
    session_id: str | None = None
    protocol_version: str | None = None
    ready: anyio.Event = field(default_factory=anyio.Event)
    wake: anyio.Event = field(default_factory=anyio.Event)
    changed: bool = False
    closed: bool = False
    error: str | None = None
    #: Calls running in this connection, and whether it closes once they are done.
    borrowed: int = 0
    retiring: bool = False

    def close(self) -> None:
        self.closed = True
        self.wake.set()

    def release(self) -> None:
        self.borrowed -= 1
        if self.retiring and self.borrowed == 0:
            self.close()


class Link:
    """The pooled session to one upstream; see the module docstring."""

    def __init__(self, upstream: Upstream, settings: Settings, spawn: Spawn) -> None:
        self.upstream = upstream
        self._settings = settings
        self._spawn = spawn
        self._current: Connection | None = None
        self._secret_values: tuple[str, ...] = ()
        self._retired = False

    @property
    def label(self) -> str:
        return self.upstream.name

    async def connection(self) -> Connection:
        """The open connection (session, live digests by tool name); connects when needed."""
        conn = self._current
        if self._retired:
            raise UpstreamUnavailable(f"upstream {self.label} unavailable: its settings"
                                      " changed during the call")
        if conn is None or conn.closed:
            conn = self._current = Connection()
            self._spawn(lambda: self._run(conn))
        with anyio.move_on_after(self._settings.connect_timeout):
            await conn.ready.wait()
        if conn.session is None:
            if not conn.ready.is_set():
                conn.close()
                conn.error = f"no connection within {self._settings.connect_timeout:g} s"
            raise UpstreamUnavailable(f"upstream {self.label} unavailable: {conn.error}")
        return conn

    async def call(self, conn: Connection, name: str,
                   arguments: Mapping[str, Any]) -> types.CallToolResult:
        """``tools/call`` of ``name`` (its name here) in ``conn``; ``CallFailed`` with a
        safe reason, or ``SessionLost`` when the upstream forgot the session (the
        connection is dropped: the caller may connect again and retry)."""
        conn.borrowed += 1
        try:
            if conn.caller is not None:
                result = await self._call_plain(conn, conn.caller, name, arguments)
            else:
                result = await self._call_sdk(conn, name, arguments)
        finally:
            conn.release()
        _check_output(conn.tools.get(name), result, self.label)
        return self._redacted(result)

    async def _call_plain(self, conn: Connection, caller: HttpCaller, name: str,
                          arguments: Mapping[str, Any]) -> types.CallToolResult:
        try:
            raw = await caller.call(name, arguments, session_id=conn.session_id,
                                    protocol_version=conn.protocol_version)
        except SessionLost:
            self.drop(conn.session)
            raise
        except Unreachable as exc:
            self.drop(conn.session)
            raise CallFailed(f"upstream {self.label} unavailable: {exc}") from None
        except RpcFailed as exc:
            raise CallFailed(f"upstream {self.label} answered MCP error {exc.code}:"
                             f" {self.redact(exc.message)[:200]}") from None
        try:
            return types.CallToolResult.model_validate(raw)
        except ValidationError:
            raise CallFailed(f"upstream {self.label} answered something that is not a tool"
                             " result") from None

    async def _call_sdk(self, conn: Connection, name: str,
                        arguments: Mapping[str, Any]) -> types.CallToolResult:
        session = conn.session
        assert session is not None
        try:
            response = await session.call_tool(name, dict(arguments))
        except RuntimeError:  # the SDK's client checked the result's output schema
            raise CallFailed(f"upstream {self.label} answered structured content that does"
                             " not match its output schema") from None
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                self.drop(session)
                raise CallFailed(f"upstream {self.label} unavailable: connection lost") from None
            raise CallFailed(f"upstream {self.label} answered MCP error {exc.code}:"
                             f" {self.redact(exc.error.message)[:200]}") from None
        except (httpx2.TransportError, anyio.ClosedResourceError, anyio.BrokenResourceError,
                anyio.EndOfStream, OSError):
            self.drop(session)
            raise CallFailed(f"upstream {self.label} unavailable: connection lost") from None
        except ValidationError:
            raise CallFailed(f"upstream {self.label} answered something that is not a tool"
                             " result") from None
        return response

    def _redacted(self, result: types.CallToolResult) -> types.CallToolResult:
        """The result without any secret value the upstream echoed back."""
        if not self._secret_values:
            return result
        text = result.model_dump_json(by_alias=True, exclude_none=True)
        clean = self.redact(text)
        return result if clean == text else types.CallToolResult.model_validate_json(clean)

    def retire(self) -> None:
        """Replaced by a new link (new settings): opens nothing more, and its
        connection closes once the calls running in it are done."""
        self._retired = True
        conn, self._current = self._current, None
        if conn is not None:
            conn.retiring = True
            if conn.borrowed == 0:
                conn.close()

    def drop(self, session: ClientSession | None = None) -> None:
        """Close the connection (only if it is still the one holding ``session``)."""
        conn = self._current
        if conn is not None and (session is None or conn.session is session):
            conn.close()
            self._current = None

    def redact(self, text: str) -> str:
        """``text`` without this upstream's secret values (headers, env)."""
        for value in self._secret_values:
            text = text.replace(value, "[redacted]")
        return text

    @property
    def has_secrets(self) -> bool:
        return bool(self._secret_values)

    async def _run(self, conn: Connection) -> None:
        fence: _Fence | None = None
        try:
            tls = self._trust()
            fence = _Fence(self._settings.guard, tls)
            async with self._open(conn, fence, tls) as (session, caller, version):
                conn.tools, conn.digests = await _listing(session)
                if caller is not None and version in HANDSHAKE_PROTOCOL_VERSIONS:
                    conn.caller, conn.session_id = caller, fence.session_id
                    conn.protocol_version = version
                conn.session = session
                conn.ready.set()
                while not conn.closed:
                    await conn.wake.wait()
                    conn.wake = anyio.Event()
                    if conn.changed and not conn.closed:
                        conn.changed = False
                        conn.tools, conn.digests = await _listing(session)
        except Exception as exc:
            conn.error = (fence.refusal if fence is not None else None) or self._explain(exc)
            print(f"skillop gateway: upstream {self.label}: {conn.error}", file=sys.stderr)
        finally:
            conn.closed = True
            conn.session = None
            conn.caller = None
            conn.ready.set()
            if self._current is conn:
                self._current = None

    def _trust(self) -> ssl.SSLContext:
        """What https connections to this upstream trust: the system's CAs, the
        ``--ca-file`` bundle and the server's ``tls`` one (read at each connection,
        so a rotated CA counts from the next one)."""
        upstream = self.upstream
        if upstream.url is None:
            return trust_context("", ())
        bundles = ca_bundles(upstream, secrets_root=self._settings.secrets_dir,
                             configmaps_root=self._settings.configmaps_dir,
                             ca_file=self._settings.ca_file)
        return trust_context(upstream.url, bundles)

    @asynccontextmanager
    async def _open(self, conn: Connection, fence: _Fence, tls: ssl.SSLContext,
                    ) -> AsyncIterator[tuple[ClientSession, HttpCaller | None, str]]:
        """The initialized SDK session, the plain caller (streamable HTTP only) and the
        negotiated protocol version."""
        upstream = self.upstream
        caller: HttpCaller | None = None

        async def on_message(message: IncomingMessage) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                conn.changed = True
                conn.wake.set()

        async with AsyncExitStack() as stack:
            if upstream.url is not None:
                headers = headers_of(upstream, self._settings.secrets_dir)
                self._remember_secrets(headers.values())
                self._settings.guard.check(upstream.url)
                streams: Any = _http_streams(upstream, headers, fence, stack)
                if upstream.transport != "sse":
                    caller = HttpCaller(upstream.url, headers, tls=tls,
                                        connect_timeout=self._settings.connect_timeout)
                    stack.push_async_callback(caller.close)
            else:
                env = env_of(upstream, self._settings.secrets_dir)
                self._remember_secrets(
                    env[e.name] for e in upstream.env if e.secret_key is not None)
                command = list(upstream.command)
                streams = stdio_client(StdioServerParameters(
                    command=command[0], args=[*command[1:], *upstream.args], env=env))
            read, write = await stack.enter_async_context(streams)
            session = await stack.enter_async_context(ClientSession(
                read, write, message_handler=on_message, client_info=_CLIENT_INFO))
            initialized = await session.initialize()
            yield session, caller, str(initialized.protocol_version)

    def _remember_secrets(self, values: Any) -> None:
        kept = {v for v in values if len(v) >= _MIN_SECRET_LEN}
        self._secret_values = tuple(sorted(kept, key=len, reverse=True))

    def _explain(self, exc: BaseException) -> str:
        """One safe line for whatever the SDK raised."""
        leaves = list(_leaves(exc))
        for leaf in leaves:
            if isinstance(leaf, SecretMissing):
                return str(leaf)
            if isinstance(leaf, TimeoutError | httpx2.TimeoutException):
                return "no answer in time"
            if isinstance(leaf, httpx2.ConnectError):
                if any(isinstance(cause, ssl.SSLCertVerificationError)
                       for cause in _causes(leaf)):
                    return _UNTRUSTED
                return "cannot connect"
            if isinstance(leaf, httpx2.HTTPStatusError):
                return f"HTTP {leaf.response.status_code}"
            if isinstance(leaf, MCPError):
                return f"MCP error {leaf.code}: {self.redact(leaf.error.message)[:200]}"
            if isinstance(leaf, FileNotFoundError | PermissionError):
                return f"cannot start {self.upstream.command[0]!r}"
        if any(isinstance(leaf, httpx2.TransportError | anyio.ClosedResourceError
                          | anyio.BrokenResourceError | anyio.EndOfStream) for leaf in leaves):
            return "connection lost"
        from skillop.sources.mcp_discovery import DiscoveryError

        for leaf in leaves:
            if isinstance(leaf, DiscoveryError):
                return f"{leaf.reason}: {leaf.detail}"
        return f"{type(leaves[0]).__name__}" if leaves else "failed"


def _http_streams(upstream: Upstream, headers: Mapping[str, str], fence: _Fence,
                  stack: AsyncExitStack) -> Any:
    assert upstream.url is not None
    # Reads are unbounded (the notification stream idles); each call has its own deadline.
    timeout = httpx2.Timeout(30.0, connect=5.0, read=None)

    def client(extra: Mapping[str, str] | None = None) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=fence, headers={**(extra or {}), **headers},
                                  timeout=timeout, follow_redirects=False, trust_env=False)

    if upstream.transport == "sse":
        def factory(headers: dict[str, str] | None = None, timeout: Any = None,
                    auth: Any = None) -> httpx2.AsyncClient:
            return client(headers)

        return sse_client(upstream.url, httpx_client_factory=factory)
    http = client()
    stack.push_async_callback(http.aclose)
    return streamable_http_client(upstream.url, http_client=http)


async def _listing(session: ClientSession) -> tuple[dict[str, types.Tool], dict[str, str]]:
    """Every tool the server lists, by name, and its ``info_digest``."""
    tools: dict[str, types.Tool] = {}
    digests: dict[str, str] = {}
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        page = await session.list_tools(params=params)
        for tool in page.tools:
            if tool.name not in digests:
                # As discovery turns a listing into what the ToolSet was resolved from.
                digests[tool.name] = info_digest(tool_info(tool))
                tools[tool.name] = tool
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools, digests


def _check_output(tool: types.Tool | None, result: types.CallToolResult, label: str) -> None:
    """A result must match its tool's output schema (as the SDK's client demands)."""
    if tool is None or tool.output_schema is None or result.is_error:
        return
    if result.structured_content is None:
        raise CallFailed(f"upstream {label} answered without the structured content its"
                         " output schema promises")
    if _schema_error(tool.output_schema, result.structured_content):
        raise CallFailed(f"upstream {label} answered structured content that does not"
                         " match its output schema")


_VALIDATORS: dict[str, Any] = {}


def _schema_error(schema: dict[str, Any], instance: Any) -> bool:
    """Whether ``instance`` fails ``schema`` (an invalid schema fails everything);
    compiled validators are kept by schema (compiling costs far more than validating)."""
    from jsonschema import SchemaError  # type: ignore[import-untyped]
    from jsonschema.validators import validator_for  # type: ignore[import-untyped]
    from referencing import Registry
    from referencing.exceptions import Unresolvable

    key = json.dumps(schema, sort_keys=True)
    validator = _VALIDATORS.get(key)
    if validator is None:
        cls = validator_for(schema)
        try:
            cls.check_schema(schema)
        except SchemaError:
            return True
        if len(_VALIDATORS) > 1000:
            _VALIDATORS.clear()
        validator = _VALIDATORS[key] = cls(schema, registry=Registry())
    try:
        return next(iter(validator.iter_errors(instance)), None) is not None
    except Unresolvable:
        return True


_UNTRUSTED: Final = ("TLS: the server's certificate is not trusted (trust its CA with the"
                     " server's tls.caConfigMapRef or caSecretRef, or --ca-file)")


def _causes(exc: BaseException) -> Any:
    seen = 0
    cause = exc.__cause__ or exc.__context__
    while cause is not None and seen < 10:
        yield cause
        cause = cause.__cause__ or cause.__context__
        seen += 1


def _leaves(exc: BaseException) -> Any:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


class Pool:
    """The links of the current set, replaced when an upstream's definition or
    Secrets change (the next call reconnects with the new ones)."""

    def __init__(self, settings: Settings, spawn: Spawn) -> None:
        self._settings = settings
        self._spawn = spawn
        self._links: dict[ServerKey, Link] = {}
        self._signatures: dict[ServerKey, object] = {}

    def update(self, upstreams: Mapping[ServerKey, Upstream],
               signatures: Mapping[ServerKey, object]) -> None:
        for key, link in list(self._links.items()):
            if upstreams.get(key) != link.upstream or signatures.get(key) != self._signatures.get(
                    key):
                link.retire()  # calls running in it finish there
                del self._links[key]
        for key, upstream in upstreams.items():
            if key not in self._links:
                self._links[key] = Link(upstream, self._settings, self._spawn)
        self._signatures = dict(signatures)

    def link(self, key: ServerKey) -> Link | None:
        return self._links.get(key)

    def connect_all(self) -> None:
        """Open every link in the background: upstreams are listed on connect."""
        for link in self._links.values():
            self._spawn(lambda link=link: _warm(link))  # type: ignore[misc]

    def close(self) -> None:
        for link in self._links.values():
            link.drop()


async def _warm(link: Link) -> None:
    # A failure is already reported; the next call retries.
    with suppress(UpstreamUnavailable):
        await link.connection()
