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

#: A host name as connected to, once normal: ASCII labels, lowercase.
_NAME: Final = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*")
#: A label an IPv4 number may be spelled with (inet_aton: decimal, octal, hex).
_IPV4_PART: Final = re.compile(r"0[xX][0-9a-fA-F]*|[0-9]+")
_GLOB_CHARS: Final = frozenset("*?[]!")


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

    @classmethod
    def parse_normal(cls, text: str) -> HostPattern:
        """``parse``, with the host in ``normal_host``'s form, so that a pattern
        written as ``API.Example.com.``, ``bücher.de`` or ``127.1`` matches the
        host a URL spelt any of its ways connects to. ``ValueError`` naming
        ``text`` when the host has no such form."""
        pattern = cls.parse(text)
        host = normal_pattern_host(pattern.host)
        if host is None:
            raise ValueError(f"host pattern {text!r}: {pattern.host!r} is no host name or"
                             " address (a non-ASCII label with glob characters: write it"
                             " in its xn-- form)")
        return cls(pattern.scheme, host, pattern.port)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return (f"{self.scheme}://" if self.scheme else "") + host + (
            f":{self.port}" if self.port is not None else "")

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
    """The one spelling of the host a client connects to, or None when ``host``
    is none a client would read one way only.

    Lowercase; one trailing dot dropped (``a.b.`` is ``a.b``, fully qualified);
    non-ASCII labels in their IDNA ``xn--`` form; an IPv4 address in dotted
    decimal whatever inet_aton spelling it has (``127.1``, ``0x7f.0.0.1``,
    ``2130706433``: what the resolver connects to); an IPv6 address (without its
    brackets) compressed. Anything else (a percent-escape, a backslash, an
    empty label, a zone index, a label IDNA would change rather than encode)
    is None: a name parsers disagree on is no name to bind a credential to.
    """
    if host.startswith("[") and host.endswith("]"):
        return _ipv6(host[1:-1])
    name = host.lower()
    if name.endswith("."):
        name = name[:-1]
    if ":" in name:
        return _ipv6(name)
    labels = name.split(".")
    if labels and all(_IPV4_PART.fullmatch(label) for label in labels):
        return _ipv4(labels)
    encoded = [_idna(label) for label in labels]
    if any(label is None for label in encoded):
        return None
    name = ".".join(label for label in encoded if label is not None)
    return name if _NAME.fullmatch(name) else None


def normal_pattern_host(host: str) -> str | None:
    """A pattern's host in ``normal_host``'s form: a host without glob
    characters is normal as a host is; with them, it is lowercased, its trailing
    dot dropped and its non-ASCII labels (which must hold no glob character)
    IDNA-encoded."""
    if not _GLOB_CHARS.intersection(host):
        return normal_host(host)
    name = host.lower()
    name = name[:-1] if name.endswith(".") else name
    out = []
    for label in name.split("."):
        if label.isascii():
            out.append(label)
            continue
        if _GLOB_CHARS.intersection(label) or (encoded := _idna(label)) is None:
            return None
        out.append(encoded)
    return ".".join(out)


def _idna(label: str) -> str | None:
    """``label`` in its ASCII form, or None. Only labels that IDNA 2003's
    nameprep leaves as they are (lowercase), so that its ``xn--`` form is the
    one IDNA 2008 (what HTTP clients encode with) gives as well: ``faß``, which
    the two encode differently, is refused rather than read one way."""
    if label.isascii():
        return label
    try:
        encoded = label.encode("idna").decode("ascii")
        same = encoded.encode("ascii").decode("idna") == label
    except UnicodeError:
        return None
    return encoded if same else None


def _ipv4(parts: list[str]) -> str | None:
    """inet_aton's reading of 1 to 4 numbers, the last filling the bytes left."""
    if len(parts) > 4:
        return None
    numbers = []
    for part in parts:
        if part[:2] in ("0x", "0X"):
            numbers.append(int(part[2:] or "0", 16))
        elif len(part) > 1 and part.startswith("0"):
            if not set(part) <= set("01234567"):
                return None
            numbers.append(int(part, 8))
        else:
            numbers.append(int(part))
    last_bits = 8 * (5 - len(numbers))
    if any(n > 255 for n in numbers[:-1]) or numbers[-1] >= 1 << last_bits:
        return None
    value = numbers[-1]
    for i, n in enumerate(numbers[:-1]):
        value |= n << (24 - 8 * i)
    return str(ipaddress.IPv4Address(value))


def _ipv6(text: str) -> str | None:
    if "%" in text:
        return None
    try:
        address = ipaddress.IPv6Address(text)
    except ValueError:
        return None
    # ::ffff:a.b.c.d is the IPv4 host a.b.c.d, reached through an IPv6 socket.
    mapped = address.ipv4_mapped
    return str(mapped) if mapped is not None else address.compressed
