"""The ToolSet document: what an actor's pods read, deterministic to the byte.

Tools are sorted by effective name; servers and Agent Skills by name. The hash
is the sha256 of the document's canonical JSON (sorted keys, no spaces) without
its own ``hash`` field, so equal inputs give equal bytes and equal hashes.
Each tool's JSON comes from ``resolve.tooljson``; how the text is stored in
ConfigMaps is ``resolve.layout``.
"""

from __future__ import annotations

from collections.abc import Sequence
from json.encoder import encode_basestring
from typing import Any

from skillop.model.callers import CallersSpec
from skillop.model.canonical import canonical_json, sha256_digest
from skillop.model.mcpserver import CONNECTION_FIELDS, STDIO_FIELDS
from skillop.model.names import ObjectRef
from skillop.model.specs import ApprovalSettings, Disclosure, McpServer
from skillop.model.toolset import (
    CALL_TOOL,
    SEARCH_TOOL,
    AgentSkillEntry,
    DisclosureEntry,
    DocumentModel,
    Owner,
    ServerEntry,
    TokenCount,
    ToolSetDocument,
)
from skillop.resolve.caller_rules import NO_SECTION, CallerSection
from skillop.resolve.layout import (
    SIZE_CONTRIBUTORS,
    Layout,
    StoredConfigMap,
    configmap_data,
    configmap_layout,
    configmap_name,
    data_size,
    tools_json,
)
from skillop.resolve.tokens import ENCODING
from skillop.resolve.tooljson import EffectiveTool, path_json, path_names, tool_entry, tool_json

#: This module's own, and what callers import from here though one tool's entry
#: is built in ``resolve.tooljson`` and the set is stored by ``resolve.layout``.
__all__ = [
    "SIZE_CONTRIBUTORS", "EffectiveTool", "Layout", "StoredConfigMap", "configmap_data",
    "configmap_layout", "configmap_name", "data_size", "disclosure_entry", "document_hash",
    "server_entry", "tool_entry", "tools_json", "toolset_document", "toolset_text",
    "used_servers",
]


def server_entry(skill: ObjectRef, server: McpServer) -> ServerEntry:
    """A server as the set names it: every connection field of the Skill's, as
    written (Secrets and CA bundles only as references: the gateway reads them
    once the pod mounts them, docs/gateway.md), lists as tuples, and each only
    for the kind of server that has it."""
    stdio = server.url is None
    fields = {name: _carried(getattr(server, name)) for name in CONNECTION_FIELDS
              if (name in STDIO_FIELDS) == stdio}
    return ServerEntry.model_construct(
        name=server.name, skill=skill.canonical,
        **{**fields, "transport": server.effective_transport})


def _carried(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _entry_dict(entry: DocumentModel) -> dict[str, Any]:
    return entry.model_dump(mode="json", by_alias=True, exclude_none=True)


def toolset_text(
    *, owner_kind: Owner, owner: str, tools: Sequence[EffectiveTool],
    servers: tuple[ServerEntry, ...], disclosure: DisclosureEntry | None = None,
    approval: ApprovalSettings | None = None, callers: CallersSpec | None = None,
    rules: CallerSection = NO_SECTION,
) -> tuple[str, str]:
    """The document's canonical JSON (what the ConfigMap stores) and its hash.

    Assembled from per-tool JSON whose constant part is cached per ToolDef, so an
    actor's 600-tool set is joined, not serialised; ``toolset_document`` builds
    the same document as a dict, for those who read it (the CLI).
    ``tools`` are in effective-name order (as the resolver gives them).
    """
    paths: dict[int, str] = {}
    counts = [t.tokens for t in tools]  # once, for the header's total and each tool's line
    body = _header(owner_kind=owner_kind, owner=owner, tools=tools, servers=servers,
                   disclosure=disclosure, approval=approval, callers=callers, rules=rules,
                   total=sum(counts))
    tools_json = [tool_json(t, path_json(t.path, paths), tokens=n)
                  for t, n in zip(tools, counts, strict=True)]
    digest = _hash(body, tools_json)
    return _canonical({**body, "hash": digest}, tools_json, with_hash=True), digest


def toolset_document(
    *, owner_kind: Owner, owner: str, tools: Sequence[EffectiveTool],
    servers: tuple[ServerEntry, ...], digest: str,
    disclosure: DisclosureEntry | None = None,
    approval: ApprovalSettings | None = None, callers: CallersSpec | None = None,
    rules: CallerSection = NO_SECTION,
) -> ToolSetDocument:
    """The ToolSet document (``digest``: its hash, from ``toolset_text``)."""
    paths: dict[int, tuple[str, ...]] = {}
    return ToolSetDocument.model_construct(
        actor=_owner(owner_kind, "actor", owner), skill=_owner(owner_kind, "skill", owner),
        hash=digest,
        tools=tuple(tool_entry(t, path_names(t.path, paths)) for t in tools),
        mcp_servers=servers, agent_skills=_agent_skills(tools),
        tokens=_token_count(tools), disclosure=disclosure, approval=approval,
        callers=callers, caller_rules=rules.rules, rate_limits=rules.limits,
    )


def _header(*, owner_kind: Owner, owner: str, tools: Sequence[EffectiveTool],
            servers: tuple[ServerEntry, ...],
            disclosure: DisclosureEntry | None,
            approval: ApprovalSettings | None = None,
            callers: CallersSpec | None = None,
            rules: CallerSection = NO_SECTION, total: int | None = None) -> dict[str, Any]:
    """Every key of the document but ``hash`` and ``tools``, as JSON values
    (``total``: the tools' tokens, when counted already)."""
    doc = ToolSetDocument.model_construct(
        actor=_owner(owner_kind, "actor", owner), skill=_owner(owner_kind, "skill", owner),
        mcp_servers=servers, agent_skills=_agent_skills(tools),
        tokens=_token_count(tools, total), disclosure=disclosure,
        approval=approval, callers=callers, caller_rules=rules.rules,
        rate_limits=rules.limits)
    return {key: value for key, value in _entry_dict(doc).items()
            if key not in ("hash", "tools")}


def disclosure_entry(disclosure: Disclosure | None, tools: Sequence[EffectiveTool],
                     ) -> tuple[DisclosureEntry | None, list[str]]:
    """The document's ``disclosure`` (None unless ``mode: Search``), pinned tools by
    binding name in the set's order, and a warning for each pin the gateway cannot
    honour: a name the set does not hold, or a tool whose bindingName is one of the
    gateway's own (it stays reachable through ``call_tool``)."""
    if disclosure is None or disclosure.mode != "Search":
        return None, []
    names: dict[str, EffectiveTool] = {}
    for tool in tools:
        for name in (tool.entry.qualified_name, tool.name, tool.binding_name):
            names[name] = tool
    pinned: dict[str, None] = {}
    warnings = []
    for i, name in enumerate(disclosure.pinned):
        found = names.get(name)
        where = f"spec.disclosure.pinned[{i}]"
        if found is None:
            warnings.append(f"{where}: no tool {name!r} in the set; nothing is pinned for it")
        elif found.binding_name in (SEARCH_TOOL, CALL_TOOL):
            warnings.append(f"{where}: {name!r} has the bindingName of the gateway's own"
                            f" {found.binding_name}; it is reached through {CALL_TOOL}")
        else:
            pinned[found.binding_name] = None
    order = {t.binding_name: i for i, t in enumerate(tools)}
    return (DisclosureEntry.model_construct(mode="Search",
                                            pinned=tuple(sorted(pinned, key=order.__getitem__))),
            warnings)


def _token_count(tools: Sequence[EffectiveTool], total: int | None = None) -> TokenCount:
    return TokenCount.model_construct(
        encoding=ENCODING, total=sum(t.tokens for t in tools) if total is None else total)


def _owner(owner_kind: Owner, field: Owner, owner: str) -> str | None:
    """``owner`` for the document field naming the owner's kind; None for the other."""
    return owner if owner_kind == field else None


def used_servers(tools: Sequence[EffectiveTool], servers: Sequence[tuple[ObjectRef, McpServer]],
                 memo: dict[tuple[ObjectRef, str], ServerEntry]) -> tuple[ServerEntry, ...]:
    """The servers that a tool of the set names, by name then skill. ``memo`` keeps
    each server's entry for the next set that uses it (the Resolver's: a skill's
    servers are the same objects for every Actor of one catalog snapshot)."""
    used = {(t.entry.skill, t.entry.tool.mcp_server) for t in tools if t.entry.tool.mcp_server}
    out = []
    for skill, server in sorted(((skill, server) for skill, server in servers
                                 if (skill, server.name) in used),
                                key=lambda p: (p[1].name, p[0])):
        found = memo.get((skill, server.name))
        if found is None:
            found = memo[(skill, server.name)] = server_entry(skill, server)
        out.append(found)
    return tuple(out)


def _agent_skills(tools: Sequence[EffectiveTool]) -> tuple[AgentSkillEntry, ...]:
    return tuple(AgentSkillEntry.model_construct(name=t.name, skill=t.entry.skill.canonical,
                                                 key=t.key)
                 for t in tools if t.key is not None)


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
