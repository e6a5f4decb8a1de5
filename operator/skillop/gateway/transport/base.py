"""The seam between an upstream client and how it reaches its server.

A ``Transport`` (one subclass per MCP transport: ``http``, ``sse``, ``stdio``)
opens one connection at a time to its upstream: an initialized SDK session
(the listings, ``list_changed``) and the ``Calls`` that forward ``tools/call``
in it. The client (``upstream.UpstreamClient``) goes through these two only;
what a transport's calls raise is already ``errors``' (``errors.mapped``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import mcp_types as types
from mcp.client.session import ClientSession, MessageHandlerFnT

from skillop import __version__
from skillop.gateway import errors
from skillop.gateway.exchange import Exchanged
from skillop.gateway.observe import NOTHING, Observer
from skillop.gateway.secrets import DEFAULT_CONFIGMAPS_DIR, credentials
from skillop.gateway.wire import MAX_MESSAGE_BYTES
from skillop.model.settings import GATEWAY_RELIST_INTERVAL
from skillop.model.toolset import ServerEntry
from skillop.sources.egress import EgressGuard
from skillop.sources.mcp_discovery import DiscoveryLimits
from skillop.sources.mcp_session import Unfenced
from skillop.sources.mcp_transport import Wire
from skillop.sources.redaction import Redactor

#: How long an upstream may take to accept a connection (HTTP and stdio alike).
CONNECT_TIMEOUT_SECONDS: Final = 10.0

CLIENT_INFO: Final = types.Implementation(name="skillop-gateway", version=__version__)
CLIENT_INFO_WIRE: Final = CLIENT_INFO.model_dump(by_alias=True, mode="json", exclude_none=True)

#: Discovery's bounds, for the gateway's listings; an answer may be as large as a
#: call's (``wire.MAX_MESSAGE_BYTES``), metered one at a time.
LIMITS: Final = DiscoveryLimits(max_response_bytes=MAX_MESSAGE_BYTES)

Bounds = Wire | Unfenced
HeaderMap = Mapping[tuple[str, ...], str]


@dataclass(frozen=True, slots=True)
class Settings:
    """How upstream clients connect: where Secrets are mounted, which hosts may be contacted."""

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
        """A connection's redactor: its own values and every other credential mounted here."""
        return Redactor([*own, *credentials(self.secrets_dir, api_dir=self.api_dir)])


class Calls(ABC):
    """How one open connection forwards ``tools/call``."""

    def __init__(self) -> None:
        #: Whether the upstream closed connections under the session since the last
        #: asking (it may have restarted, with other tools, without a session to
        #: lose). Asked before every call, so an attribute: the check of whatever
        #: holds those connections itself, no call passing the question on.
        self.peer_closed: Callable[[], bool] = _never

    @abstractmethod
    async def call(self, name: str, arguments: Mapping[str, Any], *,
                   header_map: HeaderMap | None,
                   exchanged: Exchanged | None = None) -> types.CallToolResult:
        """The upstream's result for ``name`` (its name there), not yet redacted;
        raises ``errors.CallFailed`` (``ConnectionLost``: the connection is gone) or
        ``errors.SessionLost``. ``header_map``: the tool's ``x-mcp-header`` arguments;
        ``exchanged``: the caller's exchanged token, this call's header (its texts
        redacted of it)."""

    @abstractmethod
    async def settle(self) -> None:
        """Once the connection's first listing is done: whatever calls need besides."""


def _never() -> bool:
    return False


class Transport(ABC):
    """How an upstream client reaches ``upstream``: one subclass per transport."""

    def __init__(self, upstream: ServerEntry, settings: Settings) -> None:
        self.upstream = upstream
        self.settings = settings
        self.label = upstream.name
        #: Redacts the answers: every credential mounted in the gateway (set when a
        #: connection opens, with the values read for it).
        self.redactor = Redactor(())
        #: Redacts the listings as discovery does: the values it is sent itself (the
        #: live digests must be those of what the ToolSet was resolved from).
        self.own = Redactor(())

    def bounds(self) -> Bounds:
        """What fences a connection's requests (and names its failures)."""
        return Unfenced(f"upstream {self.label}")

    @abstractmethod
    def open(self, bounds: Bounds, on_message: MessageHandlerFnT,
             ) -> AbstractAsyncContextManager[tuple[ClientSession, Calls]]:
        """One connection: its initialized SDK session and its calls."""

    def explain(self, exc: BaseException, bounds: Bounds) -> tuple[str, str]:
        """Why a connection failed: the agent's and the audit's lines (``errors.explain``)."""
        return errors.explain(exc, bounds, self.redactor)

    def _secret_values(self, values: Iterable[str]) -> None:
        """The values this connection sends, to be redacted wherever they come back."""
        values = list(values)
        self.own = Redactor(values)
        self.redactor = self.settings.redactor(values)
