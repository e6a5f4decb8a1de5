"""The status of Skills and Actors, as models: the one source of what a status holds.

The CRDs' status schemas are generated from these models, and the operator
builds every status it writes as one of them (``wire()`` is the body sent). A
field the schema does not know would be pruned silently by the API server, and a
list or text over a declared limit would get the whole write rejected; neither
can happen when both sides come from here. The limits are named so that the
builders cut to them (and say so) instead of failing.

Conditions follow ``metav1.Condition`` (KEP-1623): ``Ready`` is always present,
``lastTransitionTime`` changes only when a condition's status does.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError
from pydantic.alias_generators import to_camel

from skillop.model.specbase import empty_list

MAX_STATUS_TOOLS = 256
MAX_CONDITIONS = 16
MAX_SKILLS = 4096
MAX_WARNINGS = 64
MAX_PRUNED = 1024
MAX_SERVERS = 64
MAX_POLICIES = 256
MAX_OUTDATED_PODS = 64
MAX_CREDENTIALS = 256
MAX_TEXT = 4096
MAX_MESSAGE = 32768
Short = Annotated[str, StringConstraints(max_length=1024)]
Text = Annotated[str, StringConstraints(max_length=MAX_TEXT)]


def utcnow() -> str:
    """Now, as statuses write times: RFC 3339, UTC, whole seconds."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def clip(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` cut to ``limit`` characters, marked when cut."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


class StatusModel(BaseModel):
    """Shared configuration: camelCase on the wire, frozen, unknown fields rejected.

    Attribute docstrings become the CRDs' field descriptions (``kubectl explain``).
    """

    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True,
        defer_build=True,  # built on first use, as the specs (model.specbase)
    )

    def wire(self) -> dict[str, Any]:
        """The JSON body the API server gets: camelCase, unset optional fields absent."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class Condition(StatusModel):
    """One aspect of the object's state, as a Kubernetes metav1.Condition."""

    type: Annotated[str, StringConstraints(max_length=316)]
    """Ready (always present), ResolvedRefs, and Stalled or Reconciling only while True;
    Skills also carry Discovered and Pinned."""
    status: Literal["True", "False", "Unknown"]
    """True, False or Unknown."""
    reason: Annotated[str, StringConstraints(max_length=1024)]
    """A CamelCase code for the condition's state, e.g. Resolved, RefNotFound,
    CycleDetected, TooManyTools."""
    message: Annotated[str, StringConstraints(max_length=MAX_MESSAGE)] = ""
    """What a human needs to know: the problems found, or a summary of the result."""
    observed_generation: int | None = Field(default=None, ge=0)
    """The metadata.generation the condition was computed from."""
    last_transition_time: Annotated[str, StringConstraints(max_length=64)]
    """When status last changed (RFC 3339); a new reason or message keeps it."""


class StatusTool(StatusModel):
    """One tool of the resolved set, as the ToolSet document names it."""

    name: Short
    """The tool's name in the set: its own name, or namespace/skill.tool when
    different tools share a name."""
    binding_name: Short
    """The function name to give the LLM API: ^[a-zA-Z0-9_-]{1,64}$, unique and stable."""
    source: Short
    """Where the tool comes from, which tells how to call it: tool, anonymous, builtin,
    mcp or agent_skill."""
    skill: Short
    """The skill that contributes the tool, as namespace/name."""
    qualified_name: Short | None = None
    """namespace/skill.tool: the name the tool would get in a conflict."""
    digest: Short | None = None
    """sha256 of the definition a model sees; log it with each call."""


class PrunedStatus(StatusModel):
    """A skill or tool the access policy removed, and why."""

    kind: Literal["Skill", "Tool"]
    """Skill or Tool."""
    name: Short
    """The skill's canonical name (namespace/name) or the tool's name."""
    reason: Short
    """Which rule removed it: a glob that did not allow it or denied it, a denied or
    missing capability, or reached only through pruned skills."""
    skill: Short | None = None
    """For a tool: the skill that contributes it (namespace/name)."""
    policy: Short | None = None
    """The SkillPolicy or ClusterSkillPolicy that removed it, e.g. ClusterSkillPolicy
    tenants; absent when the Actor's own skillAccessPolicy did."""
    rule: Short | None = None
    """The policy's rule that removed it: allow, deny, denyCapabilities,
    requireCapabilities, mcpServers.allow, mcpServers.allowFor, mcpServers.tools or
    sources.deny."""


class CredentialStatus(StatusModel):
    """One Secret of the Actor's namespace its tool set sends, and where (names only)."""

    secret: Short
    """The Secret's name, in the Actor's namespace."""
    key: Short | None = None
    """The key, for a stdio server's env var (a headersFrom Secret sends every key)."""
    server: Short
    """The MCP server's name in its skill's spec.mcpServers."""
    skill: Short
    """The skill declaring the server (namespace/name)."""
    host: Short | None = None
    """Where a URL server's requests go: scheme://host[:port], the host in its normal
    spelling (a spec.credentials hosts entry matching exactly it)."""
    command: Text | None = None
    """A stdio server's command line (command and args)."""


class AppliedPolicyStatus(StatusModel):
    """A SkillPolicy or ClusterSkillPolicy that applies to the Actor."""

    kind: Literal["SkillPolicy", "ClusterSkillPolicy"]
    """SkillPolicy or ClusterSkillPolicy."""
    name: Short
    """The policy's name (namespace/name for a SkillPolicy)."""
    generation: int = Field(default=0, ge=0)
    """The policy's metadata.generation that was applied."""


class McpServerStatus(StatusModel):
    """Discovery state of one of the Skill's MCP servers."""

    name: Short
    """The server's name in spec.mcpServers."""
    tool_count: int = 0
    """How many tools the server's last listing returned (its declared tools until one
    succeeds, and for stdio servers)."""
    last_sync: Short | None = None
    """When a listing first returned the server's current tool list (RFC 3339)."""
    error: Text | None = None
    """Why the last listing failed, in one line; the last good list is kept meanwhile."""
    url: Annotated[str, StringConstraints(max_length=2048)] | None = None
    """The server's URL; absent for stdio servers, which are never contacted."""
    tools_digest: Short | None = None
    """sha256 of the server's current tool list (lastSync moves only when it changes)."""
    pinned_digests: dict[Short, Short] | None = Field(default=None, max_length=1024)
    """With pin: true, the accepted definition digest of each tool, by tool name."""


# -- reading back what was written ----------------------------------------------------
# The write side forbids unknown fields (what the schema does not know, the API
# server would prune). Reading back is the other way round: a status written by
# another version of skillop may hold fields this one does not know, and must still
# be read (docs/decisions.md, "Reading statuses back").
_READ = ConfigDict(extra="ignore", frozen=True, alias_generator=to_camel,
                   populate_by_name=True)


class _RecordedServer(McpServerStatus):
    model_config = _READ


class _RecordedTool(StatusTool):
    model_config = _READ


class _RecordedCredential(CredentialStatus):
    model_config = _READ


class RecordedCondition(BaseModel):
    """What is read back of a condition: enough to keep its lastTransitionTime."""

    model_config = _READ
    type: str
    status: str
    last_transition_time: str | None = None


class _Recorded(BaseModel):
    model_config = _READ

    @classmethod
    def read(cls, status: Mapping[str, Any]) -> Self:
        """``status`` read back; what no longer parses (another version's shape, a
        hand edit) counts as not recorded: that field, or that list entry, only."""
        try:
            return cls.model_validate(status)
        except ValidationError as err:
            return cls.model_validate(_without(status, err))


class RecordedStatus(_Recorded):
    """The fields of an old status the operator reads on every reconcile, and only those.

    A whole ``ActorStatus`` would validate up to 256 tool items to use a hash and a
    few condition times. The tool list is read by ``recorded_tools`` when an Actor's
    hash changed, which is when old and new tools are compared, and by
    ``RecordedToolSet`` when a broken spec keeps the last good set described.
    """

    observed_generation: int | None = None
    conditions: tuple[RecordedCondition, ...] = ()
    tools_hash: str | None = None
    outdated_pods: tuple[str, ...] = ()

    def condition(self, type_: str) -> RecordedCondition | None:
        return next((c for c in self.conditions if c.type == type_), None)


class RecordedToolSet(_Recorded):
    """The last good tool set an old status describes (kept while a spec is broken)."""

    tool_count: int | None = None
    tools_hash: Short | None = None
    tool_tokens: int | None = None
    tools: tuple[_RecordedTool, ...] | None = Field(default=None, max_length=MAX_STATUS_TOOLS)
    credentials: tuple[_RecordedCredential, ...] | None = Field(
        default=None, max_length=MAX_CREDENTIALS)


def _without(status: Mapping[str, Any], err: ValidationError) -> dict[str, Any]:
    """``status`` without the fields and list entries ``err`` names."""
    fields: set[str] = set()
    entries: dict[str, set[int]] = {}
    for error in err.errors():
        loc = error["loc"]
        if len(loc) > 1 and isinstance(loc[1], int) and isinstance(status.get(str(loc[0])), list):
            entries.setdefault(str(loc[0]), set()).add(loc[1])
        else:
            fields.add(str(loc[0]))
    out = {k: v for k, v in status.items() if k not in fields}
    for name, bad in entries.items():
        out[name] = [e for i, e in enumerate(status[name]) if i not in bad]
    return out


_Entry = TypeVar("_Entry", bound=StatusModel)


def recorded_servers(status: Mapping[str, Any]) -> dict[str, McpServerStatus]:
    """A Skill status's ``mcpServers`` as it was written, by name."""
    return _recorded(status.get("mcpServers"), _RecordedServer, lambda s: s.name)


def recorded_tools(status: Mapping[str, Any]) -> dict[str, StatusTool]:
    """A status's ``tools`` as they were written, by qualified name."""
    return _recorded(status.get("tools"), _RecordedTool, lambda t: t.qualified_name)


def _recorded(entries: object, model: type[_Entry], key: Callable[[_Entry], str | None],
              ) -> dict[str, _Entry]:
    """Status list entries read back through their (read-side) model, by ``key``. An
    entry that no longer parses (another version's shape, a hand edit), or has no
    key, is skipped: it is then as if nothing had been recorded for it."""
    out: dict[str, _Entry] = {}
    for entry in entries if isinstance(entries, list) else ():
        try:
            parsed = model.model_validate(entry)
        except ValidationError:
            continue
        name = key(parsed)
        if name:
            out.setdefault(name, parsed)
    return out


class CommonStatus(StatusModel):
    observed_generation: int | None = None
    """The metadata.generation this status was computed from."""
    conditions: list[Condition] = Field(default_factory=empty_list, max_length=MAX_CONDITIONS)
    """The latest observations of the object's state; Ready is always present."""
    tool_count: int | None = None
    """How many tools the resolved set holds."""
    tools_hash: Short | None = None
    """sha256 of the resolved set's ToolSet document."""
    tool_tokens: int | None = None
    """What the resolved tools' definitions cost a model, in tokens (name, description
    and input schema of each, cl100k_base); the ToolSet document has each tool's."""
    tools: list[StatusTool] | None = Field(default=None, max_length=MAX_STATUS_TOOLS)
    """The resolved tools, sorted by name; at most 256 (toolCount counts them all).
    Absent until a tool set was resolved; an empty list is an empty set."""
    skills: list[Short] = Field(default_factory=empty_list, max_length=MAX_SKILLS)
    """Every skill reached, as namespace/name."""
    warnings: list[Text] = Field(default_factory=empty_list, max_length=MAX_WARNINGS)
    """Problems that do not stop resolution, e.g. a failed MCP refresh or a conflicting
    override; at most 64."""


class ActorStatus(CommonStatus):
    """What the Actor resolved to: its tool set, the ConfigMap holding it, and what the
    access policy pruned."""

    config_map_name: Short | None = None
    """The ConfigMap holding the ToolSet document (key tools.json)."""
    pruned: list[PrunedStatus] = Field(default_factory=empty_list, max_length=MAX_PRUNED)
    """Skills and tools the access policy removed, each with its reason."""
    policies: list[AppliedPolicyStatus] | None = Field(default=None, max_length=MAX_POLICIES)
    """The SkillPolicies and ClusterSkillPolicies applied, each with its generation;
    absent when none applies."""
    outdated_pods: list[Short] | None = Field(default=None, max_length=MAX_OUTDATED_PODS)
    """Running pods of this Actor (label skillop.dev/actor) whose injected gateway
    lacks a Secret or CA bundle the current tool set names; restart them (kubectl
    rollout restart) to mount it. Absent when none is."""
    credentials: list[CredentialStatus] | None = Field(default=None, max_length=MAX_CREDENTIALS)
    """Which Secret of the Actor's namespace goes to which host (or stdio command),
    and which server of which skill sends it: the ConfigMap's tool set's (the last
    good one while Ready is False); names only, never values. Absent when the set
    sends none."""


class SkillStatus(CommonStatus):
    """What the Skill flattens to, and the discovery state of its MCP servers."""

    mcp_servers: list[McpServerStatus] = Field(default_factory=empty_list, max_length=MAX_SERVERS)
    """One entry per MCP server: tool count, last sync, digest, and the last error."""


class PolicyStatus(StatusModel):
    """Whether the operator has read the policy: Ready once it is in force."""

    observed_generation: int | None = None
    """The metadata.generation in force."""
    conditions: list[Condition] = Field(default_factory=empty_list, max_length=MAX_CONDITIONS)
    """Ready: True once the policy applies to the Actors it selects, False when its
    spec is invalid (and then it applies to none)."""
