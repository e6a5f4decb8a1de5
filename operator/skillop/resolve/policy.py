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

The skill rules are ``resolve.skillgate``; the policies' tool rules, judged
once per namespace and memoized on each ToolDef, ``resolve.namespace_rules``;
this module combines them with the Actor's own and screens its tools.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from skillop.model.manifest import PolicyResource
from skillop.model.memo import NOT_IN_KEY, MemoKey, Slot, key_of
from skillop.model.specs import AccessPolicy, ApprovalSettings
from skillop.model.tooldef import ToolDef
from skillop.resolve.entries import Entry
from skillop.resolve.namespace_rules import (
    KEEP,
    KEPT_RULE_SETS,
    VERDICTS,
    AppliedPolicy,
    Ceiling,
    Fix,
    HostOf,
    HostRules,
    Marks,
    NamespaceRules,
    capability_refusal,
)
from skillop.resolve.skillgate import OWN, GlobRules, Refusal, SkillGate


@dataclass(frozen=True, slots=True)
class EffectivePolicy:
    """What an Actor may use: the ``namespace_rules`` and the Actor's own policy.

    The tool rules are checked as if they were one list per rule with the
    policies first (docs/api.md): sources, then MCP hosts, then denied
    capabilities (the policies', then the Actor's own), then required ones.
    The namespace rules' verdict is shared by the namespace; the Actor's own
    capabilities are a second check, which most Actors do not have.
    """

    #: Every field but those marked ``NOT_IN_KEY`` enters ``_own_key``.
    gate: SkillGate = field(metadata=NOT_IN_KEY)
    namespace_rules: NamespaceRules = field(default_factory=NamespaceRules, metadata=NOT_IN_KEY)
    #: The Actor's own denied and required capabilities that no policy names
    #: already (a policy that names one is the first source), each as (cap, OWN).
    own_deny: tuple[tuple[str, str], ...] = ()
    own_require: tuple[tuple[str, str], ...] = ()
    max_tools: Ceiling | None = field(default=None, metadata=NOT_IN_KEY)
    #: maxToolTokens: the least of the Actor's and every policy's, as max_tools.
    max_tool_tokens: Ceiling | None = field(default=None, metadata=NOT_IN_KEY)
    #: Key of the own capabilities' refusals (``OWN_REFUSALS``).
    _own_key: MemoKey = field(init=False, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_own_key", key_of(self, "own-refusal"))

    @property
    def applied(self) -> tuple[AppliedPolicy, ...]:
        return self.namespace_rules.applied

    def approval(self, own: ApprovalSettings | None,
                 ) -> tuple[ApprovalSettings | None, str | None]:
        """How the Actor's calls are approved, and why not as it asked (or None).

        A policy's ``requireApproval`` asks for a person: an Actor that would have
        the MCP client answer (``via: Elicitation``; in a pod, the agent itself can)
        gets approval by request instead, as the admin's rule cannot be loosened by
        the Actor (docs/api.md, SkillPolicy and ClusterSkillPolicy)."""
        if not self.namespace_rules.approval or own is None or own.via != "Elicitation":
            return own, None
        cap, who = self.namespace_rules.approval[0]
        return own.model_copy(update={"via": "Request"}), (
            f"spec.approval.via Elicitation is replaced by Request: {who} requires"
            f" approval ({cap}), which a person gives, not the MCP client")

    def screen(self, entries: Iterable[Entry], host: HostOf, marked: MarkedEntries,
               ) -> Screened:
        """The entries kept (with the capabilities the policies fix, marked for
        approval where a policy requires it), those dropped with why, in the order
        given, and the warnings of the policies' verdicts. ``marked`` keeps the
        entries made (``_marked``): one per Resolver, shared by its namespaces, as
        a ClusterSkillPolicy marks the same entries in each namespace it governs."""
        rules, own = self.namespace_rules, bool(self.own_deny or self.own_require)
        screens = rules.screens
        if not screens and not own:
            return Screened(list(entries), [], [])
        out = Screened([], [], [])
        kept, dropped = out.kept, out.dropped
        key = rules.key
        for entry in entries:
            judged = final = marks = None
            refusal, at_require = None, False
            if screens:
                # The memo inline, not a call: this runs for every tool of every Actor.
                verdict = VERDICTS.get(entry.tool.memo, key) or rules.verdict(entry, host)
                if verdict is KEEP and not own:  # the usual verdict, shared
                    kept.append(entry)
                    continue
                refusal, at_require, judged, final, marks, note = verdict
                if note is not None:
                    out.warnings.append(note)
            if own and (refusal is None or at_require):
                refusal = self._own_refusal(judged or entry.tool, refusal)
            if refusal is not None:
                if judged is not None and marks is not None:
                    # Dropped as judged, so with the fixed capabilities only: an
                    # approval mark (the last override) is made after filtering.
                    fixes = marks[:-1] if final is not None else marks
                    entry = _marked(entry, judged, fixes, marked)
                dropped.append((entry, refusal))
            elif marks is not None:  # the policies' overrides: explain names them
                kept.append(_marked(entry, final or judged or entry.tool, marks, marked))
            else:
                kept.append(entry)
        return out

    def _own_refusal(self, tool: ToolDef, shared: Refusal | None) -> Refusal | None:
        """The refusal when the Actor's own capabilities are checked too: an own
        denied capability comes before the namespace rules' required ones."""
        found = OWN_REFUSALS.get(tool.memo, self._own_key)
        if found is None:
            flags = tool.capabilities.true_flags
            found = OWN_REFUSALS.put(tool.memo, self._own_key, (
                capability_refusal(flags, self.own_deny, ())[0],
                capability_refusal(flags, (), self.own_require)[0]))
        deny, require = found
        return deny or shared or require


#: A ToolDef's refusals by an Actor's own capabilities (denied, required), by
#: their rule set (``EffectivePolicy._own_key``).
OWN_REFUSALS: Slot[MemoKey, tuple[Refusal | None, Refusal | None]] = Slot(
    "own-refusal", bound=KEPT_RULE_SETS)


@dataclass(frozen=True, slots=True)
class Screened:
    """What ``EffectivePolicy.screen`` makes of an Actor's entries."""

    kept: list[Entry]
    dropped: list[tuple[Entry, Refusal]]
    #: The verdicts' warnings (a skill's word on a governed host overruled).
    warnings: list[str]


#: Entries the policies changed, by the ids of the entry and its marks (``_marked``).
MarkedEntries = dict[tuple[int, int], tuple[Entry, Marks, Entry]]


def _marked(entry: Entry, tool: ToolDef, marks: Marks, made: MarkedEntries) -> Entry:
    """``entry`` with the ``tool`` the policies made of it and their ``marks``, made
    once for every Actor that reaches the entry under the same marks."""
    slot = (id(entry), id(marks))
    found = made.get(slot)
    # The memo holds the entry and the marks, so no other object can take an id.
    if found is None or found[0] is not entry or found[1] is not marks:
        found = made[slot] = (
            entry, marks, Entry(tool, entry.skill, (*entry.overrides, *marks), entry.merged))
    return found[2]


def applied_policy(policy: PolicyResource) -> AppliedPolicy:
    """How a policy is named: ``ClusterSkillPolicy tenants``, ``SkillPolicy
    team-a/no-shell``, with the generation in force."""
    meta = policy.meta
    name = meta.name if policy.kind == "ClusterSkillPolicy" else f"{meta.namespace}/{meta.name}"
    return AppliedPolicy(policy.kind, name, meta.generation)


def namespace_rules_of(policies: Sequence[PolicyResource]) -> NamespaceRules:
    """Every rule of ``policies`` (those that apply to a namespace, in order):
    where two policies say the same, the first is named."""
    globs: list[GlobRules] = []
    deny_caps: dict[str, str] = {}
    require_caps: dict[str, str] = {}
    deny_sources: dict[str, str] = {}
    hosts: list[HostRules] = []
    fixes: list[Fix] = []
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
        servers = spec.mcp_servers
        if servers is not None and (servers.allow is not None or servers.allow_for is not None):
            hosts.append(HostRules(who, tuple(servers.allow or ()), tuple(
                (tuple(scope.skills), tuple(scope.hosts)) for scope in servers.allow_for or ())))
        facts = (servers.tools if servers is not None else None) or ()
        fixes += [Fix(who, i, tuple(fact.hosts), tuple(fact.names),
                      _fixed_flags(fact.capabilities.flags()))
                  for i, fact in enumerate(facts)]
        for cap in spec.require_approval:
            approval.setdefault(cap, who)
        ceiling = _least(ceiling, spec.max_tools, who)
        tokens = _least(tokens, spec.max_tool_tokens, who)
    return NamespaceRules(tuple(globs), tuple(deny_caps.items()), tuple(require_caps.items()),
                 tuple(deny_sources.items()), tuple(hosts), tuple(approval.items()),
                 tuple(fixes), ceiling, tokens, tuple(applied))


def _fixed_flags(flags: dict[str, bool]) -> tuple[tuple[str, bool], ...]:
    """What fixing ``flags`` fixes, as MCP reads the hints: a tool fixed to destroy
    also writes, and one fixed to write is not read-only, so no rule sees a tool
    as both (``readOnly`` and ``destructive``) whatever a skill said."""
    implied = {}
    if flags.get("writes") or flags.get("destructive"):
        implied["readOnly"] = False
    if flags.get("destructive"):
        implied["writes"] = True
    return tuple({**implied, **flags}.items())


def effective_policy(own: AccessPolicy, policies: Sequence[PolicyResource] | NamespaceRules,
                     ) -> EffectivePolicy:
    """The Actor's own policy tightened by ``policies`` (those that apply, in order,
    or their ``namespace_rules_of``, shared by a namespace).

    Policies come first in every rule list: when a policy and the Actor's own
    both refuse something, the refusal names the policy (the rule the Actor's
    author cannot remove).
    """
    shared = (policies if isinstance(policies, NamespaceRules)
              else namespace_rules_of(policies))
    denied = {cap for cap, _ in shared.deny_capabilities}
    required = {cap for cap, _ in shared.require_capabilities}
    # A capability a policy already names stays the policy's (the first source).
    own_deny = dict.fromkeys(c for c in own.deny_capabilities if c not in denied)
    own_require = dict.fromkeys(c for c in own.require_capabilities if c not in required)
    rules = GlobRules(OWN, tuple(own.allow), tuple(own.deny))
    # Own globs that admit every skill add nothing to the namespace rules': the namespace's
    # gate is then the Actor's, with the verdicts (and flattenings) it already has.
    gate = shared.gate if rules.admits_all else SkillGate((*shared.globs, rules), base=shared.gate)
    return EffectivePolicy(
        gate=gate,
        namespace_rules=shared,
        own_deny=tuple((cap, OWN) for cap in own_deny),
        own_require=tuple((cap, OWN) for cap in own_require),
        max_tools=_least(shared.max_tools, own.max_tools, None),
        max_tool_tokens=_least(shared.max_tool_tokens, own.max_tool_tokens, None))


def _least(ceiling: Ceiling | None, value: int | None, who: str | None) -> Ceiling | None:
    """The tighter of ``ceiling`` and ``value`` (set by ``who``; None: the Actor).
    On a tie the first policy stays named, and the Actor's own field wins over
    every policy's."""
    if value is None:
        return ceiling
    if ceiling is None or value < ceiling.value or (who is None and value == ceiling.value):
        return Ceiling(value, who)
    return ceiling
