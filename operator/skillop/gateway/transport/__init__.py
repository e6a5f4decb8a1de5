"""How the gateway reaches an upstream: one ``Transport`` per MCP transport
(``base`` holds the seam; ``transport_for`` picks the one a server names)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from skillop.gateway.transport.base import Settings, Transport
from skillop.gateway.transport.http import StreamableHttpTransport
from skillop.gateway.transport.sse import SseTransport
from skillop.gateway.transport.stdio import StdioTransport
from skillop.model.toolset import ServerEntry

_BY_KIND: Final[Mapping[str, Callable[[ServerEntry, Settings], Transport]]] = {
    "sse": SseTransport,
    "streamable-http": StreamableHttpTransport,
}


def transport_for(upstream: ServerEntry, settings: Settings) -> Transport:
    """The transport to ``upstream``: its URL's (streamable HTTP unless it names
    SSE), or its command's."""
    if upstream.url is None:
        return StdioTransport(upstream, settings)
    return _BY_KIND.get(upstream.transport, StreamableHttpTransport)(upstream, settings)
