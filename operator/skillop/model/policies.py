"""SkillPolicy and ClusterSkillPolicy: guardrails an Actor's author cannot widen.

An Actor's ``skillAccessPolicy`` is written by whoever may edit the Actor, so
it restricts only by consent. These two kinds are written by admins (the chart
grants tenants' ``edit`` no write on them, docs/security.md) and only ever
tighten: a ``SkillPolicy`` applies to every Actor of its namespace, a
``ClusterSkillPolicy`` to every Actor of the namespaces its
``namespaceSelector`` matches (none: every namespace). How the rules of
several policies and the Actor's own combine is ``resolve.policy``'s
``EffectivePolicy`` (docs/api.md, "SkillPolicy and ClusterSkillPolicy").

Both kinds share one spec model; the cluster kind adds the selector. Globs that
can never match are refused here (the CLI and the webhook) and by CEL rules in
the CRDs (the API server), as for Actors.
"""

from __future__ import annotations

import enum
import fnmatch
import re
from typing import Annotated, Any

from pydantic import AfterValidator, ConfigDict, Field, StringConstraints, model_validator
from pydantic_core import PydanticCustomError

from skillop.model.caller_rules import CallerRule, RateLimit
from skillop.model.capabilities import BooleanCapability
from skillop.model.globs import SkillGlob
from skillop.model.selectors import LabelSelector
from skillop.model.specbase import (
    MAX_LIST,
    MAX_NESTED,
    Rule,
    SpecModel,
    cel_rules,
    check_rules,
    empty_list,
)
from skillop.model.tooldef import Source
from skillop.model.urls import url_target

#: Where a tool comes from, as a policy names it: ``ToolDef.source``, the one list.
PolicySource = Source

#: A host glob: lowercase DNS characters and glob syntax, no scheme, port or path.
#: Hosts are compared lowercased (as the egress guard does), so anything else could
#: never match one.
HOST_GLOB_PATTERN = r"^[a-z0-9.*?\-\[\]!]+$"
_HOST_GLOB_RE = re.compile(HOST_GLOB_PATTERN)


def _host_glob(glob: str) -> str:
    if not _HOST_GLOB_RE.fullmatch(glob):
        raise PydanticCustomError(
            "unmatchable_glob",
            "host glob '{g}' can never match a server's host: write the host only"
            " (lowercase letters, digits, '.', '-' and glob characters), e.g."
            " '*.svc.cluster.local', without scheme, port or path", {"g": glob})
    return glob


HostGlob = Annotated[
    str, StringConstraints(min_length=1, max_length=253), AfterValidator(_host_glob),
    Field(json_schema_extra={"x-kubernetes-validations": [{
        # A raw string: CEL would read the pattern's backslashes as escapes.
        "rule": f"self.matches(r'{HOST_GLOB_PATTERN}')",
        "message": "a host glob is the host only (lowercase letters, digits, '.', '-', '*',"
                   " '?', [...]); with a scheme, port or path it can never match"}]}),
]


def url_host(url: str | None) -> str | None:
    """The host of an http(s) URL in its one spelling (``urls.url_target``: case,
    a trailing dot, IDNA and the IPv4 forms do not matter), without port; None when
    there is no URL or its authority is anything but a DNS name or IPv4 address
    (userinfo, IPv6 literals, percent-escapes, a backslash, which some parsers
    read as a ``/`` and others as part of the userinfo): such a server matches
    no host glob, so a policy's host rules fail closed rather than trust one
    parser's reading."""
    target = url_target(url) if url is not None else None
    # An IPv6 address (one that is not IPv4-mapped) has no glob to match it.
    return None if target is None or ":" in target.host else target.host


class NoHost(enum.Enum):
    """Why a server has no host a glob may match; the value says it in a refusal."""

    STDIO = "no host (stdio)"
    UNREADABLE = "a URL whose host cannot be read (not a plain DNS name or IPv4 address)"


#: A server's host as ``mcpServers.allow`` reads it.
ServerHost = str | NoHost


def server_host(url: str | None) -> ServerHost:
    """The host of a server with ``url`` (None: a stdio server), or why it has none."""
    if url is None:
        return NoHost.STDIO
    host = url_host(url)
    return NoHost.UNREADABLE if host is None else host


def host_matches(host: ServerHost, globs: tuple[str, ...]) -> bool:
    """Whether a server's host matches a glob; a server without one matches none."""
    return isinstance(host, str) and any(fnmatch.fnmatchcase(host, g) for g in globs)


#: A glob over the names a server gives its tools (fnmatch's, as ``toolFilter``'s).
ToolGlob = Annotated[str, StringConstraints(min_length=1, max_length=128)]


class ScopedHosts(SpecModel):
    """The hosts the MCP servers of some skills may have."""

    skills: list[SkillGlob] = Field(min_length=1, max_length=MAX_NESTED)
    """Globs over the canonical names (namespace/name) of the skills that declare the
    servers, e.g. team-a/*."""
    hosts: list[HostGlob] = Field(max_length=MAX_NESTED)
    """Globs over the host of those skills' servers' urls, e.g.
    *.team-a.svc.cluster.local."""


_RISK_TRUE = ("writes", "destructive", "openWorld", "sideEffects", "unsafe",
              "requiresApproval")
_SAFETY_FALSE = ("readOnly", "idempotent")
ADDS_RISK: Rule[Any] = Rule(
    " && ".join([f"(!has(self.{f}) || self.{f})" for f in _RISK_TRUE]
                + [f"(!has(self.{f}) || !self.{f})" for f in _SAFETY_FALSE]),
    "a policy's capabilities only add risk: " + ", ".join(_RISK_TRUE)
    + " may be set to true, readOnly and idempotent to false",
    lambda caps: not caps.loosening(),
    detail=lambda caps: ", ".join(caps.loosening()))
SAYS_SOMETHING: Rule[Any] = Rule(
    " || ".join(f"has(self.{f})" for f in (*_SAFETY_FALSE, *_RISK_TRUE)),
    "capabilities must set at least one flag",
    lambda caps: bool(caps.flags()))


class FixedCapabilities(SpecModel):
    """Capability flags a policy fixes: risk flags true, readOnly and idempotent
    false (a policy only adds risk)."""

    model_config = ConfigDict(json_schema_extra=cel_rules(ADDS_RISK, SAYS_SOMETHING))

    read_only: bool | None = None
    """false: not read-only, whatever a skill says."""
    writes: bool | None = None
    """true: modifies state."""
    destructive: bool | None = None
    """true: may destroy data."""
    idempotent: bool | None = None
    """false: not idempotent."""
    open_world: bool | None = None
    """true: talks to the outside world."""
    side_effects: bool | None = None
    """true: has effects beyond its result."""
    unsafe: bool | None = None
    """true: never without a sandbox."""
    requires_approval: bool | None = None
    """true: a human approves each call."""

    @model_validator(mode="after")
    def _rules(self) -> FixedCapabilities:
        return check_rules(self, (ADDS_RISK, SAYS_SOMETHING))

    def flags(self) -> dict[str, bool]:
        """The flags set, camelCase."""
        return self.model_dump(by_alias=True, exclude_none=True)

    def loosening(self) -> list[str]:
        """The flags set to a value that would loosen (``name=value``)."""
        return [f"{key}={str(value).lower()}" for key, value in self.flags().items()
                if value is not (key in _RISK_TRUE)]


class ToolFacts(SpecModel):
    """Capabilities of some tools of some hosts, fixed by the policy: applied over
    what any skill declares or overrides."""

    hosts: list[HostGlob] = Field(min_length=1, max_length=MAX_NESTED)
    """Globs over the host of a server's url (any spelling of it: case, a trailing
    dot, a port, IDNA, the IPv4 forms), e.g. db.platform.svc.cluster.local."""
    names: list[ToolGlob] = Field(min_length=1, max_length=MAX_NESTED)
    """Globs over the tools' names as the server gives them, e.g. drop_*."""
    capabilities: FixedCapabilities
    """The flags every such tool gets, whatever any skill declares or overrides."""


_SERVER_RULES: tuple[Rule[Any], ...] = (Rule(
    "has(self.allow) || has(self.allowFor) || has(self.tools)",
    "mcpServers needs allow, allowFor or tools",
    lambda rules: any(v is not None for v in (rules.allow, rules.allow_for, rules.tools))),)


class McpServerRules(SpecModel):
    """Which MCP servers skills may use, by host, and what their tools may do."""

    model_config = ConfigDict(json_schema_extra=cel_rules(*_SERVER_RULES))

    allow: list[HostGlob] | None = Field(default=None, max_length=MAX_LIST)
    """Globs over the host of a server's url (e.g. *.svc.cluster.local), for every
    skill. With allow or allowFor given, a server matching neither, and every stdio
    server, contributes no tools."""
    allow_for: list[ScopedHosts] | None = Field(default=None, max_length=MAX_NESTED)
    """Host globs for the servers of some skills only: a server passes when its
    host matches allow, or the hosts of an entry whose skills match the skill that
    declares it."""
    tools: list[ToolFacts] | None = Field(default=None, max_length=MAX_NESTED)
    """Capabilities fixed for the tools of some hosts, whatever any skill declares
    or overrides."""

    @model_validator(mode="after")
    def _rules(self) -> McpServerRules:
        return check_rules(self, _SERVER_RULES)


class SourceRules(SpecModel):
    """Which tool sources skills may use."""

    deny: list[PolicySource] = Field(default_factory=empty_list, max_length=5)
    """Tool sources not to use: builtin, tool, mcp, anonymous, agent_skill; their
    tools are dropped."""


class SkillPolicySpec(SpecModel):
    """Rules that tighten the access policy of every Actor the policy applies to."""

    allow: list[SkillGlob] | None = Field(default=None, max_length=MAX_LIST)
    """Globs over canonical skill names (namespace/name); a reached skill must match
    every applying allow list, or it is pruned. Absent: no allow list."""
    deny: list[SkillGlob] = Field(default_factory=empty_list, max_length=MAX_LIST)
    """Globs over canonical skill names; a skill matching any applying deny list is
    pruned with everything reached only through it."""
    deny_capabilities: list[BooleanCapability] = Field(default_factory=empty_list, max_length=8)
    """Tools with any of these capabilities true are dropped (added to the Actor's)."""
    require_capabilities: list[BooleanCapability] = Field(default_factory=empty_list, max_length=8)
    """Only tools that declare all of these capabilities true are kept (added to the
    Actor's)."""
    require_approval: list[BooleanCapability] = Field(default_factory=empty_list, max_length=8)
    """Tools with any of these capabilities true get requiresApproval: true, whatever
    the declaring skill says; the gateway then asks before each call."""
    max_tools: int | None = Field(default=None, ge=1, le=100000)
    """A ceiling on the Actor's maxTools: the effective budget is the least of the
    Actor's and every applying policy's."""
    max_tool_tokens: int | None = Field(default=None, ge=1, le=100_000_000)
    """A ceiling on the Actor's maxToolTokens (tokens of the tools' definitions): the
    effective budget is the least of the Actor's and every applying policy's."""
    mcp_servers: McpServerRules | None = None
    """Which MCP servers may contribute tools, by host glob, and the capabilities of
    some hosts' tools."""
    sources: SourceRules | None = None
    """Which tool sources may contribute tools."""
    caller_rules: list[CallerRule] = Field(default_factory=empty_list, max_length=MAX_NESTED)
    """Which callers may list and call which tools, checked on their own: a caller must
    pass this policy's rules as well as the Actor's (docs/api.md)."""
    rate_limits: list[RateLimit] = Field(default_factory=empty_list, max_length=MAX_NESTED)
    """Token buckets every covered call must also have a token of."""


class ClusterSkillPolicySpec(SkillPolicySpec):
    """Rules that tighten the access policy of every Actor in the selected namespaces."""

    namespace_selector: LabelSelector | None = None
    """The namespaces whose Actors the policy applies to, by label; absent: every
    namespace."""
