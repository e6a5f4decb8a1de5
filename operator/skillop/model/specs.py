"""The CRD specs as pydantic models: the one source of truth for their schemas.

A Skill's spec is here; its tools are in ``toolspecs``, its MCP servers in
``mcpserver``, an Actor's spec in ``actorspec`` (their public names are
re-exported from here, where the specs are looked for).

The CRDs in ``crds/`` are generated from these models (``skillop.model.crd``), and a
test fails when the two drift. Models are frozen and reject unknown fields, so a
typo in a manifest is an error that names the field, not a silently ignored key.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from skillop.model.actorspec import (
    AccessPolicy,
    ActorSpec,
    ApprovalSettings,
    CredentialBinding,
    Disclosure,
)
from skillop.model.mcpserver import (
    MIN_REFRESH_SECONDS,
    DataKey,
    Duration,
    EnvVar,
    HeadersFrom,
    McpServer,
    McpTls,
)
from skillop.model.selectors import LabelSelector
from skillop.model.specbase import (
    MAX_LIST,
    MAX_TOOLS_PER_LIST,
    Rule,
    SpecModel,
    cel_rules,
    check_rules,
    empty_list,
    one_of,
)
from skillop.model.toolspecs import (
    MAX_MCP_DESCRIPTION,
    DeclaredMcpTool,
    Description,
    Include,
    InlineTool,
    ObjectName,
    Override,
    ToolRefEntry,
    ToolSpec,
)


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
    tools: list[ToolRefEntry] = Field(default_factory=empty_list, max_length=MAX_TOOLS_PER_LIST)
    """Registry Tools by reference, each with optional overrides."""
    includes: list[Include] = Field(default_factory=empty_list, max_length=MAX_LIST)
    """Other Skills whose flattened tools this skill includes, in order."""
    mcp_servers: list[McpServer] = Field(default_factory=empty_list, max_length=64)
    """MCP servers whose tools this skill includes."""
    agent_skills: list[AgentSkillSource] = Field(default_factory=empty_list, max_length=MAX_LIST)
    """Agent Skills (SKILL.md), each one read-only tool named by its frontmatter."""
    builtins: list[BuiltinGroup] = Field(default_factory=empty_list, max_length=64)
    """Built-in tool groups: file_operations, directory_operations, git_operations,
    shell_operations."""
    anonymous_tools: list[InlineTool] = Field(default_factory=empty_list,
                                              max_length=MAX_TOOLS_PER_LIST)
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

__all__ = [
    "MAX_MCP_DESCRIPTION",
    "MIN_REFRESH_SECONDS",
    "AccessPolicy",
    "ActorSpec",
    "AgentSkillSource",
    "ApprovalSettings",
    "ConfigMapKeyRef",
    "CredentialBinding",
    "DeclaredMcpTool",
    "Disclosure",
    "EnvVar",
    "HeadersFrom",
    "InlineTool",
    "McpServer",
    "McpTls",
    "ObjectName",
    "Override",
    "Sharing",
    "SkillSpec",
    "ToolSpec",
]
