"""The task that keeps one MCP server's tool list fresh: its lifecycle only.

One ``ServerWatch`` per ``ServerKey``. Its task connects, lists, and keeps the
session open as a watch when the server announces ``tools.listChanged``;
otherwise it polls at ``interval``. ``wake`` ends the current connection and
lists again at once (a Skill changed, a CA bundle rotated). What a listing
found is not kept here: the task hands each result or failure to its
``Listener`` (``operator.discovery``), which replaces the server's ``Listing``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from skillop.model.names import ObjectRef
from skillop.model.serverkeys import ServerKey
from skillop.operator.listing import Listing
from skillop.operator.mcpconnect import CABundleMissing, Connection

if TYPE_CHECKING:  # the MCP client is imported when the first server is listed
    from skillop.sources.egress import EgressGuard
    from skillop.sources.mcp_discovery import (
        DiscoveryError,
        DiscoveryLimits,
        DiscoveryResult,
        McpTransport,
    )

#: Longest quiet time on a watched (listChanged) server before it is pinged.
PING_SECONDS = 15.0


@dataclass
class ServerWatch:
    key: ServerKey
    transport: McpTransport
    #: (Skill, server name) of every Skill naming the server with these credentials.
    users: set[tuple[ObjectRef, str]] = field(default_factory=set)
    interval: float = 300.0
    task: asyncio.Task[None] | None = None
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    #: A listing is under way whose result has not been delivered yet (a watched
    #: server: until the watch session's own first listing arrives).
    listing: bool = False
    #: What the listings found; replaced whole by each.
    state: Listing = field(default_factory=Listing)

    @property
    def url(self) -> str:
        return self.key.url

    def join(self, interval: float, *, refresh: bool) -> bool:
        """A Skill names the server (again), polling it at ``interval``: whether the
        task is to be started. A running one is woken when the interval got
        shorter, or a refresh is due.

        A listing already under way ends after this change and serves as its
        refresh: a burst of Skills naming one server (start-up, an apply of a
        directory) costs one session, not one per Skill. A watched server's list
        is live already: its open session is the refresh. (Headers never change
        under a watch: another Secret is another ServerKey.)
        """
        shorter = self.task is not None and interval < self.interval
        self.interval = min(self.interval, interval) if self.task else interval
        if self.task is None or self.task.done():
            return True
        if shorter or (refresh and not self.listing) or not (self.listing or self.state.watched):
            self.wake.set()
        return False


class Listener(Protocol):
    """Where a watch gets what it connects with, and hands what it found."""

    async def connect(self, watch: ServerWatch) -> Connection: ...

    def listed(self, watch: ServerWatch, result: DiscoveryResult) -> None: ...

    def failed(self, watch: ServerWatch, reason: str, message: str) -> None: ...


async def run(watch: ServerWatch, listener: Listener, *, guard: EgressGuard,
              limits: DiscoveryLimits) -> None:
    """The watch's task: connect, list (and watch), wait, again; until cancelled."""
    from skillop.sources.mcp_watch import watch_tools

    async def changed(result: DiscoveryResult) -> None:
        watch.listing = False
        listener.listed(watch, result)

    async def failed(err: DiscoveryError) -> None:
        watch.listing = False
        listener.failed(watch, err.reason, str(err))

    while True:
        watch.wake.clear()  # before listing: a Skill change during it lists again
        watch.listing = True
        try:
            conn = await listener.connect(watch)
            # One connection per server: it lists, and stays open as the watch
            # when the server announces listChanged; otherwise it returns and the
            # server is polled. Pings come at the refresh interval at most, so a
            # dead server shows soon.
            await until_woken(watch.wake, watch_tools(
                watch.url, transport=watch.transport, headers=conn.headers, guard=guard,
                limits=limits, on_change=changed, on_error=failed,
                ping_interval=min(watch.interval, PING_SECONDS),
                reconnect_backoff=(0.5, max(0.5, min(watch.interval, 30.0))),
                only_if_announced=True, trust=conn.trust))
            if watch.wake.is_set():
                continue
        except Exception as err:
            watch.listing = False
            listener.failed(watch, *failure(watch.url, err))
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(watch.wake.wait(), timeout=watch.interval)


def failure(url: str, err: Exception) -> tuple[str, str]:
    """The condition reason and the one line a failed connection is reported with."""
    from skillop.sources.egress import display_url
    from skillop.sources.mcp_discovery import DiscoveryError

    if isinstance(err, DiscoveryError):
        return err.reason, str(err)
    if isinstance(err, CABundleMissing):
        return "TLSError", f"MCP discovery at {display_url(url)} failed (TLSError): {err}"
    # A Secret that cannot be read, and the like.
    return "DiscoveryFailed", f"{type(err).__name__}: {err}"


async def until_woken(wake: asyncio.Event, work: Awaitable[None]) -> None:
    """Run ``work`` until it ends (its exception propagates) or ``wake`` is set."""
    task = asyncio.ensure_future(work)
    woken = asyncio.ensure_future(wake.wait())
    try:
        await asyncio.wait({task, woken}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in (task, woken):
            pending.cancel()
        for pending in (task, woken):
            with contextlib.suppress(asyncio.CancelledError):
                await pending
    if task.done() and not task.cancelled():
        task.result()
