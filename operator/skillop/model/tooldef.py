"""ToolDef: one tool as the resolver sees it, whatever its source.

Every source (registry Tool, MCP server, SKILL.md, built-in group, inline tool)
becomes a ``ToolDef``; the resolver only ever overlays description, title and
capabilities on it. ``identity`` decides what counts as "the same tool".
Schemas are plain JSON objects and are never mutated after construction.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any, Literal

from skillop.model.capabilities import Capabilities
from skillop.model.specs import Override

Source = Literal["builtin", "tool", "mcp", "anonymous", "agent_skill"]


@dataclass(frozen=True, slots=True)
class ToolDef:
    identity: str
    name: str
    source: Source
    description: str
    input_schema: dict[str, Any]
    capabilities: Capabilities
    title: str | None = None
    output_schema: dict[str, Any] | None = None
    runtime: dict[str, Any] | None = None
    mcp_server: str | None = None
    #: An Agent Skill's Markdown body: content for the pod, not part of the definition.
    body: str | None = None

    def with_override(self, override: Override) -> ToolDef:
        """This tool as an includer sees it (the source object is untouched)."""
        caps = self.capabilities
        if override.capabilities is not None:
            caps = caps.overlay(override.capabilities)
        return replace(
            self,
            description=self.description if override.description is None else override.description,
            title=self.title if override.title is None else override.title,
            capabilities=caps,
        )

    def digest(self) -> str:
        """sha256 of what a model is shown: name, description, schemas and capabilities."""
        body = {
            "name": self.name, "title": self.title, "description": self.description,
            "inputSchema": self.input_schema, "outputSchema": self.output_schema,
            "capabilities": self.capabilities.to_dict(),
        }
        raw = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return "sha256:" + hashlib.sha256(raw.encode()).hexdigest()
