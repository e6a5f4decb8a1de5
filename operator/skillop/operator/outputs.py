"""What the operator should write, computed purely from a Resolution.

Status and ConfigMap are built whole and compared with what is observed; a
``Plan`` carries only the writes that would change something, so an unchanged
cluster gets zero writes. Every status is built as a status model
(``skillop.model.status``, which the CRD schemas come from) and sent as its
``wire()`` form, so the API server keeps all of it. Here: what every plan
shares, the statuses of Skills and policies and of a spec that does not parse;
an Actor's plan is ``actorplan``'s, its ConfigMaps ``configmaps``', the
conditions ``conditions``'.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from skillop.model.canonical import json_digest
from skillop.model.manifest import SkillResource
from skillop.model.memo import Slot
from skillop.model.names import ObjectRef
from skillop.model.problems import Problem
from skillop.model.specs import McpServer
from skillop.model.status import (
    MAX_CREDENTIALS,
    MAX_PRUNED,
    MAX_STATUS_TOOLS,
    MAX_WARNINGS,
    ActorStatus,
    CredentialStatus,
    McpServerStatus,
    PolicyStatus,
    PrunedStatus,
    RecordedStatus,
    SkillStatus,
    StatusTool,
    clip,
)
from skillop.model.wording import count
from skillop.operator.conditions import common_conditions, condition, problem_summary
from skillop.operator.configmaps import ObservedConfigMap, Written
from skillop.operator.listing import Listing
from skillop.operator.pinning import PinState
from skillop.resolve.inject import Credentials
from skillop.resolve.resolver import Resolution
from skillop.resolve.toolset import EffectiveTool


@dataclass(frozen=True, slots=True)
class EventSpec:
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass(frozen=True)
class CredentialState:
    """What an Actor's status says of its credentials (names and keys, never values):
    ``operator.credentials`` finds it, ``actor_plan`` writes it."""

    needed: Credentials
    #: One phrase per missing object or key (``Secret docker-auth``, ``key token
    #: of Secret git-env``); None: the operator could not look.
    missing: tuple[str, ...] | None = ()
    #: Why it could not look, when ``missing`` is None.
    unknown_reason: str = ""
    #: The Actor's running pods that do not mount everything ``needed`` names.
    outdated_pods: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Plan:
    status: dict[str, Any] | None = None
    #: The Actor's ConfigMap with its digest (the last to be written: with a packed
    #: set it holds the index, so the parts it names are written before it).
    written: Written | None = None
    events: tuple[EventSpec, ...] = ()
    #: The parts of a packed set that differ from what is observed, in order.
    parts: tuple[dict[str, Any], ...] = ()
    #: Parts of the Actor's set that its index no longer names (the set shrank):
    #: deleted once the Actor's ConfigMap, which holds the index, is written.
    stale: tuple[ObservedConfigMap, ...] = ()

    @property
    def configmap(self) -> dict[str, Any] | None:
        """The Actor's ConfigMap's body (None: it is not written)."""
        return self.written.body if self.written is not None else None


def status_tools(resolution: Resolution) -> list[StatusTool]:
    return [_status_tool(t) for t in resolution.tools[:MAX_STATUS_TOOLS]]


#: A ToolDef's status items by declaring skill and names (``_status_tool``).
_STATUS_ITEMS: Slot[tuple[ObjectRef, str, str], StatusTool] = Slot("status-item", bound=64)


def _status_tool(tool: EffectiveTool) -> StatusTool:
    """A tool's status item, validated once per definition, skill and names (the
    ToolDef memoizes it: every actor reaching the tool lists the same item)."""
    key = (tool.entry.skill, tool.name, tool.binding_name)
    item = _STATUS_ITEMS.get(tool.entry.tool.memo, key)
    if item is None:
        # Constructed, not validated: every value is a name, a reference or a
        # digest, far below ``Short``'s 1,024 characters. All six fields are set,
        # so the items share one fields-set (a set each was 216 bytes per item
        # kept, one item per tool of every Skill).
        item = _STATUS_ITEMS.put(tool.entry.tool.memo, key, StatusTool.model_construct(
            _STATUS_TOOL_FIELDS, name=tool.name, binding_name=tool.binding_name,
            source=tool.entry.tool.source, skill=tool.entry.skill.canonical,
            qualified_name=tool.entry.qualified_name, digest=tool.entry.tool.digest()))
    return item


#: The fields ``_status_tool`` sets (it sets them all), shared by its items.
_STATUS_TOOL_FIELDS = set(StatusTool.model_fields)


def clipped_warnings(warnings: Sequence[str]) -> list[str]:
    return [clip(w) for w in warnings[:MAX_WARNINGS]]


def credential_statuses(resolution: Resolution) -> list[CredentialStatus] | None:
    """Which Secret the set sends where (``resolve.credentials``); None when none."""
    return [CredentialStatus.model_validate(use.to_dict())
            for use in resolution.credentials[:MAX_CREDENTIALS]] or None


def tools_from(resolution: Resolution) -> str:
    """The Ready message: "3 tools from 1 skill"."""
    return (f"{count(len(resolution.tools), 'tool')} from"
            f" {count(len(resolution.skills), 'skill')}")


def pruned_statuses(resolution: Resolution) -> tuple[list[PrunedStatus], list[str]]:
    """The pruned items the status holds, and a warning when there are more."""
    items = [PrunedStatus.model_validate(p.to_dict()) for p in resolution.pruned[:MAX_PRUNED]]
    more = len(resolution.pruned) - len(items)
    return items, ([f"{count(len(resolution.pruned), 'item')} pruned; status.pruned lists the first"
                    f" {MAX_PRUNED}"] if more > 0 else [])


def remembered(kind: str, status: Mapping[str, Any]) -> dict[str, Any]:
    """What the store keeps of a status: a Skill's tool list only as a digest.

    Nothing reads a Skill's old tool list, and with 10,000 Skills the lists were
    most of the operator's memory; equality of the digest is what "unchanged"
    needs. An Actor's list stays whole: its events compare old and new tools.
    """
    out = dict(status)
    if kind == "Skill" and isinstance(out.get("tools"), list):
        out["tools"] = json_digest(out["tools"])
    return out


def same_status(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    return old is not None and {k: v for k, v in old.items() if v is not None} == new


def invalid_status(kind: str, problems: Sequence[Problem], *, generation: int,
                   old: Mapping[str, Any], now: str) -> dict[str, Any] | None:
    """The status of an object whose spec does not parse: Ready=False with every problem.

    The rest of the last good status stays (an Actor's ConfigMap keeps that tool
    set). A Skill's tool list, which the store keeps only as a digest, is left out
    with its count and hash: sending the digest where the schema wants a list is
    what a real API server rejects, and the status would never say what is wrong.
    None when nothing changes.
    """
    model = ActorStatus if kind == "Actor" else SkillStatus
    fields = {f.alias for f in model.model_fields.values()}
    kept = {k: v for k, v in old.items() if k in fields and v is not None}
    if not isinstance(kept.get("tools"), list):
        for field_ in ("tools", "toolCount", "toolsHash", "toolTokens"):
            kept.pop(field_, None)
    conditions = common_conditions(problems, generation=generation,
                                   old=RecordedStatus.read(old), now=now, ready_message="")
    status = model.model_validate({**kept, "observedGeneration": generation,
                                   "conditions": [c.wire() for c in conditions]}).wire()
    return None if same_status(remembered(kind, old), remembered(kind, status)) else status


def policy_status(kind: str, problems: Sequence[Problem], *, generation: int,
                  old: Mapping[str, Any], now: str) -> dict[str, Any] | None:
    """A SkillPolicy's or ClusterSkillPolicy's status: Ready once it is in force;
    False, with every problem, while its spec is invalid (the Actors it may govern
    keep their last good tool set meanwhile). None when nothing changes."""
    recorded = RecordedStatus.read(old)
    if problems:
        ready = condition("Ready", False, problems[0].reason,
                          problem_summary(problems) + "; the Actors it may govern keep their"
                          " last good tool set", generation=generation,
                          old=recorded, now=now)
    else:
        scope = ("every namespace its selector matches" if kind == "ClusterSkillPolicy"
                 else "its namespace")
        ready = condition("Ready", True, "InForce", f"applies to the Actors of {scope}",
                          generation=generation, old=recorded, now=now)
    status = PolicyStatus(observed_generation=generation, conditions=[ready]).wire()
    return None if same_status(old, status) else status


# -- skills ---------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ServerReport:
    """One MCP server of a skill: what discovery knows of it (its ``Listing``, shared
    by every Skill naming the server with the same credentials) and this Skill's
    pins. The status entry, and the Discovered and Pinned conditions, derive from it."""

    name: str
    #: How many tools the Skill declares for it (counted until a listing succeeds).
    declared_tools: int
    url: str | None = None
    #: None: not discovered (stdio, discovery off, or not listed yet).
    listing: Listing | None = None
    #: Pinned servers with an accepted list.
    pins: PinState | None = None

    @classmethod
    def declared(cls, server: McpServer) -> ServerReport:
        """A server not being discovered: its declared tools, nothing else known."""
        return cls(server.name, len(server.tools))

    @property
    def error(self) -> str | None:
        return self.listing.error if self.listing is not None else None

    def status(self) -> McpServerStatus:
        """The status entry; ``error`` is cut to what the status may hold."""
        listing = self.listing
        if listing is None:
            return McpServerStatus(name=self.name, tool_count=self.declared_tools)
        return McpServerStatus(
            name=self.name, url=self.url,
            tool_count=self.declared_tools if listing.tool_count is None
            else listing.tool_count,
            last_sync=listing.last_sync, tools_digest=listing.tools_digest,
            error=clip(listing.error) if listing.error is not None else None,
            pinned_digests=dict(self.pins.digests) if self.pins is not None else None)


def skill_plan(skill: SkillResource, resolution: Resolution, *, old_status: Mapping[str, Any],
               servers: Sequence[ServerReport], now: str) -> Plan:
    gen = skill.meta.generation
    recorded = RecordedStatus.read(old_status)
    problems = list(resolution.problems)
    conditions = common_conditions(
        problems, generation=gen, old=recorded, now=now,
        ready_message=tools_from(resolution))
    entries = [s.status() for s in servers]
    # (why, the clipped entry) of each server whose last listing failed
    failing = [(s.listing.reason, e) for s, e in zip(servers, entries, strict=True)
               if s.listing is not None and e.error]
    if any(s.url for s in servers):
        conditions.append(condition(
            "Discovered", not failing,
            (failing[0][0] or "DiscoveryFailed") if failing else "Discovered",
            "; ".join(f"{e.name}: {e.error}" for _, e in failing) if failing
            else "all MCP servers listed", generation=gen, old=recorded, now=now))
    pins = [(s.name, s.pins) for s in servers if s.pins is not None]
    if pins:
        broken = [f"{name}: {v}" for name, pin in pins for v in pin.violations]
        conditions.append(condition(
            "Pinned", not broken, "PinViolation" if broken else "Accepted",
            "; ".join(broken[:10]) + (f"; ... and {len(broken) - 10} more"
                                      if len(broken) > 10 else "")
            if broken else "every served definition is accepted",
            generation=gen, old=recorded, now=now))
    status = SkillStatus(
        observed_generation=gen,
        conditions=conditions,
        tool_count=len(resolution.tools),
        tools_hash=resolution.hash,
        tool_tokens=resolution.tokens,
        tools=status_tools(resolution),
        skills=[s.canonical for s in resolution.skills],
        warnings=clipped_warnings(resolution.warnings),
        mcp_servers=entries,
    ).wire()
    same = same_status(remembered("Skill", old_status), remembered("Skill", status))
    return Plan(None if same else status)
