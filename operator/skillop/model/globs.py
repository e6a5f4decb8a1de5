"""The glob grammar over canonical skill names (``namespace/name``).

fnmatch's syntax, narrowed to what a skill name can contain: lowercase letters,
digits, ``.``, ``-``, one ``/``, and ``*``, ``?`` and unnested ``[...]`` classes.
A glob with neither ``/`` nor ``*`` can never match ``namespace/name``; that
rule is one ``Rule``, checked by the API server and the models alike.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, StringConstraints
from pydantic_core import PydanticCustomError

from skillop.model.specbase import Rule, field_rules

GLOB_RE = re.compile(r"^[a-z0-9.*?/\-\[\]!]+$")


def glob_problem(glob: str) -> str | None:
    """Why a skill-name glob is malformed, or None when it is fine."""
    if not GLOB_RE.fullmatch(glob):
        return "may contain only lowercase letters, digits, '.', '-', '/', '*', '?' and [...]"
    depth = 0
    for ch in glob:
        if ch == "[":
            if depth:
                return "nests '[' inside a character class"
            depth = 1
        elif ch == "]" and depth:
            depth = 0
    if depth:
        return "has an unclosed '['"
    if glob.count("/") > 1:
        return "has more than one '/' (skill names are namespace/name)"
    return None


def _well_formed(glob: str) -> str:
    problem = glob_problem(glob)
    if problem:
        raise PydanticCustomError("malformed_glob", "glob '{g}' {p}", {"g": glob, "p": problem})
    return glob


#: fnmatch would only ever compare such a glob with "namespace/name" and never
#: match: a policy that silently denies (or allows) nothing is worse than an error.
MATCHABLE: Rule[str] = Rule(
    "self.contains('/') || self.contains('*')",
    "a skill glob without '/' or '*' can never match namespace/name",
    lambda glob: "/" in glob or "*" in glob,
    detail=lambda glob: f"'{glob}'; write e.g. 'team-a/{glob}' or '*/{glob}'")

#: A glob over canonical skill names (``namespace/name``).
SkillGlob = Annotated[
    str, StringConstraints(min_length=1, max_length=317), AfterValidator(_well_formed),
    *field_rules(MATCHABLE),
]
