"""Memo slots: values derived from one object alone, kept on it, each kind by name.

A ToolDef is shared by every Actor that reaches it, and a registry Tool's or an
MCP server's outlives a resolution (``model.identitymemo``), so what is derived
from it alone (its token count, its ToolSet JSON template, a policy's verdict
on it) is computed once and kept on it, in its ``Memo``. Each kind of value has
a ``Slot``: a name, a key type, a value type and a bound on the entries one
object keeps. The memo is written only through slots, so two users never share
a key scheme, and no object's memo grows without bound. Two readers on the
resolver's hottest line (``resolve.tooljson.tool_json``, ``resolve.tokens.tool_tokens``,
once for every tool of every Actor) read their slot's entry inline, without the
call (about 0.6% of a resolve): a change to how a slot holds its entries (a
pair, else a dict) must change them too; read wrongly, they miss and recompute.
docs/architecture.md ("Cache invariants") lists every slot, its key and why it
cannot be stale.

Keys that stand for a rule set are ``MemoKey`` objects (``memo_key``, or
``key_of`` for a dataclass: every field enters the key unless its declaration
says it does not), one object for equal rule sets, hashed by identity.
"""

from __future__ import annotations

import dataclasses
import functools
import weakref
from collections.abc import Hashable, Mapping
from types import MappingProxyType
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Memo:
    """The slots' entries for one object (``ToolDef.memo``): by slot, then key.
    Read and written through ``Slot`` and ``Cell`` only.

    Every ToolDef has one, most never written: the table comes with the first
    entry (until then the one shared empty table, read like any other: a read
    of a new memo, a ToolDef's first, raises nothing)."""

    __slots__ = ("_tables",)
    _tables: Mapping[object, Any]

    def __init__(self) -> None:
        self._tables = _NO_TABLES

    def __len__(self) -> int:
        """How many values are kept, over every slot."""
        return sum(len(t) if isinstance(s, Slot) and isinstance(t, dict) else 1
                   for s, t in self._tables.items())


#: Every memo's table until its first entry (never written).
_NO_TABLES: Mapping[object, Any] = MappingProxyType({})


def _tables(memo: Memo) -> dict[object, Any]:
    """The memo's table to write, made on first use."""
    tables = memo._tables
    if not isinstance(tables, dict):
        tables = memo._tables = {}
    return tables


class Slot(Generic[K, V]):
    """One kind of value kept in a ``Memo``, by key: at most ``bound`` entries
    per object, the latest written (a key written again counts as new; a
    lookup does not reorder, as lookups run for every tool of every Actor)."""

    __slots__ = ("bound", "evictions", "name")

    def __init__(self, name: str, *, bound: int) -> None:
        if bound < 1:
            raise ValueError(f"memo slot {name}: bound must be at least 1, not {bound}")
        self.name, self.bound = name, bound
        #: Entries dropped for the bound, in this process: a lost hit each, to check
        #: that a bound fits the workload (bench, tests).
        self.evictions = 0

    def __repr__(self) -> str:
        return f"Slot({self.name!r}, bound={self.bound})"

    # An object's entries in a slot: one entry as a (key, value) pair, more as a
    # dict. Most objects keep one entry per slot (a ToolDef's template for the one
    # skill that declares it), and a dict of one was 232 bytes where a pair is 56.

    def get(self, memo: Memo, key: K) -> V | None:
        table: dict[K, V] | tuple[K, V] | None = memo._tables.get(self)
        if type(table) is tuple:
            return table[1] if table[0] == key else None
        return table.get(key) if table is not None else None  # type: ignore[union-attr]

    def put(self, memo: Memo, key: K, value: V) -> V:
        """Keep ``value`` under ``key`` (and return it), forgetting the oldest
        entry beyond the bound (a forgotten one is computed again)."""
        tables = _tables(memo)
        table: dict[K, V] | tuple[K, V] | None = tables.get(self)
        if isinstance(table, tuple):
            if table[0] == key or self.bound == 1:
                self.evictions += table[0] != key
                tables[self] = (key, value)
                return value
            table = tables[self] = {table[0]: table[1]}
        if table is None:
            tables[self] = (key, value)
            return value
        table.pop(key, None)
        table[key] = value
        if len(table) > self.bound:
            del table[next(iter(table))]
            self.evictions += 1
        return value

    def entries(self, memo: Memo) -> Mapping[K, V]:
        """What the object keeps in this slot (read-only)."""
        table = memo._tables.get(self, {})
        return MappingProxyType({table[0]: table[1]} if type(table) is tuple else table)


class Cell(Generic[V]):
    """One value kept in a ``Memo`` (a slot with no key: bounded by itself)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Cell({self.name!r})"

    def get(self, memo: Memo) -> V | None:
        found: V | None = memo._tables.get(self)
        return found

    def put(self, memo: Memo, value: V) -> V:
        _tables(memo)[self] = value
        return value


class MemoKey:
    """The key of one rule set's entries: one object for equal rule sets
    (``memo_key``), so entries outlive a Resolver, hashed by identity, so the
    lookup made for every tool of every Actor hashes no tuple."""

    __slots__ = ("__weakref__", "kind", "number")

    def __init__(self, kind: str, number: int) -> None:
        self.kind, self.number = kind, number

    def __repr__(self) -> str:
        return f"MemoKey({self.kind!r}, {self.number})"


#: The live keys by (kind, rules). Weak values: a key lives while a rule set
#: (its ``key`` field) or an entry made under it (a memo's table holds its key)
#: does, and is dropped with the last of them, so the table holds no more keys
#: than are in use. A key made again for the same rules is a new object, under
#: which no entry is kept yet: nothing is served stale, only computed again.
#: (An LRU bound would drop keys still in use and so lose hits.)
_KEYS: weakref.WeakValueDictionary[tuple[str, Hashable], MemoKey] = (
    weakref.WeakValueDictionary())
#: Keys made in this process, to number them (for repr only).
_made = 0


def memo_key(kind: str, rules: Hashable) -> MemoKey:
    """The key of a (hashable) rule set, the same object for equal ones while it lives."""
    global _made
    found = _KEYS.get((kind, rules))
    if found is None:
        _made += 1
        found = _KEYS[(kind, rules)] = MemoKey(kind, _made)
    return found


def live_keys() -> int:
    """How many rule-set keys are in use (the table's size)."""
    return len(_KEYS)


#: Field metadata of a dataclass field that ``key_of`` leaves out of the key:
#: what is derived under the key does not depend on it, which the field's
#: declaration then says.
NOT_IN_KEY: Mapping[str, bool] = MappingProxyType({"memo_key": False})


@functools.lru_cache(maxsize=64)
def key_fields(cls: type) -> tuple[str, ...]:
    """The fields of the dataclass ``cls`` that ``key_of`` puts in its key: every
    field its equality compares (caches are not compared) and not marked
    ``NOT_IN_KEY``, so a field added later enters the key unless its declaration
    says otherwise. (Bounded: one entry per class.)"""
    return tuple(f.name for f in dataclasses.fields(cls)
                 if f.compare and f.metadata.get("memo_key", True))


def key_of(obj: Any, kind: str) -> MemoKey:
    """``memo_key`` of the values of every ``key_fields`` field of ``obj`` (a
    frozen dataclass of hashable values)."""
    cls: type = type(obj)
    return memo_key(kind, (cls.__qualname__, tuple(getattr(obj, name)
                                                   for name in key_fields(cls))))
