"""The CRD specs as pydantic models: the one source of truth for their schemas.

The CRDs in ``crds/`` are generated from these models (``skillop.model.crd``), and a
test fails when the two drift. Models are frozen and reject unknown fields, so a
typo in a manifest is an error that names the field, not a silently ignored key.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.config import JsonDict
from pydantic_core import PydanticCustomError

from skillop.model.capabilities import BooleanCapability, Capabilities
from skillop.model.credentials import USERINFO_PATTERN, has_userinfo
from skillop.model.names import (
    OBJECT_NAME_PATTERN,
    SERVER_TOOL_NAME_PATTERN,
    TOOL_NAME_PATTERN,
    ObjectRef,
)

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
GLOB_RE = re.compile(r"^[a-z0-9.*?/\-\[\]!]+$")

MAX_LIST = 256
MAX_TOOLS_PER_LIST = 1024


class SpecModel(BaseModel):
    """Shared configuration: camelCase on the wire, frozen, unknown fields rejected.

    Attribute docstrings become the CRDs' field descriptions (``kubectl explain``):
    one or two sentences that agree with docs/api.md.
    """

    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True,
        use_attribute_docstrings=True,
    )


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


def _one_of_message(first: str, second: str) -> str:
    return f"exactly one of {first} and {second} must be set"


def _one_of_rule(first: str, second: str) -> JsonDict:
    """The CEL rule for two fields (camelCase) of which exactly one is set: what the
    API server checks, with the same message as ``_require_one_of``."""
    return {"rule": f"has(self.{first}) != has(self.{second})",
            "message": _one_of_message(first, second)}


def _require_one_of(a: object, b: object, first: str, second: str) -> None:
    """The model-side twin of ``_one_of_rule`` (the CLI and the webhook see no CEL)."""
    if (a is None) == (b is None):
        raise PydanticCustomError("one_of", _one_of_message(first, second), {})


#: A key of a ConfigMap's or Secret's data (what the API server allows there).
DataKey = Annotated[str, StringConstraints(pattern=r"^[-._a-zA-Z0-9]+$", max_length=253)]


class CaKeyRef(SpecModel):
    """A key of a ConfigMap or Secret in the Skill's namespace holding PEM CA certificates."""

    name: ObjectName
    """The ConfigMap's or Secret's name."""
    key: DataKey = "ca.crt"
    """The key holding the PEM bundle; default ca.crt."""


class McpTls(SpecModel):
    """Trust for an https server signed by a private CA, besides the system's CAs."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [
        _one_of_rule("caConfigMapRef", "caSecretRef"),
    ]})

    ca_config_map_ref: CaKeyRef | None = None
    """A ConfigMap key holding the PEM CA bundle."""
    ca_secret_ref: CaKeyRef | None = None
    """A Secret key holding the PEM CA bundle."""

    @model_validator(mode="after")
    def _one_of(self) -> McpTls:
        _require_one_of(self.ca_config_map_ref, self.ca_secret_ref,
                        "caConfigMapRef", "caSecretRef")
        return self

    def source(self, namespace: str) -> CaSource:
        if self.ca_config_map_ref is not None:
            ref = self.ca_config_map_ref
            return CaSource("ConfigMap", ObjectRef(namespace, ref.name), ref.key)
        assert self.ca_secret_ref is not None
        ref = self.ca_secret_ref
        return CaSource("Secret", ObjectRef(namespace, ref.name), ref.key)


@dataclass(frozen=True, slots=True, order=True)
class CaSource:
    """Where a server's CA bundle is read from: a ConfigMap or Secret key."""

    kind: Literal["ConfigMap", "Secret"]
    ref: ObjectRef
    key: str

    @property
    def text(self) -> str:
        return f"{self.kind}/{self.ref}#{self.key}"




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


class EnvVar(SpecModel):
    """An environment variable for a stdio server: a public value or a Secret key reference."""

    # ``value`` is copied into every ConfigMap reaching the skill; ``valueFrom`` is
    # carried into the ToolSet as the reference it is, for the pod running the
    # server to resolve: skillop never reads it.

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [
        _one_of_rule("value", "valueFrom"),
    ]})

    name: Annotated[str, StringConstraints(min_length=1, max_length=256)]
    """The variable's name."""
    value: Annotated[str, StringConstraints(max_length=4096)] | None = None
    """A public value, copied into every ConfigMap reaching the skill; use valueFrom
    for secrets."""
    value_from: EnvVarSource | None = None
    """A Secret key reference, resolved by the pod that runs the server."""

    @model_validator(mode="after")
    def _value_xor_value_from(self) -> EnvVar:
        _require_one_of(self.value, self.value_from, "value", "valueFrom")
        return self


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
_DURATION_PART = re.compile(r"([0-9]+)(ms|s|m|h)")
_NANOS = {"ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}
#: Polling a server more often than this costs every namespace sharing it a
#: reconnect for nothing: a server that changes more often should announce
#: ``tools.listChanged``, which is followed at once.
MIN_REFRESH_SECONDS = 10
#: The longest duration Kubernetes (Go's time.Duration) represents, in nanoseconds.
_MAX_NANOS = 2**63 - 1


def _duration_nanos(text: str) -> int:
    return sum(int(n) * _NANOS[unit] for n, unit in _DURATION_PART.findall(text))


def duration_seconds(text: str) -> float:
    """``1m30s``, ``500ms``, ``2h``: the sum of the parts, in seconds."""
    return _duration_nanos(text) / 10**9


def _refresh_floor(text: str) -> str:
    nanos = _duration_nanos(text)
    if nanos < MIN_REFRESH_SECONDS * 10**9:
        raise PydanticCustomError(
            "too_short", "refresh interval {d} is below the minimum of {m}s",
            {"d": text, "m": MIN_REFRESH_SECONDS})
    if nanos > _MAX_NANOS:
        raise PydanticCustomError(
            "too_long", "refresh interval {d} is longer than a Kubernetes duration can be",
            {"d": text})
    return text


Duration = Annotated[str, StringConstraints(pattern=r"^([0-9]+(ms|s|m|h))+$", max_length=32),
                     AfterValidator(_refresh_floor)]
#: The same floor, for the API server (CEL's duration() parses Go durations, a
#: superset of the pattern above, and fails beyond Go's range).
REFRESH_RULES: JsonDict = {"x-kubernetes-validations": [
    {"rule": f"duration(self) >= duration('{MIN_REFRESH_SECONDS}s')",
     "message": f"refreshInterval must be at least {MIN_REFRESH_SECONDS}s"},
]}


class McpServer(SpecModel):
    """An MCP server whose tools (all of them, filtered) the skill includes."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [
        _one_of_rule("url", "command"),
        {"rule": "!has(self.command) || !has(self.transport) || self.transport == 'stdio'",
         "message": "a command server uses transport stdio"},
        {"rule": "!has(self.url) || !has(self.transport) || self.transport != 'stdio'",
         "message": "a url server cannot use transport stdio"},
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
    refresh_interval: Duration | None = Field(default=None, json_schema_extra=REFRESH_RULES)
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
    def _url_xor_command(self) -> McpServer:
        _require_one_of(self.url, self.command, "url", "command")
        if self.command is not None and self.transport not in (None, "stdio"):
            raise PydanticCustomError(
                "one_of", "a command server uses transport stdio, not {t}", {"t": self.transport}
            )
        if self.url is not None and self.transport == "stdio":
            raise PydanticCustomError("one_of", "a url server cannot use transport stdio", {})
        return self

    @property
    def effective_transport(self) -> Transport:
        if self.transport is not None:
            return self.transport
        return "streamable-http" if self.url is not None else "stdio"

    @property
    def endpoint(self) -> str:
        """What identifies the server: its URL, or its command line."""
        if self.url is not None:
            return self.url
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
        return ServerKey(self.url, secret, ca)


@dataclass(frozen=True, slots=True)
class ServerKey:
    """One discovery: a server URL and the Secret whose headers are sent to it (or none).

    A tool list fetched with a Secret's credentials is served only to Skills naming
    that same Secret (``namespace/name``), and one fetched without credentials only
    to Skills naming none: no tenant sees a listing made with another's token
    (docs/security.md).
    """

    url: str
    secret: ObjectRef | None = None
    #: The server's own CA bundle (``tls``): a listing trusted through one tenant's
    #: CA is not served to a Skill that did not name it.
    ca: CaSource | None = None

    @property
    def text(self) -> str:
        """An unambiguous one-line form: ``<secret or -> [<ca> ]<url>`` (neither a
        Secret's name nor a CA source has spaces, so where the URL starts is never
        in doubt)."""
        ca = f"{self.ca.text} " if self.ca is not None else ""
        return f"{self.secret or '-'} {ca}{self.url}"

    def __str__(self) -> str:
        return self.url if self.secret is None else f"{self.url} (Secret {self.secret})"


class ConfigMapKeyRef(SpecModel):
    """A key of a ConfigMap in the Skill's namespace."""

    name: ObjectName
    """The ConfigMap's name."""
    key: DataKey = "SKILL.md"
    """The key holding the SKILL.md; default SKILL.md."""


class AgentSkillSource(SpecModel):
    """A SKILL.md, from a ConfigMap key or inline (exactly one): one read-only tool."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [
        _one_of_rule("configMapRef", "inline"),
    ]})

    config_map_ref: ConfigMapKeyRef | None = None
    """A ConfigMap key holding the SKILL.md."""
    inline: Annotated[str, StringConstraints(max_length=262144)] | None = None
    """The SKILL.md text itself."""

    @model_validator(mode="after")
    def _one_of(self) -> AgentSkillSource:
        _require_one_of(self.config_map_ref, self.inline, "configMapRef", "inline")
        return self


class LabelSelectorRequirement(SpecModel):
    """A requirement on one label: key, operator and values."""

    key: Annotated[str, StringConstraints(min_length=1, max_length=317)]
    """The label key."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    """In, NotIn, Exists or DoesNotExist."""
    values: list[Annotated[str, StringConstraints(max_length=63)]] = Field(
        default_factory=list, max_length=MAX_LIST
    )
    """The values for In and NotIn; empty for Exists and DoesNotExist."""


class LabelSelector(SpecModel):
    """Namespaces by their labels; every condition must hold."""

    match_labels: dict[str, str] = Field(default_factory=dict, max_length=MAX_LIST)
    """Labels a namespace must carry, each with exactly this value."""
    match_expressions: list[LabelSelectorRequirement] = Field(
        default_factory=list, max_length=MAX_LIST
    )
    """Requirements the namespace's labels must all meet."""

    def matches(self, labels: dict[str, str]) -> bool:
        if any(labels.get(k) != v for k, v in self.match_labels.items()):
            return False
        return all(_requirement_holds(r, labels) for r in self.match_expressions)


def _requirement_holds(req: LabelSelectorRequirement, labels: dict[str, str]) -> bool:
    present = req.key in labels
    if req.operator == "Exists":
        return present
    if req.operator == "DoesNotExist":
        return not present
    inside = present and labels[req.key] in req.values
    return inside if req.operator == "In" else not inside


class Sharing(SpecModel):
    """Which namespaces may include this skill or reference it from an Actor."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [
        {"rule": "(has(self.from) && self.from == 'Selector') == has(self.selector)",
         "message": "selector is required with from: Selector, and only then"},
    ]})

    from_: Literal["Same", "All", "Selector"] = Field(default="Same", alias="from")
    """Same (default): this namespace only; All: every namespace; Selector: the
    namespaces selector matches."""
    selector: LabelSelector | None = None
    """The namespaces admitted, by label; required with from: Selector, and only then."""

    @model_validator(mode="after")
    def _selector_with_selector(self) -> Sharing:
        if (self.from_ == "Selector") != (self.selector is not None):
            raise PydanticCustomError(
                "one_of", "selector is required with from: Selector, and only then", {}
            )
        return self


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
    refresh_interval: Duration | None = Field(default=None, json_schema_extra=REFRESH_RULES)
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


def _skill_glob(glob: str) -> str:
    problem = glob_problem(glob)
    if problem:
        raise PydanticCustomError("malformed_glob", "glob '{g}' {p}", {"g": glob, "p": problem})
    if "/" not in glob and "*" not in glob:
        # fnmatch would only ever compare it with "namespace/name" and never match:
        # a policy that silently denies (or allows) nothing is worse than an error.
        raise PydanticCustomError(
            "unmatchable_glob",
            "glob '{g}' can never match a skill's canonical name namespace/name (it has"
            " no '/' and no '*'); write e.g. 'team-a/{g}' or '*/{g}'", {"g": glob})
    return glob


#: A glob over canonical skill names (``namespace/name``). The CEL rule makes
#: the API server refuse the globs that can never match, as the CLI does.
SkillGlob = Annotated[
    str, StringConstraints(min_length=1, max_length=317), AfterValidator(_skill_glob),
    Field(json_schema_extra={"x-kubernetes-validations": [{
        "rule": "self.contains('/') || self.contains('*')",
        "message": "a skill glob without '/' or '*' can never match namespace/name"}]}),
]


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


def glob_problem(glob: str) -> str | None:
    """Why a skill-name glob is malformed, or None when it is fine."""
    if not GLOB_RE.fullmatch(glob):
        return "may contain only lowercase letters, digits, '.', '-', '/', '*', '?' and [...]"
    depth = 0
    for ch in glob:
        if ch == "[":
            if depth:
                return "nests '[' inside a character class"
            depth = 1
        elif ch == "]" and depth:
            depth = 0
    if depth:
        return "has an unclosed '['"
    if glob.count("/") > 1:
        return "has more than one '/' (skill names are namespace/name)"
    return None


class ActorSpec(SpecModel):
    """An agent: the skills it uses and the policy on them."""

    skills: list[Reference] = Field(default_factory=list, max_length=MAX_LIST)
    """The Skills the agent uses: name (this namespace) or namespace/name."""
    skill_access_policy: AccessPolicy = Field(default_factory=AccessPolicy)
    """Which of the reached skills and tools the agent may use."""
    config_map_name: ObjectName | None = None
    """The ConfigMap the tool set is written to; default <actor>-tools."""
