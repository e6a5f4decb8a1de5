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


class _Refused(Exception):
    """Raised where a value is refused; each level adds its key on the way up, so
    paths are spelled only for the value refused, never on the happy path."""

    def __init__(self, message: str, *, whole: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.whole = whole  # about the whole value, not one field of it
        self.parts: list[str] = []


def json_value(value: Any, *, path: str = "spec", depth: int = 1) -> Any:
    """A fresh JSON-only copy of ``value`` (whole floats as ints); ``NotJson``
    naming the first field that JSON cannot carry. ``depth`` is ``value``'s own.

    Recursive, but never deeper than ``MAX_DEPTH`` frames: deeper is refused.
    """
    try:
        return _copy(value, depth, set(), [0])
    except _Refused as refused:
        where = path if refused.whole else path + "".join(reversed(refused.parts))
        raise NotJson(where, refused.message) from None


def _copy(value: Any, depth: int, on_path: set[int], count: list[int]) -> Any:
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return _number(value)
    if not isinstance(value, (Mapping, list)):
        raise _Refused(f"is {_kind_of(value)}, which JSON cannot carry")
    if id(value) in on_path:
        raise _Refused("contains itself (a YAML anchor used inside its own value);"
                       " JSON cannot hold a recursive structure")
    if depth > MAX_DEPTH:
        raise _Refused(f"is nested more than {MAX_DEPTH} levels deep")
    count[0] += len(value)
    if count[0] > MAX_VALUES:
        raise _Refused(f"has more than {MAX_VALUES:,} values", whole=True)
    on_path.add(id(value))
    out = _copy_mapping(value, depth, on_path, count) if isinstance(value, Mapping) \
        else _copy_list(value, depth, on_path, count)
    on_path.discard(id(value))
    return out


def _copy_mapping(value: Mapping[Any, Any], depth: int, on_path: set[int],
                  count: list[int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise _Refused(f"has the key {_key_text(key)}, which is not a string;"
                           " JSON keys are strings (quote it)")
        try:
            out[key] = _copy(item, depth + 1, on_path, count)
        except _Refused as refused:
            refused.parts.append(f".{_shown_key(key)}")
            raise
    return out


def _copy_list(value: list[Any], depth: int, on_path: set[int], count: list[int]) -> list[Any]:
    out: list[Any] = []
    for i, item in enumerate(value):
        try:
            out.append(_copy(item, depth + 1, on_path, count))
        except _Refused as refused:
            refused.parts.append(f"[{i}]")
            raise
    return out


def _number(value: float) -> float | int:
    if math.isnan(value):
        raise _Refused("is NaN (.nan), which JSON cannot carry")
    if math.isinf(value):
        raise _Refused("is infinite (.inf or a number too large for a float),"
                       " which JSON cannot carry")
    if value.is_integer() and abs(value) < _PLAIN_FLOAT_LIMIT:
        return int(value)
    return value


def json_type(value: Any) -> str:
    """What a JSON value is, for a message saying a field holds the wrong type."""
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {value[:40]!r}" + ("…" if len(value) > 40 else "")
    if value is None:
        return "null"
    return "a list" if isinstance(value, list) else "a mapping"


def quote_hint(value: Any) -> str:
    """For a boolean where text belongs, how it came to be one (else nothing)."""
    if not isinstance(value, bool):
        return ""
    return (" (YAML reads unquoted yes/no, on/off, y/n and true/false as booleans;"
            " quote the text, e.g. \"no\")")


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
