"""An Actor's effective policy: its own ``skillAccessPolicy`` tightened by every
SkillPolicy and ClusterSkillPolicy that applies to it.

Skill globs match canonical names (``namespace/name``); deny wins over allow.
Capability rules look only at what a tool declares: a tool that says nothing is
neither read-only nor writing, so ``requireCapabilities: [readOnly]`` drops it.

The algebra (docs/api.md, "SkillPolicy and ClusterSkillPolicy"): every rule
source (the Actor's own, then each policy) is kept whole; a skill must pass
every allow list and match no deny list; tool rules (denied and required
capabilities, denied sources, allowed MCP hosts) are each checked against every
source; approval requirements add up; ``maxTools`` is the least of all. So a
rule is never loosened by another: adding a policy can only remove tools (or,
by ``requireApproval``, mark them), never add one. Every refusal names where it
came from (``ClusterSkillPolicy tenants: deny '*/shell-*'``).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from skillop.model.capabilities import Capabilities
from skillop.model.manifest import PolicyResource
from skillop.model.names import ObjectRef
from skillop.model.policies import host_matches
from skillop.model.specs import AccessPolicy, Override
from skillop.model.tooldef import ToolDef
from skillop.resolve.entries import AppliedOverride, Entry

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


def _any_of(globs: tuple[str, ...]) -> re.Pattern[str] | None:
    """One pattern matching what any of ``globs`` matches (None: no globs)."""
    if not globs:
        return None
    return re.compile("|".join(f"(?:{fnmatch.translate(g)})" for g in globs))


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
    #: Verdicts by canonical name: a pure function of the globs, so never stale.
    _verdicts: dict[str, Refusal | None] = field(default_factory=dict, compare=False,
                                                 hash=False, repr=False)

    @classmethod
    def of(cls, policy: AccessPolicy) -> SkillGate:
        return cls((GlobRules(OWN, tuple(policy.allow), tuple(policy.deny)),))

    @property
    def admits_all(self) -> bool:
        return all(r.admits_all for r in self.rules)

    def refusal(self, ref: ObjectRef) -> Refusal | None:
        """Why the skill is pruned, or None when every source allows it."""
        name = ref.canonical
        try:
            return self._verdicts[name]
        except KeyError:
            pass
        found = next((r for rules in self.rules if (r := rules.refusal(name)) is not None),
                     None)
        self._verdicts[name] = found
        return found


@dataclass(frozen=True, slots=True)
class Ceiling:
    """A budget and who set it (None: the Actor's own)."""

    value: int
    policy: str | None = None


@dataclass(frozen=True, slots=True)
class AppliedPolicy:
    """A policy that applies to an Actor, as its status names it."""

    kind: str
    name: str
    generation: int

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name}"


@dataclass(frozen=True, slots=True)
class EffectivePolicy:
    """What an Actor may use, from its own policy and every applying one."""

    gate: SkillGate
    #: Capability -> who denies it (the first source that does).
    deny_capabilities: tuple[tuple[str, str], ...] = ()
    #: Capability -> who requires it.
    require_capabilities: tuple[tuple[str, str], ...] = ()
    #: Tool source -> who denies it.
    deny_sources: tuple[tuple[str, str], ...] = ()
    #: Each source's allowed MCP server hosts; a server must match every one.
    server_hosts: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: (capability, who): a tool with the capability gets requiresApproval.
    approval: tuple[tuple[str, str], ...] = ()
    max_tools: Ceiling | None = None
    #: maxToolTokens: the least of the Actor's and every policy's, as max_tools.
    max_tool_tokens: Ceiling | None = None
    applied: tuple[AppliedPolicy, ...] = ()
    #: Keys of this policy's tool rules and approval marks in ``ToolDef.memo``: a
    #: ToolDef is shared by every Actor reaching it, so each verdict is computed
    #: once per distinct rule set (``_token``), not once per Actor.
    _tool_key: tuple[str, int] = field(default=("", 0), compare=False, hash=False,
                                       repr=False)
    _mark_key: tuple[str, int] = field(default=("", 0), compare=False, hash=False,
                                       repr=False)
    _filters: bool = field(default=False, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        rules = (self.deny_capabilities, self.require_capabilities, self.deny_sources,
                 self.server_hosts)
        object.__setattr__(self, "_tool_key", ("policy-refusal", _token(rules)))
        object.__setattr__(self, "_mark_key", ("policy-mark", _token(self.approval)))
        object.__setattr__(self, "_filters", any(rules))

    @property
    def filters_tools(self) -> bool:
        return bool(self.deny_capabilities or self.require_capabilities or self.deny_sources
                    or self.server_hosts)

    def tool_refusal(self, tool: ToolDef, host: str | None) -> Refusal | None:
        """Why the tool is dropped, or None to keep it. ``host`` is the host of an
        MCP tool's server URL (None for a stdio server, or an unreadable URL)."""
        if not self._filters:
            return None
        memo = tool.memo
        try:
            found: Refusal | None = memo[self._tool_key]
        except KeyError:
            found = memo[self._tool_key] = self._tool_refusal(tool, host)
        return found

    def _tool_refusal(self, tool: ToolDef, host: str | None) -> Refusal | None:
        for source, who in self.deny_sources:
            if tool.source == source:
                return _refusal(f"source {source} is denied", who, "sources.deny")
        if tool.source == "mcp":
            for who, globs in self.server_hosts:
                if not host_matches(host, globs):
                    where = f"host {host}" if host is not None else "no host (stdio)"
                    return _refusal(f"MCP server {tool.mcp_server} has {where}, matched by no"
                                    " allowed host", who, "mcpServers.allow")
        caps = tool.capabilities
        for cap, who in self.deny_capabilities:
            if caps.flag(cap):
                return _refusal(f"has denied capability {cap}", who, "denyCapabilities")
        for cap, who in self.require_capabilities:
            if not caps.flag(cap):
                return _refusal(f"lacks required capability {cap}", who, "requireCapabilities")
        return None

    def approved(self, entry: Entry) -> Entry:
        """The entry with ``requiresApproval: true`` when a policy requires it."""
        if not self.approval:
            return entry
        tool = entry.tool
        memo = tool.memo
        try:
            marked, at = memo[self._mark_key]
        except KeyError:
            marked, at = memo[self._mark_key] = self._mark(tool)
        if marked is None:
            return entry
        # Entry(), not dataclasses.replace: this runs for every marked tool of every Actor.
        return Entry(marked, entry.skill, (
            *entry.overrides, AppliedOverride(at, ("capabilities.requiresApproval",))),
            entry.merged)

    def _mark(self, tool: ToolDef) -> tuple[ToolDef | None, str]:
        caps = tool.capabilities
        if caps.flag("requiresApproval"):
            return None, ""
        for cap, who in self.approval:
            if caps.flag(cap):
                return _with_approval(tool), f"{who} requireApproval [{cap}]"
        return None, ""


_TOKENS: dict[Any, int] = {}


def _token(rules: Any) -> int:
    """A small number standing for a (hashable) rule set, the same for equal ones."""
    return _TOKENS.setdefault(rules, len(_TOKENS) + 1)


def _refusal(what: str, who: str, rule: str) -> Refusal:
    if who == OWN:
        return Refusal(what)
    return Refusal(f"{what} ({who}: {rule})", who, rule)


_APPROVAL = Override(capabilities=Capabilities(requires_approval=True))
_APPROVAL_KEY = ("requireApproval",)


def _with_approval(tool: ToolDef) -> ToolDef:
    """``tool`` with requiresApproval set, kept on the tool: every Actor under the
    policy shares one definition (and its cached JSON)."""
    found = tool.memo.get(_APPROVAL_KEY)
    if found is None:
        found = tool.memo[_APPROVAL_KEY] = tool.with_override(_APPROVAL)
    assert isinstance(found, ToolDef)
    return found


def applied_policy(policy: PolicyResource) -> AppliedPolicy:
    """How a policy is named: ``ClusterSkillPolicy tenants``, ``SkillPolicy
    team-a/no-shell``, with the generation in force."""
    meta = policy.meta
    name = meta.name if policy.kind == "ClusterSkillPolicy" else f"{meta.namespace}/{meta.name}"
    return AppliedPolicy(policy.kind, name, meta.generation)


def effective_policy(own: AccessPolicy, policies: Sequence[PolicyResource]) -> EffectivePolicy:
    """The Actor's own policy tightened by ``policies`` (those that apply, in order).

    Policies come first in every rule list: when a policy and the Actor's own
    both refuse something, the refusal names the policy (the rule the Actor's
    author cannot remove).
    """
    globs: list[GlobRules] = []
    deny_caps: dict[str, str] = {}
    require_caps: dict[str, str] = {}
    deny_sources: dict[str, str] = {}
    hosts: list[tuple[str, tuple[str, ...]]] = []
    approval: dict[str, str] = {}
    ceiling: Ceiling | None = None
    tokens: Ceiling | None = None
    applied = []
    for policy in policies:
        spec, named = policy.spec, applied_policy(policy)
        who = named.label
        applied.append(named)
        if spec.allow is not None or spec.deny:
            globs.append(GlobRules(who, None if spec.allow is None else tuple(spec.allow),
                                   tuple(spec.deny)))
        for cap in spec.deny_capabilities:
            deny_caps.setdefault(cap, who)
        for cap in spec.require_capabilities:
            require_caps.setdefault(cap, who)
        for source in spec.sources.deny if spec.sources is not None else ():
            deny_sources.setdefault(source, who)
        if spec.mcp_servers is not None:
            hosts.append((who, tuple(spec.mcp_servers.allow)))
        for cap in spec.require_approval:
            approval.setdefault(cap, who)
        ceiling = _least(ceiling, spec.max_tools, who)
        tokens = _least(tokens, spec.max_tool_tokens, who)
    globs.append(GlobRules(OWN, tuple(own.allow), tuple(own.deny)))
    for cap in own.deny_capabilities:
        deny_caps.setdefault(cap, OWN)
    for cap in own.require_capabilities:
        require_caps.setdefault(cap, OWN)
    ceiling = _least(ceiling, own.max_tools, None)
    tokens = _least(tokens, own.max_tool_tokens, None)
    return EffectivePolicy(
        gate=SkillGate(tuple(globs)), deny_capabilities=tuple(deny_caps.items()),
        require_capabilities=tuple(require_caps.items()),
        deny_sources=tuple(deny_sources.items()), server_hosts=tuple(hosts),
        approval=tuple(approval.items()), max_tools=ceiling, max_tool_tokens=tokens,
        applied=tuple(applied))


def _least(ceiling: Ceiling | None, value: int | None, who: str | None) -> Ceiling | None:
    """The tighter of ``ceiling`` and ``value`` (set by ``who``; None: the Actor).
    On a tie the first policy stays named, and the Actor's own field wins over
    every policy's."""
    if value is None:
        return ceiling
    if ceiling is None or value < ceiling.value or (who is None and value == ceiling.value):
        return Ceiling(value, who)
    return ceiling
