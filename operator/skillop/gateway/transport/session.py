"""Calls through the MCP SDK's client session: SSE and stdio upstreams, and
streamable-HTTP ones of a revision the gateway's own caller does not speak."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.client.session import ClientSession

from skillop.gateway import errors
from skillop.gateway.exchange import Exchanged
from skillop.gateway.transport.base import Calls, HeaderMap, Transport


class SessionCalls(Calls):
    """``tools/call`` as the SDK's ``call_tool`` (it checks the output schema)."""

    def __init__(self, session: ClientSession, transport: Transport) -> None:
        super().__init__()
        self.session = session
        self._transport = transport

    async def settle(self) -> None:
        """Nothing: the session is all its calls need."""

    async def call(self, name: str, arguments: Mapping[str, Any], *,
                   header_map: HeaderMap | None,
                   exchanged: Exchanged | None = None) -> types.CallToolResult:
        label = self._transport.label
        if exchanged is not None:
            # The session's requests all carry the connection's headers: none of them
            # may be one caller's.
            raise errors.CallFailed(
                f"upstream {label}: its calls go through the MCP SDK's session (its"
                " protocol revision), which cannot carry a caller's exchanged token"
                " (tokenExchange)")
        try:
            # The MCP SDK's client parents its span on, and puts in ``_meta``, the API's
            # current span: the forward's, made so here (the gateway's own caller passes
            # the context itself).
            with self._transport.settings.observer.api_current():
                response = await self.session.call_tool(name, dict(arguments),
                                                        allow_input_required=True)
        except Exception as exc:
            failure = errors.mapped(exc, label, self._transport.redactor)
            if failure is None:
                raise
            raise failure from None
        if isinstance(response, types.InputRequiredResult):
            raise errors.asks_input(label)
        return response
