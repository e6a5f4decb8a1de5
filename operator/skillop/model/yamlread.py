"""YAML read as ``kubectl`` reads it: into values JSON can carry, with bounded aliases.

kubectl turns YAML into JSON before the API server sees it, so a manifest means
what its JSON means. Read with a plain YAML 1.1 loader it would mean more:
unquoted dates become ``datetime`` objects, ``!!binary`` bytes, ``!!set`` sets,
and a few hundred bytes of nested aliases ("billion laughs") expand into
billions of values. Here:

* scalars resolve as in kubectl's YAML decoder (go-yaml, YAML 1.1): timestamps
  stay strings (``default: 2024-01-01`` is the string kubectl sends), ``y`` and
  ``n`` are booleans like ``yes`` and ``no``, ``1e3`` is a number, ``12:30`` is
  text (PyYAML would read the base-60 number 750);
* duplicate keys are an error (YAML would silently keep the last one);
* alias expansion is bounded by the rule kubectl's YAML decoder (go-yaml) uses:
  past 1,000 decoded values and 100 values from aliases, a document whose
  alias-made share exceeds 99% (falling to 10% for documents of millions of
  values) is refused. Construction shares aliased values, so the expanded size
  is counted on the shared structure without ever expanding it.

A file whose content is JSON (its first non-blank character is ``{``, the test
kubectl's decoder makes) is read as JSON, as kubectl reads it: a stream of JSON
objects, ``\\uXXXX`` escapes and surrogate pairs as JSON defines them (what
``json.dumps`` writes for non-ASCII text by default; YAML's parser refuses
surrogate escapes), a lone surrogate as U+FFFD (as Go's decoder replaces it),
no NaN or Infinity (not JSON), duplicate keys refused as in YAML.

What JSON cannot carry (NaN, binary, sets, non-string keys, recursive anchors)
is left in the values and reported by ``model.jsonvalue`` with the field's path,
where the object the field belongs to is known.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import yaml

#: libyaml's parser when PyYAML was built with it (much faster), else the pure one.
_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_TIMESTAMP = "tag:yaml.org,2002:timestamp"

#: go-yaml's bounds on alias expansion (see the module docstring).
ALIAS_RATIO_LOW, ALIAS_RATIO_HIGH = 400_000, 4_000_000
MIN_DECODED, MIN_FROM_ALIASES = 1_000, 100


class ExcessiveAliasing(yaml.YAMLError):
    """A document whose aliases expand far beyond what is written."""


class MalformedJson(yaml.YAMLError):
    """A JSON file that does not parse; ``line`` (1-based) and ``problem`` say where and why.

    A ``YAMLError``: callers handle one error for a file that cannot be read."""

    def __init__(self, problem: str, line: int, *, documents: int = 0) -> None:
        super().__init__(f"malformed JSON at line {line}: {problem}")
        #: How many documents before it parsed.
        self.problem, self.line, self.documents = problem, line, documents


_BOOL, _INT, _FLOAT = (f"tag:yaml.org,2002:{t}" for t in ("bool", "int", "float"))
#: go-yaml's scalars, where they differ from PyYAML's YAML 1.1: ``y``/``n`` are
#: booleans, ``1e3`` is a float, ``12:30`` is a string (not a base-60 number).
_GO_SCALARS = (
    (_BOOL, re.compile(r"^(?:y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE"
                       r"|on|On|ON|off|Off|OFF)$"), "yYnNtTfFoO"),
    (_FLOAT, re.compile(r"^(?:[-+]?(?:[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?"
                        r"|\.[0-9][0-9_]*(?:[eE][-+]?[0-9]+)?|[0-9][0-9_]*[eE][-+]?[0-9]+)"
                        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"), "-+0123456789."),
    (_INT, re.compile(r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)"
                      r"|[-+]?0x[0-9a-fA-F_]+)$"), "-+0123456789"),
)
_REPLACED = {_TIMESTAMP, _BOOL, _INT, _FLOAT}


def _resolvers() -> dict[str, list[tuple[str, re.Pattern[str]]]]:
    out = {first: [(tag, regexp) for tag, regexp in resolvers if tag not in _REPLACED]
           for first, resolvers in _Base.yaml_implicit_resolvers.items()}
    for tag, regexp, firsts in _GO_SCALARS:
        for first in firsts:
            out.setdefault(first, []).insert(0, (tag, regexp))
    return out


class Loader(_Base):  # type: ignore[misc]
    """The safe loader, reading scalars as go-yaml does; duplicate keys refused."""

    yaml_implicit_resolvers = _resolvers()
    bool_values = {**_Base.bool_values, "y": True, "n": False}

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[tuple[str, str]] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key = (key_node.tag, key_node.value)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping", node.start_mark,
                        f"found duplicate key {key_node.value[:64]!r}", key_node.start_mark)
                seen.add(key)
        mapping: dict[Any, Any] = super().construct_mapping(node, deep)
        return mapping

    def construct_timestamp_as_text(self, node: yaml.ScalarNode) -> str:
        # An explicit ``!!timestamp`` too: kubectl sends the text, not a time.
        return str(self.construct_scalar(node))

    def construct_go_float(self, node: yaml.ScalarNode) -> float | str:
        value: float = self.construct_yaml_float(node)
        if math.isinf(value) and "inf" not in node.value.lower():
            return str(node.value)  # out of a float's range: go-yaml keeps the text
        return value

    def construct_go_int(self, node: yaml.ScalarNode) -> int | float | str:
        # go-yaml parses an int as int64, then as uint64; past both, a decimal is
        # a float while one can hold it and anything else stays text. (Python's
        # int() would also refuse a decimal of over 4,300 digits, a bare ValueError.)
        text = str(node.value)
        digits = text.replace("_", "").lstrip("+-")
        if digits[:2] in ("0x", "0b") or (len(digits) > 1 and digits[0] == "0"):
            based: int = self.construct_yaml_int(node)  # powers of two: no digit limit
            return based if _INT_MIN <= based <= _UINT_MAX else text
        if len(digits) > _MAX_FLOAT_DIGITS:
            return text
        value: int = self.construct_yaml_int(node)
        if _INT_MIN <= value <= _UINT_MAX:
            return value
        try:
            return float(value)
        except OverflowError:
            return text


#: go-yaml's integer range (int64 and uint64); a decimal of more digits is past any float.
_INT_MIN, _UINT_MAX, _MAX_FLOAT_DIGITS = -(2**63), 2**64 - 1, 400

Loader.add_constructor(_TIMESTAMP, Loader.construct_timestamp_as_text)
Loader.add_constructor(_FLOAT, Loader.construct_go_float)
Loader.add_constructor(_INT, Loader.construct_go_int)


def load_all(text: str) -> list[Any]:
    """Every document of ``text``; ``yaml.YAMLError`` (``ExcessiveAliasing``,
    ``MalformedJson``) when it is malformed. JSON content is read as JSON."""
    if text.lstrip()[:1] == "{":
        try:
            return load_json_stream(text)
        except MalformedJson as err:
            if err.documents:
                raise
            # A flow mapping is YAML too (``{a: 1}``): kubectl's decoder reads a
            # JSON-looking file that is no JSON as YAML; what neither reads is
            # reported as the JSON it looks like.
            try:
                return _load_yaml(text)
            except yaml.YAMLError:
                raise err from None
    return _load_yaml(text)


def _load_yaml(text: str) -> list[Any]:
    loader = Loader(text)
    try:
        docs = []
        while loader.check_data():
            doc = loader.get_data()
            refuse_excessive_aliasing(doc)
            docs.append(doc)
        return docs
    finally:
        loader.dispose()


def load_json_stream(text: str) -> list[Any]:
    """The JSON values of ``text``, one after another (blank between them), as
    kubectl's decoder reads a JSON file; ``MalformedJson`` when one does not parse."""
    decoder = json.JSONDecoder(object_pairs_hook=_json_object, parse_constant=_no_constant,
                               parse_int=_json_int)
    docs: list[Any] = []
    position, end = 0, len(text)
    while True:
        while position < end and text[position] in " \t\r\n":
            position += 1
        if position == end:
            return docs
        try:
            doc, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError as err:
            raise MalformedJson(err.msg, err.lineno, documents=len(docs)) from None
        except _Refused as err:
            raise MalformedJson(str(err), text.count("\n", 0, position) + 1,
                                documents=len(docs)) from None
        docs.append(_without_lone_surrogates(doc))


class _Refused(ValueError):
    """JSON that parses but that kubectl's decoder would not accept."""


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"found duplicate key {key[:64]!r}")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise _Refused(f"{name} is not a JSON value")


def _json_int(text: str) -> int | float:
    """An integer as Go's decoder reads one into an object: an int64 or uint64, else
    a float while one holds it (Python's int() also refuses over 4,300 digits)."""
    digits = text.lstrip("-")
    if len(digits) <= _MAX_FLOAT_DIGITS:
        value = int(text)
        if _INT_MIN <= value <= _UINT_MAX:
            return value
        with_float = float(value) if len(digits) <= 308 else math.inf
        if not math.isinf(with_float):
            return with_float
    raise _Refused(f"number {text[:20]}... is out of range")


_SURROGATE = re.compile("[\ud800-\udfff]")


def _without_lone_surrogates(value: Any) -> Any:
    """``value`` with every unpaired surrogate of its strings (keys too) replaced by
    U+FFFD, as Go's decoder does: a lone surrogate is no character UTF-8 can carry.
    (Python joins a valid ``\\uXXXX\\uXXXX`` pair into one character itself.)"""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_without_lone_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_without_lone_surrogates(k): _without_lone_surrogates(v)
                for k, v in value.items()}
    return value


def load_one(text: str) -> Any:
    """The single document of ``text`` (None when empty), as ``load_all`` reads it."""
    docs = load_all(text)
    if len(docs) > 1:
        raise yaml.YAMLError("expected a single document, found several")
    return docs[0] if docs else None


def refuse_excessive_aliasing(doc: Any) -> None:
    decoded, written = expansion(doc)
    from_aliases = decoded - written
    if (from_aliases > MIN_FROM_ALIASES and decoded > MIN_DECODED
            and from_aliases / decoded > allowed_alias_ratio(decoded)):
        raise ExcessiveAliasing(
            f"document contains excessive aliasing: {written} values written expand to"
            f" {_count(decoded)}")


def _count(n: int) -> str:
    return f"{n:,}" if n < 10**12 else f"about 10^{len(str(n)) - 1}"


def allowed_alias_ratio(decoded: int) -> float:
    """The share of values that may come from aliases (go-yaml's scale)."""
    if decoded <= ALIAS_RATIO_LOW:
        return 0.99
    if decoded >= ALIAS_RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * (decoded - ALIAS_RATIO_LOW) / (ALIAS_RATIO_HIGH - ALIAS_RATIO_LOW)


def expansion(doc: Any) -> tuple[int, int]:
    """``(decoded, written)``: how many values ``doc`` has when every shared
    container is expanded, and how many when each is counted once (a mapping's
    keys count as values).

    Linear in the distinct containers (sizes are memoized by identity); a
    container that contains itself counts its inner occurrence as one value.
    """
    if not isinstance(doc, (dict, list)):
        return 1, 1
    sizes: dict[int, int] = {}
    entered: set[int] = set()
    written = 0
    stack: list[tuple[Any, bool]] = [(doc, False)]
    while stack:
        node, done = stack.pop()
        items = node.values() if isinstance(node, dict) else node
        if done:
            keys = len(node) if isinstance(node, dict) else 0
            sizes[id(node)] = 1 + keys + sum(
                sizes.get(id(c), 1) if isinstance(c, (dict, list)) else 1 for c in items)
            continue
        if id(node) in entered:
            continue
        entered.add(id(node))
        containers = [c for c in items if isinstance(c, (dict, list))]
        written += 1 + len(node) + (len(node) - len(containers) if isinstance(node, dict)
                                    else -len(containers))
        stack.append((node, True))
        stack.extend((c, False) for c in containers if id(c) not in entered)
    return sizes[id(doc)], written
