"""Keeping a server's tool list current: ``watch_tools``.

A server announcing ``tools.listChanged`` that opens a notification stream is
watched over one long session: it is re-listed on every
``notifications/tools/list_changed``, pinged when quiet, and reconnected with
exponential backoff when the connection is lost (a reconnect always lists
again, so no change is missed across an outage). Stateless servers announce the
capability but never open the stream; they are listed at once and polled.
The session, the listing and the failure reasons are ``mcp_session``'s.
"""

from __future__ import annotations

import logging
import math
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import NoReturn

import anyio
import mcp_types as types
from mcp.client.session import ClientSession, IncomingMessage

from skillop.sources.egress import EgressGuard
from skillop.sources.mcp_discovery import (
    DEFAULT_LIMITS,
    DiscoveryError,
    DiscoveryLimits,
    DiscoveryResult,
    McpTransport,
)
from skillop.sources.mcp_session import (
    announces_list_changed,
    classify,
    first,
    list_all,
    open_session,
)
from skillop.sources.mcp_transport import Wire
from skillop.sources.mcp_trust import SYSTEM_TRUST, Trust
from skillop.sources.redaction import Redactor

__all__ = ["watch_tools"]

logger = logging.getLogger(__name__)


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
    limits: DiscoveryLimits = DEFAULT_LIMITS,
    on_change: Callable[[DiscoveryResult], Awaitable[None]],
    on_error: Callable[[DiscoveryError], Awaitable[None]],
    reconnect_backoff: tuple[float, float] = (0.5, 30.0),
    ping_interval: float = 15.0,
    only_if_announced: bool = False,
    ca_bundles: Sequence[str] = (),
    trust: Trust = SYSTEM_TRUST,
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
    ``trust``: what https trusts, passed whole (``ca_bundles`` are trusted besides).
    """
    guard.check(url)
    tls = trust.adding(ca_bundles).context(url)
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

    redact = Redactor(headers.values())
    wire = Wire(url, transport, guard, limits, tls)
    wire.wake = changed.set
    try:
        # One scope whose deadline bounds connecting only: anyio forbids leaving
        # a deadline scope while the SDK's task groups opened inside it live on.
        with anyio.CancelScope(deadline=anyio.current_time() + limits.total_timeout) as connecting:
            async with open_session(url, transport, headers, wire, limits, on_message) as session:
                connecting.deadline = math.inf
                await _serve_watch(
                    session, wire, changed, limits, on_change, backoff, ping_interval,
                    redact, only_if_announced,
                )
        raise TimeoutError("connecting took too long")
    except Exception as exc:
        if first(exc, _NoStream) is not None:
            raise _NoStream() from None
        if (carrier := first(exc, _CallbackFailed)) is not None:
            raise (carrier.__cause__ or carrier) from None
        raise classify(exc, wire, redact) from None


async def _serve_watch(
    session: ClientSession,
    wire: Wire,
    changed: _Flag,
    limits: DiscoveryLimits,
    on_change: Callable[[DiscoveryResult], Awaitable[None]],
    backoff: _Backoff,
    ping_interval: float,
    redact: Redactor,
    only_if_announced: bool = False,
) -> NoReturn:
    """List, hand the list over, wait for a change; again and again."""
    announced = announces_list_changed(session)
    if announced and _stream_coming(wire):
        await _wait_event_stream(wire, limits)
    while True:
        wire.raise_if_failed()
        changed.clear()
        wire.bytes = 0  # the byte limit applies to each listing
        with anyio.fail_after(limits.total_timeout):
            result = await list_all(session, wire, limits, redact)
        live = announced and wire.open_event_streams > 0
        backoff.reset()
        try:
            await on_change(replace(result, notifications=live))
        except Exception as exc:
            raise _CallbackFailed() from exc
        if only_if_announced and not live:
            raise _NoStream()
        await _idle_until_changed(session, wire, changed, ping_interval, limits, live=live)


def _stream_coming(wire: Wire) -> bool:
    """Whether a notification stream may still open on this connection.

    On SSE the stream is the transport itself. On streamable HTTP the SDK opens
    it (a GET) only when the server gave a session id: a stateless server gives
    none and never will, so waiting for its stream would only cost the connect
    timeout.
    """
    return wire.transport == "sse" or wire.session_seen


async def _wait_event_stream(wire: Wire, limits: DiscoveryLimits) -> None:
    """Let the notification stream open before the first listing, so no change slips between.

    A server answers the GET at once (200 with an event stream, or 405 when it
    never pushes); only a hung one costs the connect timeout here.
    """
    with anyio.move_on_after(limits.connect_timeout):
        await wire.event_stream_settled.wait()


async def _idle_until_changed(
    session: ClientSession,
    wire: Wire,
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
