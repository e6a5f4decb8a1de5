"""The CRD specs as pydantic models: the one source of truth for their schemas.

The CRDs in ``crds/`` are generated from these models (``skillop.model.crd``), and a
test fails when the two drift. Models are frozen and reject unknown fields, so a
typo in a manifest is an error that names the field, not a silently ignored key.
"""

from __future__ import annotations

import fnmatch
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from skillop.model.capabilities import BooleanCapability, Capabilities
from skillop.model.credentials import USERINFO_PATTERN, has_userinfo
from skillop.model.durations import DURATION_PATTERN, MAX_NANOS, duration_nanos
from skillop.model.globs import SkillGlob
from skillop.model.hostpatterns import HostPattern
from skillop.model.names import (
    OBJECT_NAME_PATTERN,
    SERVER_TOOL_NAME_PATTERN,
    TOOL_NAME_PATTERN,
    ObjectRef,
)
from skillop.model.selectors import LabelSelector
from skillop.model.serverkeys import CaSource, ServerKey
from skillop.model.specbase import (
    MAX_LIST,
    MAX_TOOLS_PER_LIST,
    Rule,
    SpecModel,
    cel_rules,
    check_rules,
    field_rules,
    one_of,
)
from skillop.model.urls import normal_url

JsonObject = dict[str, Any]
ToolName = Annotated[str, StringConstraints(pattern=TOOL_NAME_PATTERN, max_length=128)]
ObjectName = Annotated[str, StringConstraints(pattern=OBJECT_NAME_PATTERN, max_length=253)]
Reference = Annotated[str, StringConstraints(min_length=1, max_length=317)]
Description = Annotated[str, StringConstraints(max_length=4096)]
#: A tool name as an MCP server may spell it (unicode, ``/``): see docs/api.md, Names.
ServerToolName = Annotated[
    str, StringConstraints(pattern=SERVER_TOOL_NAME_PATTERN, min_length=1, max_length=128)
]
#: MCP servers write long descriptions (usage notes, examples); a declared copy
#: of what discovery lists must fit. Still bounded: a Skill is one etcd object.
MAX_MCP_DESCRIPTION = 65536
McpDescription = Annotated[str, StringConstraints(max_length=MAX_MCP_DESCRIPTION)]
Title = Annotated[str, StringConstraints(max_length=256)]
Glob = Annotated[str, StringConstraints(min_length=1, max_length=317)]
ServerName = Annotated[
    str, StringConstraints(pattern=r"^[a-z0-9]([-a-z0-9_.]{0,61}[a-z0-9])?$", max_length=63)
]

#: Override keys that change what a tool *is*; only description, title and
#: capabilities describe how an includer wants to see it.
FORBIDDEN_OVERRIDE_KEYS = ("name", "inputSchema", "outputSchema", "runtime", "identity",
                           "source", "input_schema", "output_schema")


class Override(SpecModel):
    """How an includer sees a tool: description, title and capabilities, field by field."""

    description: Description | None = None
    """Replaces the description the model is told."""
    title: Title | None = None
    """Replaces the tool's title."""
    capabilities: Capabilities | None = None
    """Capabilities set field by field; from includes[] or tools[] they may only tighten."""

    @model_validator(mode="before")
    @classmethod
    def _refuse_identity_changes(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in data:
                if key in FORBIDDEN_OVERRIDE_KEYS:
                    raise PydanticCustomError(
                        "forbidden_override",
                        "overrides may not change {key}; only description, title and"
                        " capabilities can be overridden",
                        {"key": key},
                    )
        return data

    @property
    def is_empty(self) -> bool:
        return self.description is None and self.title is None and (
            self.capabilities is None or not self.capabilities.to_dict()
        )

    def fields(self) -> list[str]:
        """Names of the fields this override sets, for provenance."""
        out = [k for k in ("description", "title") if getattr(self, k) is not None]
        if self.capabilities is not None:
            out += [f"capabilities.{k}" for k in self.capabilities.to_dict()]
        return out


class ToolSpec(SpecModel):
    """A named, reusable tool definition, referenced from Skills' spec.tools."""

    name: ToolName | None = None
    """The tool's name: 1-128 characters of [A-Za-z0-9_.-]; default metadata.name."""
    title: Title | None = None
    """A human-readable title."""
    description: Description
    """What the model is told the tool does."""
    input_schema: JsonObject = Field(default_factory=lambda: {"type": "object"})
    """JSON Schema of the tool's arguments; default {type: object}."""
    output_schema: JsonObject | None = None
    """JSON Schema of the tool's structured result."""
    capabilities: Capabilities = Field(default_factory=Capabilities)
    """What the tool may do: its own risk, asserted here only."""
    runtime: JsonObject | None = None
    """Opaque configuration, passed through to the actor pods that run the tool."""


class InlineTool(SpecModel):
    """A tool declared inline: a Skill's anonymous tool or an MCP server's declared tool."""

    name: ToolName
    """The tool's name: 1-128 characters of [A-Za-z0-9_.-]."""
    title: Title | None = None
    """A human-readable title."""
    description: Description = ""
    """What the model is told the tool does."""
    input_schema: JsonObject = Field(default_factory=lambda: {"type": "object"})
    """JSON Schema of the tool's arguments; default {type: object}."""
    output_schema: JsonObject | None = None
    """JSON Schema of the tool's structured result."""
    capabilities: Capabilities | None = None
    """What the tool may do, asserted by this skill; applied on top of what its
    annotations give."""
    annotations: JsonObject | None = None
    """MCP ToolAnnotations (readOnlyHint, destructiveHint, idempotentHint,
    openWorldHint, title); the hints map onto capabilities."""
    runtime: JsonObject | None = None
    """Opaque configuration, passed through to the actor pods that run the tool."""


class ToolExecution(SpecModel):
    """How a tool may be run (MCP 2025-11-25 ``Tool.execution``), kept as the server says."""

    task_support: Literal["forbidden", "optional", "required"] | None = None
    """Whether a call may (optional), must (required) or must not (forbidden) run as
    an MCP task."""


class DeclaredMcpTool(InlineTool):
    """A tool declared for an MCP server: what ``skillop discover -o yaml`` prints.

    Names and descriptions are the server's, so they follow what servers send
    (docs/api.md, Names), not skillop's own naming rules.
    """

    name: ServerToolName
    """The tool's name as the server spells it (unicode and / allowed, no whitespace);
    1-128 characters."""
    description: McpDescription = ""
    """What the model is told the tool does, as the server says it; up to 65,536
    characters."""
    execution: ToolExecution | None = None
    """The tool's MCP execution object, as the server sends it."""


class ToolRefEntry(SpecModel):
    """A registry Tool, by reference."""

    ref: Reference
    """The Tool: name (this namespace) or namespace/name; another namespace's Tool
    only with label skillop.dev/shared: "true"."""
    overrides: Override | None = None
    """How this skill sees the tool; capabilities may only tighten."""


class Include(SpecModel):
    """Another Skill whose flattened tools this skill includes."""

    skill: Reference
    """The Skill: name (this namespace) or namespace/name; its sharing must admit
    this namespace."""
    overrides: dict[Annotated[str, StringConstraints(max_length=400)], Override] = Field(
        default_factory=dict, max_length=MAX_TOOLS_PER_LIST
    )
    """Overrides keyed by tool name in the included skill's flattened set;
    capabilities may only tighten."""


class SecretRef(SpecModel):
    """A Secret in the Skill's namespace."""

    name: ObjectName
    """The Secret's name."""


class HeadersFrom(SpecModel):
    """HTTP headers taken from a Secret."""

    secret_ref: SecretRef
    """A Secret in the Skill's namespace whose keys are HTTP headers, sent on
    discovery and by pods; values never leave the Secret."""


#: A key of a ConfigMap's or Secret's data (what the API server allows there).
DataKey = Annotated[str, StringConstraints(pattern=r"^[-._a-zA-Z0-9]+$", max_length=253)]


class CaKeyRef(SpecModel):
    """A key of a ConfigMap or Secret in the Skill's namespace holding PEM CA certificates."""

    name: ObjectName
    """The ConfigMap's or Secret's name."""
    key: DataKey = "ca.crt"
    """The key holding the PEM bundle; default ca.crt."""


_TLS_RULES = (one_of("caConfigMapRef", "caSecretRef"),)


class McpTls(SpecModel):
    """Trust for an https server signed by a private CA, besides the system's CAs."""

    model_config = ConfigDict(json_schema_extra=cel_rules(*_TLS_RULES))

    ca_config_map_ref: CaKeyRef | None = None
    """A ConfigMap key holding the PEM CA bundle."""
    ca_secret_ref: CaKeyRef | None = None
    """A Secret key holding the PEM CA bundle."""

    @model_validator(mode="after")
    def _rules_hold(self) -> McpTls:
        return check_rules(self, _TLS_RULES)

    def source(self, namespace: str) -> CaSource:
        if self.ca_config_map_ref is not None:
            ref = self.ca_config_map_ref
            return CaSource("ConfigMap", ObjectRef(namespace, ref.name), ref.key)
        assert self.ca_secret_ref is not None
        ref = self.ca_secret_ref
        return CaSource("Secret", ObjectRef(namespace, ref.name), ref.key)


class SecretKeySelector(SpecModel):
    """One key of a Secret in the Skill's namespace."""

    name: ObjectName
    """The Secret's name."""
    key: DataKey
    """The key in the Secret."""


class EnvVarSource(SpecModel):
    """Where an environment variable's value comes from."""

    secret_key_ref: SecretKeySelector
    """A key of a Secret in the Skill's namespace, carried as a reference for the pod
    running the server; skillop never reads it."""


_ENV_RULES = (one_of("value", "valueFrom"),)


class EnvVar(SpecModel):
    """An environment variable for a stdio server: a public value or a Secret key reference."""

    # ``value`` is copied into every ConfigMap reaching the skill; ``valueFrom`` is
    # carried into the ToolSet as the reference it is, for the pod running the
    # server to resolve: skillop never reads it.

    model_config = ConfigDict(json_schema_extra=cel_rules(*_ENV_RULES))

    name: Annotated[str, StringConstraints(min_length=1, max_length=256)]
    """The variable's name."""
    value: Annotated[str, StringConstraints(max_length=4096)] | None = None
    """A public value, copied into every ConfigMap reaching the skill; use valueFrom
    for secrets."""
    value_from: EnvVarSource | None = None
    """A Secret key reference, resolved by the pod that runs the server."""

    @model_validator(mode="after")
    def _rules_hold(self) -> EnvVar:
        return check_rules(self, _ENV_RULES)


class ToolFilter(SpecModel):
    """Which of a server's tools the skill takes, by globs over tool names."""

    include: list[Glob] = Field(default_factory=list, max_length=MAX_LIST)
    """When set, only tools matching one of these globs are taken."""
    exclude: list[Glob] = Field(default_factory=list, max_length=MAX_LIST)
    """Tools matching one of these globs are dropped."""

    def admits(self, name: str) -> bool:
        if self.include and not any(fnmatch.fnmatchcase(name, g) for g in self.include):
            return False
        return not any(fnmatch.fnmatchcase(name, g) for g in self.exclude)


Transport = Literal["streamable-http", "sse", "stdio"]
#: Polling a server more often than this costs every namespace sharing it a
#: reconnect for nothing: a server that changes more often should announce
#: ``tools.listChanged``, which is followed at once.
MIN_REFRESH_SECONDS = 10
#: The floor, for the API server (CEL's duration() parses Go durations, a superset
#: of the pattern, and fails beyond Go's range) and the models alike.
REFRESH_FLOOR: Rule[str] = Rule(
    f"duration(self) >= duration('{MIN_REFRESH_SECONDS}s')",
    f"refreshInterval must be at least {MIN_REFRESH_SECONDS}s",
    lambda text: duration_nanos(text) >= MIN_REFRESH_SECONDS * 10**9,
    detail=lambda text: f"not {text}")


def _within_go_range(text: str) -> str:
    # The API server refuses these too: CEL's duration() fails beyond Go's range.
    if duration_nanos(text) > MAX_NANOS:
        raise PydanticCustomError(
            "too_long", "refresh interval {d} is longer than a Kubernetes duration can be",
            {"d": text})
    return text


Duration = Annotated[str, StringConstraints(pattern=DURATION_PATTERN, max_length=32),
                     AfterValidator(_within_go_range), *field_rules(REFRESH_FLOOR)]


_SERVER_RULES: tuple[Rule[Any], ...] = (
    one_of("url", "command"),
    Rule("!has(self.command) || !has(self.transport) || self.transport == 'stdio'",
         "a command server uses transport stdio",
         lambda server: server.command is None or server.transport in (None, "stdio"),
         detail=lambda server: f"not {server.transport}"),
    Rule("!has(self.url) || !has(self.transport) || self.transport != 'stdio'",
         "a url server cannot use transport stdio",
         lambda server: server.url is None or server.transport != "stdio"),
    # docs/api.md: tools are required for stdio, since the operator never runs one.
    Rule("!has(self.command) || (has(self.tools) && size(self.tools) > 0)",
         "a stdio server (command) declares its tools: the operator never runs it",
         lambda server: server.command is None or bool(server.tools)),
    # Fields of the other kind of server would be dropped without a word.
    Rule("!has(self.url) || ((!has(self.args) || size(self.args) == 0)"
         " && (!has(self.env) || size(self.env) == 0))",
         "args and env are for stdio servers (command), not url ones",
         lambda server: server.url is None or not (server.args or server.env)),
    Rule("!has(self.command) || (!has(self.headersFrom) && !has(self.tls))",
         "headersFrom and tls are for url servers, not stdio ones (command)",
         lambda server: server.command is None or (server.headers_from is None
                                                   and server.tls is None)),
)


class McpServer(SpecModel):
    """An MCP server whose tools (all of them, filtered) the skill includes."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [
        *(rule.cel_rule for rule in _SERVER_RULES),
        {"rule": f"!has(self.url) || !self.url.matches('{USERINFO_PATTERN}')",
         "message": "url must not carry credentials (user:password@); name a Secret in"
                    " headersFrom instead"},
    ]})

    name: ServerName
    """The server's name, unique within the skill."""
    url: Annotated[str, StringConstraints(pattern=r"^https?://", max_length=2048)] | None = None
    """The server's http(s) URL, without user:password@ (use headersFrom); exactly
    one of url and command."""
    transport: Transport | None = None
    """streamable-http (default for url), sse, or stdio (default for command)."""
    command: list[Annotated[str, StringConstraints(max_length=4096)]] | None = Field(
        default=None, min_length=1, max_length=64
    )
    """A stdio server's command line, never run by the operator (declare its tools);
    exactly one of url and command."""
    args: list[Annotated[str, StringConstraints(max_length=4096)]] = Field(
        default_factory=list, max_length=256
    )
    """Arguments to command."""
    env: list[EnvVar] = Field(default_factory=list, max_length=256)
    """Environment of a stdio server: public values or Secret key references."""
    headers_from: HeadersFrom | None = None
    """A Secret whose keys are HTTP headers, for discovery and for pods."""
    tls: McpTls | None = None
    """A PEM CA bundle to trust, for an https server signed by a private CA."""
    tools: list[DeclaredMcpTool] = Field(default_factory=list, max_length=MAX_TOOLS_PER_LIST)
    """Declared tools: required for stdio servers, and used whenever the server has
    not been listed successfully."""
    tool_filter: ToolFilter | None = None
    """Include and exclude globs over the server's tool names."""
    overrides: dict[ServerToolName, Override] = Field(
        default_factory=dict, max_length=MAX_TOOLS_PER_LIST
    )
    """By tool name: description, title and capabilities, set freely (this skill
    declares the server)."""
    pin: bool = False
    """Keep the accepted tool definitions: changed tools are withheld (PinViolation)
    until accepted."""
    refresh_interval: Duration | None = None
    """How often the server is listed again, e.g. 5m; at least 10s. Default:
    the Skill's refreshInterval."""

    @field_validator("url")
    @classmethod
    def _no_userinfo(cls, url: str | None) -> str | None:
        # The message never repeats the URL: it holds the password.
        if url is not None and has_userinfo(url):
            raise PydanticCustomError(
                "userinfo", "url must not carry credentials (user:password@); name a Secret"
                " in headersFrom instead", {})
        return url

    @model_validator(mode="after")
    def _rules_hold(self) -> McpServer:
        return check_rules(self, _SERVER_RULES)

    @property
    def effective_transport(self) -> Transport:
        if self.transport is not None:
            return self.transport
        return "streamable-http" if self.url is not None else "stdio"

    @property
    def endpoint(self) -> str:
        """What identifies the server: its URL (RFC 3986 normal form), or its command line."""
        if self.url is not None:
            return normal_url(self.url)
        return " ".join([*(self.command or []), *self.args])

    def discovery_key(self, namespace: str) -> ServerKey | None:
        """What this server's live tool list is keyed by, for a Skill in ``namespace``.

        None for stdio servers, which are never contacted. The Secret named by
        ``headersFrom`` lives in the Skill's namespace.
        """
        if self.url is None:
            return None
        secret = (ObjectRef(namespace, self.headers_from.secret_ref.name)
                  if self.headers_from is not None else None)
        ca = self.tls.source(namespace) if self.tls is not None else None
        return ServerKey(normal_url(self.url), secret, ca)


class ConfigMapKeyRef(SpecModel):
    """A key of a ConfigMap in the Skill's namespace."""

    name: ObjectName
    """The ConfigMap's name."""
    key: DataKey = "SKILL.md"
    """The key holding the SKILL.md; default SKILL.md."""


_AGENT_SKILL_RULES = (one_of("configMapRef", "inline"),)


class AgentSkillSource(SpecModel):
    """A SKILL.md, from a ConfigMap key or inline (exactly one): one read-only tool."""

    model_config = ConfigDict(json_schema_extra=cel_rules(*_AGENT_SKILL_RULES))

    config_map_ref: ConfigMapKeyRef | None = None
    """A ConfigMap key holding the SKILL.md."""
    inline: Annotated[str, StringConstraints(max_length=262144)] | None = None
    """The SKILL.md text itself."""

    @model_validator(mode="after")
    def _rules_hold(self) -> AgentSkillSource:
        return check_rules(self, _AGENT_SKILL_RULES)


_SHARING_RULES: tuple[Rule[Any], ...] = (
    Rule("(has(self.from) && self.from == 'Selector') == has(self.selector)",
         "selector is required with from: Selector, and only then",
         lambda sharing: (sharing.from_ == "Selector") == (sharing.selector is not None)),
)


class Sharing(SpecModel):
    """Which namespaces may include this skill or reference it from an Actor."""

    model_config = ConfigDict(json_schema_extra=cel_rules(*_SHARING_RULES))

    from_: Literal["Same", "All", "Selector"] = Field(default="Same", alias="from")
    """Same (default): this namespace only; All: every namespace; Selector: the
    namespaces selector matches."""
    selector: LabelSelector | None = None
    """The namespaces admitted, by label; required with from: Selector, and only then."""

    @model_validator(mode="after")
    def _rules_hold(self) -> Sharing:
        return check_rules(self, _SHARING_RULES)


BuiltinGroup = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]{1,63}$")]


class SkillSpec(SpecModel):
    """What a Skill contributes: registry Tools, included Skills, MCP servers, Agent
    Skills, built-in groups and inline tools."""

    description: Description = ""
    """Free text describing the skill."""
    tools: list[ToolRefEntry] = Field(default_factory=list, max_length=MAX_TOOLS_PER_LIST)
    """Registry Tools by reference, each with optional overrides."""
    includes: list[Include] = Field(default_factory=list, max_length=MAX_LIST)
    """Other Skills whose flattened tools this skill includes, in order."""
    mcp_servers: list[McpServer] = Field(default_factory=list, max_length=64)
    """MCP servers whose tools this skill includes."""
    agent_skills: list[AgentSkillSource] = Field(default_factory=list, max_length=MAX_LIST)
    """Agent Skills (SKILL.md), each one read-only tool named by its frontmatter."""
    builtins: list[BuiltinGroup] = Field(default_factory=list, max_length=64)
    """Built-in tool groups: file_operations, directory_operations, git_operations,
    shell_operations."""
    anonymous_tools: list[InlineTool] = Field(default_factory=list, max_length=MAX_TOOLS_PER_LIST)
    """Tools defined inline, belonging to this skill."""
    sharing: Sharing = Field(default_factory=Sharing)
    """Which namespaces may include this skill or reference it; default this
    namespace only."""
    refresh_interval: Duration | None = None
    """Default discovery period of this skill's MCP servers, e.g. 5m; at least 10s."""

    @field_validator("mcp_servers")
    @classmethod
    def _unique_server_names(cls, servers: list[McpServer]) -> list[McpServer]:
        seen: set[str] = set()
        for server in servers:
            if server.name in seen:
                raise PydanticCustomError(
                    "duplicate", "MCP server name {n} is used twice", {"n": server.name}
                )
            seen.add(server.name)
        return servers


class AccessPolicy(SpecModel):
    """Which skills and tools the Actor may use."""

    allow: list[SkillGlob] = Field(default_factory=lambda: ["*"], max_length=MAX_LIST)
    """Globs over canonical skill names (namespace/name, so each has a / or *); a skill
    matching none is pruned. Default ["*"]."""
    deny: list[SkillGlob] = Field(default_factory=list, max_length=MAX_LIST)
    """Globs over canonical skill names; a matching skill is pruned, and deny wins
    over allow."""
    deny_capabilities: list[BooleanCapability] = Field(default_factory=list, max_length=8)
    """Tools with any of these capabilities true are dropped."""
    require_capabilities: list[BooleanCapability] = Field(default_factory=list, max_length=8)
    """Only tools that declare all of these capabilities true are kept."""
    max_tools: int | None = Field(default=None, ge=1, le=100000)
    """The most tools allowed after filtering; over it the Actor is Ready=False,
    TooManyTools."""
    max_tool_tokens: int | None = Field(default=None, ge=1, le=100_000_000)
    """The most tokens the tool definitions may cost the model (name, description and
    input schema of every tool, cl100k_base); over it the Actor is Ready=False,
    TooManyToolTokens."""


#: A tool as the Actor names it: its name, bindingName or qualifiedName.
PinnedName = Annotated[str, StringConstraints(min_length=1, max_length=320)]


class Disclosure(SpecModel):
    """How the gateway shows the Actor's tools to the agent (docs/gateway.md)."""

    mode: Literal["All", "Search"] = "All"
    """All: the gateway lists every tool of the set. Search: it lists only the pinned
    tools, plus search_tools (finds tools of the set by purpose, returning their
    exact definitions) and call_tool (calls a tool of the set by bindingName)."""
    pinned: list[PinnedName] = Field(default_factory=list, max_length=MAX_LIST)
    """In Search mode, the tools listed as themselves: name, bindingName or
    qualifiedName. A name the set does not hold gets a warning."""


class ApprovalSettings(SpecModel):
    """How a call to a tool with requiresApproval is approved, and how long it waits."""

    via: Literal["Request", "Elicitation"] = "Request"
    """Request (default): a ToolCallApproval object a person decides with kubectl;
    Elicitation: an MCP prompt to the client, for clients with a person in front."""
    timeout_seconds: int = Field(default=300, ge=1, le=86400)
    """How long the gateway waits for a decision (not counted in timeoutSeconds)."""


def _binding_host(text: str) -> str:
    try:
        HostPattern.parse_normal(text)
    except ValueError as err:
        raise PydanticCustomError("host_pattern", "{why}", {"why": str(err)}) from None
    return text


#: Where a Secret may go: ``[scheme://]host[:port]``, globs allowed (the egress
#: allow-list's grammar, ``model.hostpatterns``); no path, query or userinfo.
BindingHost = Annotated[
    str, StringConstraints(min_length=1, max_length=300, pattern=r"^[^/?#@\s]+(://[^/?#@\s]+)?/?$"),
    AfterValidator(_binding_host),
]
#: A stdio server's command line, exactly as its command and args joined by spaces.
CommandLine = Annotated[str, StringConstraints(min_length=1, max_length=4096)]


class CredentialBinding(SpecModel):
    """A Secret of the Actor's namespace, and where a shared Skill may send it."""

    secret_ref: SecretRef
    """The Secret (in the Actor's namespace) a server of a Skill from another
    namespace names in headersFrom or env[].valueFrom.secretKeyRef."""
    hosts: list[BindingHost] = Field(default_factory=list, max_length=MAX_LIST)
    """The URL servers it may be sent to: [scheme://]host[:port] globs (e.g.
    https://mcp.example.com, *.team-b.svc:8080), matched against the server's
    host in its one normal spelling (lowercase, no trailing dot, IDNA, IPv4 in
    dotted decimal); no port: any port."""
    commands: list[CommandLine] = Field(default_factory=list, max_length=MAX_LIST)
    """The stdio servers it may be given to, by their exact command line
    (command and args joined by single spaces)."""


class ActorSpec(SpecModel):
    """An agent: the skills it uses and the policy on them."""

    skills: list[Reference] = Field(default_factory=list, max_length=MAX_LIST)
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
    credentials: list[CredentialBinding] = Field(default_factory=list, max_length=MAX_LIST)
    """Where the Actor's own Secrets may go when a Skill from another namespace names
    them: without an entry binding the Secret to the server's host (or stdio
    command), the set is refused (CredentialNotBound). Servers of Skills in the
    Actor's namespace need none."""
