"""The ToolSet document (docs/toolset.md): one model for its writer and its readers.

The resolver writes it (``resolve.toolset`` assembles its canonical JSON from
these fields, byte for byte what ``ToolSetDocument.canonical()`` gives), the CLI
prints it and ``skillop gateway`` reads it back with ``ToolSetDocument.parse``.
What the ConfigMap holds, its keys and its size limit are stated here once, so
that the writer, the gateway, the tests and the benchmarks cannot drift apart.

Readers ignore keys they do not know (a gateway may be older than the operator
that wrote the document); the shapes copied from a Skill (``env``,
``headersFrom``, ``tls``) keep the Skill's own rules.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from skillop.model.caller_rules import CallerMatch, Effect, LimitScope
from skillop.model.callers import CallersSpec
from skillop.model.canonical import canonical_json
from skillop.model.exchange import TokenExchange
from skillop.model.names import GROUP_VERSION
from skillop.model.specbase import empty_dict
from skillop.model.specs import ApprovalSettings, EnvVar, HeadersFrom, McpTls

#: The ConfigMap key holding the document.
TOOLS_KEY = "tools.json"
#: An Actor's ConfigMap is ``<actor>`` + this, unless ``spec.configMapName`` says otherwise.
CONFIGMAP_SUFFIX = "-tools"
#: The most an Actor's ConfigMap may hold (keys and values, in bytes): the API
#: server refuses objects over 1 MiB, and metadata needs room. A set whose
#: ``tools.json`` (with the Agent Skill bodies) fits is stored as it always was; a
#: larger one is stored packed (below); a reader refuses a larger ``tools.json``
#: as not one of ours.
MAX_CONFIGMAP_BYTES = 900 * 1024
#: A packed set (docs/toolset.md, Large sets): ``tools.json``'s very bytes cut
#: into pieces at tool boundaries chosen by content, each piece a gzip member of
#: its own under a ``binaryData`` key named by where it is and what it holds
#: (``chunk_key``), in the Actor's ConfigMap or a part ``<configmap>-part-<i>``.
#: Concatenated in the index's order the members are one gzip file (RFC 1952: a
#: series of members): ``gunzip`` reads it whole.
PACKED_KEY = "tools.json.gz"
#: A packed set's index (``PackedIndex``), in the Actor's ConfigMap: the document's
#: hash and where each chunk is, with its sha256. It is what makes the chunks one
#: version: the kubelet may show a new index beside an old part, and a reader
#: waits until every chunk is the one the index names.
INDEX_KEY = "tools.index.json"
#: The most ConfigMaps an Actor's set is stored in (its own and ``MAX_PARTS - 1``
#: parts, fixed names all of which the injected gateway mounts): over it the set
#: is ``TooLarge``.
MAX_PARTS = 4
#: The most chunks an index names.
MAX_CHUNKS = 4096
#: The most bytes a packed document may decompress to: a reader refuses more.
MAX_DOCUMENT_BYTES = 128 * 1024 * 1024
#: ``bindingName``'s grammar: what LLM APIs accept as a function name.
BINDING_NAME_PATTERN = r"^[a-zA-Z0-9_-]{1,64}$"
#: The gateway's own tools in ``disclosure: Search`` (docs/gateway.md): they take
#: precedence over a set tool of the same bindingName in the listing, which then
#: stays reachable through ``call_tool``.
SEARCH_TOOL = "search_tools"
CALL_TOOL = "call_tool"
#: ``agent_skill_key``'s results: one file name in the mounted directory, never a path.
AGENT_SKILL_KEY_PATTERN = r"^agent-skill\.[a-zA-Z0-9_-]{1,64}\.md$"

Owner = Literal["actor", "skill"]


def default_configmap_name(actor_name: str) -> str:
    """The ConfigMap an Actor's set is written to when it names none."""
    return f"{actor_name}{CONFIGMAP_SUFFIX}"


def part_configmap_name(configmap: str, index: int) -> str:
    """The ConfigMap holding chunk ``index`` (>= 1) of the set packed for ``configmap``."""
    return f"{configmap}-part-{index}"


def chunk_key(slot: int, sha256: str) -> str:
    """The ``binaryData`` key of the chunk whose digest is ``sha256`` (``sha256:<hex>``)
    in ConfigMap ``slot`` of a packed set (0: the Actor's own, ``i``: part ``i``).
    Named by content, so a part holds a chunk of the next version beside one of
    the last; named by slot too, so no key is ever in two ConfigMaps of one
    projected volume at once (a chunk moved to a part is a new key)."""
    return f"{PACKED_KEY}.{slot}.{sha256.removeprefix('sha256:')[:CHUNK_KEY_HEX]}"


#: Hex digits of a chunk's sha256 in its key: enough to tell an Actor's chunks
#: apart; the index carries the whole digest, which the reader checks.
CHUNK_KEY_HEX = 16


def agent_skill_key(binding_name: str) -> str:
    """The ConfigMap key of an Agent Skill's Markdown body."""
    return f"agent-skill.{binding_name}.md"


class DocumentModel(BaseModel):
    """camelCase on the wire, frozen; unknown keys ignored (newer writers)."""

    model_config = ConfigDict(extra="ignore", frozen=True, alias_generator=to_camel,
                              populate_by_name=True,
                              defer_build=True)  # built on first use (model.specbase)


class ToolEntry(DocumentModel):
    """One tool of the set. Field order is the contract's (``skillop tools -o json``)."""

    name: str = Field(min_length=1)
    binding_name: str = Field(pattern=BINDING_NAME_PATTERN)
    qualified_name: str
    source: str
    skill: str
    title: str | None = None
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    output_schema: dict[str, Any] | None = None
    capabilities: dict[str, Any] = Field(default_factory=empty_dict)
    runtime: dict[str, Any] | None = None
    mcp_server: str | None = None
    #: ``mcp`` only: the tool's name on its server (``name`` may be qualified to
    #: break a conflict, and ``qualifiedName`` carries the skill).
    upstream_name: str | None = None
    execution: dict[str, Any] | None = None
    path: tuple[str, ...] = ()
    digest: str = ""
    #: What the model is sent for the tool (name, description, input schema), in
    #: tokens of ``TokenCount.encoding``.
    tokens: int = Field(default=0, ge=0)
    upstream_digest: str | None = None


class ServerEntry(DocumentModel):
    """An MCP server that a tool of the set names: a URL, or a stdio command."""

    name: str = Field(min_length=1)
    skill: str
    transport: str = "streamable-http"
    url: str | None = None
    command: tuple[str, ...] | None = None
    args: tuple[str, ...] | None = None
    env: tuple[EnvVar, ...] | None = None
    headers_from: HeadersFrom | None = None
    tls: McpTls | None = None
    #: Calls carry a token exchanged for the caller's (no secret: what to ask for).
    token_exchange: TokenExchange | None = None

    @property
    def key(self) -> tuple[str, str]:
        """The server in the set: (declaring skill, server name), as tools name it."""
        return (self.skill, self.name)

    def secrets(self) -> tuple[str, ...]:
        """The Secrets this server's connection reads (headers, env, CA)."""
        names = {var.value_from.secret_key_ref.name for var in self.env or ()
                 if var.value_from is not None}
        if self.headers_from is not None:
            names.add(self.headers_from.secret_ref.name)
        if self.tls is not None and self.tls.ca()[0] == "Secret":
            names.add(self.tls.ca()[1].name)
        return tuple(sorted(names))

    def configmaps(self) -> tuple[str, ...]:
        """The ConfigMaps this server's connection reads (its CA bundle)."""
        if self.tls is None or self.tls.ca()[0] != "ConfigMap":
            return ()
        return (self.tls.ca()[1].name,)


class AgentSkillEntry(DocumentModel):
    """Where an Agent Skill's body is: a key of the same ConfigMap."""

    name: str
    skill: str
    key: str = Field(pattern=AGENT_SKILL_KEY_PATTERN)


class TokenCount(DocumentModel):
    """What the set's tool definitions cost a model: the sum of the tools' ``tokens``."""

    encoding: str
    total: int = Field(ge=0)


class DisclosureEntry(DocumentModel):
    """``disclosure: Search``: list only ``pinned`` (binding names of set tools), plus
    the gateway's search and call tools. Absent: every tool is listed."""

    mode: Literal["Search"]
    pinned: tuple[str, ...] = ()


class CallerRuleEntry(DocumentModel):
    """A caller rule of the Actor or of a policy, with the tools it covers
    (docs/api.md, Caller rules and rate limits). ``callers`` keeps the spec's
    strict model: a gateway that cannot read a match refuses the set rather than
    match other callers than the rule names."""

    #: Where the rule is written: ``Actor team-a/bot``, ``SkillPolicy team-a/p``.
    origin: str
    #: Its place in that object's ``callerRules``, from 1.
    rule: int = Field(ge=1)
    effect: Effect
    callers: CallerMatch = Field(default_factory=CallerMatch)
    #: The bindingNames of the tools it covers.
    tools: tuple[str, ...] = ()


class RateLimitEntry(DocumentModel):
    """A rate limit of the Actor or of a policy, with the tools it covers."""

    origin: str
    #: Its place in that object's ``rateLimits``, from 1.
    limit: int = Field(ge=1)
    calls: int = Field(ge=1)
    per_seconds: int = Field(ge=1)
    per: LimitScope = "CallerAndTool"
    callers: CallerMatch | None = None
    tools: tuple[str, ...] = ()


class ToolSetDocument(DocumentModel):
    """The document; ``actor`` or ``skill`` names its owner."""

    api_version: str = GROUP_VERSION
    kind: Literal["ToolSet"] = "ToolSet"
    actor: str | None = None
    skill: str | None = None
    hash: str = ""
    tools: tuple[ToolEntry, ...] = ()
    mcp_servers: tuple[ServerEntry, ...] = ()
    agent_skills: tuple[AgentSkillEntry, ...] = ()
    #: How the gateway gets calls approved: the Actor's ``spec.approval``, present
    #: only when the Actor sets it (the default is a ToolCallApproval, 300 s).
    approval: ApprovalSettings | None = None
    #: Whose tokens the gateway verifies: the Actor's ``spec.callers``, when set.
    callers: CallersSpec | None = None
    #: Beyond the contract's keys, so after them (docs/decisions.md).
    tokens: TokenCount | None = None
    disclosure: DisclosureEntry | None = None
    #: Rules per caller and rate limits, absent when there are none (so sets
    #: without them keep their bytes and hash).
    caller_rules: tuple[CallerRuleEntry, ...] | None = None
    rate_limits: tuple[RateLimitEntry, ...] | None = None

    @classmethod
    def parse(cls, raw: bytes | str) -> ToolSetDocument:
        """The document in ``raw`` (JSON); raises pydantic's ``ValidationError``."""
        return cls.model_validate_json(raw)

    def as_dict(self) -> dict[str, Any]:
        """The document as JSON values, keys in the contract's order, unset
        optional fields absent (as the writer leaves them out)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def canonical(self) -> str:
        """Its canonical JSON: what ``tools.json`` holds (less the final newline)."""
        return canonical_json(self.as_dict())



class PackedChunk(DocumentModel):
    """One chunk of a packed set: where it is and what it must be."""

    key: str = Field(pattern=r"^tools\.json\.gz\.[0-9]\.[0-9a-f]{16}$")
    config_map: str = Field(min_length=1)
    #: sha256 of the chunk's bytes (``sha256:<hex>``).
    sha256: str
    size: int = Field(ge=0)


class PackedIndex(DocumentModel):
    """``tools.index.json``: how a packed set's chunks make ``tools.json``."""

    kind: Literal["PackedToolSet"] = "PackedToolSet"
    #: The document's own ``hash``: the same set the Actor's status names.
    hash: str
    encoding: Literal["gzip"] = "gzip"
    #: The bytes of ``tools.json`` once decompressed.
    size: int = Field(ge=0, le=MAX_DOCUMENT_BYTES)
    #: In order: each a gzip member, their concatenation ``tools.json``'s gzip.
    chunks: tuple[PackedChunk, ...] = Field(min_length=1, max_length=MAX_CHUNKS)

    @classmethod
    def parse(cls, raw: bytes | str) -> PackedIndex:
        return cls.model_validate_json(raw)

    def text(self) -> str:
        """What the ConfigMap holds: canonical JSON and a newline."""
        return canonical_json(self.model_dump(mode="json", by_alias=True)) + "\n"
