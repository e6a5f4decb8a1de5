"""The mounted ToolSet, parsed into what the gateway serves.

The Actor's ConfigMap directory holds ``tools.json`` (the ToolSet document,
docs/toolset.md) and one ``agent-skill.<bindingName>.md`` per Agent Skill. Only
tools whose source is ``mcp`` or ``agent_skill`` are served: the others run
inside the agent (built-ins, runtime tools), out of the gateway's reach
(docs/gateway.md). Each served tool is shown to the agent under its
``bindingName`` with the effective definition (overrides applied), its
capabilities as MCP annotations and, whole, under ``_meta``.

Reading fails with one ``ToolSetError`` line naming the file, the field and the
reason; the caller keeps serving the set it had.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import mcp_types as types
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from skillop.model.specs import DataKey, ObjectName
from skillop.resolve.toolset import TOOLS_KEY

#: The ``_meta`` keys under which the listing carries what MCP annotations cannot.
META_CAPABILITIES = "skillop.dev/capabilities"
META_DIGEST = "skillop.dev/digest"
#: tools.json is at most a ConfigMap (1 MiB); anything larger is not ours.
_MAX_DOCUMENT_BYTES = 4 * 1024 * 1024
_SERVED_SOURCES = ("mcp", "agent_skill")
_HINTS = {"readOnly": "read_only_hint", "destructive": "destructive_hint",
          "idempotent": "idempotent_hint", "openWorld": "open_world_hint"}

ServerKey = tuple[str, str]
"""An upstream server: (declaring skill, server name), as the ToolSet pairs them."""


class ToolSetError(Exception):
    """The mounted ToolSet cannot be served; the message is one line."""


class _Doc(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, alias_generator=to_camel,
                              populate_by_name=True)


class _ToolDoc(_Doc):
    name: str = Field(min_length=1)
    binding_name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    qualified_name: str = ""
    source: str
    skill: str = ""
    title: str | None = None
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    output_schema: dict[str, Any] | None = None
    capabilities: dict[str, Any] = Field(default_factory=dict)
    mcp_server: str | None = None
    digest: str = ""
    upstream_digest: str | None = None


class _SecretKeyRef(_Doc):
    name: str = Field(min_length=1)
    key: str = Field(min_length=1)


class _ValueFrom(_Doc):
    secret_key_ref: _SecretKeyRef | None = None


class _EnvDoc(_Doc):
    name: str = Field(min_length=1)
    value: str | None = None
    value_from: _ValueFrom | None = None


class _SecretRef(_Doc):
    name: str = Field(min_length=1)


class _HeadersFrom(_Doc):
    secret_ref: _SecretRef


class _CaKeyRef(_Doc):
    # The Skill's own rules: a name and key that stay one path segment each.
    name: ObjectName
    key: DataKey = "ca.crt"


class _TlsDoc(_Doc):
    ca_config_map_ref: _CaKeyRef | None = None
    ca_secret_ref: _CaKeyRef | None = None


class _ServerDoc(_Doc):
    name: str
    skill: str = ""
    transport: str = "streamable-http"
    url: str | None = None
    command: list[str] = Field(default_factory=list)
    args: list[str] = Field(default_factory=list)
    env: list[_EnvDoc] = Field(default_factory=list)
    headers_from: _HeadersFrom | None = None
    tls: _TlsDoc | None = None


class _ToolSetDoc(_Doc):
    kind: Literal["ToolSet"]
    actor: str = ""
    hash: str = ""
    tools: list[_ToolDoc] = Field(default_factory=list)
    mcp_servers: list[_ServerDoc] = Field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SecretKey:
    """One key of a mounted Secret."""

    secret: str
    key: str


@dataclass(frozen=True, slots=True)
class CaRef:
    """A server's CA bundle (``tls``): a key of a ConfigMap or of a Secret, mounted
    into the gateway like the Secrets (docs/gateway.md, Private CAs)."""

    kind: Literal["ConfigMap", "Secret"]
    name: str
    key: str


@dataclass(frozen=True, slots=True)
class EnvEntry:
    """A stdio upstream's environment variable: a literal or a Secret key."""

    name: str
    value: str | None
    secret_key: SecretKey | None


@dataclass(frozen=True, slots=True)
class Upstream:
    """An MCP server of the set, as the gateway connects to it."""

    name: str
    skill: str
    transport: str
    url: str | None
    command: tuple[str, ...]
    args: tuple[str, ...]
    env: tuple[EnvEntry, ...]
    headers_secret: str | None
    ca: CaRef | None = None

    @property
    def key(self) -> ServerKey:
        return (self.skill, self.name)

    def secrets(self) -> tuple[str, ...]:
        """The Secrets this upstream reads (headers, env, CA), for change detection."""
        names = {e.secret_key.secret for e in self.env if e.secret_key is not None}
        if self.headers_secret is not None:
            names.add(self.headers_secret)
        if self.ca is not None and self.ca.kind == "Secret":
            names.add(self.ca.name)
        return tuple(sorted(names))

    def configmaps(self) -> tuple[str, ...]:
        """The ConfigMaps this upstream reads (its CA bundle), for change detection."""
        return (self.ca.name,) if self.ca is not None and self.ca.kind == "ConfigMap" else ()


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


@dataclass(frozen=True, slots=True)
class ServedSet:
    """What the gateway serves: tools by binding name, their upstreams, the listing."""

    actor: str
    hash: str
    tools: Mapping[str, ServedTool]
    upstreams: Mapping[ServerKey, Upstream]
    listing: tuple[types.Tool, ...]

    @classmethod
    def empty(cls) -> ServedSet:
        return cls(actor="", hash="", tools={}, upstreams={}, listing=())


def load_served_set(directory: Path) -> ServedSet:
    """The set mounted at ``directory``; raises ``ToolSetError`` (one line)."""
    path = directory / TOOLS_KEY
    try:
        raw = path.read_bytes()[: _MAX_DOCUMENT_BYTES + 1]
    except OSError as exc:
        raise ToolSetError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > _MAX_DOCUMENT_BYTES:
        raise ToolSetError(f"{path}: larger than {_MAX_DOCUMENT_BYTES} bytes")
    return parse_served_set(raw, path=str(path),
                            body=lambda key: _read_body(directory, key))


def _read_body(directory: Path, key: str) -> str | None:
    try:
        return (directory / key).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def parse_served_set(raw: bytes | str, *, path: str = TOOLS_KEY,
                     body: Any = lambda key: None) -> ServedSet:
    """Parse a ToolSet document; ``body(key)`` gives an Agent Skill's body or None."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ToolSetError(f"{path}: not JSON ({_short(str(exc))})") from None
    try:
        doc = _ToolSetDoc.model_validate(data)
    except ValidationError as exc:
        raise ToolSetError(f"{path}: {_first_error(exc)}") from None
    servers: dict[ServerKey, Upstream] = {}
    for i, server in enumerate(doc.mcp_servers):
        upstream = _upstream(server, f"{path}: mcpServers[{i}]")
        servers.setdefault(upstream.key, upstream)
    tools: dict[str, ServedTool] = {}
    for i, tool in enumerate(doc.tools):
        if tool.source not in _SERVED_SOURCES:
            continue
        where = f"{path}: tools[{i}]"
        if tool.binding_name in tools:
            raise ToolSetError(f"{where}.bindingName: {tool.binding_name} appears twice")
        tools[tool.binding_name] = _served_tool(tool, where, servers, body)
    used = {t.upstream for t in tools.values() if t.upstream is not None}
    return ServedSet(
        actor=doc.actor, hash=doc.hash, tools=tools,
        upstreams={key: server for key, server in servers.items() if key in used},
        listing=tuple(t.definition for t in tools.values()),
    )


def _upstream(server: _ServerDoc, where: str) -> Upstream:
    if server.url is None and not server.command:
        raise ToolSetError(f"{where}: neither url nor command")
    env = []
    for var in server.env:
        ref = var.value_from.secret_key_ref if var.value_from is not None else None
        env.append(EnvEntry(var.name, var.value,
                            SecretKey(ref.name, ref.key) if ref is not None else None))
    return Upstream(
        name=server.name, skill=server.skill, transport=server.transport, url=server.url,
        command=tuple(server.command), args=tuple(server.args), env=tuple(env),
        headers_secret=(server.headers_from.secret_ref.name
                        if server.headers_from is not None else None),
        ca=_ca(server.tls, where),
    )


def _ca(tls: _TlsDoc | None, where: str) -> CaRef | None:
    if tls is None:
        return None
    if (tls.ca_config_map_ref is None) == (tls.ca_secret_ref is None):
        raise ToolSetError(f"{where}.tls: exactly one of caConfigMapRef and caSecretRef"
                           " must be set")
    if tls.ca_config_map_ref is not None:
        return CaRef("ConfigMap", tls.ca_config_map_ref.name, tls.ca_config_map_ref.key)
    assert tls.ca_secret_ref is not None
    return CaRef("Secret", tls.ca_secret_ref.name, tls.ca_secret_ref.key)


def _served_tool(tool: _ToolDoc, where: str, servers: Mapping[ServerKey, Upstream],
                 body: Any) -> ServedTool:
    caps = tool.capabilities
    timeout = caps.get("timeoutSeconds")
    common: dict[str, Any] = {
        "binding_name": tool.binding_name,
        "digest": tool.digest,
        "definition": _definition(tool),
        "requires_approval": caps.get("requiresApproval") is True,
        "timeout_seconds": float(timeout) if isinstance(timeout, int | float)
        and not isinstance(timeout, bool) and timeout > 0 else None,
    }
    if tool.source == "agent_skill":
        return ServedTool(source="agent_skill",
                          body=body(f"agent-skill.{tool.binding_name}.md"), **common)
    key = (tool.skill, tool.mcp_server or "")
    if tool.mcp_server is None or key not in servers:
        raise ToolSetError(f"{where}.mcpServer: no mcpServers entry {tool.mcp_server!r}"
                           f" of skill {tool.skill!r}")
    return ServedTool(source="mcp", upstream=key, upstream_name=_upstream_name(tool),
                      upstream_digest=tool.upstream_digest, **common)


def _upstream_name(tool: _ToolDoc) -> str:
    """The tool's name on its server: ``qualifiedName`` is ``<skill>.<name there>``
    (the effective ``name`` may be qualified to break a conflict)."""
    prefix = f"{tool.skill}."
    if tool.qualified_name.startswith(prefix) and len(tool.qualified_name) > len(prefix):
        return tool.qualified_name[len(prefix):]
    return tool.name


def _definition(tool: _ToolDoc) -> types.Tool:
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
    loc = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"])
    return f"{loc.lstrip('.') or 'document'}: {_short(error['msg'])}"


def _short(text: str, limit: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."
