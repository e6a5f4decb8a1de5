"""The ToolSet document: what an actor's pods read, deterministic to the byte.

Tools are sorted by effective name; servers and Agent Skills by name. The hash
is the sha256 of the document's canonical JSON (sorted keys, no spaces) without
its own ``hash`` field, so equal inputs give equal bytes and equal hashes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from skillop.model.names import GROUP_VERSION, ObjectRef
from skillop.model.specs import McpServer
from skillop.resolve.entries import Entry

TOOLS_KEY = "tools.json"


@dataclass(frozen=True, slots=True)
class EffectiveTool:
    name: str
    binding_name: str
    entry: Entry
    path: tuple[ObjectRef, ...]

    @property
    def key(self) -> str | None:
        """The ConfigMap key of an Agent Skill's body."""
        if self.entry.tool.source != "agent_skill":
            return None
        return f"agent-skill.{self.binding_name}.md"


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def tool_document(tool: EffectiveTool) -> dict[str, Any]:
    t = tool.entry.tool
    doc: dict[str, Any] = {
        "name": tool.name,
        "bindingName": tool.binding_name,
        "qualifiedName": tool.entry.qualified_name,
        "source": t.source,
        "skill": tool.entry.skill.canonical,
    }
    if t.title is not None:
        doc["title"] = t.title
    doc["description"] = t.description
    doc["inputSchema"] = t.input_schema
    if t.output_schema is not None:
        doc["outputSchema"] = t.output_schema
    doc["capabilities"] = t.capabilities.to_dict()
    if t.runtime is not None:
        doc["runtime"] = t.runtime
    if t.mcp_server is not None:
        doc["mcpServer"] = t.mcp_server
    doc["path"] = [ref.canonical for ref in tool.path]
    doc["digest"] = t.digest()
    return doc


def server_document(skill: ObjectRef, server: McpServer) -> dict[str, Any]:
    doc: dict[str, Any] = {"name": server.name, "skill": skill.canonical,
                           "transport": server.effective_transport}
    if server.url is not None:
        doc["url"] = server.url
    else:
        doc["command"] = list(server.command or [])
        doc["args"] = list(server.args)
        # Literal values are already in the Skill; valueFrom stays a reference.
        doc["env"] = [e.model_dump(by_alias=True, exclude_none=True) for e in server.env]
    if server.headers_from is not None:
        doc["headersFrom"] = {"secretRef": {"name": server.headers_from.secret_ref.name}}
    return doc


def toolset_document(
    *, owner_kind: str, owner: str, tools: Sequence[EffectiveTool],
    servers: Sequence[tuple[ObjectRef, McpServer]],
) -> dict[str, Any]:
    """The document, with ``hash`` filled in. ``owner_kind`` is ``actor`` or ``skill``."""
    used = {(t.entry.skill, t.entry.tool.mcp_server) for t in tools if t.entry.tool.mcp_server}
    doc: dict[str, Any] = {
        "apiVersion": GROUP_VERSION,
        "kind": "ToolSet",
        owner_kind: owner,
        "hash": "",
        "tools": [tool_document(t) for t in sorted(tools, key=lambda t: t.name)],
        "mcpServers": [
            server_document(skill, server)
            for skill, server in sorted(servers, key=lambda p: (p[1].name, p[0]))
            if (skill, server.name) in used
        ],
        "agentSkills": [
            {"name": t.name, "skill": t.entry.skill.canonical, "key": t.key}
            for t in sorted(tools, key=lambda t: t.name) if t.key is not None
        ],
    }
    doc["hash"] = document_hash(doc)
    return doc


def document_hash(doc: dict[str, Any]) -> str:
    body = {k: v for k, v in doc.items() if k != "hash"}
    return "sha256:" + hashlib.sha256(canonical_json(body).encode()).hexdigest()


def render_document(doc: dict[str, Any]) -> str:
    """The document as stored and printed: indented JSON, fixed key order."""
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def configmap_data(doc: dict[str, Any], tools: Sequence[EffectiveTool]) -> dict[str, str]:
    data = {TOOLS_KEY: render_document(doc)}
    for tool in tools:
        if tool.key is not None and tool.entry.tool.body is not None:
            data[tool.key] = tool.entry.tool.body
    return data
