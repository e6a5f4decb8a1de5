"""Effective names: conflict qualification and LLM-safe binding names.

Conflicts are decided on the filtered set: every member of a set of different
tools sharing one name becomes ``<namespace>/<skill>.<tool>``; everything else
keeps its bare name, so adding an unrelated tool never renames another.

A binding name is the name's own form, which depends on the name alone: the
name itself when it already fits ``^[a-zA-Z0-9_-]{1,64}$``, otherwise a
sanitised prefix and 8 hex digits of the name's sha256. Only names sharing one
form depend on each other (``binding_names``), never unrelated neighbours.
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


def binding_name(name: str) -> str:
    """The name's own form: itself when valid, else sanitised and hashed."""
    return name if BINDING_RE.fullmatch(name) else _hashed(name, 8)


def _hashed(name: str, digits: int) -> str:
    suffix = hashlib.sha256(name.encode()).hexdigest()[:digits]
    base = _UNSAFE.sub("_", name).strip("_") or "tool"
    return f"{base[: 63 - digits]}_{suffix}"


def binding_names(names: Iterable[str]) -> dict[str, str]:
    """Unique binding names for unique effective names: each its own form, unless
    another name has the same one.

    A hashed form belongs to the one name hashed to it: a valid name spelling it
    is hashed as an invalid one is, so no tool takes over another's binding name
    by being named after it. Two names hashing alike (1 in 2**32) both take longer
    hashes, whichever came first. A longer hash avoids every name's own form, so
    it moves nobody else (docs/decisions.md, Names and the ToolSet).
    """
    ordered = sorted(names)
    claims: dict[str, list[str]] = {}
    for name in ordered:
        claims.setdefault(binding_name(name), []).append(name)
    out: dict[str, str] = {}
    for form, claimants in claims.items():
        owner = _owner(form, claimants)
        if owner is not None:
            out[owner] = form
    taken = set(out.values()) | claims.keys()
    for name in ordered:
        if name in out:
            continue
        digits = 8 if BINDING_RE.fullmatch(name) else 12
        while (candidate := _hashed(name, digits)) in taken:
            digits += 4
        out[name] = candidate
        taken.add(candidate)
    return out


def _owner(form: str, claimants: list[str]) -> str | None:
    """Who keeps ``form``: its one claimant; else the one name hashed to it; else
    the valid name it spells, when several names hash to it (None: nobody)."""
    if len(claimants) == 1:
        return claimants[0]
    hashed = [n for n in claimants if n != form]
    if len(hashed) == 1:
        return hashed[0]
    return form if form in claimants else None
