"""The inflected forms of the operation verbs (gateway/actions.py), for reading a
tool's text by its words' forms rather than their stems: a stemmer joins "terminal"
to "terminate" and "general" to "generate", so that "polls until a terminal state"
reads as stopping. The abstention reads forms (``actions.FORMS``); the ranking's
features keep the stems they were fitted with.
"""

from __future__ import annotations

from collections.abc import Mapping

#: Past forms that no rule of ``forms`` makes.
_IRREGULAR: Mapping[str, tuple[str, ...]] = {
    "make": ("made",), "build": ("built",), "send": ("sent",), "write": ("wrote", "written"),
    "run": ("ran",), "rerun": ("reran",), "undo": ("undid", "undone"),
    "forget": ("forgot", "forgotten"),
}
_VOWELS = frozenset("aeiou")


def forms(verb: str) -> set[str]:
    """The inflected forms of ``verb`` ("stop": "stops", "stopped", "stopping"; a
    form the English verb lacks, "stoped", is never written, so it costs nothing)."""
    out = {verb, f"{verb}s", f"{verb}es", f"{verb}ed", f"{verb}ing", *_IRREGULAR.get(verb, ())}
    if verb.endswith("e"):
        out |= {f"{verb}d", f"{verb[:-1]}ing"}
    if verb.endswith("y") and verb[-2:-1] not in _VOWELS:
        out |= {f"{verb[:-1]}ies", f"{verb[:-1]}ied"}
    if verb[-1] not in "aeiouwxy":
        out |= {f"{verb}{verb[-1]}ed", f"{verb}{verb[-1]}ing"}
    return out


def inflected(verbs: Mapping[str, frozenset[str]]) -> dict[str, frozenset[str]]:
    """Each form of each of ``verbs`` -> the classes of the verbs it is a form of."""
    out: dict[str, set[str]] = {}
    for verb, classes in verbs.items():
        for form in forms(verb):
            out.setdefault(form, set()).update(classes)
    return {form: frozenset(classes) for form, classes in out.items()}
