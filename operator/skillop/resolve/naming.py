"""Effective names: conflict qualification and LLM-safe binding names.

Conflicts are decided on the filtered set: every member of a set of different
tools sharing one name becomes ``<namespace>/<skill>.<tool>``; everything else
keeps its bare name, so adding an unrelated tool never renames another.

A binding name depends only on the effective name, never on its neighbours, so
it is stable: the name itself when it already fits ``^[a-zA-Z0-9_-]{1,64}$``,
otherwise a sanitised prefix and 8 hex digits of the name's sha256.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence

BINDING_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]+")


def effective_names(pairs: Sequence[tuple[str, str]]) -> list[str]:
    """For ``(name, qualified_name)`` pairs of distinct tools: the name each goes by."""
    counts: dict[str, int] = {}
    for name, _ in pairs:
        counts[name] = counts.get(name, 0) + 1
    return [name if counts[name] == 1 else qualified for name, qualified in pairs]


def binding_name(name: str, *, digits: int = 8) -> str:
    if BINDING_RE.fullmatch(name):
        return name
    suffix = hashlib.sha256(name.encode()).hexdigest()[:digits]
    base = _UNSAFE.sub("_", name).strip("_") or "tool"
    return f"{base[: 63 - digits]}_{suffix}"


def binding_names(names: Iterable[str]) -> dict[str, str]:
    """Unique binding names for unique effective names (longer hashes on a clash)."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    ordered = sorted(names)
    # Names that are already valid claim themselves first, so they never move.
    for name in ordered:
        if BINDING_RE.fullmatch(name):
            out[name] = name
            taken.add(name)
    for name in ordered:
        if name in out:
            continue
        digits = 8
        candidate = binding_name(name, digits=digits)
        while candidate in taken:
            digits += 4
            candidate = binding_name(name, digits=digits)
        out[name] = candidate
        taken.add(candidate)
    return out
