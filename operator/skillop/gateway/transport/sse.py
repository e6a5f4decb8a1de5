"""MCP over HTTP through the SDK's client session: an SSE upstream, and the
session (initialize, listings, ``list_changed``) of a streamable-HTTP one.

Every request goes through discovery's fence (``Wire``: the egress guard, no
redirect, bounded answers) with the headers of the server's Secret, trusting
the system's CAs, ``--ca-file`` and the server's ``tls`` bundle (read at each
connection, so a rotated CA counts from the next one)."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager

from mcp.client.session import ClientSession, MessageHandlerFnT

from skillop.gateway.secrets import ca_bundles, headers_of
from skillop.gateway.transport.base import CLIENT_INFO, LIMITS, Bounds, Calls, Transport
from skillop.gateway.transport.session import SessionCalls
from skillop.sources.mcp_discovery import McpTransport
from skillop.sources.mcp_session import open_session
from skillop.sources.mcp_transport import Wire
from skillop.sources.mcp_trust import Trust


class SseTransport(Transport):
    """An upstream at a URL, called through the SDK session."""

    kind: McpTransport = "sse"

    @property
    def url(self) -> str:
        assert self.upstream.url is not None  # the set's parser saw to it
        return self.upstream.url

    def bounds(self) -> Bounds:
        return Wire(self.url, self.kind, self.settings.guard, LIMITS, self.trust(),
                    per_response=True)

    def trust(self) -> ssl.SSLContext:
        """What https connections to this upstream trust (read now: a rotated CA counts)."""
        settings, tls = self.settings, self.upstream.tls
        bundles = ca_bundles(tls, secrets_root=settings.secrets_dir,
                             configmaps_root=settings.configmaps_dir, ca_file=settings.ca_file)
        return Trust(tuple(bundles), tls).context(self.url)

    @asynccontextmanager
    async def open(self, bounds: Bounds, on_message: MessageHandlerFnT,
                   ) -> AsyncIterator[tuple[ClientSession, Calls]]:
        assert isinstance(bounds, Wire)
        async with AsyncExitStack() as stack:
            headers = headers_of(self.upstream, self.settings.secrets_dir)
            self._secret_values(headers.values())
            self.settings.guard.check(self.url)
            session = await stack.enter_async_context(open_session(
                self.url, self.kind, headers, bounds, LIMITS, on_message,
                client_info=CLIENT_INFO, read_timeout=None))
            yield session, await self.calls(stack, session, bounds, headers)

    async def calls(self, stack: AsyncExitStack, session: ClientSession, bounds: Wire,
                    headers: Mapping[str, str]) -> Calls:
        """How the open ``session``'s tools are called (``stack`` closes what it opens)."""
        return SessionCalls(session, self)
