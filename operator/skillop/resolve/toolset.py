"""The ToolSet document: what an actor's pods read, deterministic to the byte.

Tools are sorted by effective name; servers and Agent Skills by name. The hash
is the sha256 of the document's canonical JSON (sorted keys, no spaces) without
its own ``hash`` field, so equal inputs give equal bytes and equal hashes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any

from skillop.model.canonical import canonical_json, sha256_digest
from skillop.model.manifest import ActorResource
from skillop.model.names import GROUP_VERSION, ObjectRef
from skillop.model.specs import McpServer
from skillop.model.tooldef import ToolDef
from skillop.resolve.entries import Entry

TOOLS_KEY = "tools.json"
#: The most an Actor's ConfigMap may hold (keys and values, in bytes): the API
#: server refuses objects over 1 MiB, and metadata needs room. An Actor whose
#: tool set would not fit is ``TooLarge``, in the operator and the CLI alike.
MAX_CONFIGMAP_BYTES = 900 * 1024


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


def _json_value(value: Any) -> str:
    """``canonical_json(value)``, with shortcuts for strings and lists of strings (the
    encoder json.dumps uses for strings, and its separators)."""
    if isinstance(value, str):
        return encode_basestring(value)
    if isinstance(value, list):
        try:
            return "[" + ",".join(map(encode_basestring, value)) + "]"
        except TypeError:  # not all strings
            pass
    return canonical_json(value)


#: Tool document keys whose values are the ToolDef's own fields, unchanged.
_DEFINITION_KEYS = frozenset({"source", "title", "description", "inputSchema", "outputSchema",
                              "capabilities", "runtime", "mcpServer", "execution"})
#: Tool document keys whose values depend on the actor. Every other key's value
#: must depend on the ToolDef and its declaring skill alone: its JSON is cached
#: per ToolDef (``_tool_json``).
_PER_ACTOR_KEYS = frozenset({"name", "bindingName", "path"})
Template = tuple[str, str, str, str]


def _tool_json(tool: EffectiveTool, path_json: str) -> str:
    """``canonical_json(tool_document(tool))``, without building the document;
    ``path_json`` is the JSON of the tool's path.

    A ToolDef is shared by every actor that reaches it (and an MCP tool's is kept
    from one resolution to the next), so the JSON of all but the per-actor keys is
    built once per ToolDef and declaring skill, from the ToolDef's cached
    fragments; only the binding name and name are encoded here.
    """
    entry = tool.entry
    template = entry.tool.memo.get(entry.skill)
    if template is None:
        template = entry.tool.memo[entry.skill] = _template(tool_document(tool), entry.tool)
    before_binding, before_name, before_path, end = template
    binding = encode_basestring(tool.binding_name)
    name = binding if tool.name == tool.binding_name else encode_basestring(tool.name)
    return f"{before_binding}{binding}{before_name}{name}{before_path}{path_json}{end}"


def _template(doc: dict[str, Any], tool: ToolDef) -> Template:
    """The canonical JSON of ``doc`` as the constant texts around its per-actor
    values, which sort as ``bindingName``, ``name``, ``path``:
    ``texts[0] + json(bindingName) + texts[1] + json(name) + texts[2] + json(path)
    + texts[3]``."""
    fragments = tool.fragments()
    texts: list[str] = []
    text = "{"
    for i, key in enumerate(sorted(doc)):
        text += ("," if i else "") + encode_basestring(key) + ":"
        if key in _PER_ACTOR_KEYS:
            texts.append(text)
            text = ""
        else:
            text += fragments[key] if key in _DEFINITION_KEYS else _json_value(doc[key])
    texts.append(text + "}")
    before_binding, before_name, before_path, end = texts
    return before_binding, before_name, before_path, end


def tool_document(tool: EffectiveTool, path: Sequence[str] | None = None) -> dict[str, Any]:
    """One tool. Optional fields (``title``, ``outputSchema``, ``runtime``,
    ``mcpServer``, ``execution``) are absent when unset; ``digest`` pins the
    definition (see docs/decisions.md); an MCP tool's ``upstreamDigest`` is its
    definition as the server gave it, before overrides (docs/toolset.md). ``path``
    is ``tool.path`` spelled out, when the caller has it."""
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
    if t.execution is not None:
        doc["execution"] = t.execution
    doc["path"] = [ref.canonical for ref in tool.path] if path is None else list(path)
    doc["digest"] = t.digest()
    if t.upstream_digest is not None:
        doc["upstreamDigest"] = t.upstream_digest
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
    if server.tls is not None and server.url is not None:
        # Where the CA bundle is (a reference, as for headersFrom): the gateway
        # trusts it once the pod mounts it (docs/gateway.md, Private CAs).
        doc["tls"] = server.tls.model_dump(by_alias=True, exclude_none=True)
    return doc


def toolset_text(
    *, owner_kind: str, owner: str, tools: Sequence[EffectiveTool],
    servers: Sequence[tuple[ObjectRef, McpServer]],
) -> tuple[str, str]:
    """The document's canonical JSON (what the ConfigMap stores) and its hash.

    Assembled from per-tool JSON whose constant part is cached per ToolDef, so an
    actor's 600-tool set is joined, not serialised; ``toolset_document`` builds
    the same document as a dict, for those who read it (the CLI).
    ``tools`` are in effective-name order (as the resolver gives them).
    """
    paths: dict[int, str] = {}
    body = _header(owner_kind=owner_kind, owner=owner, tools=tools, servers=servers)
    tools_json = [_tool_json(t, _path_json(t.path, paths)) for t in tools]
    digest = _hash(body, tools_json)
    return _canonical({**body, "hash": digest}, tools_json, with_hash=True), digest


def toolset_document(
    *, owner_kind: str, owner: str, tools: Sequence[EffectiveTool],
    servers: Sequence[tuple[ObjectRef, McpServer]], digest: str,
) -> dict[str, Any]:
    """The ToolSet document (``digest``: its hash, from ``toolset_text``), keys in
    the contract's order."""
    paths: dict[int, tuple[str, ...]] = {}
    header = _header(owner_kind=owner_kind, owner=owner, tools=tools, servers=servers)
    return {
        "apiVersion": header["apiVersion"],
        "kind": header["kind"],
        owner_kind: owner,
        "hash": digest,
        "tools": [tool_document(t, _path_names(t.path, paths)) for t in tools],
        "mcpServers": header["mcpServers"],
        "agentSkills": header["agentSkills"],
    }


def _header(*, owner_kind: str, owner: str, tools: Sequence[EffectiveTool],
            servers: Sequence[tuple[ObjectRef, McpServer]]) -> dict[str, Any]:
    """Every key of the document but ``hash`` and ``tools``."""
    used = {(t.entry.skill, t.entry.tool.mcp_server) for t in tools if t.entry.tool.mcp_server}
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "ToolSet",
        owner_kind: owner,
        "mcpServers": [
            server_document(skill, server)
            for skill, server in sorted(servers, key=lambda p: (p[1].name, p[0]))
            if (skill, server.name) in used
        ],
        "agentSkills": [
            {"name": t.name, "skill": t.entry.skill.canonical, "key": t.key}
            for t in tools if t.key is not None
        ],
    }


def _path_json(path: tuple[ObjectRef, ...], memo: dict[int, str]) -> str:
    """``path`` as JSON; memoized by identity like ``_path_names``."""
    found = memo.get(id(path))
    if found is None:
        found = memo[id(path)] = _json_value([ref.canonical for ref in path])
    return found


def _path_names(path: tuple[ObjectRef, ...], memo: dict[int, tuple[str, ...]],
                ) -> tuple[str, ...]:
    """``path`` as canonical names; memoized by identity, as the tools of one skill
    share one path tuple (``memo`` lives for one call, while the tuples are alive)."""
    found = memo.get(id(path))
    if found is None:
        found = memo[id(path)] = tuple(ref.canonical for ref in path)
    return found


def document_hash(doc: dict[str, Any]) -> str:
    """sha256 of the document's canonical JSON, without its ``hash`` field."""
    return _hash(doc, None)


def _hash(doc: dict[str, Any], tools_json: list[str] | None) -> str:
    """``document_hash``; given ``tools_json`` (the canonical JSON of each of
    ``doc["tools"]``), the tools are not serialised again."""
    text = _canonical(doc, tools_json, with_hash=False)
    return sha256_digest(text)


def _canonical(doc: dict[str, Any], tools_json: list[str] | None, *, with_hash: bool) -> str:
    """``canonical_json`` of the document (optionally without ``hash``); given the
    tools' JSON, ``doc`` need not hold ``tools``."""
    body = {k: v for k, v in doc.items() if with_hash or k != "hash"}
    if tools_json is None:
        return canonical_json(body)
    keys = sorted({*body, "tools"})
    return "{" + ",".join(
        f"{encode_basestring(key)}:"
        + ("[" + ",".join(tools_json) + "]" if key == "tools" else canonical_json(body[key]))
        for key in keys
    ) + "}"


def render_document(doc: dict[str, Any]) -> str:
    """The document as the CLI prints it: indented JSON, the contract's key order."""
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def data_size(data: dict[str, str]) -> int:
    """A ConfigMap's data size as the API server counts it: UTF-8 bytes."""
    return sum(len(k.encode()) + len(v.encode()) for k, v in data.items())


def configmap_data(text: str, tools: Sequence[EffectiveTool]) -> dict[str, str]:
    """The ConfigMap's data: ``tools.json``, the document's canonical JSON (sorted
    keys, no spaces: compact, and exactly the bytes that were hashed, plus the
    hash; ``toolset_text``) and one key per Agent Skill body."""
    data = {TOOLS_KEY: text + "\n"}
    for tool in tools:
        if tool.key is not None and tool.entry.tool.body is not None:
            data[tool.key] = tool.entry.tool.body
    return data


def configmap_name(actor: ActorResource) -> str:
    """The Actor's ConfigMap: ``spec.configMapName``, default ``<actor>-tools``."""
    return actor.spec.config_map_name or f"{actor.meta.name}-tools"
