"""Rules per caller and rate limits (docs/api.md, "Caller rules and rate limits").

An Actor's ``spec.skillAccessPolicy.callerRules`` and a SkillPolicy's or
ClusterSkillPolicy's ``spec.callerRules`` decide which end users (``Caller``) may
list and call which tools; ``rateLimits`` bound how often. Whom a rule is for is
a ``CallerMatch``, and ``matches`` is the one reading of it: the gateway
decides with it at call time, the CLI (``explain --claims``) offline.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import re
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, StringConstraints, model_validator

from skillop.model.caller import Caller
from skillop.model.globs import SkillGlob
from skillop.model.specbase import MAX_NESTED, Rule, SpecModel, cel_rules, check_rules

#: A glob over callers' subjects (fnmatch's, case-sensitive: subjects are opaque).
SubjectGlob = Annotated[str, StringConstraints(min_length=1, max_length=256)]
#: A group name, compared exactly.
GroupName = Annotated[str, StringConstraints(min_length=1, max_length=256)]
#: A claim's name in the caller's token.
ClaimName = Annotated[str, StringConstraints(min_length=1, max_length=128)]
ClaimValue = Annotated[str, StringConstraints(max_length=256)]
#: A glob over a tool's name, bindingName or qualifiedName.
ToolNameGlob = Annotated[str, StringConstraints(min_length=1, max_length=320)]

Effect = Literal["Allow", "Deny", "RequireApproval"]
LimitScope = Literal["CallerAndTool", "Caller", "Tool", "Actor"]


class ClaimMatch(SpecModel):
    """A claim of the caller's token and the values it may have."""

    claim: ClaimName
    """The claim's name, e.g. dept."""
    values: list[ClaimValue] = Field(min_length=1, max_length=MAX_NESTED)
    """The claim matches when its value (or, for a list claim, any of its items) is
    one of these; true, false and numbers are compared as their JSON text."""


class CallerMatch(SpecModel):
    """Whom a rule is for: every field given must match, a field matches when any of
    its values does; no field: every caller, anonymous ones included (an anonymous
    caller matches only a CallerMatch without fields)."""

    subjects: list[SubjectGlob] | None = Field(default=None, min_length=1,
                                               max_length=MAX_NESTED)
    """Globs over the caller's subject (the Actor's subjectClaim), e.g. svc-*."""
    groups: list[GroupName] | None = Field(default=None, min_length=1, max_length=MAX_NESTED)
    """The caller is in any of these groups (the Actor's groupsClaim)."""
    claims: list[ClaimMatch] | None = Field(default=None, min_length=1, max_length=MAX_NESTED)
    """Other claims of the caller's token, each of which must match."""

    @property
    def everyone(self) -> bool:
        """Whether the match names nobody in particular: every caller."""
        return self.subjects is None and self.groups is None and self.claims is None

    def describe(self) -> str:
        """The match as refusals name it: ``groups: [contractors]``, or ``every caller``."""
        parts = [f"{key}: [{', '.join(values)}]" for key, values in
                 (("subjects", self.subjects), ("groups", self.groups)) if values is not None]
        parts += [f"{c.claim}: [{', '.join(c.values)}]" for c in self.claims or ()]
        return "; ".join(parts) or "every caller"


EVERY_CALLER = CallerMatch()


def matches(match: CallerMatch, caller: Caller) -> bool:
    """Whether ``caller`` is one ``match`` names (docs/api.md, CallerMatch)."""
    if match.everyone:
        return True
    if caller.anonymous:
        return False
    subject = caller.subject
    assert subject is not None
    if match.subjects is not None and not any(fnmatch.fnmatchcase(subject, g)
                                              for g in match.subjects):
        return False
    if match.groups is not None and not set(match.groups).intersection(caller.groups):
        return False
    return all(_claim_matches(c, caller.claims.get(c.claim)) for c in match.claims or ())


def _claim_matches(match: ClaimMatch, value: Any) -> bool:
    items = value if isinstance(value, list) else [value]
    return any(text in match.values for text in map(_claim_text, items) if text is not None)


def _claim_text(value: Any) -> str | None:
    """A claim value as the rules compare it: a string as it is, true, false and
    numbers as their JSON text; anything else (objects, null) matches nothing."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    return None


@functools.lru_cache(maxsize=1024)
def glob_pattern(globs: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern matching what any of ``globs`` matches (fnmatch's, case-sensitive):
    a rule's globs are tried against every tool of a set at once."""
    return re.compile("|".join(f"(?:{fnmatch.translate(g)})" for g in globs))


NAMES_TOOLS: Rule[Any] = Rule(
    "has(self.skills) || has(self.tools)",
    "a caller rule needs skills or tools (the tools it covers)",
    lambda rule: rule.skills is not None or rule.tools is not None)


class CallerRule(SpecModel):
    """Which callers may (Allow), may not (Deny), or only with approval
    (RequireApproval) use some tools."""

    model_config = ConfigDict(json_schema_extra=cel_rules(NAMES_TOOLS))

    callers: CallerMatch = Field(default_factory=CallerMatch)
    """Whom the rule is for; absent or {}: every caller, anonymous included."""
    effect: Effect
    """Deny: matching callers may neither list nor call the covered tools. Allow: the
    covered tools are reserved to the callers of this object's Allow rules.
    RequireApproval: matching callers' calls need approval (spec.approval)."""
    skills: list[SkillGlob] | None = Field(default=None, min_length=1, max_length=MAX_NESTED)
    """Globs over canonical skill names: a tool is covered when its skill or any skill
    on its path matches."""
    tools: list[ToolNameGlob] | None = Field(default=None, min_length=1, max_length=MAX_NESTED)
    """Globs over a tool's name, bindingName or qualifiedName; with skills, a tool
    must match both."""

    @model_validator(mode="after")
    def _rules(self) -> CallerRule:
        return check_rules(self, (NAMES_TOOLS,))


class RateLimit(SpecModel):
    """At most ``calls`` calls per ``perSeconds`` (a token bucket) for some callers
    and tools."""

    calls: int = Field(ge=1, le=1_000_000)
    """The bucket's size: calls allowed at once (the burst)."""
    per_seconds: int = Field(ge=1, le=86400)
    """The bucket refills evenly over this many seconds."""
    per: LimitScope = "CallerAndTool"
    """Whose bucket: CallerAndTool (each caller for each tool, the default), Caller,
    Tool, or Actor (one for every call the limit covers)."""
    callers: CallerMatch | None = None
    """The callers limited; absent: every caller."""
    skills: list[SkillGlob] | None = Field(default=None, min_length=1, max_length=MAX_NESTED)
    """Globs over canonical skill names, as in callerRules; absent: every skill."""
    tools: list[ToolNameGlob] | None = Field(default=None, min_length=1, max_length=MAX_NESTED)
    """Globs over a tool's name, bindingName or qualifiedName; absent: every tool."""
