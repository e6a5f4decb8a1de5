"""A large set's chunks (docs/toolset.md, Large sets): ``tools.json``'s bytes cut
into pieces at tool boundaries chosen by each tool's own bytes, each piece
gzip-compressed on its own (a gzip member).

Boundaries chosen by content are what keep a change small: a tool changed moves
no boundary but, at most, its own and its neighbours', so every other piece, and
its gzip member, keeps its bytes and its digest, and a part holding it is not
written again. The document's header (everything before the first tool: the
hash, the servers, the token total) is a piece of its own, as it changes with
every version.
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from skillop.model.canonical import bytes_digest

#: Uncompressed bytes of a piece: at least MIN (but the header and the last), at
#: most MAX (a larger tool is cut inside), a boundary after a tool chosen with a
#: probability of its size over TARGET, so pieces average MIN + TARGET.
MIN_PIECE = 64 * 1024
TARGET_PIECE = 192 * 1024
MAX_PIECE = 512 * 1024
_TOOLS_OPEN = b'"tools":['
_CLOSE = b"]}\n"


@dataclass(frozen=True, slots=True)
class Chunk:
    """One gzip member of a packed set, and the sha256 of its bytes."""

    sha256: str
    data: bytes


def pieces(document: bytes, tool_sizes: Sequence[int]) -> list[bytes]:
    """``document`` (``tools.json``'s bytes) cut into pieces; ``tool_sizes``: the
    bytes of each tool's JSON in the ``tools`` array, in order (the last key of
    the canonical document). Joined, the pieces are ``document``."""
    tools = sum(tool_sizes) + max(len(tool_sizes) - 1, 0)
    start = len(document) - len(_CLOSE) - tools
    if not tool_sizes or document[start - len(_TOOLS_OPEN):start] != _TOOLS_OPEN or \
            not document.endswith(_CLOSE):
        return _sliced(document)
    out = _sliced(document[:start])
    current: list[bytes] = []
    size = 0
    at = start
    for i, tool in enumerate(tool_sizes):
        end = at + tool + (1 if i < len(tool_sizes) - 1 else len(_CLOSE))
        piece = document[at:end]
        at = end
        if len(piece) > MAX_PIECE:
            if current:
                out.append(b"".join(current))
            out += _sliced(piece)
            current, size = [], 0
            continue
        if current and size + len(piece) > MAX_PIECE:
            out.append(b"".join(current))
            current, size = [], 0
        current.append(piece)
        size += len(piece)
        if size >= MIN_PIECE and _boundary(piece):
            out.append(b"".join(current))
            current, size = [], 0
    if current:
        out.append(b"".join(current))
    return out


def _boundary(piece: bytes) -> bool:
    """Whether a piece ends after this tool: by the tool's own bytes, with a
    probability of its size over TARGET_PIECE."""
    drawn = int.from_bytes(hashlib.blake2b(piece, digest_size=8).digest(), "big")
    return drawn < (len(piece) << 64) // TARGET_PIECE


def _sliced(data: bytes) -> list[bytes]:
    return [data[i:i + MAX_PIECE] for i in range(0, len(data), MAX_PIECE)] or [data]


class _Members:
    """Compressed pieces by the digest of their bytes, the most recently used
    last: an Actor's set is compared with its ConfigMaps on every pass, and a
    changed set shares most pieces with the last one; compressing 10 MiB again
    would cost the operator a fifth of a second per large Actor."""

    kept_bytes = 64 * 1024 * 1024

    def __init__(self) -> None:
        self.found: dict[bytes, Chunk] = {}
        self.size = 0

    def member(self, piece: bytes) -> Chunk:
        key = hashlib.blake2b(piece, digest_size=16).digest()
        found = self.found.pop(key, None)
        if found is None:
            data = gzip.compress(piece, compresslevel=6, mtime=0)
            found = Chunk(bytes_digest(data), data)
            self.size += len(data)
        self.found[key] = found
        while self.size > self.kept_bytes and len(self.found) > 1:
            self.size -= len(self.found.pop(next(iter(self.found))).data)
        return found


_MEMBERS = _Members()


def chunks(document: bytes, tool_sizes: Sequence[int]) -> tuple[Chunk, ...]:
    """The set's chunks, in order: each piece as a gzip member (no time, no name:
    equal pieces give equal bytes)."""
    return tuple(_MEMBERS.member(piece) for piece in pieces(document, tool_sizes))
