"""The MCP SDK's lowlevel server as the gateway runs it: ``tools.listChanged``
announced on every transport, no tracing span per message, and the approval state
a 2026-07-28 client echoes sealed."""

from __future__ import annotations

from typing import Any

from mcp.server import NotificationOptions, Server
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity

from skillop import __version__
from skillop.gateway import approval


class GatewayServer(Server[Any]):
    """The SDK's lowlevel server, announcing ``tools.listChanged`` on every transport."""

    def create_initialization_options(
        self, notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            NotificationOptions(tools_changed=True), experimental_capabilities, extensions)


def sdk_server(**handlers: Any) -> GatewayServer:
    """The server, with ``handlers`` (the SDK's ``on_*`` and ``get_tool_input_schema``)."""
    server = GatewayServer("skillop-gateway", version=__version__, **handlers)
    # No tracing span per message: nothing exports them, and it is the hot path.
    server.middleware = [m for m in server.middleware
                         if not isinstance(m, OpenTelemetryMiddleware)]
    # The approval state a 2026-07-28 client echoes is sealed, bound to the tool and
    # its arguments, and expires (approval.InputRequired).
    server.middleware.append(RequestStateBoundary(
        RequestStateSecurity.ephemeral(ttl=approval.TICKET_SECONDS),
        default_audience="skillop-gateway"))
    return server
