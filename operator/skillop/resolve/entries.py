"""Entries: a tool on its way through the include graph, with its provenance.

An ``Entry`` is a ToolDef plus where it was declared and every override applied
on the way up. ``Flat`` is one skill's flattened set: entries by identity in
pre-order, the skills reached, and the warnings met on the way.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from skillop.model.names import ObjectRef
from skillop.model.specs import Override
from skillop.model.tooldef import ToolDef


@dataclass(frozen=True, slots=True)
class AppliedOverride:
    """One override, where it was written and the fields it set."""

    at: str
    fields: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Entry:
    tool: ToolDef
    skill: ObjectRef
    overrides: tuple[AppliedOverride, ...] = ()
    #: Set when several inclusion paths with different overrides were merged.
    merged: bool = False

    @property
    def qualified_name(self) -> str:
        return f"{self.skill.canonical}.{self.tool.name}"

    def overridden(self, override: Override, *, at: str) -> Entry:
        if override.is_empty:
            return self
        return replace(
            self,
            tool=self.tool.with_override(override),
            overrides=(*self.overrides, AppliedOverride(at, tuple(override.fields()))),
        )


def forbidden_loosening(tool: ToolDef, override: Override) -> list[str]:
    """Capability fields ``override`` would loosen on ``tool`` (empty when it only
    tightens). Applies to every override made outside the skill that declares
    the tool: an includer may add risk, never erase it."""
    if override.capabilities is None:
        return []
    return tool.capabilities.loosened_by(override.capabilities)


def loosening_message(tool: ToolDef, loosened: list[str]) -> str:
    return (f"tool {tool.name} ({tool.identity}) may only be tightened here; overriding"
            f" {', '.join(loosened)} would loosen it (only the skill that declares a tool"
            " sets its capabilities freely)")


def same_view(a: ToolDef, b: ToolDef) -> bool:
    """Whether two views of one tool (same identity) differ in what overrides touch."""
    return a is b or (
        a.description == b.description and a.title == b.title
        and a.capabilities == b.capabilities
    )


@dataclass(slots=True)
class Flat:
    """One skill's flattened tool set, and the flattened sets of what it includes."""

    skill: ObjectRef
    entries: dict[str, Entry]
    children: tuple[Flat, ...]
    warnings: tuple[str, ...] = ()
    _names: dict[str, list[str]] | None = field(default=None, repr=False)
    _skills: tuple[ObjectRef, ...] | None = field(default=None, repr=False)

    @property
    def skills(self) -> tuple[ObjectRef, ...]:
        """Every skill reached, in pre-order. Computed when asked (for the skills a
        resolution starts from), not for every skill: in a 10,000-skill include
        chain each skill would otherwise hold the rest of the chain."""
        if self._skills is None:
            seen: dict[ObjectRef, None] = {}
            stack = [self]
            while stack:
                flat = stack.pop()
                if flat.skill not in seen:
                    seen[flat.skill] = None
                    stack.extend(reversed(flat.children))
            self._skills = tuple(seen)
        return self._skills

    def lookup(self, key: str) -> tuple[str | None, list[str]]:
        """The identity a tool is known by in this set (bare or qualified name).

        Returns ``(identity, [])`` when found, ``(None, candidates)`` when a bare
        name is ambiguous, ``(None, [])`` when unknown.
        """
        if self._names is None:
            self._names = {}
            for ident, entry in self.entries.items():
                self._names.setdefault(entry.tool.name, []).append(ident)
                self._names.setdefault(entry.qualified_name, []).append(ident)
        found = self._names.get(key, [])
        if len(found) == 1:
            return found[0], []
        return None, [self.entries[i].qualified_name for i in found]


def merge_into(acc: dict[str, Entry], more: dict[str, Entry], warnings: list[str]) -> None:
    """Add ``more`` after ``acc``: a tool already there keeps its first path."""
    common = acc.keys() & more.keys()
    if not common:
        acc.update(more)
        return
    for ident, entry in more.items():
        first = acc.get(ident)
        acc[ident] = entry if first is None else combine(first, entry, warnings)


def combine(first: Entry, second: Entry, warnings: list[str]) -> Entry:
    """One tool reached by two paths: most restrictive capabilities, first description."""
    if same_view(first.tool, second.tool):
        return first
    warnings.append(
        f"tool {first.tool.name} ({first.tool.identity}) is reached by several paths with"
        f" different overrides; capabilities merged to the most restrictive, description"
        f" from the first path"
    )
    return Entry(
        tool=first.tool.merged_with(second.tool),
        skill=first.skill,
        overrides=(*first.overrides, *second.overrides),
        merged=True,
    )
