"""Upstream MCP servers: one pooled client session each, with its live listing.

A ``Link`` owns at most one open session to one upstream (streamable HTTP, SSE
or a stdio command), shared by every call to that server. The session lives in
a task of its own (the SDK's sessions must be closed by the task that opened
them); calls borrow it. On connect, on every
``notifications/tools/list_changed`` and at least every ``relist_interval``
seconds (a server may change a tool without saying so), the link lists the
server's tools and keeps each one's digest (``mcp_tools.info_digest``, what the
ToolSet's ``upstreamDigest`` holds), so a call can tell whether the tool it
forwards to is still the one the set was resolved from. From a ``list_changed``
until its re-listing is done, calls to that server wait: the digests they would
be checked against are the old ones.

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

import logging
import os
import ssl
import sys
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import anyio
import httpx2
import mcp_types as types
from mcp.client.extension import UnexpectedClaimedResult
from mcp.client.session import ClientSession, IncomingMessage, MessageHandlerFnT
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import mcp_param_headers, x_mcp_header_map
from mcp_types import SERVER_INFO_META_KEY
from mcp_types.methods import is_input_required
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError

from skillop import __version__
from skillop.gateway.caller import (
    CONNECT_TIMEOUT_SECONDS,
    HttpCaller,
    RpcFailed,
    SessionLost,
    Unreachable,
)
from skillop.gateway.observe import NOTHING, Observer
from skillop.gateway.secrets import (
    DEFAULT_CONFIGMAPS_DIR,
    SecretMissing,
    ca_bundles,
    credentials,
    env_of,
    headers_of,
)
from skillop.gateway.served import ServerKey, Upstream
from skillop.gateway.wire import MAX_MESSAGE_BYTES
from skillop.model.settings import GATEWAY_RELIST_INTERVAL
from skillop.sources.egress import EgressGuard
from skillop.sources.mcp_discovery import DiscoveryLimits, ErrorReason, McpTransport
from skillop.sources.mcp_session import (
    Unfenced,
    classify,
    first,
    list_pages,
    open_session,
    tool_info,
)
from skillop.sources.mcp_tools import info_digest
from skillop.sources.mcp_transport import Wire, trust_context
from skillop.sources.redaction import Redactor

logger = logging.getLogger(__name__)

_CLIENT_INFO: Final = types.Implementation(name="skillop-gateway", version=__version__)
_CLIENT_INFO_WIRE: Final = _CLIENT_INFO.model_dump(by_alias=True, mode="json", exclude_none=True)

Spawn = Callable[[Callable[[], Coroutine[Any, Any, None]]], object]


class _Explained(Exception):
    """A failure with two safe texts: ``str`` for the agent (may quote the upstream,
    redacted and bounded) and ``audit``, the gateway's own words only."""

    def __init__(self, message: str, *, audit: str | None = None) -> None:
        super().__init__(message)
        self.audit = audit if audit is not None else message


class UpstreamUnavailable(_Explained):
    """The upstream cannot be reached or answered badly."""


class CallFailed(_Explained):
    """A forwarded call got no usable answer."""


__all__ = ["CallFailed", "Link", "Pool", "SessionLost", "Settings", "UpstreamUnavailable"]


@dataclass(frozen=True, slots=True)
class Settings:
    """How links connect: where Secrets are mounted, which hosts may be contacted."""

    secrets_dir: Path
    guard: EgressGuard
    connect_timeout: float = CONNECT_TIMEOUT_SECONDS
    #: Mounted ConfigMaps holding CA bundles (``tls.caConfigMapRef``).
    configmaps_dir: Path = DEFAULT_CONFIGMAPS_DIR
    #: A CA bundle trusted for every https upstream (``--ca-file``).
    ca_file: Path | None = None
    #: Every upstream is listed again at least this often (``--relist-interval``),
    #: so a definition changed without ``list_changed`` is seen within it.
    relist_interval: float = GATEWAY_RELIST_INTERVAL.default
    #: Where the API token is mounted (``--api-dir``): redacted like the Secrets.
    api_dir: Path | None = None
    #: Told of re-listings and redactions; adds the trace context to calls (observe.py).
    observer: Observer = NOTHING

    def redactor(self, own: Iterable[str]) -> Redactor:
        """A link's redactor: its own values and every other credential mounted here."""
        return Redactor([*own, *credentials(self.secrets_dir, api_dir=self.api_dir)])


#: Discovery's bounds, for the gateway's listings; an answer may be as large as a
#: call's (``wire.MAX_MESSAGE_BYTES``), metered one at a time.
_LIMITS: Final = DiscoveryLimits(max_response_bytes=MAX_MESSAGE_BYTES)


@dataclass(eq=False)
class Connection:
    """One connection attempt of a link, from opening to closing: the SDK session,
    the live listing and, for streamable HTTP, the session's id for ``HttpCaller``."""

    session: ClientSession | None = None
    digests: Mapping[str, str] = field(default_factory=dict)
    #: The live definitions by name (their output schemas validate results).
    tools: Mapping[str, types.Tool] = field(default_factory=dict)
    #: Of the tools above, those with ``x-mcp-header`` arguments: their header maps
    #: (a 2026-07-28 call carries those arguments as headers too), made per listing.
    header_maps: Mapping[str, Mapping[tuple[str, ...], str]] = field(default_factory=dict)
    #: Streamable HTTP only: what ``HttpCaller`` needs to call in the session's name.
    caller: HttpCaller | None = None
    session_id: str | None = None
    protocol_version: str | None = None
    ready: anyio.Event = field(default_factory=anyio.Event)
    wake: anyio.Event = field(default_factory=anyio.Event)
    #: Set while the listing is current; cleared from a ``list_changed`` until the
    #: re-listing is done (calls wait for it: the old digests no longer vouch).
    current: anyio.Event = field(default_factory=anyio.Event)
    #: ``list_changed`` notifications so far (one during a listing outdates it).
    changes: int = 0
    closed: bool = False
    error: str | None = None
    audit_error: str | None = None
    #: Calls running in this connection, and whether it closes once they are done.
    borrowed: int = 0
    retiring: bool = False
    #: The connection's task: cancelled when the connection is given up while it is
    #: still connecting (a server that accepts TCP and never answers).
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)

    def close(self) -> None:
        self.closed = True
        self.wake.set()
        if not self.ready.is_set():
            self.scope.cancel()
        self.current.set()  # nobody waits for a listing that will not come

    def stale(self) -> None:
        """The upstream said its tools changed: list again, and hold calls until then."""
        if self.current.is_set():
            self.current = anyio.Event()
        self.changes += 1
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
        #: Redacts the link's answers: every credential mounted in the gateway.
        self._redactor = Redactor(())
        #: Redacts its listings as discovery does: the values it is sent itself (the
        #: live digests must be those of what the ToolSet was resolved from).
        self._own = Redactor(())
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
        elif conn.session is not None and conn.current.is_set():
            return conn  # open and listed: nothing to wait for (every call's case)
        with anyio.move_on_after(self._settings.connect_timeout):
            await conn.ready.wait()
        if conn.session is None:
            if not conn.ready.is_set():
                conn.error = f"no connection within {self._settings.connect_timeout:g} s"
                conn.close()  # and its attempt with it: nothing waits for it any more
            raise UpstreamUnavailable(
                f"upstream {self.label} unavailable: {conn.error}",
                audit=f"upstream {self.label} unavailable: {conn.audit_error or conn.error}")
        with anyio.move_on_after(self._settings.connect_timeout):
            await conn.current.wait()
        if not conn.current.is_set():
            raise UpstreamUnavailable(f"upstream {self.label} unavailable: its tools changed and"
                                      f" were not listed again within"
                                      f" {self._settings.connect_timeout:g} s")
        if conn.session is None:
            raise UpstreamUnavailable(
                f"upstream {self.label} unavailable: {conn.error}",
                audit=f"upstream {self.label} unavailable: {conn.audit_error or conn.error}")
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
        return self._redacted(result)

    def _rpc_failed(self, code: int, message: str) -> CallFailed:
        """The upstream's JSON-RPC error: its text for the agent, redacted before it is
        bounded (a bound first could leave part of a value); the code alone for the
        audit line."""
        said = f"upstream {self.label} answered MCP error {code}"
        return CallFailed(f"{said}: {self._redactor.line(message, 200)}", audit=said)

    async def _call_plain(self, conn: Connection, caller: HttpCaller, name: str,
                          arguments: Mapping[str, Any]) -> types.CallToolResult:
        try:
            raw = await caller.call(name, arguments, session_id=conn.session_id,
                                    protocol_version=conn.protocol_version,
                                    client_info=_CLIENT_INFO_WIRE,
                                    param_headers=_param_headers(conn.header_maps.get(name),
                                                                 arguments),
                                    trace=self._settings.observer.context())  # observe
        except SessionLost:
            self.drop(conn.session)
            raise
        except Unreachable as exc:  # may quote the upstream (a content type)
            self.drop(conn.session)
            raise CallFailed(f"upstream {self.label} unavailable:"
                             f" {self._redactor.line(str(exc), 120)}",
                             audit=f"upstream {self.label} unavailable: {exc.own}") from None
        except RpcFailed as exc:
            raise self._rpc_failed(exc.code, exc.message) from None
        if is_input_required(raw):
            raise CallFailed(self._asks_input())
        meta = raw.get("_meta")
        if isinstance(meta, dict) and SERVER_INFO_META_KEY in meta:
            # A 2026-07-28 answer names its server: the agent's server is the gateway.
            raw = {**raw, "_meta": {k: v for k, v in meta.items() if k != SERVER_INFO_META_KEY}}
        try:
            result = types.CallToolResult.model_validate(raw)
        except ValidationError:
            raise CallFailed(f"upstream {self.label} answered something that is not a tool"
                             " result") from None
        if not result.is_error and conn.session is not None:
            # The SDK's own check, as its call_tool makes it (the output schema is the
            # one the session listed).
            try:
                await conn.session.validate_tool_result(name, result)
            except RuntimeError:
                raise CallFailed(self._off_schema()) from None
        return result

    async def _call_sdk(self, conn: Connection, name: str,
                        arguments: Mapping[str, Any]) -> types.CallToolResult:
        session = conn.session
        assert session is not None
        try:
            response = await session.call_tool(name, dict(arguments), allow_input_required=True)
        except RuntimeError:  # the SDK's client checked the result's output schema
            raise CallFailed(self._off_schema()) from None
        except UnexpectedClaimedResult:
            raise CallFailed(f"upstream {self.label} answered something that is not a tool"
                             " result") from None
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                self.drop(session)
                raise CallFailed(f"upstream {self.label} unavailable: connection lost") from None
            raise self._rpc_failed(exc.code, exc.error.message) from None
        except (httpx2.TransportError, anyio.ClosedResourceError, anyio.BrokenResourceError,
                anyio.EndOfStream, OSError):
            self.drop(session)
            raise CallFailed(f"upstream {self.label} unavailable: connection lost") from None
        except ValidationError:
            raise CallFailed(f"upstream {self.label} answered something that is not a tool"
                             " result") from None
        if isinstance(response, types.InputRequiredResult):
            raise CallFailed(self._asks_input())
        return response

    def _off_schema(self) -> str:
        return (f"upstream {self.label} answered structured content that does not match its"
                " output schema")

    def _asks_input(self) -> str:
        return (f"upstream {self.label} asked for more input (input_required), which the"
                " gateway does not relay")

    def _redacted(self, result: types.CallToolResult) -> types.CallToolResult:
        """The result without any secret value the upstream echoed back, in any of
        the forms ``Redactor`` knows, in any string of it (and split across its
        text items)."""
        redactor = self._redactor
        if not redactor:
            return result
        data = result.model_dump(by_alias=True, exclude_none=True, mode="json")
        clean = redactor.json(data)
        items = [item for item in clean.get("content", [])
                 if isinstance(item, dict) and item.get("type") == "text"]
        for item, text in zip(items, redactor.texts([i["text"] for i in items]), strict=True):
            item["text"] = text
        if clean == data:
            return result
        self._settings.observer.count(lambda m: m.redacted(self.label))  # observe
        return types.CallToolResult.model_validate(clean)

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

    async def _run(self, conn: Connection) -> None:
        bounds: Wire | Unfenced = Unfenced(f"upstream {self.label}")
        try:
            with conn.scope:
                tls = self._trust()
                if self.upstream.url is not None:
                    bounds = Wire(self.upstream.url, _transport(self.upstream),
                                  self._settings.guard, _LIMITS, tls, per_response=True)
                async with self._open(conn, bounds, tls) as (session, caller, version):
                    await _listing(session, bounds, conn, self._own)
                    if caller is not None and version in HANDSHAKE_PROTOCOL_VERSIONS:
                        assert isinstance(bounds, Wire)
                        conn.caller, conn.session_id = caller, bounds.session_id
                        conn.protocol_version = version
                        # A 2026-07-28 server is called in that revision: a request of
                        # its own costs it far less than one in a session (the session
                        # stays for the listings and list_changed).
                        modern = await caller.discover(_CLIENT_INFO_WIRE)
                        if modern is not None:
                            conn.session_id, conn.protocol_version = None, modern
                    conn.session = session
                    conn.current.set()
                    conn.ready.set()
                    while not conn.closed:
                        with anyio.move_on_after(self._settings.relist_interval):
                            await conn.wake.wait()
                        conn.wake = anyio.Event()
                        if not conn.closed:
                            # Told of a change, or the interval is over (a change not told).
                            changes, digests = conn.changes, conn.digests
                            await _listing(session, bounds, conn, self._own)
                            changed = conn.digests != digests
                            self._settings.observer.count(  # observe; called at once:
                                lambda m: m.relisted(self.label, changed=changed))  # noqa: B023
                            if conn.changes == changes:  # else listed again at once (woken)
                                conn.current.set()
        except Exception as exc:
            conn.error, conn.audit_error = self._explain(exc, bounds)
            print(f"skillop gateway: upstream {self.label}: {conn.error}", file=sys.stderr)
        finally:
            conn.closed = True
            conn.session = None
            conn.caller = None
            conn.ready.set()
            conn.current.set()
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
    async def _open(self, conn: Connection, bounds: Wire | Unfenced, tls: ssl.SSLContext,
                    ) -> AsyncIterator[tuple[ClientSession, HttpCaller | None, str]]:
        """The initialized SDK session, the plain caller (streamable HTTP only) and the
        negotiated protocol version."""
        upstream = self.upstream

        async def on_message(message: IncomingMessage) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                conn.stale()

        async with AsyncExitStack() as stack:
            caller: HttpCaller | None = None
            if isinstance(bounds, Wire):
                assert upstream.url is not None
                headers = headers_of(upstream, self._settings.secrets_dir)
                self._own = Redactor(headers.values())
                self._redactor = self._settings.redactor(headers.values())
                self._settings.guard.check(upstream.url)
                session = await stack.enter_async_context(open_session(
                    upstream.url, _transport(upstream), headers, bounds, _LIMITS, on_message,
                    client_info=_CLIENT_INFO, read_timeout=None))
                if upstream.transport != "sse":
                    caller = HttpCaller(upstream.url, headers, tls=tls,
                                        connect_timeout=self._settings.connect_timeout)
                    stack.push_async_callback(caller.close)
            else:
                session = await stack.enter_async_context(self._stdio(on_message))
            yield session, caller, str(session.protocol_version)

    @asynccontextmanager
    async def _stdio(self, on_message: MessageHandlerFnT) -> AsyncIterator[ClientSession]:
        """The initialized session to a stdio child, whose stderr is relayed redacted
        (a server printing its environment would print its Secret values)."""
        upstream = self.upstream
        env = env_of(upstream, self._settings.secrets_dir)
        secret = [env[e.name] for e in upstream.env if e.secret_key is not None]
        self._own = Redactor(secret)
        self._redactor = self._settings.redactor(secret)
        command = list(upstream.command)
        async with AsyncExitStack() as stack:
            errlog = stack.enter_context(_RedactedStderr(self._redactor, self.label))
            read, write = await stack.enter_async_context(stdio_client(StdioServerParameters(
                command=command[0], args=[*command[1:], *upstream.args], env=env),
                errlog=errlog.writer))
            errlog.started()
            session = await stack.enter_async_context(ClientSession(
                read, write, message_handler=on_message, client_info=_CLIENT_INFO))
            await session.initialize()
            yield session

    def _explain(self, exc: BaseException, bounds: Wire | Unfenced) -> tuple[str, str]:
        """Two safe lines for whatever the SDK raised: ``classify``'s finding (the one
        discovery reports too) for the agent and stderr, which may quote the upstream
        redacted; and the gateway's own words alone, for the audit line."""
        found = first(exc, (SecretMissing, FileNotFoundError, PermissionError))
        if isinstance(found, SecretMissing):
            return str(found), str(found)
        if found is not None:
            started = f"cannot start {self.upstream.command[0]!r}"
            return started, started
        error = classify(exc, bounds, self._redactor)
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


def _transport(upstream: Upstream) -> McpTransport:
    return "sse" if upstream.transport == "sse" else "streamable-http"


class _RedactedStderr:
    """A pipe for a stdio child's stderr, relayed line by line to the gateway's own
    stderr with every Secret value redacted, each line marked as the child's (a
    child cannot write what reads as the gateway's audit line).

    A line is redacted whole, then bounded: one read up to ``_READ`` characters,
    of which at most the first ``_SHOWN`` are relayed, so a value is never cut in
    two before it is recognised (a value cut off at the read's end lies far past
    what is shown); the rest of a longer line is read and dropped."""

    _READ: Final = 1024 * 1024
    _SHOWN: Final = 64 * 1024

    def __init__(self, redactor: Redactor, label: str) -> None:
        self._redactor = redactor
        self._label = label
        read, write = os.pipe()
        self._read = os.fdopen(read, "r", encoding="utf-8", errors="replace")
        self.writer = os.fdopen(write, "w")

    def __enter__(self) -> _RedactedStderr:
        threading.Thread(target=self._relay, daemon=True,
                         name=f"stderr of {self._label}").start()
        return self

    def started(self) -> None:
        """The child holds its copy of the pipe: ours closes, so that the relay ends
        when the child does."""
        self.writer.close()

    def __exit__(self, *exc: object) -> None:
        self.writer.close()

    def _relay(self) -> None:
        with self._read:
            while line := self._read.readline(self._READ):
                whole = line.endswith("\n")
                text = self._redactor(line.rstrip("\n"))
                cut = " [line cut]" if len(text) > self._SHOWN or not whole else ""
                sys.stderr.write(f"[upstream {self._label} stderr] {text[:self._SHOWN]}{cut}\n")
                sys.stderr.flush()
                while not whole and (line := self._read.readline(self._READ)):
                    whole = line.endswith("\n")


def _param_headers(header_map: Mapping[tuple[str, ...], str] | None,
                   arguments: Mapping[str, Any]) -> dict[str, str]:
    """The ``Mcp-Param-*`` headers a 2026-07-28 call carries (its tool's input
    schema's ``x-mcp-header`` arguments, ``header_map``), as the SDK's client sends them."""
    return mcp_param_headers(header_map, arguments) if header_map else {}


async def _listing(session: ClientSession, bounds: Wire | Unfenced, conn: Connection,
                   redact: Redactor) -> None:
    """Every tool the server lists, by name, its ``info_digest`` and its header map,
    into ``conn``: discovery's listing (``list_pages``: its page, tool and cursor
    checks), digested as discovery digests what the ToolSet was resolved from
    (redacted with the values discovery redacts, ``redact``)."""
    tools, _ = await list_pages(session, bounds, _LIMITS, redact)
    maps = {name: x_mcp_header_map(tool.input_schema) for name, tool in tools.items()}
    conn.tools, conn.header_maps = tools, {name: m for name, m in maps.items() if m}
    conn.digests = {name: info_digest(tool_info(tool, redact)) for name, tool in tools.items()}


_UNTRUSTED: Final = ("TLS: the server's certificate is not trusted (trust its CA with the"
                     " server's tls.caConfigMapRef or caSecretRef, or --ca-file)")


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
