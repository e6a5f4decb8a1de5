"""The specs' shared value types and a Skill's tools: declared, inline, referenced,
included, and how an includer overrides them (docs/api.md, Skill)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    StringConstraints,
    model_validator,
)
from pydantic_core import PydanticCustomError

from skillop.model.capabilities import Capabilities
from skillop.model.names import (
    OBJECT_NAME_PATTERN,
    SERVER_TOOL_NAME_PATTERN,
    TOOL_NAME_PATTERN,
)
from skillop.model.specbase import (
    MAX_TOOLS_PER_LIST,
    SpecModel,
    empty_dict,
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
        default_factory=empty_dict, max_length=MAX_TOOLS_PER_LIST
    )
    """Overrides keyed by tool name in the included skill's flattened set;
    capabilities may only tighten."""
