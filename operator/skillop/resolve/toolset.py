"""The ToolSet document: what an actor's pods read, deterministic to the byte.

Tools are sorted by effective name; servers and Agent Skills by name. The hash
is the sha256 of the document's canonical JSON (sorted keys, no spaces) without
its own ``hash`` field, so equal inputs give equal bytes and equal hashes.
"""

from __future__ import annotations

import gzip
import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any

from skillop.model.canonical import bytes_digest, canonical_json, sha256_digest
from skillop.model.manifest import ActorResource
from skillop.model.memo import Slot
from skillop.model.names import ObjectRef
from skillop.model.specs import ApprovalSettings, Disclosure, McpServer
from skillop.model.tooldef import ToolDef
from skillop.model.toolset import (
    CALL_TOOL,
    INDEX_KEY,
    MAX_CONFIGMAP_BYTES,
    MAX_DOCUMENT_BYTES,
    MAX_PARTS,
    PACKED_KEY,
    SEARCH_TOOL,
    TOOLS_KEY,
    AgentSkillEntry,
    DisclosureEntry,
    DocumentModel,
    Owner,
    PackedChunk,
    PackedIndex,
    ServerEntry,
    TokenCount,
    ToolEntry,
    ToolSetDocument,
    agent_skill_key,
    chunk_key,
    default_configmap_name,
    part_configmap_name,
)
from skillop.resolve.entries import Entry
from skillop.resolve.tokens import ENCODING, tool_tokens


@dataclass(frozen=True, slots=True)
class EffectiveTool:
    name: str
    binding_name: str
    entry: Entry
    path: tuple[ObjectRef, ...]
    #: What the model is sent for this tool, in tokens (``resolve.tokens``).
    tokens: int

    @classmethod
    def of(cls, name: str, binding_name: str, entry: Entry,
           path: tuple[ObjectRef, ...]) -> EffectiveTool:
        return cls(name, binding_name, entry, path, tool_tokens(binding_name, entry.tool))

    @property
    def key(self) -> str | None:
        """The ConfigMap key of an Agent Skill's body."""
        if self.entry.tool.source != "agent_skill":
            return None
        return agent_skill_key(self.binding_name)


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
_PER_ACTOR_KEYS = frozenset({"name", "bindingName", "path", "tokens"})
Template = tuple[str, str, str, str, str]
#: A ToolDef's templates by declaring skill (``_tool_json``): a registry Tool's
#: ToolDef is shared by every skill referencing it without overrides, so the
#: bound is above the skills that reference one Tool in a large catalog.
TEMPLATES: Slot[ObjectRef, Template] = Slot("toolset-template", bound=1024)


def _tool_json(tool: EffectiveTool, path_json: str) -> str:
    """``canonical_json`` of ``tool_entry(tool)``, without building the entry;
    ``path_json`` is the JSON of the tool's path.

    A ToolDef is shared by every actor that reaches it (and an MCP tool's is kept
    from one resolution to the next), so the JSON of all but the per-actor keys is
    built once per ToolDef and declaring skill, from the ToolDef's cached
    fragments; only the binding name and name are encoded here.
    """
    entry = tool.entry
    template = TEMPLATES.get(entry.tool.memo, entry.skill)
    if template is None:
        template = TEMPLATES.put(entry.tool.memo, entry.skill,
                                 _template(_entry_fields(tool), entry.tool))
    before_binding, before_name, before_path, before_tokens, end = template
    binding = encode_basestring(tool.binding_name)
    name = binding if tool.name == tool.binding_name else encode_basestring(tool.name)
    return (f"{before_binding}{binding}{before_name}{name}{before_path}{path_json}"
            f"{before_tokens}{tool.tokens}{end}")


#: ``ToolEntry``'s (document key, attribute) pairs in canonical (sorted) order.
_TOOL_KEYS = tuple(sorted((field.alias or name, name)
                          for name, field in ToolEntry.model_fields.items()))


def _template(fields: Mapping[str, Any], tool: ToolDef) -> Template:
    """The canonical JSON of the entry whose field values are ``fields``
    (``_entry_fields``) as the constant texts around its per-actor values, which
    sort as ``bindingName``, ``name``, ``path``, ``tokens``: ``texts[0] +
    json(bindingName) + texts[1] + json(name) + texts[2] + json(path) + texts[3] +
    json(tokens) + texts[4]``. Unset (None) fields are absent, as
    ``ToolSetDocument.canonical`` leaves them out."""
    fragments = tool.fragments()
    texts: list[str] = []
    text = "{"
    for key, attribute in _TOOL_KEYS:
        value = fields[attribute]  # a KeyError when ToolEntry gains a field _entry_fields lacks
        if value is None:
            continue
        text += ("" if text == "{" else ",") + encode_basestring(key) + ":"
        if key in _PER_ACTOR_KEYS:
            texts.append(text)
            text = ""
        else:
            text += fragments[key] if key in _DEFINITION_KEYS else _json_value(value)
    texts.append(text + "}")
    before_binding, before_name, before_path, before_tokens, end = texts
    return before_binding, before_name, before_path, before_tokens, end


def tool_entry(tool: EffectiveTool, path: Sequence[str] | None = None) -> ToolEntry:
    """One tool. Optional fields (``title``, ``outputSchema``, ``runtime``,
    ``mcpServer``, ``upstreamName``, ``execution``) are unset when they do not
    apply; ``digest`` pins the definition (see docs/decisions.md); an MCP tool's
    ``upstreamDigest`` is its definition as the server gave it, before overrides
    (docs/toolset.md). ``path`` is ``tool.path`` spelled out, when the caller has it.

    Built without validation: every value comes from models that were validated
    (``ToolSetDocument.parse`` checks what a reader gets)."""
    return ToolEntry.model_construct(**_entry_fields(tool, path))


def _entry_fields(tool: EffectiveTool, path: Sequence[str] | None = None) -> dict[str, Any]:
    """``tool_entry``'s field values by attribute name: what the ToolSet text's
    per-ToolDef template is made of too (``_tool_json``), without building the
    model (pydantic's ``model_construct`` costs more than the rest of a template)."""
    t = tool.entry.tool
    return {
        "name": tool.name, "binding_name": tool.binding_name,
        "qualified_name": tool.entry.qualified_name, "source": t.source,
        "skill": tool.entry.skill.canonical, "title": t.title, "description": t.description,
        "input_schema": t.input_schema, "output_schema": t.output_schema,
        "capabilities": t.capabilities.to_dict(), "runtime": t.runtime,
        "mcp_server": t.mcp_server, "upstream_name": t.name if t.source == "mcp" else None,
        "execution": t.execution,
        "path": tuple(ref.canonical for ref in tool.path) if path is None else tuple(path),
        "digest": t.digest(), "tokens": tool.tokens, "upstream_digest": t.upstream_digest,
    }


def server_entry(skill: ObjectRef, server: McpServer) -> ServerEntry:
    """A server as the set names it: its URL (and CA reference), or its stdio
    command; Secrets only as references."""
    stdio = server.url is None
    return ServerEntry.model_construct(
        name=server.name, skill=skill.canonical, transport=server.effective_transport,
        url=server.url,
        command=tuple(server.command or ()) if stdio else None,
        args=tuple(server.args) if stdio else None,
        # Literal values are already in the Skill; valueFrom stays a reference.
        env=tuple(server.env) if stdio else None,
        headers_from=server.headers_from,
        # Where the CA bundle is (a reference, as for headersFrom): the gateway
        # trusts it once the pod mounts it (docs/gateway.md, Private CAs).
        tls=None if stdio else server.tls,
    )


def _entry_dict(entry: DocumentModel) -> dict[str, Any]:
    return entry.model_dump(mode="json", by_alias=True, exclude_none=True)


def toolset_text(
    *, owner_kind: Owner, owner: str, tools: Sequence[EffectiveTool],
    servers: tuple[ServerEntry, ...], disclosure: DisclosureEntry | None = None,
    approval: ApprovalSettings | None = None,
) -> tuple[str, str]:
    """The document's canonical JSON (what the ConfigMap stores) and its hash.

    Assembled from per-tool JSON whose constant part is cached per ToolDef, so an
    actor's 600-tool set is joined, not serialised; ``toolset_document`` builds
    the same document as a dict, for those who read it (the CLI).
    ``tools`` are in effective-name order (as the resolver gives them).
    """
    paths: dict[int, str] = {}
    body = _header(owner_kind=owner_kind, owner=owner, tools=tools, servers=servers,
                   disclosure=disclosure, approval=approval)
    tools_json = [_tool_json(t, _path_json(t.path, paths)) for t in tools]
    digest = _hash(body, tools_json)
    return _canonical({**body, "hash": digest}, tools_json, with_hash=True), digest


def toolset_document(
    *, owner_kind: Owner, owner: str, tools: Sequence[EffectiveTool],
    servers: tuple[ServerEntry, ...], digest: str,
    disclosure: DisclosureEntry | None = None,
    approval: ApprovalSettings | None = None,
) -> ToolSetDocument:
    """The ToolSet document (``digest``: its hash, from ``toolset_text``)."""
    paths: dict[int, tuple[str, ...]] = {}
    return ToolSetDocument.model_construct(
        actor=_owner(owner_kind, "actor", owner), skill=_owner(owner_kind, "skill", owner),
        hash=digest,
        tools=tuple(tool_entry(t, _path_names(t.path, paths)) for t in tools),
        mcp_servers=servers, agent_skills=_agent_skills(tools),
        tokens=_token_count(tools), disclosure=disclosure, approval=approval,
    )


def _header(*, owner_kind: Owner, owner: str, tools: Sequence[EffectiveTool],
            servers: tuple[ServerEntry, ...],
            disclosure: DisclosureEntry | None,
            approval: ApprovalSettings | None = None) -> dict[str, Any]:
    """Every key of the document but ``hash`` and ``tools``, as JSON values."""
    doc = ToolSetDocument.model_construct(
        actor=_owner(owner_kind, "actor", owner), skill=_owner(owner_kind, "skill", owner),
        mcp_servers=servers,
        agent_skills=_agent_skills(tools), tokens=_token_count(tools), disclosure=disclosure,
        approval=approval)
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


def _token_count(tools: Sequence[EffectiveTool]) -> TokenCount:
    return TokenCount.model_construct(encoding=ENCODING, total=sum(t.tokens for t in tools))


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


def tools_json(text: str) -> str:
    """The bytes of ``tools.json``: the canonical text and a newline. The ConfigMap
    holds them and ``skillop tools -o json`` prints them, so the two compare equal
    with ``diff`` (docs/api.md, Reading manifests: byte-identical)."""
    return text + "\n"


def data_size(data: dict[str, str]) -> int:
    """A ConfigMap's data size as the API server counts it: UTF-8 bytes."""
    return sum(len(k.encode()) + len(v.encode()) for k, v in data.items())


def configmap_data(text: str, tools: Sequence[EffectiveTool]) -> dict[str, str]:
    """The ConfigMap's data: ``tools.json``, the document's canonical JSON (sorted
    keys, no spaces: compact, and exactly the bytes that were hashed, plus the
    hash; ``toolset_text``) and one key per Agent Skill body."""
    data = {TOOLS_KEY: tools_json(text)}
    for tool in tools:
        if tool.key is not None and tool.entry.tool.body is not None:
            data[tool.key] = tool.entry.tool.body
    return data


@dataclass(frozen=True, slots=True)
class StoredConfigMap:
    """One ConfigMap of an Actor's set: its name, ``data`` and ``binaryData``."""

    name: str
    data: Mapping[str, str]
    binary: Mapping[str, bytes]

    def size(self) -> int:
        """What the API server counts against its limit: keys and values, in bytes."""
        return data_size(dict(self.data)) + sum(len(k) + len(v) for k, v in self.binary.items())


@dataclass(frozen=True, slots=True)
class Layout:
    """How an Actor's set is stored (docs/toolset.md): one ConfigMap holding
    ``tools.json`` when it fits, else the set packed into the Actor's ConfigMap and
    its parts. ``problem`` says why it cannot be stored at all (``TooLarge``)."""

    #: The Actor's own ConfigMap first, then its parts in order.
    configmaps: tuple[StoredConfigMap, ...]
    #: The bytes of ``tools.json``, and (packed) of its gzip.
    document_bytes: int
    compressed_bytes: int | None = None
    problem: str | None = None

    @property
    def main(self) -> StoredConfigMap:
        return self.configmaps[0]

    @property
    def parts(self) -> tuple[StoredConfigMap, ...]:
        return self.configmaps[1:]


#: Room kept in the Actor's ConfigMap for the index of a packed set.
_INDEX_ROOM = 4096
#: How many of the largest contributors a TooLarge reason names.
SIZE_CONTRIBUTORS = 5


def configmap_layout(name: str, text: str, digest: str,
                     tools: Sequence[EffectiveTool]) -> Layout:
    """The ConfigMaps that store the set whose canonical JSON is ``text`` (hash
    ``digest``) for the Actor whose ConfigMap is ``name``.

    A set that fits is exactly ``configmap_data`` (the same key, bytes and hash
    as ever). A larger one is packed: ``tools.json``'s bytes gzip-compressed
    (deterministic: no time, no name), cut into chunks that each fill a
    ConfigMap, the first in the Actor's ConfigMap with the index and the Agent
    Skill bodies."""
    data = configmap_data(text, tools)
    document_bytes = len(data[TOOLS_KEY].encode())
    if data_size(data) <= MAX_CONFIGMAP_BYTES:
        return Layout((StoredConfigMap(name, data, {}),), document_bytes)
    bodies = {k: v for k, v in data.items() if k != TOOLS_KEY}
    room = MAX_CONFIGMAP_BYTES - data_size(bodies) - _INDEX_ROOM - len(INDEX_KEY)
    if room < MAX_CONFIGMAP_BYTES // 2:
        return Layout((), document_bytes, problem=_bodies_too_large(bodies))
    packed = _gzip(data[TOOLS_KEY], digest)
    chunks = [packed[:room]]
    rest = packed[room:]
    while rest:
        take = MAX_CONFIGMAP_BYTES - len(chunk_key(len(chunks)))
        chunks.append(rest[:take])
        rest = rest[take:]
    if len(chunks) > MAX_PARTS or document_bytes > MAX_DOCUMENT_BYTES:
        return Layout((), document_bytes, len(packed),
                      problem=_too_large(document_bytes, len(packed), tools, bodies))
    names = [name, *(part_configmap_name(name, i) for i in range(1, len(chunks)))]
    index = PackedIndex(hash=digest, size=document_bytes, chunks=tuple(
        PackedChunk(key=chunk_key(i), config_map=names[i], sha256=bytes_digest(chunk),
                    size=len(chunk)) for i, chunk in enumerate(chunks)))
    main = StoredConfigMap(name, {INDEX_KEY: index.text(), **bodies}, {PACKED_KEY: chunks[0]})
    return Layout((main, *(StoredConfigMap(names[i], {}, {chunk_key(i): chunk})
                           for i, chunk in enumerate(chunks) if i)),
                  document_bytes, len(packed))


#: The last few sets packed, by hash: an Actor's set is compared with its
#: ConfigMaps on every pass, and compressing 10 MiB again each time would cost
#: the operator a fifth of a second per large Actor.
_PACKED: dict[str, bytes] = {}
_PACKED_KEPT = 8


def _gzip(tools_json_text: str, digest: str) -> bytes:
    found = _PACKED.get(digest)
    if found is None:
        found = gzip.compress(tools_json_text.encode(), compresslevel=6, mtime=0)
        if len(_PACKED) >= _PACKED_KEPT:
            del _PACKED[next(iter(_PACKED))]
        _PACKED[digest] = found
    return found


def _kib(size: int) -> str:
    return f"{size / 1024:,.0f} KiB" if size < 10 * 1024 * 1024 else f"{size / 2**20:,.1f} MiB"


def _too_large(document: int, compressed: int, tools: Sequence[EffectiveTool],
               bodies: Mapping[str, str]) -> str:
    capacity = MAX_PARTS * MAX_CONFIGMAP_BYTES
    paths: dict[int, str] = {}
    sizes = [(len(_tool_json(t, _path_json(t.path, paths)).encode()), t.binding_name)
             for t in tools]
    sizes += [(len(v.encode()), k) for k, v in bodies.items()]
    largest = ", ".join(f"{name} ({_kib(size)})"
                        for size, name in heapq.nlargest(SIZE_CONTRIBUTORS, sizes))
    return (f"the ToolSet is {_kib(document)} ({_kib(compressed)} compressed); an Actor's set"
            f" is stored in at most {MAX_PARTS} ConfigMaps of {MAX_CONFIGMAP_BYTES // 1024} KiB"
            f" ({_kib(capacity)} compressed); the largest:"
            f" {largest}")


def _bodies_too_large(bodies: Mapping[str, str]) -> str:
    sizes = sorted(((len(v.encode()), k) for k, v in bodies.items()), reverse=True)
    largest = ", ".join(f"{k} ({_kib(n)})" for n, k in sizes[:SIZE_CONTRIBUTORS])
    return (f"the Agent Skill bodies are {_kib(sum(n for n, _ in sizes))}; the Actor's ConfigMap"
            f" holds them with the tools in at most {MAX_CONFIGMAP_BYTES // 1024} KiB;"
            f" the largest: {largest}")


def configmap_name(actor: ActorResource) -> str:
    """The Actor's ConfigMap: ``spec.configMapName``, default ``<actor>-tools``."""
    return actor.spec.config_map_name or default_configmap_name(actor.meta.name)
