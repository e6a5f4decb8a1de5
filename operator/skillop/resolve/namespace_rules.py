"""The tool half of the policies governing a namespace, together.

``NamespaceRules`` is what every SkillPolicy and ClusterSkillPolicy that applies
to a namespace says, the part of an Actor's effective policy (``resolve.policy``)
that is the same for every Actor of the namespace. Tool rules (denied and
required capabilities, denied sources, allowed MCP hosts, fixed capabilities)
are each checked against every policy; approval requirements add up. Its
verdict on a tool is memoized on the ToolDef (``VERDICTS``) under a key derived
from its fields (``model.memo.key_of``), so it is shared by every Actor of the
namespace and by every namespace with the same rules.
"""

from __future__ import annotations

import fnmatch
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from skillop.model.capabilities import Capabilities
from skillop.model.memo import NOT_IN_KEY, Cell, MemoKey, Slot, key_of
from skillop.model.policies import NoHost, ServerHost, host_matches
from skillop.model.tooldef import ToolDef
from skillop.resolve.entries import AppliedOverride, Entry
from skillop.resolve.skillgate import GlobRules, Refusal, SkillGate, rule_refusal


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
#: A ToolDef's verdict under a NamespaceRules: the refusal, whether it came from a
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
class NamespaceRules:
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
            source: (rule_refusal(f"source {source} is denied", who, "sources.deny"), False, None,
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
        # The approval mark alone is one object for every NamespaceRules (``_marked``).
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
            return rule_refusal(f"MCP server {tool.mcp_server} has {where.value}, so the"
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
        refusal, at_require = capability_refusal(flags, self.deny_capabilities,
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
                found = rule_refusal(f"MCP server {server}{of} has {where}, matched by no"
                                 " allowed host", rules.who, rules.rule)
                break
        self._servers[slot] = found
        return found


def capability_refusal(flags: frozenset[str], deny: Sequence[tuple[str, str]],
                        require: Sequence[tuple[str, str]]) -> tuple[Refusal | None, bool]:
    """The first denied capability a tool with the true ``flags`` has, else the
    first required one it lacks (True: the refusal is a required capability's)."""
    for cap, who in deny:
        if cap in flags:
            return rule_refusal(f"has denied capability {cap}", who, "denyCapabilities"), False
    for cap, who in require:
        if cap not in flags:
            return (rule_refusal(f"lacks required capability {cap}", who, "requireCapabilities"),
                    True)
    return None, False


#: Rule sets whose verdicts a ToolDef keeps at most: registry and MCP ToolDefs
#: live as long as their specs, across every policy edit meanwhile.
KEPT_RULE_SETS = 32
#: A ToolDef's verdict under each rule set (``NamespaceRules.key``).
VERDICTS: Slot[MemoKey, Verdict] = Slot("policy-verdict", bound=KEPT_RULE_SETS)
#: A ToolDef with requiresApproval set (``_with_approval``).
WITH_APPROVAL: Cell[ToolDef] = Cell("requireApproval")


@functools.lru_cache(maxsize=1024)
def _approval_mark(who: str, cap: str) -> Marks:
    """The override a policy's ``requireApproval`` applies: one object for every
    NamespaceRules naming it (``_marked`` shares marked entries by it)."""
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
