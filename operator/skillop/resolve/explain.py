"""Why an actor has, or lacks, a tool: the path, the overrides, the policy.

Pure and built on the same Resolver, so the explanation can never disagree with
what the operator writes. Each capability is shown with where it came from: an
MCP annotation, an MCP default (a hint the server left out), the declaring
source, or an override (which skill and field applied it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from skillop.model.names import ObjectRef
from skillop.model.tooldef import ToolDef
from skillop.resolve.entries import Entry
from skillop.resolve.limits import TOKEN_CONTRIBUTORS, largest_tools
from skillop.resolve.resolution import Resolution
from skillop.resolve.resolver import Resolver
from skillop.resolve.tokens import ENCODING
from skillop.resolve.tooljson import EffectiveTool


@dataclass(frozen=True, slots=True)
class Explanation:
    has_tool: bool
    lines: tuple[str, ...]
    #: No skill in the input declares a tool by that name: a mistyped question
    #: rather than an answer (the CLI exits 1).
    unknown: bool = False

    def text(self) -> str:
        return "\n".join(self.lines)


UNKNOWN = "no skill in the input declares a tool by that name"


def explain(resolver: Resolver, actor: ObjectRef, tool_name: str) -> Explanation | None:
    resolution = resolver.resolve_actor(actor)
    if resolution is None:
        return None
    found = resolution.tool(tool_name)
    if found is not None:
        lines = [f"{resolution.subject} has tool {found.name} (bindingName {found.binding_name})"]
        lines += _entry_lines(found.entry)
        lines.append("path: " + " -> ".join(r.canonical for r in found.path))
        lines += _token_lines(resolver, resolution, actor, found)
        if found.name != found.entry.tool.name:
            rivals = [t.name for t in resolution.tools
                      if t.entry.tool.name == found.entry.tool.name and t is not found]
            lines.append(f"renamed: another tool is also called {found.entry.tool.name}"
                         f" ({', '.join(rivals)}), so each goes by its qualified name")
        lines += _policy_lines(resolution)
        return Explanation(True, tuple(lines))
    lines = _absence(resolver, resolution, actor, tool_name)
    return Explanation(False, tuple(lines), unknown=lines[-1] == UNKNOWN)


def _entry_lines(entry: Entry) -> list[str]:
    tool = entry.tool
    lines = [f"source: {tool.source} ({tool.identity})", f"declared by: skill {entry.skill}"]
    if tool.mcp_server:
        lines.append(f"mcp server: {tool.mcp_server}")
    if entry.overrides:
        lines.append("overrides applied (deepest first):")
        lines += [f"  - {o.at}: {', '.join(o.fields)}" for o in entry.overrides]
    else:
        lines.append("overrides applied: none")
    if entry.merged:
        lines.append("reached by several paths with different overrides: capabilities merged"
                     " to the most restrictive, description from the first path")
    caps = tool.capabilities.to_dict()
    if not caps:
        return [*lines, "capabilities: none declared"]
    origins = capability_origins(entry)
    lines.append("capabilities (and where each came from):")
    lines += [f"  {key}={json.dumps(value)}  <- {origins[key]}" for key, value in caps.items()]
    return lines


def capability_origins(entry: Entry) -> dict[str, str]:
    """Where each of the entry's capabilities came from: the source's own word
    (annotation, MCP default, declared, built-in), then every override on the
    way up, deepest first, so the one nearest the actor is what is named."""
    tool = entry.tool
    out = dict.fromkeys(tool.capabilities.to_dict(), _declared_by(tool))
    out.update((key, origin) for key, origin in tool.origins if key in out)
    for applied in entry.overrides:
        for field in applied.fields:
            key = field.removeprefix("capabilities.")
            if key != field and key in out:
                out[key] = f"override at {applied.at}"
    return out


def _declared_by(tool: ToolDef) -> str:
    if tool.source == "builtin":
        return "built-in (shipped with skillop)"
    if tool.source == "tool":
        return f"declared by Tool {tool.identity.removeprefix('tool:')}"
    if tool.source == "agent_skill":
        return "Agent Skill (always read-only)"
    return "declared"


def _token_lines(resolver: Resolver, resolution: Resolution, actor: ObjectRef,
                 tool: EffectiveTool) -> list[str]:
    """The tool's share of the set's tokens and, when the set is over its token
    budget, the tools that cost the most (what to cut or disclose by search)."""
    lines = [f"tokens: {tool.tokens} of the set's {resolution.tokens} ({ENCODING})"]
    budget = resolver.effective_policy(resolver.catalog.actors[actor]).max_tool_tokens
    if budget is not None and resolution.tokens > budget.value:
        by = f" set by {budget.policy}" if budget.policy is not None else ""
        lines.append(f"over the token budget of {budget.value}{by} (maxToolTokens);"
                     " the largest tools:")
        lines += [f"  - {t.name}: {t.tokens}"
                  for t in largest_tools(resolution.tools, TOKEN_CONTRIBUTORS)]
    return lines


def _policy_lines(resolution: Resolution) -> list[str]:
    lines = applied_lines(resolution)
    if not resolution.pruned:
        return [*lines, "policy: nothing pruned or dropped for this actor"]
    return [*lines, "policy decisions for this actor:"] + [
        f"  - {p.kind} {p.name}{f' (skill {p.skill})' if p.skill else ''}: {p.reason}"
        for p in resolution.pruned
    ]


def applied_lines(resolution: Resolution) -> list[str]:
    """The SkillPolicies and ClusterSkillPolicies in force, in one line (none: no line)."""
    if not resolution.policies:
        return []
    # A manifest read from a file has no generation (the API server sets it on
    # create): "generation 0" would name a version that never existed.
    return ["policies applied: " + ", ".join(
        f"{p.label} (generation {p.generation})" if p.generation else p.label
        for p in resolution.policies)]


def _dropped_by(resolution: Resolution, entry: Entry) -> str:
    """Who dropped ``entry``. A policy's reason names it and its rule already; the
    Actor's own skillAccessPolicy is named here, as the policies applied are listed
    next and would otherwise read as the cause."""
    for item in resolution.pruned:
        if (item.kind, item.name, item.skill) == ("Tool", entry.tool.name,
                                                  entry.skill.canonical):
            return "policy" if item.policy is not None else "the Actor's own skillAccessPolicy"
    return "policy"


def _absence(resolver: Resolver, resolution: Resolution, actor: ObjectRef,
             tool_name: str) -> list[str]:
    head = f"{resolution.subject} does not have tool {tool_name}"
    renamed = [t.name for t in resolution.tools if t.entry.tool.name == tool_name]
    if renamed:
        return [head, f"several different tools are called {tool_name}, so each goes by its"
                f" qualified name: {', '.join(renamed)}"]
    for entry, reason in resolution.dropped:
        if tool_name in (entry.tool.name, entry.qualified_name):
            return [head, f"dropped by {_dropped_by(resolution, entry)}: {reason}",
                    *applied_lines(resolution), *_entry_lines(entry)]
    actor_obj = resolver.catalog.actors[actor]
    for pruned in resolution.pruned:
        if pruned.kind != "Skill":
            continue
        ref = ObjectRef(*pruned.name.split("/", 1))
        flat = resolver.flattener.flat(ref)
        if flat is None:
            continue
        for entry in flat.entries.values():
            if tool_name in (entry.tool.name, entry.qualified_name):
                return [head, f"it is declared by skill {entry.skill}, reached through skill"
                        f" {ref}, which was pruned: {pruned.reason}",
                        *applied_lines(resolution)]
    for ref in sorted(resolver.catalog.skills):
        view = resolver.view(ref)
        if view and any(tool_name in (e.tool.name, e.qualified_name) for e in view.own):
            return [head, f"skill {ref} declares it, but no skill in {actor_obj.subject}'s"
                    " spec.skills reaches that skill"]
    return [head, UNKNOWN]
