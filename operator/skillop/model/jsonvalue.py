"""Values as the API server stores them: JSON, and nothing JSON cannot carry.

A manifest's spec reaches skillop from the API server (always JSON) or from a
YAML file (``model.yamlread``), where YAML can say more than JSON: NaN and
Infinity, binary, sets, non-string keys, an anchor that contains itself.
kubectl refuses to send those, so the CLI refuses them too, naming the field.

Whole numbers written as floats (``30.0``) become ints, as they do on their way
through kubectl (JSON has one number type; Go prints 30.0 as ``30``), so the
CLI sees the same values, and writes the same bytes, as the operator.

Depth is bounded: a schema nested 5,000 levels deep is valid JSON, but no tool
needs it, and serialising it would overflow Python's stack in the operator.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

#: Deepest nesting below the manifest's root (``spec`` is level 1).
MAX_DEPTH = 64
#: Most values in one spec, aliases expanded: far more than the API server's
#: 1.5 MB object limit can hold, so it only ever stops pathological input.
MAX_VALUES = 1_000_000
#: The largest float that is still printed without an exponent (as Go does).
_PLAIN_FLOAT_LIMIT = 1e21
_KEY_SHOWN = 64


class NotJson(ValueError):
    """A value JSON cannot carry; ``path`` names the field (``spec.x[0].y``)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


_EXIT = object()


def json_value(value: Any, *, path: str = "spec", depth: int = 1) -> Any:
    """A fresh JSON-only copy of ``value`` (whole floats as ints); ``NotJson``
    naming the first field that JSON cannot carry. ``depth`` is ``value``'s own."""
    holder: list[Any] = []
    on_path: set[int] = set()
    count = 0
    # (where the copy goes, its key there (None: append), value, path, depth)
    stack: list[tuple[Any, str | None, Any, str, int]] = [(holder, None, value, path, depth)]
    while stack:
        target, key, item, where, level = stack.pop()
        if target is _EXIT:
            on_path.discard(id(item))
            continue
        count += 1
        if count > MAX_VALUES:
            raise NotJson(path, f"has more than {MAX_VALUES:,} values")
        copy = _copy_of(item, where, level, on_path)
        if key is None:
            target.append(copy)
        else:
            target[key] = copy
        if isinstance(item, (Mapping, list)):
            stack.append((_EXIT, None, item, where, level))
            stack.extend(reversed(_children(item, copy, where, level)))
    return holder[0]


def _copy_of(value: Any, path: str, depth: int, on_path: set[int]) -> Any:
    """A scalar's JSON value, or an empty container to fill."""
    if isinstance(value, (Mapping, list)):
        if id(value) in on_path:
            raise NotJson(path, "contains itself (a YAML anchor used inside its own"
                                " value); JSON cannot hold a recursive structure")
        if depth > MAX_DEPTH:
            raise NotJson(path, f"is nested more than {MAX_DEPTH} levels deep")
        on_path.add(id(value))
        return {} if isinstance(value, Mapping) else []
    return _scalar(value, path)


def _children(value: Mapping[Any, Any] | list[Any], copy: Any, path: str, depth: int,
              ) -> list[tuple[Any, str | None, Any, str, int]]:
    if isinstance(value, list):
        return [(copy, None, v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value)]
    out: list[tuple[Any, str | None, Any, str, int]] = []
    for key, v in value.items():
        if not isinstance(key, str):
            raise NotJson(path, f"has the key {_key_text(key)}, which is not a string;"
                                " JSON keys are strings (quote it)")
        out.append((copy, key, v, f"{path}.{_shown_key(key)}", depth + 1))
    return out


def _scalar(value: Any, path: str) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if math.isnan(value):
            raise NotJson(path, "is NaN (.nan), which JSON cannot carry")
        if math.isinf(value):
            raise NotJson(path, "is infinite (.inf or a number too large for a float),"
                                " which JSON cannot carry")
        if value.is_integer() and abs(value) < _PLAIN_FLOAT_LIMIT:
            return int(value)
        return value
    raise NotJson(path, f"is {_kind_of(value)}, which JSON cannot carry")


def _kind_of(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        return "binary data (!!binary)"
    if isinstance(value, (set, frozenset)):
        return "a set (!!set)"
    if isinstance(value, tuple):
        return "a list of pairs (!!omap or !!pairs)"
    return f"a {type(value).__name__}"


def _key_text(key: Any) -> str:
    if key is None:
        return "null (~)"
    if isinstance(key, bool):
        # kubectl would silently send the key "true" or "false".
        return (f"{str(key).lower()} (YAML reads an unquoted y/n, yes/no, on/off or"
                " true/false as a boolean)")
    if isinstance(key, (int, float)):
        return repr(key)
    return _kind_of(key)


def _shown_key(key: str) -> str:
    return key if len(key) <= _KEY_SHOWN else key[:_KEY_SHOWN] + "…"
