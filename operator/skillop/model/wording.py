"""Counts in messages, conditions and logs: "1 tool", "2 tools", "1 policy"."""

from __future__ import annotations


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1 (``plural``, else ``noun`` + "s")."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
