"""What a caller may do with a tool of the set: the ToolSet's ``callerRules``
decided per caller (docs/gateway.md, "Decisions per caller").

Pure: ``decide`` answers ``Allowed``, ``Denied`` (the reason names the rule's
origin) or ``NeedsApproval`` from the rules, the caller and the tool's
bindingName; the gateway's guard (``guards.caller_rules``), the listing filter
and the CLI's ``explain --claims`` all read it. In order: any matching ``Deny``
rule covering the tool denies; then each object (origin) whose ``Allow`` rules
cover the tool reserves it to the callers of those rules; then a matching
``RequireApproval`` rule asks for approval.

What a caller sees depends only on which rules match them, so the decisions
for a whole listing are made once per set of matched rules (``CallerRules.hidden``),
and kept in a bounded table: many callers share a few such sets.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from skillop.model.caller import Caller
from skillop.model.caller_rules import CallerMatch, Effect, matches
from skillop.model.toolset import CallerRuleEntry


@dataclass(frozen=True, slots=True)
class Allowed:
    """The caller may list and call the tool."""


@dataclass(frozen=True, slots=True)
class Denied:
    """The caller may neither list nor call the tool; ``reason`` names the rule."""

    reason: str


@dataclass(frozen=True, slots=True)
class NeedsApproval:
    """The caller's calls of the tool need approval; ``reason`` names the rule."""

    reason: str


Decision = Allowed | Denied | NeedsApproval
ALLOWED: Final = Allowed()
#: The rules a caller matches, by their index in ``CallerRules.rules``.
Matched = frozenset[int]
#: How many sets of matched rules keep their listing decisions.
MAX_KEPT_VIEWS: Final = 256
#: How many callers' matched rules are kept.
MAX_KEPT_CALLERS: Final = 4096


@dataclass(frozen=True, slots=True)
class CompiledRule:
    """One ``callerRules`` entry, its tools as a set."""

    origin: str
    rule: int
    effect: Effect
    callers: CallerMatch
    tools: frozenset[str]

    @property
    def named(self) -> str:
        return f"{self.origin}: rule {self.rule} ({self.callers.describe()})"


@dataclass(eq=False, slots=True)
class CallerRules:
    """A set's caller rules, and the listing decisions made for each set of
    matched rules so far (bounded, least recently used dropped)."""

    rules: tuple[CompiledRule, ...] = ()
    _views: OrderedDict[Matched, frozenset[str]] = field(default_factory=OrderedDict)
    #: The rules each recent caller matches: a caller's calls and listings repeat.
    _callers: OrderedDict[Caller, Matched] = field(default_factory=OrderedDict)

    @classmethod
    def of(cls, entries: Iterable[CallerRuleEntry]) -> CallerRules:
        return cls(tuple(CompiledRule(e.origin, e.rule, e.effect, e.callers, frozenset(e.tools))
                         for e in entries))

    def matched(self, caller: Caller) -> Matched:
        """The rules ``caller`` matches (kept for the last ``MAX_KEPT_CALLERS``)."""
        found = self._callers.get(caller)
        if found is None:
            found = self._callers[caller] = frozenset(
                i for i, rule in enumerate(self.rules) if matches(rule.callers, caller))
            if len(self._callers) > MAX_KEPT_CALLERS:
                self._callers.popitem(last=False)
        return found

    def decide(self, matched: Matched, binding: str) -> Decision:
        """The decision on ``binding`` for a caller matching ``matched``."""
        rules = self.rules
        for i, rule in enumerate(rules):
            if rule.effect == "Deny" and i in matched and binding in rule.tools:
                return Denied(f"denied by {rule.named}")
        reserved: dict[str, list[int]] = {}
        for i, rule in enumerate(rules):
            if rule.effect == "Allow" and binding in rule.tools:
                reserved.setdefault(rule.origin, []).append(i)
        for origin, indexes in reserved.items():
            if not matched.intersection(indexes):
                numbers = ", ".join(str(rules[i].rule) for i in indexes)
                rule_word = "rule" if len(indexes) == 1 else "rules"
                return Denied(f"not allowed by {origin}: {binding} is reserved to the callers"
                              f" of its Allow {rule_word} {numbers}")
        for i, rule in enumerate(rules):
            if rule.effect == "RequireApproval" and i in matched and binding in rule.tools:
                return NeedsApproval(f"approval required by {rule.named}")
        return ALLOWED

    def hidden(self, matched: Matched, bindings: Sequence[str]) -> frozenset[str]:
        """Which of ``bindings`` (the set's) a caller matching ``matched`` may not use;
        found once per set of matched rules while it is kept."""
        found = self._views.get(matched)
        if found is None:
            covered = frozenset().union(*(rule.tools for rule in self.rules
                                          if rule.effect != "RequireApproval"))
            found = frozenset(b for b in bindings if b in covered
                              and isinstance(self.decide(matched, b), Denied))
            self._views[matched] = found
            if len(self._views) > MAX_KEPT_VIEWS:
                self._views.popitem(last=False)
        else:
            self._views.move_to_end(matched)
        return found


NO_RULES: Final = CallerRules()


def decide(rules: CallerRules, caller: Caller, binding: str) -> Decision:
    """What ``caller`` may do with the tool ``binding`` under ``rules``."""
    if not rules.rules:
        return ALLOWED
    return rules.decide(rules.matched(caller), binding)
