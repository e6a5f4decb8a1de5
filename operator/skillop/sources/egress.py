"""The egress guard: which MCP server URLs discovery and the gateway may contact.

The servers are untrusted input, and the hosts they live on are too: an
``EgressGuard`` decides which hosts may be contacted at all. Discovery checks it
before connecting and again on every HTTP request the SDK makes
(``mcp_transport``), so a redirect or a second endpoint cannot lead elsewhere.

``DEFAULT_EGRESS_PATTERNS`` is the one default allow-list (cluster-internal
hosts; declared with ``SKILLOP_MCP_ALLOW`` in ``model.settings``): the
operator's settings, the CLI, ``skillop gateway`` and the guard itself use it,
and a test holds the Helm chart's ``mcp.allow`` to it. httpx2 is imported on
the first URL checked, not with this module: the CLI names the
default in its help without needing the MCP extra.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from skillop.model.hostpatterns import DEFAULT_PORTS, HostPattern
from skillop.model.settings import DEFAULT_EGRESS_PATTERNS
from skillop.sources.mcp_discovery import DiscoveryError

if TYPE_CHECKING:
    import httpx2

__all__ = ["DEFAULT_EGRESS_PATTERNS", "EgressGuard", "display_url"]



def _parse(url: str | httpx2.URL) -> httpx2.URL | None:
    # httpx's parser, not urllib's: the guard must see the host httpx connects to.
    import httpx2

    try:
        return url if isinstance(url, httpx2.URL) else httpx2.URL(url)
    except (httpx2.InvalidURL, TypeError, ValueError):
        return None


def display_url(url: str | httpx2.URL) -> str:
    """The URL without userinfo, query and fragment: what errors and logs may show."""
    parsed = _parse(url)
    if parsed is None:
        return "<invalid URL>"
    return str(parsed.copy_with(userinfo=b"", query=None, fragment=None))


def _target(url: str | httpx2.URL) -> tuple[str, str, int] | None:
    """The (scheme, host, port) a request to ``url`` connects to; None unless http(s)."""
    parsed = _parse(url)
    if parsed is None:
        return None
    scheme = parsed.scheme.lower()
    try:
        host = parsed.raw_host.decode("ascii").lower()  # IDNA form: the name resolved
    except UnicodeDecodeError:
        return None
    if scheme not in DEFAULT_PORTS or not host:
        return None
    port = parsed.port if parsed.port is not None else DEFAULT_PORTS[scheme]
    if not 0 < port < 65536:
        return None
    return scheme, host, port


class EgressGuard:
    """Which MCP server URLs discovery may contact.

    Patterns are ``fnmatch`` globs, matched case-insensitively, in the form
    ``[scheme://]host[:port]``:

    * ``*.svc`` - any host ending in ``.svc`` (``*`` also spans dots), any port,
      http or https;
    * ``127.0.0.1:8080`` - that host and port only (the port may be a glob too);
    * ``https://*.example.com`` - https only;
    * ``[::1]`` - an IPv6 literal, in brackets.

    A URL is allowed when any pattern matches its scheme, host and port (the
    scheme's default port when the URL names none). Only ``http`` and ``https``
    URLs are ever allowed. The host is compared as written in the URL, before
    any DNS resolution; proxies from the environment are never used, so the
    host checked is the host connected to.
    """

    def __init__(self, patterns: Sequence[str] = DEFAULT_EGRESS_PATTERNS) -> None:
        if isinstance(patterns, str):
            raise TypeError("EgressGuard takes a sequence of patterns, not one string")
        self.patterns: tuple[str, ...] = tuple(patterns)
        self._compiled = tuple(HostPattern.parse(p) for p in self.patterns)

    def __repr__(self) -> str:
        return f"EgressGuard({list(self.patterns)!r})"

    def allows(self, url: str | httpx2.URL) -> bool:
        target = _target(url)
        return target is not None and any(p.matches(*target) for p in self._compiled)

    def check(self, url: str) -> None:
        """Raise ``DiscoveryError(reason="URLNotAllowed")`` unless ``url`` may be contacted."""
        if not self.allows(url):
            raise DiscoveryError(
                "URLNotAllowed",
                display_url(url),
                "the URL is not http(s) or its host is not in the egress allow-list "
                f"{list(self.patterns)}",
            )
