"""Upstream MCP servers: one pooled client session each, with its live listing.

An ``UpstreamClient`` owns at most one open connection to one upstream, shared by
every call to that server, opened and called through its ``transport.Transport``
(streamable HTTP, SSE or a stdio command; the client never asks which). The
connection lives in a task of its own (the SDK's sessions must be closed by the
task that opened them); calls borrow it. On connect, on every
``notifications/tools/list_changed``, at least every ``relist_interval`` seconds
(a server may change a tool without saying so) and before the first call after
the upstream closed the transport's connections (it may have restarted), the
client lists the server's tools and keeps each one's digest
(``mcp_tools.info_digest``, what the ToolSet's ``upstreamDigest`` holds), so a
call can tell whether the tool it forwards to is still the one the set was
resolved from. From a ``list_changed`` until its re-listing is done, calls to
that server wait: the digests they would be checked against are the old ones.

A connection that fails is dropped; the next call opens a new one. Failures are
``errors.UpstreamError``s with texts safe to show anyone: they name the server,
never a header value (the same ``EgressGuard`` and no-redirect rule as
discovery apply to every request, docs/mcp.md).
"""

from __future__ import annotations

import contextvars
import logging
import sys
from collections.abc import Callable, Coroutine, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import mcp_types as types
from mcp.client.session import ClientSession, IncomingMessage
from mcp.shared.inbound import x_mcp_header_map

from skillop.gateway.errors import (
    CallFailed,
    ConnectionLost,
    ConnectTimedOut,
    SessionLost,
    UpstreamError,
    UpstreamUnavailable,
)
from skillop.gateway.exchange import Exchanged
from skillop.gateway.served import ServerKey
from skillop.gateway.transport import transport_for
from skillop.gateway.transport.base import LIMITS, Bounds, Calls, Settings, Transport
from skillop.model.toolset import ServerEntry
from skillop.sources.mcp_session import Unfenced, list_pages, tool_info
from skillop.sources.mcp_tools import info_digest
from skillop.sources.redaction import Redactor

logger = logging.getLogger(__name__)

Spawn = Callable[[Callable[[], Coroutine[Any, Any, None]]], object]

#: Links opened at once while warming, and the least time between two starts: each
#: is a handshake and a listing on the event loop, which the agent's requests share
#: (an unreachable server's failure alone is about 4 ms of its CPU; unpaced, a few
#: hundred of them held the loop for a second).
WARM_AT_ONCE: Final = 8
WARM_INTERVAL_SECONDS: Final = 0.02

__all__ = ["CallFailed", "Connection", "Pool", "SessionLost", "Settings", "UpstreamClient",
           "UpstreamError", "UpstreamUnavailable"]


@dataclass(eq=False)
class Connection:
    """One connection attempt of a client, from opening to closing: the SDK session,
    its calls and the live listing."""

    session: ClientSession | None = None
    calls: Calls | None = None
    digests: Mapping[str, str] = field(default_factory=dict)
    #: The live definitions by name (their output schemas validate results).
    tools: Mapping[str, types.Tool] = field(default_factory=dict)
    #: Of the tools above, those with ``x-mcp-header`` arguments: their header maps
    #: (a 2026-07-28 call carries those arguments as headers too), made per listing.
    header_maps: Mapping[str, Mapping[tuple[str, ...], str]] = field(default_factory=dict)
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


class UpstreamClient:
    """The pooled connection to one upstream; see the module docstring."""

    def __init__(self, upstream: ServerEntry, settings: Settings, spawn: Spawn) -> None:
        self.upstream = upstream
        #: The upstream's name (an attribute: read by every call's membership guard).
        self.label = upstream.name
        self._settings = settings
        self._spawn = spawn
        self._transport: Transport = transport_for(upstream, settings)
        self._current: Connection | None = None
        self._retired = False

    async def connection(self) -> Connection:
        """The open connection (session, live digests by tool name); connects when needed.

        A connection whose upstream closed the transport's connections under it (it
        may have restarted, with other tools, keeping no session to lose) is listed
        again before it is used; when that listing fails (the restarted upstream
        does not know the session), a new connection is opened and listed."""
        conn = self._current
        if self._retired:
            self._check_retired()
        if conn is not None and not conn.closed and conn.calls is not None:
            if conn.current.is_set() and not conn.calls.peer_closed():
                return conn  # open and listed: nothing to wait for (every call's case)
            if conn.current.is_set():
                conn.stale()
            try:
                return await self._listed(conn)
            except UpstreamUnavailable:
                if not conn.closed:
                    raise
            self._check_retired()  # the listing failed: a new connection, listed
        if conn is None or conn.closed:
            conn = self._current = Connection()
            self._spawn(lambda: self._run(conn))
        return await self._listed(conn)

    def _check_retired(self) -> None:
        if self._retired:
            raise UpstreamUnavailable(f"upstream {self.label} unavailable: its settings"
                                      " changed during the call")

    async def _listed(self, conn: Connection) -> Connection:
        """``conn`` once it is open and its listing current; ``UpstreamUnavailable``
        when it does not get there within the connect timeout."""
        timeout = self._settings.connect_timeout
        with anyio.move_on_after(timeout):
            await conn.ready.wait()
        if conn.calls is None:
            if not conn.ready.is_set():
                conn.error = f"no connection within {timeout:g} s"
                conn.close()  # and its attempt with it: nothing waits for it any more
                raise ConnectTimedOut(f"upstream {self.label} unavailable: {conn.error}")
            raise self._unavailable(conn)
        with anyio.move_on_after(timeout):
            await conn.current.wait()
        if not conn.current.is_set():
            raise ConnectTimedOut(f"upstream {self.label} unavailable: its tools changed and"
                                  f" were not listed again within {timeout:g} s")
        if conn.calls is None:
            raise self._unavailable(conn)
        return conn

    def _unavailable(self, conn: Connection) -> UpstreamUnavailable:
        said = f"upstream {self.label} unavailable"
        return UpstreamUnavailable(f"{said}: {conn.error}",
                                   audit=f"{said}: {conn.audit_error or conn.error}")

    async def call(self, conn: Connection, name: str, arguments: Mapping[str, Any], *,
                   exchanged: Exchanged | None = None) -> types.CallToolResult:
        """``tools/call`` of ``name`` (its name here) in ``conn``; ``CallFailed`` with a
        safe reason, or ``SessionLost`` when the upstream forgot the session (the
        connection is dropped: the caller may connect again and retry).
        ``exchanged``: the caller's token for this server, sent with this call only
        and redacted from its result like the Secrets' values."""
        calls = conn.calls
        if calls is None:
            raise ConnectionLost(f"upstream {self.label} unavailable: connection lost")
        conn.borrowed += 1
        try:
            result = await calls.call(name, arguments, header_map=conn.header_maps.get(name),
                                      exchanged=exchanged)
        except (ConnectionLost, SessionLost):
            self.drop(conn.session)
            raise
        finally:
            conn.release()
        if exchanged is not None:
            result = self._redacted(result, exchanged.redactor)
        return self._redacted(result, self._transport.redactor)

    def _redacted(self, result: types.CallToolResult,
                  redactor: Redactor) -> types.CallToolResult:
        """The result without any secret value the upstream echoed back, in any of
        the forms ``Redactor`` knows, in any string of it (and split across its
        text items)."""
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
        self._settings.observer.count(lambda m: m.redacted(self.label))
        return types.CallToolResult.model_validate(clean)

    def retire(self) -> None:
        """Replaced by a new client (new settings): opens nothing more, and its
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
        transport = self._transport
        bounds: Bounds = Unfenced(f"upstream {self.label}")
        try:
            with conn.scope:
                bounds = transport.bounds()

                async def on_message(message: IncomingMessage) -> None:
                    if isinstance(message, types.ToolListChangedNotification):
                        conn.stale()

                async with transport.open(bounds, on_message) as (session, calls):
                    await _listing(session, bounds, conn, transport.own)
                    await calls.settle()
                    conn.session, conn.calls = session, calls
                    conn.current.set()
                    conn.ready.set()
                    await self._relist(conn, session, bounds)
        except Exception as exc:
            conn.error, conn.audit_error = transport.explain(exc, bounds)
            print(f"skillop gateway: upstream {self.label}: {conn.error}", file=sys.stderr)
        finally:
            conn.closed = True
            conn.session = None
            conn.calls = None
            conn.ready.set()
            conn.current.set()
            if self._current is conn:
                self._current = None

    async def _relist(self, conn: Connection, session: ClientSession, bounds: Bounds) -> None:
        """List again when told of a change, or when the interval is over (a change
        not told), until the connection closes."""
        while not conn.closed:
            with anyio.move_on_after(self._settings.relist_interval):
                await conn.wake.wait()
            conn.wake = anyio.Event()
            if not conn.closed:
                changes, digests = conn.changes, conn.digests
                await _listing(session, bounds, conn, self._transport.own)
                changed = conn.digests != digests
                self._settings.observer.count(  # called at once:
                    lambda m: m.relisted(self.label, changed=changed))  # noqa: B023
                if conn.changes == changes:  # else listed again at once (woken)
                    conn.current.set()


async def _listing(session: ClientSession, bounds: Bounds, conn: Connection,
                   redact: Redactor) -> None:
    """Every tool the server lists, by name, its ``info_digest`` and its header map,
    into ``conn``: discovery's listing (``list_pages``: its page, tool and cursor
    checks), digested as discovery digests what the ToolSet was resolved from
    (redacted with the values discovery redacts, ``redact``)."""
    tools, _ = await list_pages(session, bounds, LIMITS, redact)
    maps = {name: x_mcp_header_map(tool.input_schema) for name, tool in tools.items()}
    conn.tools, conn.header_maps = tools, {name: m for name, m in maps.items() if m}
    conn.digests = {name: info_digest(tool_info(tool, redact)) for name, tool in tools.items()}


class Pool:
    """The links of the current set, replaced when an upstream's definition or
    Secrets change (the next call reconnects with the new ones).

    The links are warmed (opened, so that a call finds its upstream listed) in the
    background, ``WARM_AT_ONCE`` at a time and one per ``WARM_INTERVAL_SECONDS`` at
    most, from ``start_warming`` on: once a client has its first listing, or makes
    its first call without one. Hundreds of handshakes would otherwise hold up the
    agent's own handshake, listing and first search on the event loop; a call to a
    link not yet warm opens it at once itself."""

    def __init__(self, settings: Settings, spawn: Spawn) -> None:
        self._settings = settings
        # A link's connection outlives the call that opened it and serves every later
        # one: its task runs in the pool's context, not the call's (its trace, its
        # caller, its headers).
        context = contextvars.copy_context()
        self._spawn: Spawn = lambda fn: context.run(spawn, fn)
        self._links: dict[ServerKey, UpstreamClient] = {}
        self._signatures: dict[ServerKey, object] = {}
        self._warming = False
        self._slots = anyio.Semaphore(WARM_AT_ONCE)
        self._pace = anyio.Lock()

    def update(self, upstreams: Mapping[ServerKey, ServerEntry],
               signatures: Mapping[ServerKey, object]) -> None:
        for key, link in list(self._links.items()):
            if upstreams.get(key) != link.upstream or signatures.get(key) != self._signatures.get(
                    key):
                link.retire()  # calls running in it finish there
                del self._links[key]
        for key, upstream in upstreams.items():
            if key not in self._links:
                self._links[key] = UpstreamClient(upstream, self._settings, self._spawn)
        self._signatures = dict(signatures)

    def link(self, key: ServerKey) -> UpstreamClient | None:
        if not self._warming:  # a call, made without a listing
            self.start_warming()
        return self._links.get(key)

    def connect_all(self) -> None:
        """Open every link in the background once warming has started (upstreams are
        listed on connect)."""
        if self._warming:
            self._warm_links()

    def start_warming(self) -> None:
        """Warm the links from now on (a client has its listing)."""
        if not self._warming:
            self._warming = True
            self._warm_links()

    def _warm_links(self) -> None:
        for link in self._links.values():
            self._spawn(lambda link=link: self._warm(link))  # type: ignore[misc]

    async def _warm(self, link: UpstreamClient) -> None:
        async with self._slots:
            async with self._pace:
                await anyio.sleep(WARM_INTERVAL_SECONDS)
            # A failure is already reported; the next call retries (a link retired
            # meanwhile says so here too).
            with suppress(UpstreamUnavailable):
                await link.connection()

    def close(self) -> None:
        for link in self._links.values():
            link.drop()
