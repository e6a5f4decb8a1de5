"""One spelling per server URL: what RFC 3986 (section 6.2.2) treats as equal.

``http://MCP.tools.svc:80/mcp`` and ``http://mcp.tools.svc/mcp`` are one server to
HTTP. Were they two to skillop, one tool would reach an Actor twice, each copy with
its own overrides (one with approval, one without). A server's identity, the
digests built from it and its discovery key therefore use ``normal_url``:

* scheme and host in lower case;
* the scheme's default port dropped (``:80`` for http, ``:443`` for https), and an
  empty port too;
* an empty path as ``/``;
* percent-encodings in upper case, and those of unreserved characters
  (letters, digits, ``-._~``) decoded.

Nothing else changes: not dot segments, not a trailing dot of a host name, not a
query (a server may read it), not what cannot be parsed (returned as given;
the URL's own validation reports it).
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

from skillop.model.hostpatterns import DEFAULT_PORTS, normal_host

_PARTS: Final = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]*)([^?#]*)(\?[^#]*)?(#.*)?$", re.S)
_PERCENT: Final = re.compile(r"%([0-9A-Fa-f]{2})")
_DEFAULT_PORTS: Final = {"http": "80", "https": "443"}
_UNRESERVED: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def normal_url(url: str) -> str:
    """``url`` in its RFC 3986 normal form (see the module docstring)."""
    parts = _PARTS.match(url)
    if parts is None:
        return url
    scheme, authority, path, query, fragment = parts.groups()
    scheme = scheme.lower()
    userinfo, at, hostport = authority.rpartition("@")
    host, port = _split_port(hostport)
    if port == "" or port == _DEFAULT_PORTS.get(scheme):
        port = None
    authority = (userinfo + at + _percent(host).lower()
                 + (f":{port}" if port is not None else ""))
    return (f"{scheme}://{authority}{_percent(path) or '/'}"
            f"{_percent(query or '')}{_percent(fragment or '')}")


class Target(NamedTuple):
    """Where a request to an http(s) URL goes: what a host pattern matches."""

    scheme: str
    host: str
    port: int

    def __str__(self) -> str:
        """``scheme://host[:port]`` (the scheme's default port left out): a host
        pattern (``model.hostpatterns``) that matches exactly this target."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = "" if DEFAULT_PORTS.get(self.scheme) == self.port else f":{self.port}"
        return f"{self.scheme}://{host}{port}"


def url_target(url: str) -> Target | None:
    """The scheme, host (``hostpatterns.normal_host``) and port (the scheme's
    default when none is written) a request to ``url`` connects to; None for
    anything else than http(s), a URL with userinfo, or a host or port that is
    not plainly one (fail closed: what is None matches no pattern)."""
    parts = _PARTS.match(url)
    if parts is None:
        return None
    scheme, authority = parts.group(1).lower(), parts.group(2)
    if scheme not in DEFAULT_PORTS or "@" in authority:
        return None
    host, port = _split_port(authority)
    if port in (None, ""):
        number = DEFAULT_PORTS[scheme]
    elif port.isascii() and port.isdigit() and 0 < int(port) < 65536:
        number = int(port)
    else:
        return None
    name = normal_host(host) if host else None
    return None if name is None else Target(scheme, name, number)


def _split_port(hostport: str) -> tuple[str, str | None]:
    if hostport.startswith("["):  # an IPv6 literal: the port is after the bracket
        end = hostport.find("]")
        rest = hostport[end + 1:] if end >= 0 else ""
        if end >= 0 and rest.startswith(":"):
            return hostport[:end + 1], rest[1:]
        return hostport, None
    host, colon, port = hostport.rpartition(":")
    return (host, port) if colon else (hostport, None)


def _percent(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        char = chr(int(match.group(1), 16))
        return char if char in _UNRESERVED else f"%{match.group(1).upper()}"

    return _PERCENT.sub(one, text)
