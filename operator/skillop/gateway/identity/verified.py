"""Tokens already verified, so that a client repeating its token (every request
carries it) costs a dictionary lookup, not a signature check.

Entries are keyed by the token's SHA-256 (the cache never holds a token as a
key) and kept until the token expires (``exp`` plus the leeway it was accepted
with), at most ``MAX_ENTRIES`` of them, the least recently used dropped first.
Only verified tokens are kept: an invalid one is checked again each time (and
refused each time).
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

from skillop.model.caller import Caller

MAX_ENTRIES: Final = 4096


def digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class Verified:
    """Callers of verified tokens, by the token's digest, until each expires."""

    def __init__(self, *, size: int = MAX_ENTRIES,
                 clock: Callable[[], float] = time.time) -> None:
        self._size = size
        self._clock = clock
        self._entries: OrderedDict[bytes, tuple[Caller, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: bytes) -> Caller | None:
        """The caller of a token verified before and not expired, or None."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[1] <= self._clock():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def put(self, key: bytes, caller: Caller, until: float) -> None:
        """Remember ``caller`` until ``until`` (seconds since the epoch)."""
        self._entries[key] = (caller, until)
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)
