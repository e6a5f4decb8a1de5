"""Status list items equal between objects, held once.

An Actor's status lists its tools (up to 256), and the store keeps the last status
of every Actor: with 1,000 Actors of about 108 tools each, 108,000 six-key dicts,
most of them equal to another Actor's (the same tool of the same skill reached
by many Actors). The store keeps one dict per distinct item instead; the status
dicts are only read and compared, never written to in place.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from typing import Any

#: The status lists whose items are shared. Conditions too: most objects of a
#: batch carry equal ones (same reason, message, time and generation).
SHARED_LISTS = ("tools", "conditions")
#: The status lists of names held once each (``sys.intern``): a Skill's status
#: names every skill it reaches, 20 or more each with 10,000 Skills in chains,
#: and each name is in many statuses.
NAME_LISTS = ("skills",)

Item = tuple[Any, ...]


class SharedItems:
    """One dict per distinct list item; rebuilt from what is in use when it has
    grown to twice that (items of statuses since replaced are then let go)."""

    __slots__ = ("_items", "_limit")

    def __init__(self, *, floor: int = 4096) -> None:
        self._items: dict[Item, dict[str, Any]] = {}
        self._limit = floor

    def share(self, status: dict[str, Any]) -> dict[str, Any]:
        """``status`` with the items of its shared lists replaced by equal shared ones."""
        for name in SHARED_LISTS:
            items = status.get(name)
            if isinstance(items, list):
                status[name] = [self._one(item) for item in items]
        for name in NAME_LISTS:
            names = status.get(name)
            if isinstance(names, list):
                status[name] = [sys.intern(n) if type(n) is str else n for n in names]
        return status

    def prune(self, statuses: Iterable[Mapping[str, Any]]) -> None:
        """Keep only the items ``statuses`` (every status held) use, once the table
        has outgrown its limit."""
        if len(self._items) <= self._limit:
            return
        self._items = {}
        for status in statuses:
            for name in SHARED_LISTS:
                for item in status.get(name) or ():
                    self._one(item)
        self._limit = max(self._limit, 2 * len(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def _one(self, item: Any) -> Any:
        if not isinstance(item, dict):
            return item
        values: Item = tuple(item.values())  # the keys are compared on a hit
        try:
            found = self._items.get(values)
        except TypeError:  # an unhashable value (a hand-written status): kept as it is
            return item
        if found is not None and found == item:
            return found
        self._items[values] = item
        return item
