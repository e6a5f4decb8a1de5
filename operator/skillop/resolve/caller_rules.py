"""Caller rules and rate limits compiled into the ToolSet (docs/api.md, "Caller
rules and rate limits").

Every applying policy's rules and the Actor's own are kept whole, each with its
``origin``, in the order refusals name them: the policies (as
``Catalog.policies_for`` orders them), then the Actor. Each is resolved to the
tools it covers, by bindingName, so the gateway decides per caller without
globs: a tool is covered when its skill, or any skill that includes it (on any
include path of the Actor, so the answer does not depend on which path was
walked first), matches ``skills``, and one of its names matches ``tools``. A
rule or limit that covers no tool of the set is left out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from skillop.model.caller_rules import glob_pattern
from skillop.model.manifest import ActorResource, PolicyResource
from skillop.model.names import ObjectRef
from skillop.model.toolset import CallerRuleEntry, RateLimitEntry
from skillop.resolve.entries import Flat
from skillop.resolve.policy import applied_policy
from skillop.resolve.tooljson import EffectiveTool


@dataclass(frozen=True, slots=True)
class CallerSection:
    """The document's ``callerRules`` and ``rateLimits`` (None: there are none)."""

    rules: tuple[CallerRuleEntry, ...] | None = None
    limits: tuple[RateLimitEntry, ...] | None = None


NO_SECTION = CallerSection()

#: A tool's skill and every skill that includes it, as canonical names.
Lineage = Callable[[ObjectRef], tuple[str, ...]]


def caller_section(actor: ActorResource, policies: Sequence[PolicyResource],
                   tools: Sequence[EffectiveTool], flats: Sequence[Flat]) -> CallerSection:
    """The rules and limits of ``policies`` (those that apply, in order) and of
    ``actor``, with the ``tools`` each covers."""
    sources = [(applied_policy(p).label, p.spec.caller_rules, p.spec.rate_limits)
               for p in policies]
    sources.append((f"Actor {actor.meta.namespace}/{actor.meta.name}",
                    actor.spec.skill_access_policy.caller_rules, actor.spec.rate_limits))
    if not any(rules or limits for _, rules, limits in sources):
        return NO_SECTION
    named = Named.of(tools, lineage_of(flats))
    rules = [CallerRuleEntry.model_construct(origin=origin, rule=i + 1, effect=rule.effect,
                                             callers=rule.callers, tools=covers)
             for origin, own, _ in sources for i, rule in enumerate(own)
             if (covers := named.covered(rule.skills, rule.tools))]
    limits = [RateLimitEntry.model_construct(
                  origin=origin, limit=i + 1, calls=limit.calls, per_seconds=limit.per_seconds,
                  per=limit.per, callers=limit.callers, tools=covers)
              for origin, _, own in sources for i, limit in enumerate(own)
              if (covers := named.covered(limit.skills, limit.tools))]
    return CallerSection(tuple(rules) or None, tuple(limits) or None)


@dataclass(frozen=True, slots=True)
class Named:
    """A set's tools as rules name them: each tool's bindingName and names (name,
    bindingName, qualifiedName), its skill, and the skills above it."""

    tools: tuple[tuple[str, tuple[str, ...], ObjectRef], ...]
    lineage: Lineage

    @classmethod
    def of(cls, tools: Sequence[EffectiveTool], lineage: Lineage) -> Named:
        return cls(tuple((t.binding_name,
                          tuple(dict.fromkeys((t.name, t.binding_name, t.entry.qualified_name))),
                          t.entry.skill) for t in tools), lineage)

    def covered(self, skills: Sequence[str] | None,
                names: Sequence[str] | None) -> tuple[str, ...]:
        """The bindingNames of the tools that ``skills`` and ``names`` (globs) cover
        (both given: a tool must match both; neither: every tool). Each skill is
        judged once, for all its tools, and first: it is the cheaper test."""
        by_name = None if names is None else glob_pattern(tuple(names)).match
        by_skill = None if skills is None else glob_pattern(tuple(skills)).match
        judged: dict[ObjectRef, bool] = {}
        out = []
        for binding, known, skill in self.tools:
            if by_skill is not None:
                ok = judged.get(skill)
                if ok is None:
                    ok = judged[skill] = any(by_skill(n) for n in self.lineage(skill))
                if not ok:
                    continue
            if by_name is None or any(by_name(n) for n in known):
                out.append(binding)
        return tuple(out)


def lineage_of(flats: Sequence[Flat]) -> Lineage:
    """A skill's canonical name and those of every skill above it in ``flats`` (the
    Actor's roots and what they include), found once per skill."""
    parents: dict[ObjectRef, set[ObjectRef]] = {}
    seen: set[ObjectRef] = set()
    stack = list(flats)
    while stack:
        flat = stack.pop()
        if flat.skill in seen:
            continue
        seen.add(flat.skill)
        for child in flat.children:
            parents.setdefault(child.skill, set()).add(flat.skill)
            stack.append(child)
    memo: dict[ObjectRef, tuple[str, ...]] = {}

    def lineage(skill: ObjectRef) -> tuple[str, ...]:
        found = memo.get(skill)
        if found is None:
            above: dict[ObjectRef, None] = {skill: None}
            todo = [skill]
            while todo:
                for parent in sorted(parents.get(todo.pop(), ())):
                    if parent not in above:
                        above[parent] = None
                        todo.append(parent)
            found = memo[skill] = tuple(ref.canonical for ref in above)
        return found

    return lineage
