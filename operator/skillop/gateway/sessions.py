"""The gateway's connected MCP clients, by session.

A client is registered when it sends ``notifications/initialized`` (over HTTP the
front holds the SDK's 202 until then, ``front.Front``), forgotten when its
session ends; ``list_changed`` goes to every one registered. Over HTTP the
requests open in a session are counted, so that a session is idle only with
none open (``Sessions.idle``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from mcp.server.session import ServerSession
from mcp_types.version import LATEST_HANDSHAKE_VERSION


@dataclass(eq=False, slots=True)
class Client:
    """A connected MCP client: its SDK session (to notify it) and what it can do."""

    #: None for a 2026-07-28 request (no session: nothing to notify).
    session: ServerSession | None
    can_elicit: bool
    last_seen: float
    #: The protocol revision its session negotiated (answers are shaped for it).
    protocol_version: str = LATEST_HANDSHAKE_VERSION


class Sessions:
    """The connected clients by session id (``stdio:<n>`` for a stdio client)."""

    def __init__(self) -> None:
        self._clients: dict[str, Client] = {}
        #: Requests being answered by session id, notification streams (GET) included;
        #: counted from the first request on (its stream may open before the client
        #: is registered).
        self._open: dict[str, int] = {}
        #: Set when a session is registered, for whoever waits on it (``registered``).
        self._added: dict[str, asyncio.Event] = {}

    def __len__(self) -> int:
        return len(self._clients)

    def add(self, key: str, client: Client) -> None:
        self._clients[key] = client
        event = self._added.pop(key, None)
        if event is not None:
            event.set()

    async def registered(self, key: str, timeout: float) -> bool:
        """Wait until ``key`` is registered (at most ``timeout`` seconds)."""
        if key in self._clients:
            return True
        event = self._added.setdefault(key, asyncio.Event())
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            self._added.pop(key, None)
            return False
        return True

    def get(self, key: str) -> Client | None:
        return self._clients.get(key)

    def forget(self, key: str) -> None:
        self._clients.pop(key, None)
        self._added.pop(key, None)

    def items(self) -> list[tuple[str, Client]]:
        return list(self._clients.items())

    def begin(self, key: str) -> None:
        self._open[key] = self._open.get(key, 0) + 1

    def end(self, key: str, now: float) -> None:
        left = self._open.get(key, 1) - 1
        if left > 0:
            self._open[key] = left
        else:
            self._open.pop(key, None)
        client = self._clients.get(key)
        if client is not None:
            client.last_seen = now

    def idle(self, timeout: float, now: float) -> list[str]:
        """The HTTP sessions with no request open, and none for ``timeout`` seconds
        (a client listening on its notification stream is not idle)."""
        return [key for key, client in self._clients.items()
                if not key.startswith("stdio:") and key not in self._open
                and now - client.last_seen > timeout]
