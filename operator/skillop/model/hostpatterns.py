"""The grammar of the MCP egress allow-list: ``[scheme://]host[:port]`` globs.

One grammar for every place a pattern is written (``SKILLOP_MCP_ALLOW``, the
``--allow`` flags of the CLI and the gateway, the chart's ``mcp.allow``) and for
the guard that matches URLs against it (``sources.egress``), so that a pattern
the guard could not use is refused where it is written, in one line naming it,
not found by a traceback when the first server is contacted.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
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


def normal_host(host: str) -> str | None:
    """``host`` (a URL's host, IPv6 literals in brackets) as the HTTP client
    reaches it, one spelling per host; None when it cannot be read.

    httpx (the MCP client's) lowercases a name, IDNA-encodes (2008) one that is
    not ASCII, and hands it to the resolver, which takes one trailing dot as the
    root and reads the legacy IPv4 forms (``0x0a.0.0.1``, ``10.1``,
    ``167772161``) as addresses; an IPv4-mapped IPv6 literal is that IPv4 address.
    So ``DB.Platform.svc.``, ``db.platform.svc`` and their punycode are one host,
    and ``10.0.0.1`` in any of its forms is ``10.0.0.1``. Anything that is not a
    plain DNS name or an address (a ``%``-escape, a backslash, ``@``, an empty
    label) is None: rules keyed on hosts fail closed on it.
    """
    if host.startswith("[") and host.endswith("]"):
        return _ipv6_host(host[1:-1])
    if not host.isascii():
        # Imported for non-ASCII names only: its tables take longer to import
        # than the rest of the CLI's start-up.
        import idna

        try:
            host = idna.encode(host.lower()).decode("ascii")
        except idna.IDNAError:
            return None
    host = host.lower()
    host = host[:-1] if host.endswith(".") else host
    if not _DNS_NAME.fullmatch(host):
        return None
    address = _legacy_ipv4(host)
    return host if address is None else address


_DNS_NAME: Final = re.compile(r"[a-z0-9-]+(\.[a-z0-9-]+)*")
_IPV4_PART: Final = re.compile(r"0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*")


def _ipv6_host(text: str) -> str | None:
    try:
        address = ipaddress.IPv6Address(text)
    except ValueError:
        return None
    mapped = address.ipv4_mapped
    return str(mapped) if mapped is not None else f"[{address.compressed}]"


def _legacy_ipv4(host: str) -> str | None:
    """The dotted-decimal address ``host`` spells the way ``inet_aton`` reads it
    (1-4 parts, each decimal, ``0x`` hex or ``0`` octal, the last filling the
    remaining bytes), or None when it is a name."""
    parts = host.split(".")
    if len(parts) > 4 or not all(_IPV4_PART.fullmatch(p) for p in parts):
        return None
    values = [int(p, 16) if p[:2] in ("0x", "0X") else int(p, 8) if p.startswith("0")
              else int(p) for p in parts]
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (5 - len(values)):
        return None
    number = sum(v << (8 * (3 - i)) for i, v in enumerate(head)) + last
    return str(ipaddress.IPv4Address(number))
