"""The mounted ToolSet, parsed into what the gateway serves.

The Actor's ConfigMap directory holds ``tools.json`` (the ToolSet document,
docs/toolset.md) and one ``agent-skill.<bindingName>.md`` per Agent Skill; a set
too large for one ConfigMap is packed instead (``tools.index.json`` and the gzip
chunks of ``tools.json``, from the Actor's ConfigMap and its parts, projected
into the same directory), and is read only once every chunk is the one the
index names: the kubelet updates the sources of a projected volume one by one,
and a mix of two versions is never served. Only
tools whose source is ``mcp`` or ``agent_skill`` are served: the others run
inside the agent (built-ins, runtime tools), out of the gateway's reach
(docs/gateway.md). Each served tool is shown to the agent under its
``bindingName`` with the effective definition (overrides applied), its
capabilities as MCP annotations and, whole, under ``_meta``.

Reading fails with one ``ToolSetError`` line naming the file, the field and the
reason; the caller keeps serving the set it had.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import mcp_types as types
from pydantic import ValidationError

from skillop.gateway.buckets import Limit, limits_of
from skillop.gateway.caller_policy import NO_RULES, CallerRules, NeedsApproval, decide
from skillop.gateway.search import Document, SearchIndex
from skillop.model.caller import Caller
from skillop.model.callers import CallersSpec
from skillop.model.canonical import bytes_digest
from skillop.model.specs import ApprovalSettings
from skillop.model.toolset import (
    CALL_TOOL,
    INDEX_KEY,
    MAX_CONFIGMAP_BYTES,
    SEARCH_TOOL,
    TOOLS_KEY,
    PackedIndex,
    ServerEntry,
    ToolEntry,
    ToolSetDocument,
)

#: The ``_meta`` keys under which the listing carries what MCP annotations cannot.
META_CAPABILITIES = "skillop.dev/capabilities"
META_DIGEST = "skillop.dev/digest"
_SERVED_SOURCES = ("mcp", "agent_skill")
_HINTS = {"readOnly": "read_only_hint", "destructive": "destructive_hint",
          "idempotent": "idempotent_hint", "openWorld": "open_world_hint"}

ServerKey = tuple[str, str]
"""An upstream server: (declaring skill, server name), as the ToolSet pairs them."""
#: An Agent Skill's body by its ConfigMap key, or None when it is not mounted.
BodyReader = Callable[[str], str | None]


class ToolSetError(Exception):
    """The mounted ToolSet cannot be served; the message is one line."""


@dataclass(frozen=True, slots=True)
class ServedTool:
    """One tool the agent may call through the gateway."""

    binding_name: str
    source: Literal["mcp", "agent_skill"]
    digest: str
    definition: types.Tool
    #: mcp only: the upstream server, the tool's name there, its digest as resolved.
    upstream: ServerKey | None = None
    upstream_name: str | None = None
    upstream_digest: str | None = None
    #: agent_skill only: the SKILL.md body (None when the key is not mounted).
    body: str | None = None
    requires_approval: bool = False
    timeout_seconds: float | None = None
    #: What search_tools indexes: the skill and the capability tags.
    skill: str = ""
    tags: tuple[str, ...] = ()


_DEFAULT_APPROVAL: Final = ApprovalSettings()


@dataclass(frozen=True, slots=True)
class ServedSet:
    """What the gateway serves: tools by binding name, their upstreams, the listing."""

    actor: str
    hash: str
    tools: Mapping[str, ServedTool]
    #: The MCP servers the tools call, as the ToolSet holds them.
    upstreams: Mapping[ServerKey, ServerEntry]
    listing: tuple[types.Tool, ...]
    #: ``disclosure: Search``: the index search_tools ranks; None lists every tool.
    search: SearchIndex | None = None
    #: How calls to tools with requiresApproval are approved (the Actor's spec.approval).
    approval: ApprovalSettings = _DEFAULT_APPROVAL
    #: The set's ``callerRules`` (who may list and call what) and ``rateLimits``.
    caller_rules: CallerRules = NO_RULES
    rate_limits: tuple[Limit, ...] = ()
    #: Whose tokens name the callers (the Actor's spec.callers); None: all anonymous.
    callers: CallersSpec | None = None

    @classmethod
    def empty(cls) -> ServedSet:
        return cls(actor="", hash="", tools={}, upstreams={}, listing=())

    def target(self, name: str, arguments: Mapping[str, Any] | None) -> ServedTool | None:
        """The set tool a ``tools/call`` of ``name`` reaches: itself, or in Search
        mode the one ``call_tool`` names; None for search_tools or an unknown name."""
        if self.search is not None and name == CALL_TOOL:
            inner = (arguments or {}).get("name")
            return self.tools.get(inner) if isinstance(inner, str) else None
        if self.search is not None and name == SEARCH_TOOL:
            return None
        return self.tools.get(name)


def needs_approval(served: ServedSet, tool: ServedTool, caller: Caller) -> bool:
    """Whether a call of ``tool`` by ``caller`` waits for approval: the tool requires
    it, or the caller's rules do."""
    return tool.requires_approval or isinstance(
        decide(served.caller_rules, caller, tool.binding_name), NeedsApproval)


def load_served_set(directory: Path) -> ServedSet:
    """The set mounted at ``directory``; raises ``ToolSetError`` (one line)."""
    if (directory / INDEX_KEY).exists():
        raw, where = read_packed(directory), str(directory / INDEX_KEY)
    else:
        raw, where = _read_limited(directory / TOOLS_KEY, MAX_CONFIGMAP_BYTES), ""
    return parse_served_set(raw, path=where or str(directory / TOOLS_KEY),
                            body=lambda key: _read_body(directory, key))


def _read_limited(path: Path, limit: int) -> bytes:
    try:
        with path.open("rb") as file:
            raw = file.read(limit + 1)
    except OSError as exc:
        raise ToolSetError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > limit:
        # More than the writer puts in a whole ConfigMap: not a document of ours.
        raise ToolSetError(f"{path}: larger than {limit} bytes")
    return raw


def read_packed(directory: Path) -> bytes:
    """``tools.json``'s bytes from a packed set: every chunk the index names (in
    the Actor's ConfigMap or a part, each a gzip member), each checked against its
    sha256 (a chunk the kubelet has not updated yet, or an
    edited one, is refused: the caller keeps the set it serves and reads again
    when the volume changes), decompressed within the size the index states."""
    path = directory / INDEX_KEY
    try:
        index = PackedIndex.parse(_read_limited(path, MAX_CONFIGMAP_BYTES))
    except ValidationError as exc:
        raise ToolSetError(f"{path}: {_first_error(exc)}") from None
    chunks = []
    for chunk in index.chunks:
        part = directory / chunk.key
        if not part.exists():
            raise ToolSetError(f"{part}: missing (ConfigMap {chunk.config_map}, not mounted"
                               f" or not written yet); waiting for the set {index.hash}")
        data = _read_limited(part, MAX_CONFIGMAP_BYTES)
        if bytes_digest(data) != chunk.sha256:
            raise ToolSetError(f"{part}: not the chunk of the set {index.hash} (ConfigMap"
                               f" {chunk.config_map} holds another version); waiting for it")
        chunks.append(data)
    out: list[bytes] = []
    left = index.size
    for chunk, data in zip(index.chunks, chunks, strict=True):
        inflate = zlib.decompressobj(wbits=31)  # each chunk is a gzip member of its own
        try:
            out.append(inflate.decompress(data, left + 1))
        except zlib.error as exc:
            raise ToolSetError(f"{directory / chunk.key}: no gzip member ({exc})") from None
        left -= len(out[-1])
        if left < 0 or not inflate.eof or inflate.unused_data:
            break
    if left != 0 or not inflate.eof or inflate.unused_data:
        raise ToolSetError(f"{path}: the chunks decompress to other than the {index.size}"
                           " bytes the index states")
    return b"".join(out)


def _read_body(directory: Path, key: str) -> str | None:
    try:
        return (directory / key).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def parse_served_set(raw: bytes | str, *, path: str = TOOLS_KEY,
                     body: BodyReader = lambda key: None) -> ServedSet:
    """Parse a ToolSet document; ``body(key)`` gives an Agent Skill's body or None."""
    try:
        doc = ToolSetDocument.parse(raw)
    except ValidationError as exc:
        raise ToolSetError(f"{path}: {_first_error(exc)}") from None
    except RecursionError:
        raise ToolSetError(f"{path}: not JSON (nested too deeply)") from None
    servers: dict[ServerKey, ServerEntry] = {}
    for i, server in enumerate(doc.mcp_servers):
        if server.url is None and not server.command:
            raise ToolSetError(f"{path}: mcpServers[{i}]: neither url nor command")
        servers.setdefault(server.key, server)
    keys = {entry.name: entry.key for entry in doc.agent_skills}
    tools: dict[str, ServedTool] = {}
    for i, tool in enumerate(doc.tools):
        if tool.source not in _SERVED_SOURCES:
            continue
        where = f"{path}: tools[{i}]"
        if tool.binding_name in tools:
            raise ToolSetError(f"{where}.bindingName: {tool.binding_name} appears twice")
        tools[tool.binding_name] = _served_tool(tool, where, servers, keys, body)
    used = {t.upstream for t in tools.values() if t.upstream is not None}
    upstreams = {key: server for key, server in servers.items() if key in used}
    common: dict[str, Any] = {
        "actor": doc.actor or "", "hash": doc.hash, "tools": tools, "upstreams": upstreams,
        "approval": doc.approval or _DEFAULT_APPROVAL,
        "caller_rules": CallerRules.of(doc.caller_rules or ()),
        "rate_limits": limits_of(doc.rate_limits or ()), "callers": doc.callers}
    if doc.disclosure is None:
        return ServedSet(listing=tuple(t.definition for t in tools.values()), **common)
    pinned = [tools[name].definition for name in doc.disclosure.pinned
              if name in tools and name not in (SEARCH_TOOL, CALL_TOOL)]
    return ServedSet(
        listing=(*pinned, search_tool_definition(len(tools)), CALL_TOOL_DEFINITION),
        search=SearchIndex(_document(t) for t in tools.values()), **common)


def _document(tool: ServedTool) -> Document:
    definition = tool.definition
    return Document(key=tool.binding_name, name=tool.binding_name, title=definition.title or "",
                    description=definition.description or "", tags=tool.tags,
                    skill=tool.skill.partition("/")[2],
                    parameters=parameter_text(definition.input_schema))


def parameter_text(schema: Mapping[str, Any]) -> str:
    """The top-level property names and descriptions of an input schema."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return ""
    return " ".join(f"{name} {prop.get('description', '')}" if isinstance(prop, Mapping)
                    else str(name) for name, prop in properties.items())


#: search_tools returns at most this many definitions per query.
MAX_MATCHES = 20


def search_tool_definition(size: int) -> types.Tool:
    """The gateway's search tool, as the agent sees it."""
    return types.Tool(
        name=SEARCH_TOOL, title="Search this agent's tools",
        description=(f"Find tools for a task among the {size} tools this agent may use (only"
                     " a few are listed). Describe what you want to do; the best matches come"
                     f" back with their exact definitions. Call one with {CALL_TOOL}."),
        input_schema={"type": "object", "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": 1000,
                      "description": "what you want to do, in a few words"},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_MATCHES, "default": 5,
                      "description": "how many tools to return"}},
            "required": ["query"], "additionalProperties": False},
        annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False,
                                          destructive_hint=False, idempotent_hint=True),
    )


CALL_TOOL_DEFINITION = types.Tool(
    name=CALL_TOOL, title="Call one of this agent's tools",
    description=(f"Call a tool found with {SEARCH_TOOL}: its name and its arguments, as its"
                 " definition asks."),
    input_schema={"type": "object", "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 64,
                 "description": f"the tool's name, as {SEARCH_TOOL} returned it"},
        "arguments": {"type": "object", "description": "the tool's arguments"}},
        "required": ["name"], "additionalProperties": False},
)


def _served_tool(tool: ToolEntry, where: str, servers: Mapping[ServerKey, ServerEntry],
                 keys: Mapping[str, str], body: BodyReader) -> ServedTool:
    caps = tool.capabilities
    timeout = caps.get("timeoutSeconds")
    common: dict[str, Any] = {
        "binding_name": tool.binding_name,
        "digest": tool.digest,
        "definition": _definition(tool),
        "requires_approval": caps.get("requiresApproval") is True,
        "timeout_seconds": float(timeout) if isinstance(timeout, int | float)
        and not isinstance(timeout, bool) and timeout > 0 else None,
        "skill": tool.skill,
        "tags": tuple(tag for tag in caps.get("tags") or () if isinstance(tag, str)),
    }
    if tool.source == "agent_skill":
        if tool.name not in keys:
            raise ToolSetError(f"{where}.name: no agentSkills entry {tool.name!r}")
        return ServedTool(source="agent_skill", body=body(keys[tool.name]), **common)
    key = (tool.skill, tool.mcp_server or "")
    if tool.mcp_server is None or key not in servers:
        raise ToolSetError(f"{where}.mcpServer: no mcpServers entry {tool.mcp_server!r}"
                           f" of skill {tool.skill!r}")
    if tool.upstream_name is None:
        raise ToolSetError(f"{where}.upstreamName: required for an mcp tool")
    return ServedTool(source="mcp", upstream=key, upstream_name=tool.upstream_name,
                      upstream_digest=tool.upstream_digest, **common)


def _definition(tool: ToolEntry) -> types.Tool:
    caps = tool.capabilities
    hints = {field: caps[cap] for cap, field in _HINTS.items() if isinstance(caps.get(cap), bool)}
    annotations = (types.ToolAnnotations(title=tool.title, **hints)
                   if hints or tool.title is not None else None)
    return types.Tool(
        name=tool.binding_name, title=tool.title, description=tool.description,
        input_schema=tool.input_schema, output_schema=tool.output_schema,
        annotations=annotations,
        _meta={META_CAPABILITIES: caps, META_DIGEST: tool.digest},
    )


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    if error["type"] == "json_invalid":
        return f"not JSON ({_short(error['msg'])})"
    loc = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"])
    return f"{loc.lstrip('.') or 'document'}: {_short(error['msg'])}"


def _short(text: str, limit: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."
