"""The ConfigMaps the store knows by name only, with the epoch of each one's last event.

Clusters hold many ConfigMaps that have nothing to do with skillop; the watch
sees every one, and the store must know each exists (a Skill may start naming
it) and when its last event came (the watch-gap check, ``Store.reconcile_members``).
An ``ObjectRef`` per ConfigMap in a set, and again as the key of the epoch
table, cost 246 bytes each (bench/configmaps.py); here a ConfigMap is its name
string and one slot in its namespace's dict, whose value is the epoch (a shared
int): the namespace is one string per namespace (interned), not one per object.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Set

from skillop.model.names import ObjectRef


class NameTable(Set[ObjectRef]):
    """A set of ConfigMap refs (compared as one), each with the epoch of its last event."""

    __slots__ = ("_by_namespace", "_count")

    def __init__(self) -> None:
        self._by_namespace: dict[str, dict[str, int]] = {}
        self._count = 0

    def add(self, ref: ObjectRef, epoch: int) -> None:
        names = self._by_namespace.get(ref.namespace)
        if names is None:
            names = self._by_namespace[sys.intern(ref.namespace)] = {}
        if ref.name not in names:
            self._count += 1
        names[ref.name] = epoch

    def discard(self, ref: ObjectRef) -> int | None:
        """Forget ``ref``; the epoch it had (None: it was not held)."""
        names = self._by_namespace.get(ref.namespace)
        if names is None or ref.name not in names:
            return None
        epoch = names.pop(ref.name)
        self._count -= 1
        if not names:
            del self._by_namespace[ref.namespace]
        return epoch

    def __contains__(self, ref: object) -> bool:
        return isinstance(ref, ObjectRef) and ref.name in self._by_namespace.get(
            ref.namespace, {})

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[ObjectRef]:
        return (ref for ref, _ in self.items())

    def items(self) -> Iterator[tuple[ObjectRef, int]]:
        for namespace, names in list(self._by_namespace.items()):
            for name, epoch in list(names.items()):
                yield ObjectRef(namespace, name), epoch
