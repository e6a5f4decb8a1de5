"""What https connections to an MCP server trust: one ``Trust`` value, passed whole.

The operator's discovery (``operator.mcpconnect``), the CLI and the gateway
each build one ``Trust`` where the bundles are read, and only ``Trust.context``
reads what is in it: a new ``tls`` setting is read here, where it is used, and
by nobody in between (docs/architecture.md). Kept apart from the HTTP client
(``sources.mcp_transport``) so that the operator can build one without
importing the MCP client.
"""

from __future__ import annotations

import functools
import os
import ssl
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from skillop.sources.egress import display_url
from skillop.sources.mcp_discovery import DiscoveryError

if TYPE_CHECKING:
    from skillop.model.mcpserver import McpTls

__all__ = ["SYSTEM_TRUST", "Trust", "trust_context"]


@dataclass(frozen=True, slots=True)
class Trust:
    """The PEM bundles trusted besides the system's CAs (operator-wide or
    ``--ca-file``, and the server's ``tls`` one: read once per connection), and
    the server's ``tls`` as the Skill wrote it (its settings apply here)."""

    ca_bundles: tuple[str, ...] = ()
    tls: McpTls | None = None

    def adding(self, ca_bundles: Sequence[str]) -> Trust:
        """This trust, with ``ca_bundles`` trusted besides (the CLI's ``--ca-file``)."""
        return replace(self, ca_bundles=(*self.ca_bundles, *ca_bundles)) if ca_bundles else self

    def context(self, url: str) -> ssl.SSLContext:
        """The context for connecting to ``url``. A bundle that is not PEM
        certificates is a ``TLSError`` naming ``url``. Contexts are built once per
        distinct ``Trust`` and shared: loading the system store costs tens of ms
        of CPU, once per connection otherwise."""
        try:
            return _context(self)
        except (ssl.SSLError, ValueError) as err:
            raise DiscoveryError(
                "TLSError", display_url(url),
                f"the CA bundle is not PEM certificates ({type(err).__name__})") from None


#: The system's CAs only.
SYSTEM_TRUST = Trust()


def trust_context(url: str, ca_bundles: Sequence[str]) -> ssl.SSLContext:
    """What https connections trust: the system's CAs, plus ``ca_bundles`` (PEM texts).

    Private CAs are the rule inside companies; ``SSL_CERT_FILE`` and the like are
    not read (``trust_env`` is off, as for proxies), so trust is what the caller
    configures: per server and operator-wide in the operator, ``--ca-file`` in
    the CLI.
    """
    return Trust(tuple(ca_bundles)).context(url)


@functools.lru_cache(maxsize=32)
def _context(trust: Trust) -> ssl.SSLContext:
    # The system store at OpenSSL's compiled-in paths, not the SSL_CERT_* variables.
    paths = ssl.get_default_verify_paths()
    context = ssl.create_default_context(
        cafile=paths.openssl_cafile if os.path.isfile(paths.openssl_cafile) else None,
        capath=paths.openssl_capath if os.path.isdir(paths.openssl_capath) else None,
    )
    for pem in trust.ca_bundles:
        if "-----BEGIN CERTIFICATE-----" not in pem:
            raise ValueError("no PEM certificate")
        context.load_verify_locations(cadata=pem)
    return context
