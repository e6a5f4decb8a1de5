"""The skill half of a policy: which skills an Actor may reach.

Skill globs match canonical names (``namespace/name``); deny wins over allow.
Every source of globs (the Actor's own ``skillAccessPolicy``, each policy) is
kept whole: a skill must pass every allow list and match no deny list, and a
refusal names the source and rule behind it (``Refusal``).
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from skillop.model.caller_rules import glob_pattern
from skillop.model.names import ObjectRef
from skillop.model.specs import AccessPolicy

#: The label of the Actor's own rules: refusals by them read as before policies
#: existed ("denied by skillAccessPolicy.deny 'x'").
OWN = "skillAccessPolicy"


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a skill is pruned or a tool dropped: the text, and the policy and rule
    behind it (both None for the Actor's own skillAccessPolicy)."""

    reason: str
    policy: str | None = None
    rule: str | None = None


_NOTHING = re.compile(r"(?!)")


@functools.lru_cache(maxsize=1024)
def _any_of(globs: tuple[str, ...]) -> re.Pattern[str] | None:
    """One pattern matching what any of ``globs`` matches (None: no globs). Cached:
    every Resolver builds an effective policy per namespace and own policy, and
    most of them share their glob lists."""
    return glob_pattern(globs) if globs else None


@dataclass(frozen=True, slots=True)
class GlobRules:
    """One source's skill globs: ``allow`` None means no allow list."""

    label: str
    allow: tuple[str, ...] | None
    deny: tuple[str, ...]
    #: Each list as one regular expression (what fnmatch would compile glob by glob).
    _deny: re.Pattern[str] | None = field(default=None, init=False, compare=False,
                                          hash=False, repr=False)
    _allow: re.Pattern[str] | None = field(default=None, init=False, compare=False,
                                           hash=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_deny", _any_of(self.deny))
        if self.allow is not None:  # an empty allow list allows nothing
            object.__setattr__(self, "_allow", _any_of(self.allow) or _NOTHING)

    def refusal(self, name: str) -> Refusal | None:
        if (self._deny is None or not self._deny.match(name)) and (
                self._allow is None or self._allow.match(name)):
            return None
        own = self.label == OWN
        for glob in self.deny:
            if fnmatch.fnmatchcase(name, glob):
                if own:
                    return Refusal(f"denied by skillAccessPolicy.deny {glob!r}")
                return Refusal(f"denied by {self.label}: deny {glob!r}", self.label, "deny")
        if self.allow is not None and not any(fnmatch.fnmatchcase(name, g) for g in self.allow):
            if own:
                return Refusal("not matched by skillAccessPolicy.allow")
            return Refusal(f"not matched by {self.label}: allow", self.label, "allow")
        return None

    @property
    def admits_all(self) -> bool:
        return not self.deny and (self.allow is None or "*" in self.allow
                                  or "*/*" in self.allow)


@dataclass(frozen=True, slots=True)
class SkillGate:
    """Every source's skill globs; hashable, so flattenings under one gate are shared
    by every Actor that has it (typically all of a namespace's)."""

    rules: tuple[GlobRules, ...]
    #: A gate whose rules come first in ``rules`` (a namespace's policies): its
    #: verdicts, shared by every Actor of the namespace, are asked first.
    base: SkillGate | None = field(default=None, compare=False, hash=False, repr=False)
    #: Verdicts by canonical name: a pure function of the globs, so never stale.
    _verdicts: dict[str, Refusal | None] = field(default_factory=dict, compare=False,
                                                 hash=False, repr=False)
    #: The rules after the base's, and what they say together: one pattern for
    #: every deny list, and the allow lists that do not allow every skill. Most
    #: names pass both, and only a refused one is looked up rule by rule (for
    #: the rule to name).
    _rest: tuple[GlobRules, ...] = field(init=False, compare=False, hash=False, repr=False)
    _deny: re.Pattern[str] | None = field(init=False, compare=False, hash=False, repr=False)
    _allow: tuple[re.Pattern[str], ...] = field(init=False, compare=False, hash=False,
                                                repr=False)
    _admits_all: bool = field(init=False, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        rest = self.rules if self.base is None else self.rules[len(self.base.rules):]
        object.__setattr__(self, "_rest", rest)
        object.__setattr__(self, "_deny", _any_of(tuple(g for r in rest for g in r.deny)))
        object.__setattr__(self, "_allow", tuple(
            r._allow for r in rest if r._allow is not None and not r.admits_all))
        object.__setattr__(self, "_admits_all", all(r.admits_all for r in self.rules))

    @classmethod
    def of(cls, policy: AccessPolicy) -> SkillGate:
        return cls((GlobRules(OWN, tuple(policy.allow), tuple(policy.deny)),))

    @property
    def admits_all(self) -> bool:
        return self._admits_all

    @property
    def known(self) -> int:
        """How many names the gate has a verdict on."""
        return len(self._verdicts)

    def refusal(self, ref: ObjectRef) -> Refusal | None:
        """Why the skill is pruned, or None when every source allows it."""
        return self.verdict(ref.canonical)

    def verdict(self, name: str) -> Refusal | None:
        """``refusal`` by canonical name."""
        found = self._verdicts.get(name, _UNSEEN)
        if found is not _UNSEEN:
            return found
        found = None if self.base is None else self.base.verdict(name)
        if found is None and not self._admits(name):
            found = next((r for rules in self._rest if (r := rules.refusal(name)) is not None),
                         None)
        self._verdicts[name] = found
        return found

    def _admits(self, name: str) -> bool:
        """Whether the rules after the base's pass ``name`` (what their refusals say)."""
        if self._deny is not None and self._deny.match(name):
            return False
        return all(allow.match(name) for allow in self._allow)

    def admits_every(self, names: Iterable[str]) -> bool:
        """Whether no skill of ``names`` (canonical) is refused: a loop, not
        ``all(refusal(...))``, as it runs over whole closures."""
        verdicts, verdict = self._verdicts, self.verdict
        for name in names:
            found = verdicts.get(name, _UNSEEN)
            if found is _UNSEEN:
                found = verdict(name)
            if found is not None:
                return False
        return True


_UNSEEN = Refusal("")


def rule_refusal(what: str, who: str, rule: str) -> Refusal:
    if who == OWN:
        return Refusal(what)
    return Refusal(f"{what} ({who}: {rule})", who, rule)
