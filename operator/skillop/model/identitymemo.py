"""Values kept from one resolution to the next while what they were made from is
the very same object.

The operator keeps a parsed spec object until its spec changes (a status echo or
an unchanged re-list keeps the old object), and a server's tool list until it
differs. So a value derived from such objects alone (a ToolDef, with everything
memoized on it) is reused while they are identical, and made again otherwise: it
can never be stale. One entry per (owner, field): a changed owner replaces its
entries rather than adding to them, and ``forget`` drops an owner that is gone.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class IdentityMemo(Generic[T]):
    """``build()`` results by owner and field, reused while made from the same objects."""

    def __init__(self) -> None:
        #: By owner, then field: the value and the (one or two) objects it came from.
        self._owners: dict[Hashable, dict[str, tuple[object, object, T]]] = {}

    def get(self, owner: Hashable, field: str, build: Callable[[], T], source: object,
            second: object = None) -> T:
        """``build()``, or what it gave before from these very objects."""
        entries = self._owners.setdefault(owner, {})
        found = entries.get(field)
        if found is not None and found[0] is source and found[1] is second:
            return found[2]
        made = build()
        entries[field] = (source, second, made)
        return made

    def forget(self, owner: Hashable) -> None:
        """Drop what was kept for an owner that is gone."""
        self._owners.pop(owner, None)

    def __len__(self) -> int:
        return sum(len(entries) for entries in self._owners.values())
