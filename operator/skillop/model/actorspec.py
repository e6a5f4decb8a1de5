"""An Actor's spec: its skills, access policy, disclosure, approval and credential
bindings (docs/api.md, Actor)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    Field,
    StringConstraints,
)

from skillop.model.bindinghost import BindingHost
from skillop.model.caller_rules import CallerRule, RateLimit
from skillop.model.callers import CallersSpec
from skillop.model.capabilities import BooleanCapability
from skillop.model.globs import SkillGlob
from skillop.model.mcpserver import SecretRef
from skillop.model.specbase import (
    MAX_LIST,
    MAX_NESTED,
    SpecModel,
    empty_list,
)
from skillop.model.toolspecs import ObjectName, Reference


class AccessPolicy(SpecModel):
    """Which skills and tools the Actor may use."""

    allow: list[SkillGlob] = Field(default_factory=lambda: ["*"], max_length=MAX_LIST)
    """Globs over canonical skill names (namespace/name, so each has a / or *); a skill
    matching none is pruned. Default ["*"]."""
    deny: list[SkillGlob] = Field(default_factory=empty_list, max_length=MAX_LIST)
    """Globs over canonical skill names; a matching skill is pruned, and deny wins
    over allow."""
    deny_capabilities: list[BooleanCapability] = Field(default_factory=empty_list, max_length=8)
    """Tools with any of these capabilities true are dropped."""
    require_capabilities: list[BooleanCapability] = Field(default_factory=empty_list, max_length=8)
    """Only tools that declare all of these capabilities true are kept."""
    max_tools: int | None = Field(default=None, ge=1, le=100000)
    """The most tools allowed after filtering; over it the Actor is Ready=False,
    TooManyTools."""
    max_tool_tokens: int | None = Field(default=None, ge=1, le=100_000_000)
    """The most tokens the tool definitions may cost the model (name, description and
    input schema of every tool, cl100k_base); over it the Actor is Ready=False,
    TooManyToolTokens."""
    caller_rules: list[CallerRule] = Field(default_factory=empty_list, max_length=MAX_NESTED)
    """Which callers (end users, spec.callers) may list and call which tools: Allow,
    Deny or RequireApproval, by caller, skill and tool (docs/api.md)."""


#: A tool as the Actor names it: its name, bindingName or qualifiedName.
PinnedName = Annotated[str, StringConstraints(min_length=1, max_length=320)]


class Disclosure(SpecModel):
    """How the gateway shows the Actor's tools to the agent (docs/gateway.md)."""

    mode: Literal["All", "Search"] = "All"
    """All: the gateway lists every tool of the set. Search: it lists only the pinned
    tools, plus search_tools (finds tools of the set by purpose, returning their
    exact definitions) and call_tool (calls a tool of the set by bindingName)."""
    pinned: list[PinnedName] = Field(default_factory=empty_list, max_length=MAX_LIST)
    """In Search mode, the tools listed as themselves: name, bindingName or
    qualifiedName. A name the set does not hold gets a warning."""


class ApprovalSettings(SpecModel):
    """How a call to a tool with requiresApproval is approved, and how long it waits."""

    via: Literal["Request", "Elicitation"] = "Request"
    """Request (default): a ToolCallApproval object a person decides with kubectl;
    Elicitation: an MCP prompt to the client, for clients with a person in front."""
    timeout_seconds: int = Field(default=300, ge=1, le=86400)
    """How long the gateway waits for a decision (not counted in timeoutSeconds)."""


#: A stdio server's command line, exactly as its command and args joined by spaces.
CommandLine = Annotated[str, StringConstraints(min_length=1, max_length=4096)]


class CredentialBinding(SpecModel):
    """A Secret of the Actor's namespace, and where a shared Skill may send it."""

    secret_ref: SecretRef
    """The Secret (in the Actor's namespace) a server of a Skill from another
    namespace names in headersFrom or env[].valueFrom.secretKeyRef."""
    hosts: list[BindingHost] = Field(default_factory=empty_list, max_length=MAX_LIST)
    """The URL servers it may be sent to: [scheme://]host[:port] globs (e.g.
    https://mcp.example.com, *.team-b.svc:8080), matched against the server's
    host in its one normal spelling (lowercase, no trailing dot, IDNA, IPv4 in
    dotted decimal); no port: any port."""
    commands: list[CommandLine] = Field(default_factory=empty_list, max_length=MAX_LIST)
    """The stdio servers it may be given to, by their exact command line
    (command and args joined by single spaces)."""


class ActorSpec(SpecModel):
    """An agent: the skills it uses and the policy on them."""

    skills: list[Reference] = Field(default_factory=empty_list, max_length=MAX_LIST)
    """The Skills the agent uses: name (this namespace) or namespace/name."""
    skill_access_policy: AccessPolicy = Field(default_factory=AccessPolicy)
    """Which of the reached skills and tools the agent may use."""
    config_map_name: ObjectName | None = None
    """The ConfigMap the tool set is written to; default <actor>-tools."""
    disclosure: Disclosure = Field(default_factory=Disclosure)
    """How the tools are shown to the agent: all listed, or found by search."""
    approval: ApprovalSettings | None = None
    """How calls to tools with requiresApproval are approved (default: a ToolCallApproval
    request, waiting 300 s)."""
    credentials: list[CredentialBinding] = Field(default_factory=empty_list, max_length=MAX_LIST)
    """Where the Actor's own Secrets may go when a Skill from another namespace names
    them: without an entry binding the Secret to the server's host (or stdio
    command), the set is refused (CredentialNotBound). Servers of Skills in the
    Actor's namespace need none."""
    rate_limits: list[RateLimit] = Field(default_factory=empty_list, max_length=MAX_NESTED)
    """Token buckets bounding how often callers call tools; every applying limit (the
    Actor's and its policies') must have a token for a call to run."""
    callers: CallersSpec | None = None
    """The end users' tokens the gateway verifies (OpenID Connect): the issuer, the
    audiences, and the claims naming the caller. Absent: every call is anonymous."""
