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
import functools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from skillop.model.capabilities import Capabilities
from skillop.model.manifest import PolicyResource
from skillop.model.memo import NOT_IN_KEY, Cell, MemoKey, Slot, key_of
from skillop.model.names import ObjectRef
from skillop.model.policies import NoHost, ServerHost, host_matches
from skillop.model.specs import AccessPolicy, ApprovalSettings
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


@functools.lru_cache(maxsize=1024)
def _any_of(globs: tuple[str, ...]) -> re.Pattern[str] | None:
    """One pattern matching what any of ``globs`` matches (None: no globs). Cached:
    every Resolver builds an effective policy per namespace and own policy, and
    most of them share their glob lists."""
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


HostOf = Callable[[Entry], ServerHost]
#: The overrides the policies apply to one tool (fixed capabilities, an approval
#: mark), in order.
Marks = tuple[AppliedOverride, ...]
#: A ToolDef's verdict under a Floor: the refusal, whether it came from a
#: required capability (an Actor's own denied capabilities are checked before
#: every required one), the definition the rules judged (its capabilities fixed
#: by ``mcpServers.tools``; None: the entry's own), the definition kept (also
#: marked for approval; None: the one judged), the overrides that made them
#: (None: none), and a warning for the Actor (a skill's word on a governed
#: host overruled).
Verdict = tuple[Refusal | None, bool, ToolDef | None, ToolDef | None, Marks | None, str | None]
#: The verdict of a tool kept as it is (one object: tested by identity).
KEEP: Verdict = (None, False, None, None, None, None)


@dataclass(frozen=True, slots=True)
class HostRules:
    """One policy's ``mcpServers.allow`` and ``allowFor``: a server passes when its
    host matches ``allow``, or the hosts of an entry whose skill globs match the
    skill that declares it."""

    who: str
    allow: tuple[str, ...]
    #: (skill globs, host globs) of each ``allowFor`` entry.
    scoped: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = ()

    def admits(self, skill: str, host: ServerHost) -> bool:
        return host_matches(host, self.allow) or any(
            host_matches(host, hosts) and any(fnmatch.fnmatchcase(skill, g) for g in skills)
            for skills, hosts in self.scoped)

    @property
    def rule(self) -> str:
        if not self.scoped:
            return "mcpServers.allow"
        return "mcpServers.allowFor" if not self.allow else "mcpServers.allow, allowFor"


@dataclass(frozen=True, slots=True)
class Fix:
    """One ``mcpServers.tools`` entry: the capability flags of the matching tools
    of the matching hosts, fixed by a policy."""

    who: str
    index: int
    hosts: tuple[str, ...]
    names: tuple[str, ...]
    #: The flags (camelCase, value), as set.
    flags: tuple[tuple[str, bool], ...]

    @property
    def rule(self) -> str:
        return f"mcpServers.tools[{self.index}]"

    def applies(self, host: str, tool: str) -> bool:
        return (any(fnmatch.fnmatchcase(host, g) for g in self.hosts)
                and any(fnmatch.fnmatchcase(tool, g) for g in self.names))


@dataclass(frozen=True, slots=True)
class Floor:
    """What every policy governing a namespace says, together: the part of an
    effective policy that is the same for every Actor of the namespace, so it is
    built once per namespace and its verdicts (per skill, per tool) are shared
    by all of them, whatever their own ``skillAccessPolicy``."""

    #: Every field but those marked ``NOT_IN_KEY`` enters ``key``: the skill
    #: globs, budgets and names judge no tool.
    globs: tuple[GlobRules, ...] = field(default=(), metadata=NOT_IN_KEY)
    #: Capability -> the first policy that denies it.
    deny_capabilities: tuple[tuple[str, str], ...] = ()
    #: Capability -> the first policy that requires it.
    require_capabilities: tuple[tuple[str, str], ...] = ()
    #: Tool source -> the first policy that denies it.
    deny_sources: tuple[tuple[str, str], ...] = ()
    #: Each policy's allowed MCP server hosts; a server must pass every one.
    server_hosts: tuple[HostRules, ...] = ()
    #: (capability, policy): a tool with the capability gets requiresApproval.
    approval: tuple[tuple[str, str], ...] = ()
    #: Every policy's fixed capabilities (``mcpServers.tools``), in order.
    fixes: tuple[Fix, ...] = ()
    max_tools: Ceiling | None = field(default=None, metadata=NOT_IN_KEY)
    max_tool_tokens: Ceiling | None = field(default=None, metadata=NOT_IN_KEY)
    applied: tuple[AppliedPolicy, ...] = field(default=(), metadata=NOT_IN_KEY)
    #: The policies' skill globs, whose verdicts every Actor's gate asks first.
    gate: SkillGate = field(init=False, compare=False, hash=False, repr=False)
    #: Key of the tool verdicts (``VERDICTS``): a ToolDef is reached from many
    #: entries and Actors (and a registry Tool's outlives a Resolver), so each is
    #: judged once per distinct rule set (``model.memo.key_of``: every field not
    #: marked ``NOT_IN_KEY``).
    key: MemoKey = field(init=False, compare=False, hash=False, repr=False)
    #: The override each approval requirement applies (one object, shared).
    _marks: dict[str, Marks] = field(init=False, compare=False, hash=False, repr=False)
    #: The verdict on each denied source's tools.
    _sources: dict[str, Verdict] = field(init=False, compare=False, hash=False, repr=False)
    #: Capability verdicts by a tool's true boolean capabilities (``_flags_verdict``).
    _by_flags: dict[frozenset[str], Verdict] = field(default_factory=dict, compare=False,
                                                     hash=False, repr=False)
    #: MCP servers' verdicts by (declaring skill, server name, host): every tool
    #: of a server has one.
    _servers: dict[tuple[str, str | None, ServerHost], Refusal | None] = field(
        default_factory=dict, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        # Every field a verdict depends on, found from the fields themselves: one
        # left out would hand a tool the verdict of another rule set.
        object.__setattr__(self, "key", key_of(self, "policy-verdict"))
        object.__setattr__(self, "gate", SkillGate(self.globs))
        object.__setattr__(self, "_sources", {
            source: (_refusal(f"source {source} is denied", who, "sources.deny"), False, None,
                     None, None, None)
            for source, who in reversed(self.deny_sources)})  # the first policy named
        object.__setattr__(self, "_marks", {cap: _approval_mark(who, cap)
                                            for cap, who in self.approval})

    @property
    def screens(self) -> bool:
        """Whether a tool can be dropped or marked by the policies."""
        return bool(self.deny_sources or self.server_hosts or self.deny_capabilities
                    or self.require_capabilities or self.approval or self.fixes)

    def verdict(self, entry: Entry, host: HostOf) -> Verdict:
        """The verdict on the entry's tool, computed once (``VERDICTS``)."""
        tool = entry.tool
        found = VERDICTS.get(tool.memo, self.key)
        if found is None:
            found = VERDICTS.put(tool.memo, self.key, self._verdict(tool, entry, host))
        return found

    def _verdict(self, tool: ToolDef, entry: Entry, host: HostOf) -> Verdict:
        # Runs once per tool definition reached in the namespace (most of them
        # built afresh by each Resolver), so it only looks up what every tool with
        # the same source and capabilities shares.
        refused = self._sources.get(tool.source)
        if refused is not None:
            return refused
        judged: ToolDef | None = None
        fixed: Marks = ()
        note = None
        if tool.source == "mcp" and (self.server_hosts or self.fixes):
            where = host(entry)
            refusal = self._server_refusal(entry.skill.canonical, tool.mcp_server, where)
            if refusal is not None:
                return refusal, False, None, None, None, None
            if self.fixes:
                refusal, judged, fixed, note = self._fixed(entry, tool, where)
                if refusal is not None:
                    return refusal, False, None, None, None, None
        caps = (judged or tool).capabilities
        flags = caps.true_flags
        found = self._by_flags.get(flags)
        if found is None:
            found = self._by_flags[flags] = self._flags_verdict(flags)
        refusal, at_require, _, _, mark, _ = found
        if judged is None and mark is None:  # kept as it is, or refused
            return found
        if refusal is not None:
            return refusal, at_require, judged, None, fixed or None, note
        if mark is None:
            return None, False, judged, None, fixed or None, note
        # The approval mark alone is one object for every floor (``_marked``).
        return (None, False, judged, _with_approval(judged or tool),
                (*fixed, *mark) if fixed else mark, note)

    def _fixed(self, entry: Entry, tool: ToolDef, where: ServerHost,
               ) -> tuple[Refusal | None, ToolDef | None, Marks, str | None]:
        """The tool with the capabilities the policies fix for it (None: none
        applies), the overrides that say so and the warning when they overrule
        the declaring skill; or the refusal when its host cannot be read, so a
        rule keyed on hosts cannot be judged (fails closed)."""
        if where is NoHost.STDIO:
            return None, None, (), None
        if isinstance(where, NoHost):
            first = self.fixes[0]
            return _refusal(f"MCP server {tool.mcp_server} has {where.value}, so the"
                            " capabilities fixed for hosts cannot be judged", first.who,
                            "mcpServers.tools"), None, (), None
        applied = [fix for fix in self.fixes if fix.applies(where, tool.name)]
        if not applied:
            return None, None, (), None
        caps = tool.capabilities.overlay(Capabilities.model_validate(
            dict(flag for fix in applied for flag in fix.flags)))
        marks = tuple(_fix_mark(fix) for fix in applied)
        judged = tool.overlaid(description=tool.description, title=tool.title,
                               capabilities=caps)
        note = None
        if caps != tool.capabilities:
            # One line per skill and server, whichever of its tools were overruled.
            who = ", ".join(dict.fromkeys(fix.who for fix in applied))
            note = (f"Skill {entry.skill} declares MCP server {tool.mcp_server} on host {where},"
                    f" whose tools' capabilities {who} fixes (mcpServers.tools): what the"
                    " skill says of them is overruled")
        return None, judged, marks, note

    def _flags_verdict(self, flags: frozenset[str]) -> Verdict:
        """The verdict on a tool whose true boolean capabilities are ``flags``; one
        that marks for approval carries the mark but no definition (each tool's
        own, made by ``_verdict``)."""
        refusal, at_require = _capability_refusal(flags, self.deny_capabilities,
                                                  self.require_capabilities)
        if refusal is not None:
            return refusal, at_require, None, None, None, None
        if self.approval and "requiresApproval" not in flags:
            for cap, mark in self._marks.items():  # in self.approval's order
                if cap in flags:
                    return None, False, None, None, mark, None
        return KEEP

    def _server_refusal(self, skill: str, server: str | None, host: ServerHost,
                        ) -> Refusal | None:
        if not self.server_hosts:
            return None
        slot = (skill, server, host)
        try:
            return self._servers[slot]
        except KeyError:
            pass
        found = None
        for rules in self.server_hosts:
            if not rules.admits(skill, host):
                where = host.value if isinstance(host, NoHost) else f"host {host}"
                # Scoped rules judge the skill too: the refusal names it.
                of = f" of skill {skill}" if rules.scoped else ""
                found = _refusal(f"MCP server {server}{of} has {where}, matched by no"
                                 " allowed host", rules.who, rules.rule)
                break
        self._servers[slot] = found
        return found


def _capability_refusal(flags: frozenset[str], deny: Sequence[tuple[str, str]],
                        require: Sequence[tuple[str, str]]) -> tuple[Refusal | None, bool]:
    """The first denied capability a tool with the true ``flags`` has, else the
    first required one it lacks (True: the refusal is a required capability's)."""
    for cap, who in deny:
        if cap in flags:
            return _refusal(f"has denied capability {cap}", who, "denyCapabilities"), False
    for cap, who in require:
        if cap not in flags:
            return (_refusal(f"lacks required capability {cap}", who, "requireCapabilities"),
                    True)
    return None, False


@dataclass(frozen=True, slots=True)
class EffectivePolicy:
    """What an Actor may use: the namespace's ``floor`` and the Actor's own policy.

    The tool rules are checked as if they were one list per rule with the
    policies first (docs/api.md): sources, then MCP hosts, then denied
    capabilities (the policies', then the Actor's own), then required ones.
    The floor's verdict is shared by the namespace; the Actor's own
    capabilities are a second check, which most Actors do not have.
    """

    #: Every field but those marked ``NOT_IN_KEY`` enters ``_own_key``.
    gate: SkillGate = field(metadata=NOT_IN_KEY)
    floor: Floor = field(default_factory=Floor, metadata=NOT_IN_KEY)
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
        return self.floor.applied

    def approval(self, own: ApprovalSettings | None,
                 ) -> tuple[ApprovalSettings | None, str | None]:
        """How the Actor's calls are approved, and why not as it asked (or None).

        A policy's ``requireApproval`` asks for a person: an Actor that would have
        the MCP client answer (``via: Elicitation``; in a pod, the agent itself can)
        gets approval by request instead, as the admin's rule cannot be loosened by
        the Actor (docs/api.md, SkillPolicy and ClusterSkillPolicy)."""
        if not self.floor.approval or own is None or own.via != "Elicitation":
            return own, None
        cap, who = self.floor.approval[0]
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
        floor, own = self.floor, bool(self.own_deny or self.own_require)
        screens = floor.screens
        if not screens and not own:
            return Screened(list(entries), [], [])
        out = Screened([], [], [])
        kept, dropped = out.kept, out.dropped
        key = floor.key
        for entry in entries:
            judged = final = marks = None
            refusal, at_require = None, False
            if screens:
                # The memo inline, not a call: this runs for every tool of every Actor.
                verdict = VERDICTS.get(entry.tool.memo, key) or floor.verdict(entry, host)
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

    def _own_refusal(self, tool: ToolDef, floor: Refusal | None) -> Refusal | None:
        """The refusal when the Actor's own capabilities are checked too: an own
        denied capability comes before the floor's required ones."""
        found = OWN_REFUSALS.get(tool.memo, self._own_key)
        if found is None:
            flags = tool.capabilities.true_flags
            found = OWN_REFUSALS.put(tool.memo, self._own_key, (
                _capability_refusal(flags, self.own_deny, ())[0],
                _capability_refusal(flags, (), self.own_require)[0]))
        deny, require = found
        return deny or floor or require


#: Rule sets whose verdicts a ToolDef keeps at most: registry and MCP ToolDefs
#: live as long as their specs, across every policy edit meanwhile.
_KEPT_RULE_SETS = 32
#: A ToolDef's verdict under each rule set (``Floor.key``), and its refusals by an
#: Actor's own capabilities (``EffectivePolicy._own_key``).
VERDICTS: Slot[MemoKey, Verdict] = Slot("policy-verdict", bound=_KEPT_RULE_SETS)
OWN_REFUSALS: Slot[MemoKey, tuple[Refusal | None, Refusal | None]] = Slot(
    "own-refusal", bound=_KEPT_RULE_SETS)
#: A ToolDef with requiresApproval set (``_with_approval``).
WITH_APPROVAL: Cell[ToolDef] = Cell("requireApproval")


def _refusal(what: str, who: str, rule: str) -> Refusal:
    if who == OWN:
        return Refusal(what)
    return Refusal(f"{what} ({who}: {rule})", who, rule)


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


@functools.lru_cache(maxsize=1024)
def _approval_mark(who: str, cap: str) -> Marks:
    """The override a policy's ``requireApproval`` applies: one object for every
    floor naming it (``_marked`` shares marked entries by it)."""
    return (AppliedOverride(f"{who} requireApproval [{cap}]",
                            ("capabilities.requiresApproval",)),)


@functools.lru_cache(maxsize=1024)
def _fix_mark(fix: Fix) -> AppliedOverride:
    """The override a policy's ``mcpServers.tools`` entry applies (explain names it)."""
    return AppliedOverride(f"{fix.who} {fix.rule}",
                           tuple(f"capabilities.{flag}" for flag, _ in fix.flags))


def _with_approval(tool: ToolDef) -> ToolDef:
    """``tool`` with requiresApproval set (as an override setting only it), kept on
    the tool: every Actor under the policy shares one definition (and its cached
    JSON)."""
    found = WITH_APPROVAL.get(tool.memo)
    if found is None:
        found = WITH_APPROVAL.put(tool.memo, tool.overlaid(
            description=tool.description, title=tool.title,
            capabilities=tool.capabilities.requiring_approval))
    return found


def applied_policy(policy: PolicyResource) -> AppliedPolicy:
    """How a policy is named: ``ClusterSkillPolicy tenants``, ``SkillPolicy
    team-a/no-shell``, with the generation in force."""
    meta = policy.meta
    name = meta.name if policy.kind == "ClusterSkillPolicy" else f"{meta.namespace}/{meta.name}"
    return AppliedPolicy(policy.kind, name, meta.generation)


def floor_of(policies: Sequence[PolicyResource]) -> Floor:
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
    return Floor(tuple(globs), tuple(deny_caps.items()), tuple(require_caps.items()),
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


def effective_policy(own: AccessPolicy, policies: Sequence[PolicyResource] | Floor,
                     ) -> EffectivePolicy:
    """The Actor's own policy tightened by ``policies`` (those that apply, in order,
    or their ``floor_of``, shared by a namespace).

    Policies come first in every rule list: when a policy and the Actor's own
    both refuse something, the refusal names the policy (the rule the Actor's
    author cannot remove).
    """
    floor = policies if isinstance(policies, Floor) else floor_of(policies)
    denied = {cap for cap, _ in floor.deny_capabilities}
    required = {cap for cap, _ in floor.require_capabilities}
    # A capability a policy already names stays the policy's (the first source).
    own_deny = dict.fromkeys(c for c in own.deny_capabilities if c not in denied)
    own_require = dict.fromkeys(c for c in own.require_capabilities if c not in required)
    rules = GlobRules(OWN, tuple(own.allow), tuple(own.deny))
    # Own globs that admit every skill add nothing to the floor's: the namespace's
    # gate is then the Actor's, with the verdicts (and flattenings) it already has.
    gate = floor.gate if rules.admits_all else SkillGate((*floor.globs, rules), base=floor.gate)
    return EffectivePolicy(
        gate=gate,
        floor=floor,
        own_deny=tuple((cap, OWN) for cap in own_deny),
        own_require=tuple((cap, OWN) for cap in own_require),
        max_tools=_least(floor.max_tools, own.max_tools, None),
        max_tool_tokens=_least(floor.max_tool_tokens, own.max_tool_tokens, None))


def _least(ceiling: Ceiling | None, value: int | None, who: str | None) -> Ceiling | None:
    """The tighter of ``ceiling`` and ``value`` (set by ``who``; None: the Actor).
    On a tie the first policy stays named, and the Actor's own field wins over
    every policy's."""
    if value is None:
        return ceiling
    if ceiling is None or value < ceiling.value or (who is None and value == ceiling.value):
        return Ceiling(value, who)
    return ceiling
