"""Equal parts of the specs the store holds, held once.

Thousands of Skills and Actors repeat each other: the same tool schema in every
namespace that installs a skill, the same sharing, capabilities and overrides,
the same empty lists. Parsed apart, each repeat is its own pydantic models,
dicts and lists (about 40 objects per Skill, half the store's memory). The
store hands every spec it keeps to ``SpecShare.share``, which replaces equal
parts by one object:

* free-form JSON (an ``inputSchema``, a ``runtime``, a list of names): one
  value per distinct JSON text (by its sha256), order included (the text is
  what the ToolSet prints, so two values shared are two values printed alike);
* pydantic sub-models whose parts are all held once themselves: one per
  distinct type, fields set and parts, in a weak-valued table (a model no spec
  uses any more goes with its last user);
* each model's ``__pydantic_fields_set__``: one set per distinct set of fields;
* short strings: ``sys.intern``.

Specs are frozen models and nothing writes into their dicts and lists (the
resolver's ToolDefs already hold the specs' own schemas), so a shared part is
only ever read. A spec's top-level model is never merged with another's: each
object keeps its own spec, and every cache keyed by object identity is keyed by
its owner too (``model.identitymemo``), so two namespaces holding equal specs
share values, never results derived with one's Secrets or listings.
"""

from __future__ import annotations

import hashlib
import json
import sys
import weakref
from collections.abc import Hashable, Iterable
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

#: Strings up to this length are interned: names, references, short texts.
INTERNED = 256
#: ``True == 1`` and ``hash(True) == hash(1)``: scalars enter a key with their type.
_BOOLS = {True: (bool, True), False: (bool, False)}
_SCALARS = frozenset({str, bool, int, float, type(None)})
#: A field holding None (a key of None means "cannot be keyed").
_NONE = (type(None),)

Key = Hashable | None


class SpecShare:
    """One object per distinct part of the specs it has seen (``share``)."""

    __slots__ = ("_fields_sets", "_json", "_limit", "_models")

    def __init__(self, *, floor: int = 1024) -> None:
        self._models: weakref.WeakValueDictionary[Hashable, BaseModel] = (
            weakref.WeakValueDictionary())
        #: One fields set per distinct set of fields, and its frozen form (a key part).
        self._fields_sets: dict[frozenset[str], tuple[frozenset[str], set[str]]] = {}
        #: JSON values by the sha256 of their text. Dicts and lists cannot be weakly
        #: referenced: ``prune`` keeps the ones in use once the table has doubled.
        self._json: dict[bytes, Any] = {}
        self._limit = floor

    def share(self, spec: M) -> M:
        """``spec``, its parts replaced by the equal ones already held (in place:
        call it on a model nobody else has seen yet)."""
        self._parts(spec)
        return spec

    def prune(self, specs: Iterable[BaseModel]) -> None:
        """Keep only the JSON values ``specs`` (every spec held) use, once the table
        has outgrown its limit."""
        if len(self._json) <= self._limit:
            return
        used: set[int] = set()
        for spec in specs:
            _json_ids(spec, used)
        self._json = {d: v for d, v in self._json.items() if id(v) in used}
        self._limit = max(self._limit, 2 * len(self._json))

    def __len__(self) -> int:
        return len(self._models) + len(self._json)

    # -- internals ----------------------------------------------------------------
    def _parts(self, model: BaseModel) -> Key:
        """Share ``model``'s parts in place; the key of its content (None: not shareable)."""
        if not type(model).model_config.get("frozen"):
            return None  # could be written to: kept as it is, all of it
        fields = model.__dict__  # the fields, and what a cached_property kept (not walked)
        keys: list[Key] = [type(model)]
        for name in type(model).model_fields:
            value = fields[name]
            shared, k = self._value(value)
            if shared is not value:
                fields[name] = shared
            keys.append(k)
        fields_set = model.__pydantic_fields_set__
        frozen, one = self._fields_sets.setdefault(frozenset(fields_set),
                                                   (frozenset(fields_set), fields_set))
        if one is not fields_set:
            object.__setattr__(model, "__pydantic_fields_set__", one)
        keys.append(frozen)
        return None if None in keys else tuple(keys)

    def _model(self, model: BaseModel) -> tuple[BaseModel, Key]:
        key = self._parts(model)
        if key is None:
            return model, None
        found = self._models.get(key)
        if found is None:
            self._models[key] = found = model
        # A held model keeps its parts alive, so their ids in its key stay theirs.
        return found, id(found)

    def _value(self, value: Any) -> tuple[Any, Key]:
        if value is None:
            return None, _NONE
        if type(value) is str:
            shared = sys.intern(value) if len(value) <= INTERNED else value
            return shared, shared
        if type(value) is bool:
            return value, _BOOLS[value]
        if type(value) in (int, float):
            return value, (type(value), value)
        if isinstance(value, BaseModel):
            return self._model(value)
        if type(value) is list:
            return self._list(value)
        if type(value) is dict:
            return self._dict(value)
        if type(value) is tuple and all(type(i) in _SCALARS for i in value):
            # Immutable, so kept as it is: only scalars are keyed, never an id of
            # something the tuple does not hold.
            return value, ("tuple", *(self._value(item)[1] for item in value))
        return value, None

    def _list(self, items: list[Any]) -> tuple[Any, Key]:
        if not any(isinstance(item, BaseModel) for item in items):
            return self._json_value(items)
        keys: list[Key] = []
        for i, item in enumerate(items):
            items[i], k = self._value(item)
            keys.append(k)
        return items, None if None in keys else ("list", *keys)

    def _dict(self, mapping: dict[str, Any]) -> tuple[Any, Key]:
        if not any(isinstance(v, BaseModel) for v in mapping.values()):
            return self._json_value(mapping)
        keys: list[Key] = []
        for name, v in mapping.items():
            mapping[name], k = self._value(v)
            keys += (name, k)
        return mapping, None if None in keys else ("dict", *keys)

    def _json_value(self, value: Any) -> tuple[Any, Key]:
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError):
            return value, None
        # By the text's sha256, not the text: a distinct schema is not held twice.
        digest = hashlib.sha256(text.encode()).digest()
        found = self._json.setdefault(digest, value)
        if found is not value and found != value:  # never: a sha256 collision
            return value, None
        return found, id(found)


def _json_ids(value: Any, used: set[int]) -> None:
    """The ids of the JSON values (dicts and lists of no model) within ``value``."""
    if isinstance(value, BaseModel):
        for name in type(value).model_fields:
            _json_ids(value.__dict__[name], used)
    elif type(value) is list:
        if any(isinstance(item, BaseModel) for item in value):
            for item in value:
                _json_ids(item, used)
        else:
            used.add(id(value))
    elif type(value) is dict:
        if any(isinstance(v, BaseModel) for v in value.values()):
            for v in value.values():
                _json_ids(v, used)
        else:
            used.add(id(value))
