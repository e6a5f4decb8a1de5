"""What MCP discovery takes and gives: transports, bounds, results and errors.

The operator (docs/api.md, Semantics 9) lists the tools of every ``url`` MCP server of a
Skill; the modules doing the talking are ``egress`` (which hosts may be
contacted), ``mcp_transport`` (the fenced HTTP client), ``mcp_session`` (one
listing) and ``mcp_watch`` (keeping a list current). They share these values,
which need nothing beyond the standard library, so the CLI and settings can
name them without the MCP SDK installed.

Every failure is a ``DiscoveryError`` with a machine-readable ``reason`` and a
one-line message of bounded length.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

from skillop.sources.mcp_tools import McpToolInfo

__all__ = [
    "DEFAULT_LIMITS",
    "DiscoveryError",
    "DiscoveryLimits",
    "DiscoveryResult",
    "ErrorReason",
    "McpTransport",
    "one_line",
]

McpTransport = Literal["streamable-http", "sse"]
ErrorReason = Literal[
    "URLNotAllowed",
    "Timeout",
    "ConnectFailed",
    "TooManyTools",
    "ResponseTooLarge",
    "Redirected",
    "ProtocolError",
    "HTTPError",
    "TLSError",
]

MAX_DETAIL_LEN: Final = 300
_CONTROL_RUNS: Final = re.compile(r"[\s\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def one_line(text: str, limit: int = MAX_DETAIL_LEN) -> str:
    """``text`` as one printable line of at most ``limit`` characters.

    Servers answer with error pages, tracebacks and JSON spread over many lines;
    a condition message, an Event or a CLI error must stay one line.
    """
    flat = _CONTROL_RUNS.sub(" ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 3].rstrip() + "..."


@dataclass(frozen=True)
class DiscoveryLimits:
    """Bounds on one discovery: seconds, tool count, response bytes and pages."""

    connect_timeout: float = 5.0
    total_timeout: float = 30.0
    max_tools: int = 1000
    max_response_bytes: int = 4 * 1024 * 1024
    max_pages: int = 100

    def __post_init__(self) -> None:
        for name in (
            "connect_timeout",
            "total_timeout",
            "max_tools",
            "max_response_bytes",
            "max_pages",
        ):
            if not getattr(self, name) > 0:
                raise ValueError(f"DiscoveryLimits.{name} must be positive")


DEFAULT_LIMITS: Final = DiscoveryLimits()


@dataclass(frozen=True)
class DiscoveryResult:
    """All tools of a server; ``list_changed`` is its ``tools.listChanged`` capability.

    ``notifications``: a watch holds a notification stream the server opened,
    so a change reaches the watch without polling. A server may announce
    ``listChanged`` and never open one (stateless streamable HTTP): then this is
    False and the server has to be polled. Always False from ``list_tools``.
    ``skipped``: one line per tool left out because its name cannot be used.
    """

    tools: tuple[McpToolInfo, ...]
    list_changed: bool
    notifications: bool = False
    skipped: tuple[str, ...] = ()


class DiscoveryError(Exception):
    """Discovery failed; ``reason`` is one of ``ErrorReason``, ``url`` is safe to print.

    The message names the URL (without userinfo, query or fragment) and never
    contains header values.
    """

    def __init__(self, reason: ErrorReason, url: str, detail: str) -> None:
        self.reason: ErrorReason = reason
        self.url = one_line(url, 2048)
        self.detail = one_line(detail)
        super().__init__(f"MCP discovery at {self.url} failed ({reason}): {self.detail}")

    def __reduce__(self) -> tuple[type[DiscoveryError], tuple[ErrorReason, str, str]]:
        # Exceptions rebuild from args when copied or pickled; ours has three.
        return (DiscoveryError, (self.reason, self.url, self.detail))
