"""A label selector in the string form kubectl's ``-l`` takes, for namespaces.

A shard of the operator owns the namespaces its selector matches
(``SKILLOP_SHARD_SELECTOR``, docs/install.md, Sharding). Equality-based
requirements only, comma-separated, all of which must hold: ``key=value``
(or ``key==value``), ``key!=value`` (also true when the label is absent), ``key``
(present) and ``!key`` (absent). Set-based requirements (``in``, ``notin``) are
refused with a clear error rather than half-read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

#: A label key: an optional DNS-subdomain prefix and a name (as Kubernetes checks it).
_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?"
                  r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")

Operator = Literal["=", "!=", "exists", "absent"]


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    op: Operator
    value: str = ""

    def holds(self, labels: Mapping[str, str]) -> bool:
        if self.op == "exists":
            return self.key in labels
        if self.op == "absent":
            return self.key not in labels
        if self.op == "=":
            return labels.get(self.key) == self.value
        return labels.get(self.key) != self.value


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """Every requirement must hold; none at all matches every namespace."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.holds(labels) for r in self.requirements)

    def __str__(self) -> str:
        shown = {"=": "{k}={v}", "!=": "{k}!={v}", "exists": "{k}", "absent": "!{k}"}
        return ",".join(shown[r.op].format(k=r.key, v=r.value) for r in self.requirements)

    @classmethod
    def parse(cls, text: str) -> LabelSelector:
        """``text`` as a selector; ``ValueError`` names the part that is wrong."""
        return cls(tuple(_requirement(part.strip()) for part in text.split(",")
                         if part.strip() or text.strip()))


def _requirement(part: str) -> Requirement:
    if not part:
        raise ValueError("an empty requirement (two commas in a row?)")
    if re.search(r"\s(in|notin)\s*\(", f" {part}"):
        raise ValueError(f"{part!r}: set-based requirements (in, notin) are not supported;"
                         " use key=value, key!=value, key or !key")
    signs: tuple[tuple[str, Operator], ...] = (("!=", "!="), ("==", "="), ("=", "="))
    for sign, op in signs:
        if sign in part:
            name, _, value = part.partition(sign)
            return Requirement(_key(name.strip(), part), op, _value(value.strip(), part))
    if part.startswith("!"):
        return Requirement(_key(part[1:].strip(), part), "absent")
    return Requirement(_key(part, part), "exists")


def _key(name: str, part: str) -> str:
    if not _KEY.match(name):
        raise ValueError(f"{part!r}: {name!r} is not a label key")
    return name


def _value(value: str, part: str) -> str:
    if not _VALUE.match(value):
        raise ValueError(f"{part!r}: {value!r} is not a label value")
    return value
