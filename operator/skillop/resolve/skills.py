"""A skill's own contribution: its direct tools, its include edges, its own problems.

This is everything about one Skill that does not depend on what it includes:
references parsed and looked up (with ``sharing`` checked), tools from all five
sources turned into entries, and the per-skill rules (unique names, known
built-in groups, valid SKILL.md) checked. Include-override checks need the
included skill's flattened set and live in ``flatten``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

from skillop.model import problems as P
from skillop.model.capabilities import EMPTY, Capabilities, Origins, mcp_capabilities
from skillop.model.credentials import credential_query_names, looks_like_credential
from skillop.model.manifest import SkillResource, ToolResource
from skillop.model.names import ObjectRef, RefError, did_you_mean, parse_ref
from skillop.model.problems import Problem
from skillop.model.serverkeys import ServerKey
from skillop.model.specs import InlineTool, McpServer, Override
from skillop.model.tooldef import ToolDef
from skillop.resolve.catalog import Catalog
from skillop.resolve.entries import Entry, forbidden_loosening, loosening_message
from skillop.sources.agent_skill import AgentSkillError, parse_skill_md
from skillop.sources.builtins import builtin_group, builtin_groups

READ_ONLY = Capabilities.model_construct(read_only=True)  # no validator built at import
OBJECT_SCHEMA = {"type": "object"}


@dataclass(frozen=True, slots=True)
class IncludeEdge:
    index: int
    target: ObjectRef
    overrides: Mapping[str, Override]


@dataclass(frozen=True, slots=True)
class SkillView:
    ref: ObjectRef
    own: tuple[Entry, ...]
    includes: tuple[IncludeEdge, ...]
    problems: tuple[Problem, ...]
    warnings: tuple[str, ...]
    servers: tuple[McpServer, ...]


@dataclass(frozen=True, slots=True)
class ParsedRef:
    """One reference as a Skill spells it, parsed: the target, or why it is malformed."""

    field: str
    target: ObjectRef | None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class SkillRefs:
    """Everything a Skill names outside itself, parsed once.

    The resolver looks these up (``skill_view``) and the operator's dependency
    index watches them (``watched``): one source, so a new kind of reference
    cannot reach one and not the other. Each tuple is aligned with its spec list.
    """

    includes: tuple[ParsedRef, ...]
    tools: tuple[ParsedRef, ...]
    #: The ConfigMap of each ``agentSkills`` entry; None for inline ones.
    configmaps: tuple[ObjectRef | None, ...]
    #: The discovery of each ``mcpServers`` entry; None for stdio servers.
    servers: tuple[ServerKey | None, ...]

    def watched(self) -> list[tuple[str, str]]:
        """(kind, name) of every object whose change can change this Skill's view:
        found or not, so creating a missing object heals the Skill."""
        out = [("Skill", r.target.canonical) for r in self.includes if r.target]
        out += [("Tool", r.target.canonical) for r in self.tools if r.target]
        out += [("ConfigMap", cm.canonical) for cm in self.configmaps if cm]
        out += [("McpServer", key.text) for key in self.servers if key]
        # A server's CA bundle is part of its discovery key: a new bundle means a
        # new listing (and the store keeps that ConfigMap's data for discovery).
        out += [("ConfigMap", key.ca.ref.canonical) for key in self.servers
                if key and key.ca is not None and key.ca.kind == "ConfigMap"]
        return out


def skill_refs(skill: SkillResource) -> SkillRefs:
    spec, ns = skill.spec, skill.meta.namespace
    return SkillRefs(
        includes=tuple(_parse(inc.skill, ns, f"spec.includes[{i}].skill")
                       for i, inc in enumerate(spec.includes)),
        tools=tuple(_parse(t.ref, ns, f"spec.tools[{i}].ref") for i, t in enumerate(spec.tools)),
        configmaps=tuple(ObjectRef(ns, a.config_map_ref.name) if a.config_map_ref else None
                         for a in spec.agent_skills),
        servers=tuple(server.discovery_key(ns) for server in spec.mcp_servers),
    )


def _parse(text: str, namespace: str, field: str) -> ParsedRef:
    try:
        return ParsedRef(field, parse_ref(text, namespace=namespace))
    except RefError as err:
        return ParsedRef(field, None, str(err))


class _Builder:
    def __init__(self, skill: SkillResource, catalog: Catalog) -> None:
        self.skill = skill
        self.catalog = catalog
        self.ns = skill.meta.namespace
        self.problems: list[Problem] = []
        self.warnings: list[str] = []
        self.own: dict[str, Entry] = {}
        self.fields: dict[str, str] = {}  # identity -> field that declared it

    def problem(self, field: str, reason: str, message: str) -> None:
        self.problems.append(Problem(self.skill.subject, field, reason, message,
                                     self.skill.origin))

    def add(self, tool: ToolDef, field: str, override: Override | None = None, *,
            tighten_only: bool = False) -> None:
        """Add a tool the skill reaches directly, seen through ``override``.

        ``tighten_only`` for tools declared elsewhere (registry Tools): their
        own metadata states their risk, and this skill may only add to it.
        """
        entry = Entry(tool, self.skill.ref)
        if override is not None:
            at = f"{field}.overrides"
            loosened = forbidden_loosening(tool, override) if tighten_only else []
            if loosened:
                self.problem(f"{at}.capabilities.{loosened[0]}", P.FORBIDDEN_OVERRIDE,
                             loosening_message(tool, loosened))
            else:
                entry = entry.overridden(override, at=f"{self.skill.subject} {at}")
        first = self.fields.get(tool.identity)
        if first is None:
            self.own[tool.identity] = entry
            self.fields[tool.identity] = field
        elif _declared_twice(tool, first, field):
            where = f"{field} lists it twice" if first == field else f"{first} and {field}"
            self.problem(field, P.DUPLICATE_TOOL_NAME,
                         f"two different tools are named {tool.name}: {where}")

    def ref(self, parsed: ParsedRef) -> ObjectRef | None:
        """The target, or None with the problem reported when it is malformed."""
        if parsed.target is None:
            self.problem(parsed.field, P.INVALID_REF, parsed.error or "malformed reference")
        return parsed.target


def _declared_twice(tool: ToolDef, first_field: str, field: str) -> bool:
    """Whether a second tool with a known identity is a second declaration.

    A registry Tool or built-in group listed twice is one tool reached twice,
    and so is one MCP endpoint under two server names. But inline tools and
    SKILL.md files are identified by skill and name, so a repeat is a second
    tool with the same name; so is a name an MCP server's ``tools`` lists twice.
    """
    if tool.source in ("anonymous", "agent_skill"):
        return True
    return tool.source == "mcp" and first_field == field


def skill_view(skill: SkillResource, catalog: Catalog) -> SkillView:
    """Everything a skill contributes by itself."""
    b = _Builder(skill, catalog)
    spec, refs = skill.spec, skill_refs(skill)
    for i, (item, parsed) in enumerate(zip(spec.tools, refs.tools, strict=True)):
        _registry_tool(b, parsed, item.overrides, f"spec.tools[{i}]")
    for i, (server, key) in enumerate(zip(spec.mcp_servers, refs.servers, strict=True)):
        _mcp_server(b, server, key, f"spec.mcpServers[{i}]")
    for i, (source, cm) in enumerate(zip(spec.agent_skills, refs.configmaps, strict=True)):
        _agent_skill(b, source.inline, cm, source.config_map_ref, f"spec.agentSkills[{i}]")
    for i, group in enumerate(spec.builtins):
        _builtin(b, group, f"spec.builtins[{i}]")
    for i, tool in enumerate(spec.anonymous_tools):
        field = f"spec.anonymousTools[{i}]"
        b.add(catalog.defs.get(("Skill", skill.ref), field,
                               functools.partial(_anonymous, skill, tool), tool), field)
    _check_unique_names(b)
    edges = [edge for i, (inc, parsed) in enumerate(zip(spec.includes, refs.includes, strict=True))
             if (edge := _include(b, i, parsed, inc.overrides)) is not None]
    return SkillView(skill.ref, tuple(b.own.values()), tuple(edges), tuple(b.problems),
                     tuple(b.warnings), tuple(spec.mcp_servers))


def _registry_tool(b: _Builder, parsed: ParsedRef, override: Override | None,
                   field: str) -> None:
    ref = b.ref(parsed)
    if ref is None:
        return
    tool = b.catalog.tools.get(ref)
    if tool is None:
        b.problem(f"{field}.ref", *b.catalog.missing("Tool", ref))
        return
    if not b.catalog.tool_admits(tool, b.ns):
        b.problem(f"{field}.ref", P.REF_NOT_PERMITTED,
                  f"tool {ref} is not shared with namespace {b.ns} (it needs label"
                  f" skillop.dev/shared=true)")
        return
    b.add(b.catalog.defs.get(("Tool", tool.ref), "", functools.partial(_registry_def, tool),
                             tool.spec),
          field, override, tighten_only=True)


def _registry_def(tool: ToolResource) -> ToolDef:
    spec = tool.spec
    return ToolDef(
        identity=f"tool:{tool.ref}", name=spec.name or tool.meta.name, source="tool",
        description=spec.description, input_schema=spec.input_schema,
        capabilities=spec.capabilities, title=spec.title, output_schema=spec.output_schema,
        runtime=spec.runtime,
    )


def _mcp_server(b: _Builder, server: McpServer, server_key: ServerKey | None,
                field: str) -> None:
    infos = b.catalog.accepted.get((b.skill.ref, server.name)) if server.pin else None
    if infos is None and server_key is not None:
        infos = b.catalog.discovered.get(server_key)
    b.warnings.extend(_credential_warnings(b.skill, server, field))
    tools = b.catalog.tool_defs.tool_defs(b.skill.ref, field, server, infos)
    names = {t.name for t in tools}
    for key in server.overrides:
        if key not in names:
            why = ("its toolFilter leaves out" if server.tool_filter is not None
                   and not server.tool_filter.admits(key) else "has no")
            b.warnings.append(f"{b.skill.subject}: {field}.overrides.{key}: server"
                              f" {server.name} {why} tool {key}")
    for tool in tools:
        b.add(tool, field, server.overrides.get(tool.name))


def _credential_warnings(skill: SkillResource, server: McpServer, field: str) -> list[str]:
    """What of the server's definition looks like a credential written where it is read.

    Names only: a warning never repeats the value it warns about.
    """
    out = []
    names = credential_query_names(server.url or "")
    if names:
        out.append(f"{skill.subject}: {field}.url: query parameter(s) {', '.join(names)} look"
                   f" like credentials, and the URL is written to ConfigMaps that pods in every"
                   f" namespace reaching the skill can read; send them as headers from a Secret"
                   f" (headersFrom)")
    for i, env in enumerate(server.env):
        if env.value is not None and looks_like_credential(env.name):
            out.append(f"{skill.subject}: {field}.env[{i}]: {env.name} looks like a credential"
                       f" but has a literal value, which is copied into ConfigMaps that pods in"
                       f" every namespace reaching the skill can read; use"
                       f" valueFrom.secretKeyRef")
    return out


def _agent_skill(b: _Builder, inline: str | None, cm: ObjectRef | None, cm_ref: object,
                 field: str) -> None:
    text = inline if inline is not None or cm is None else _configmap_text(b, cm, cm_ref, field)
    if text is None:
        return
    try:
        # Kept while the text is the very same string (the spec's, or the
        # ConfigMap's): parsed once, not by every resolution.
        tool = b.catalog.defs.get(("Skill", b.skill.ref), field,
                                  functools.partial(_agent_skill_def, b.skill.ref, text), text)
    except AgentSkillError as err:
        b.problem(field, P.INVALID_AGENT_SKILL, str(err))
        return
    b.add(tool, field)


def _agent_skill_def(skill: ObjectRef, text: str) -> ToolDef:
    doc = parse_skill_md(text)
    return ToolDef(
        identity=f"agentskill:{skill}#{doc.name}", name=doc.name, source="agent_skill",
        description=doc.description, input_schema=OBJECT_SCHEMA, capabilities=READ_ONLY,
        body=doc.body,
    )


def _configmap_text(b: _Builder, ref: ObjectRef, cm_ref: object, field: str) -> str | None:
    key = getattr(cm_ref, "key", "SKILL.md")
    cm = b.catalog.configmaps.get(ref)
    if cm is None:
        nearby = (r.name for r in b.catalog.configmaps if r.namespace == ref.namespace)
        b.problem(f"{field}.configMapRef", P.REF_NOT_FOUND,
                  f"configmap {ref} not found{did_you_mean(ref.name, nearby)}")
        return None
    text = cm.data.get(key)
    if text is None:
        b.problem(f"{field}.configMapRef.key", P.REF_NOT_FOUND,
                  f"configmap {ref} has no key {key}{did_you_mean(str(key), cm.data)}")
    return text


def _builtin(b: _Builder, group: str, field: str) -> None:
    tools = builtin_group(group)
    if tools is None:
        known = ", ".join(sorted(builtin_groups()))
        b.problem(field, P.UNKNOWN_BUILTIN, f"unknown built-in group {group!r}"
                  f"{did_you_mean(group, builtin_groups())}; known: {known}")
        return
    for tool in tools:
        b.add(tool, field)


def _anonymous(skill: SkillResource, tool: InlineTool) -> ToolDef:
    # Annotations are MCP's vocabulary, so they mean what MCP says, defaults
    # included; a tool without them has exactly the capabilities it declares.
    caps: Capabilities = tool.capabilities or EMPTY
    origins: Origins = ()
    if tool.annotations is not None:
        caps, origins = mcp_capabilities(tool.annotations, declared=tool.capabilities)
    return ToolDef(
        identity=f"anon:{skill.ref}#{tool.name}", name=tool.name, source="anonymous",
        description=tool.description, input_schema=tool.input_schema, capabilities=caps,
        title=tool.title, output_schema=tool.output_schema, runtime=tool.runtime,
        origins=origins,
    )


def _check_unique_names(b: _Builder) -> None:
    by_name: dict[str, list[str]] = {}
    for ident, entry in b.own.items():
        by_name.setdefault(entry.tool.name, []).append(ident)
    for name, idents in by_name.items():
        if len(idents) > 1:
            where = ", ".join(f"{b.fields[i]} ({i})" for i in idents)
            b.problem(b.fields[idents[1]], P.DUPLICATE_TOOL_NAME,
                      f"two different tools are named {name}: {where}")
            # The skill is in error; keeping only the first keeps names unique.
            for ident in idents[1:]:
                del b.own[ident]


def _include(b: _Builder, i: int, parsed: ParsedRef, overrides: Mapping[str, Override],
             ) -> IncludeEdge | None:
    field = parsed.field
    ref = b.ref(parsed)
    if ref is None:
        return None
    target = b.catalog.skills.get(ref)
    if target is None:
        b.problem(field, *b.catalog.missing("Skill", ref))
        return None
    if not b.catalog.skill_admits(target, b.ns):
        b.problem(field, P.REF_NOT_PERMITTED,
                  f"skill {ref} is not shared with namespace {b.ns} (its spec.sharing)")
        return None
    return IncludeEdge(i, ref, overrides)
