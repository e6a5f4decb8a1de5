"""MCP tools, declared or discovered, into ToolDefs.

Declared tools (``mcpServers[].tools``) and discovered ones (``tools/list``)
take the same path: annotations map onto capabilities with the MCP spec's
defaults for absent hints (a tool that says nothing writes, may destroy and is
open-world), a declared tool's explicit capabilities win field by field, then
the server's ``toolFilter`` applies. The declaring skill's server ``overrides``
are applied by the resolver; a ``readOnly`` there is read as the readOnlyHint.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from skillop.model.canonical import json_digest, sha256_digest
from skillop.model.capabilities import Capabilities, mcp_capabilities
from skillop.model.identitymemo import IdentityMemo
from skillop.model.specs import McpServer
from skillop.model.tooldef import ToolDef


@dataclass(frozen=True, slots=True)
class McpToolInfo:
    """One tool as an MCP server describes it (declared in a Skill or listed live)."""

    name: str
    description: str = ""
    title: str | None = None
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] = field(default_factory=dict)
    capabilities: Capabilities | None = None
    #: ``Tool.execution`` (MCP 2025-11-25), e.g. ``{"taskSupport": "optional"}``.
    execution: dict[str, Any] | None = None


def mcp_identity(server: McpServer, tool: str) -> str:
    return f"mcp:{server.endpoint}#{tool}"


def declared_infos(server: McpServer) -> tuple[McpToolInfo, ...]:
    return tuple(
        McpToolInfo(
            name=t.name, description=t.description, title=t.title,
            input_schema=t.input_schema, output_schema=t.output_schema,
            annotations=dict(t.annotations or {}), capabilities=t.capabilities,
            execution=(t.execution.model_dump(by_alias=True, exclude_none=True)
                       if t.execution is not None else None),
        )
        for t in server.tools
    )


def mcp_tool_defs(server: McpServer, infos: Iterable[McpToolInfo]) -> tuple[ToolDef, ...]:
    """The server's tools that pass its filter, as ToolDefs."""
    filt = server.tool_filter
    return tuple(
        _tool_def(server, info) for info in infos if filt is None or filt.admits(info.name)
    )


class ToolDefMemo(IdentityMemo[tuple[ToolDef, ...]]):
    """``mcp_tool_defs`` results kept from one resolution to the next
    (``model.identitymemo``): a server's ToolDefs depend only on its spec object and its
    tool list, so they are reused while both are the very same objects. Reused
    ToolDefs keep their cached fragments, digests and JSON templates: a batch
    touching 30 Actors of 300 tools each does not rebuild 9,000 definitions.
    """

    def tool_defs(self, owner: object, field: str, server: McpServer,
                  infos: tuple[McpToolInfo, ...] | None) -> tuple[ToolDef, ...]:
        """``mcp_tool_defs(server, infos)``; ``infos`` None means the declared tools."""
        return self.get(owner, field, lambda: mcp_tool_defs(
            server, declared_infos(server) if infos is None else infos), server, infos)


def _tool_def(server: McpServer, info: McpToolInfo) -> ToolDef:
    override = server.overrides.get(info.name)
    claim = override.capabilities.read_only if override and override.capabilities else None
    caps, origins = mcp_capabilities(
        info.annotations, declared=info.capabilities, read_only_claim=claim,
        claimed_by=f"the server's overrides.{info.name}")
    title = info.title if info.title is not None else info.annotations.get("title")
    return ToolDef(
        identity=mcp_identity(server, info.name),
        name=info.name,
        source="mcp",
        description=info.description,
        input_schema=info.input_schema,
        output_schema=info.output_schema,
        capabilities=caps,
        title=title if isinstance(title, str) else None,
        mcp_server=server.name,
        upstream_digest=info_digest(info),
        execution=info.execution,
        origins=origins,
    )


def info_digest(info: McpToolInfo) -> str:
    """sha256 of a tool as its server defines it: what pinning compares, and the
    ToolSet's ``upstreamDigest`` (checked by ``skillop gateway`` at call time)."""
    body = {"name": info.name, "title": info.title, "description": info.description,
            "inputSchema": info.input_schema, "outputSchema": info.output_schema,
            "annotations": info.annotations}
    if info.execution is not None:  # absent before MCP 2025-11-25: digests stay as they were
        body["execution"] = info.execution
    return json_digest(body)


def changed_fields(old: McpToolInfo, new: McpToolInfo) -> list[str]:
    """Which parts of a tool's definition differ, for ToolDefinitionChanged."""
    pairs = {"title": (old.title, new.title), "description": (old.description, new.description),
             "inputSchema": (old.input_schema, new.input_schema),
             "outputSchema": (old.output_schema, new.output_schema),
             "annotations": (old.annotations, new.annotations),
             "execution": (old.execution, new.execution)}
    return [name for name, (a, b) in pairs.items() if a != b]


def tools_digest(infos: tuple[McpToolInfo, ...]) -> str:
    """sha256 over a server's whole tool list (each tool's ``info_digest``)."""
    return sha256_digest("\n".join(sorted(info_digest(i) for i in infos)))
