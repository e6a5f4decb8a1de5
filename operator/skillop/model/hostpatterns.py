"""The grammar of the MCP egress allow-list: ``[scheme://]host[:port]`` globs.

One grammar for every place a pattern is written (``SKILLOP_MCP_ALLOW``, the
``--allow`` flags of the CLI and the gateway, the chart's ``mcp.allow``) and for
the guard that matches URLs against it (``sources.egress``), so that a pattern
the guard could not use is refused where it is written, in one line naming it,
not found by a traceback when the first server is contacted.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Final

DEFAULT_PORTS: Final = {"http": 80, "https": 443}


@dataclass(frozen=True)
class HostPattern:
    scheme: str | None
    host: str
    port: str | None

    @classmethod
    def parse(cls, text: str) -> HostPattern:
        """``ValueError`` naming ``text`` when it is no pattern."""
        raw = text.strip().lower()
        scheme, sep, rest = raw.partition("://")
        if not sep:
            scheme, rest = "", raw
        if scheme and scheme not in DEFAULT_PORTS:
            raise ValueError(f"egress pattern {text!r}: scheme must be http or https")
        host, port = _split_host_port(rest.rstrip("/"))
        if not host:
            raise ValueError(f"egress pattern {text!r} has no host")
        return cls(scheme or None, host, port)

    def matches(self, scheme: str, host: str, port: int) -> bool:
        if self.scheme is not None and self.scheme != scheme:
            return False
        if self.port is not None and not fnmatch.fnmatchcase(str(port), self.port):
            return False
        return fnmatch.fnmatchcase(host, self.host)


def _split_host_port(text: str) -> tuple[str, str | None]:
    if text.startswith("["):  # IPv6 literal, e.g. [::1]:8080
        host, _, tail = text[1:].partition("]")
        return host, (tail[1:] or None) if tail.startswith(":") else None
    host, sep, port = text.rpartition(":")
    if sep and ":" not in host:
        return host, port or None
    return text, None
