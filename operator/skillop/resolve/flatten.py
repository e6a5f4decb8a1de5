"""Flattening: a skill's tools plus, in declaration order, everything it includes.

Each skill is flattened once and memoized, so resolving many actors over a
shared DAG does every skill once. The walk is iterative (post-order with an
explicit stack): a 10,000-skill include chain never reaches the recursion limit.
Edges between skills on an include cycle are skipped, which keeps the walk
finite; the cycle itself is reported as an error elsewhere.

Overrides on an ``includes[]`` entry apply to the included skill's flattened
set, keyed by the tool's name there (bare, or ``ns/skill.tool`` when that set
has a conflict), so overrides nearer the actor apply after deeper ones. They
may only tighten capabilities (``ForbiddenOverride`` otherwise), whatever the
tool's source: only the skill that declares a tool sets its risk.

With an access policy, a pruned skill is skipped with everything reached only
through it; flattening under a policy reuses the unpruned result of any skill
whose closure the policy does not touch. A tool's ``path`` is the first path
that reaches its skill in the flattened sets (``first_parents``, ``path_to``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from skillop.model import problems as P
from skillop.model.names import ObjectRef
from skillop.model.problems import Problem
from skillop.resolve.entries import (
    Entry,
    Flat,
    forbidden_loosening,
    loosening_message,
    merge_into,
)
from skillop.resolve.skills import IncludeEdge, SkillView

Views = Callable[[ObjectRef], SkillView | None]
Allowed = Callable[[ObjectRef], bool]


class Flattener:
    """Memoized flattening over one catalog snapshot."""

    def __init__(self, views: Views, cyclic: set[ObjectRef],
                 subjects: Callable[[ObjectRef], tuple[object, str | None]]) -> None:
        self._views = views
        self._cyclic = cyclic
        self._subjects = subjects
        self.full: dict[ObjectRef, Flat] = {}
        #: Problems found while flattening a skill (include overrides), by skill.
        self.override_problems: dict[ObjectRef, tuple[Problem, ...]] = {}

    def edges(self, view: SkillView) -> list[IncludeEdge]:
        """Include edges the walk follows: all but those inside an include cycle."""
        if view.ref not in self._cyclic:
            return list(view.includes)
        return [e for e in view.includes if e.target not in self._cyclic]

    def flat(self, root: ObjectRef, *, allowed: Allowed | None = None,
             memo: dict[ObjectRef, Flat] | None = None) -> Flat | None:
        """The flattened set of ``root`` (None when the skill does not exist)."""
        self._walk(root, self.full, None)
        if allowed is None or memo is None:
            return self.full.get(root)
        self._walk(root, memo, allowed)
        return memo.get(root)

    def _walk(self, root: ObjectRef, memo: dict[ObjectRef, Flat], allowed: Allowed | None,
              ) -> None:
        stack = [root]
        while stack:
            ref = stack[-1]
            if ref in memo:
                stack.pop()
                continue
            view = self._views(ref)
            if view is None:
                stack.pop()
                continue
            edges = [e for e in self.edges(view) if allowed is None or allowed(e.target)]
            pending = [e.target for e in edges if e.target not in memo]
            if pending:
                stack.extend(reversed(pending))
                continue
            stack.pop()
            memo[ref] = self._build(view, edges, memo, pruning=allowed is not None)

    def _build(self, view: SkillView, edges: list[IncludeEdge], memo: dict[ObjectRef, Flat],
               *, pruning: bool) -> Flat:
        if pruning:
            full = self.full[view.ref]
            unchanged = len(edges) == len(self.edges(view)) and all(
                memo.get(e.target) is self.full.get(e.target) for e in edges)
            if unchanged:
                return full
        entries = {e.tool.identity: e for e in view.own}
        children: list[Flat] = []
        warnings = dict.fromkeys(view.warnings)
        problems: list[Problem] = []
        for edge in edges:
            child = memo.get(edge.target)
            if child is None:
                continue
            more = child.entries
            if edge.overrides:
                more = self._apply(view, edge, child, problems if not pruning else None)
            merged: list[str] = []
            merge_into(entries, more, merged)
            warnings.update(dict.fromkeys(child.warnings))
            warnings.update(dict.fromkeys(f"{view.ref}: {w}" for w in merged))
            children.append(child)
        if not pruning:
            self.override_problems[view.ref] = tuple(problems)
        return Flat(view.ref, entries, tuple(children), tuple(warnings))

    def _apply(self, view: SkillView, edge: IncludeEdge, child: Flat,
               problems: list[Problem] | None) -> dict[str, Entry]:
        """The included set as this skill sees it, after its ``includes[].overrides``."""
        subject, origin = self._subjects(view.ref)
        out = dict(child.entries)
        for key, override in edge.overrides.items():
            field = f"spec.includes[{edge.index}].overrides.{key}"
            ident, candidates = child.lookup(key)
            if ident is None:
                if problems is not None:
                    problems.append(_unknown_target(subject, field, key, edge, candidates, origin))
                continue
            entry = out[ident]
            loosened = forbidden_loosening(entry.tool, override)
            if loosened:
                if problems is not None:
                    problems.append(Problem(
                        subject, f"{field}.capabilities.{loosened[0]}",  # type: ignore[arg-type]
                        P.FORBIDDEN_OVERRIDE, loosening_message(entry.tool, loosened), origin))
                continue
            out[ident] = entry.overridden(override, at=f"{subject} {field}")
        return out


def _unknown_target(subject: object, field: str, key: str, edge: IncludeEdge,
                    candidates: list[str], origin: str | None) -> Problem:
    if candidates:
        msg = (f"tool name {key} is ambiguous in skill {edge.target}; use one of "
               + ", ".join(sorted(candidates)))
    else:
        msg = f"skill {edge.target} has no tool {key}"
    return Problem(subject, field, P.UNKNOWN_OVERRIDE_TARGET, msg, origin)  # type: ignore[arg-type]


def first_parents(flats: Sequence[Flat]) -> dict[ObjectRef, ObjectRef | None]:
    """First-visit parents of a pre-order walk: each skill's first path. The
    flattened sets hold exactly the include edges followed (pruned ones left
    out), so the walk needs no policy."""
    parents: dict[ObjectRef, ObjectRef | None] = {}
    for root in flats:
        if root.skill in parents:
            continue
        parents[root.skill] = None
        stack = [iter(root.children)]
        nodes = [root.skill]
        while stack:
            child = next(stack[-1], None)
            if child is None:
                stack.pop()
                nodes.pop()
                continue
            if child.skill in parents:
                continue
            parents[child.skill] = nodes[-1]
            nodes.append(child.skill)
            stack.append(iter(child.children))
    return parents


def path_to(parents: dict[ObjectRef, ObjectRef | None], skill: ObjectRef,
            memo: dict[ObjectRef, tuple[ObjectRef, ...]]) -> tuple[ObjectRef, ...]:
    """The include path from a root to ``skill`` along ``parents``; one tuple per
    skill (``memo``), shared by its tools."""
    found = memo.get(skill)
    if found is None:
        path = [skill]
        while (parent := parents.get(path[-1])) is not None:
            path.append(parent)
        found = memo[skill] = tuple(reversed(path))
    return found
