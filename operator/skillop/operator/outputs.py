"""What the operator should write, computed purely from a Resolution.

Status and ConfigMap are built whole and compared with what is observed; a
``Plan`` carries only the writes that would change something, so an unchanged
cluster gets zero writes. Every status is built as a status model
(``skillop.model.status``, which the CRD schemas come from) and sent as its
``wire()`` form, so the API server keeps all of it. Conditions follow KEP-1623:
``Ready`` always present, ``lastTransitionTime`` kept unless the condition's
status changes.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from skillop.model import problems as P
from skillop.model.canonical import json_digest
from skillop.model.manifest import ActorResource, SkillResource
from skillop.model.memo import Slot
from skillop.model.names import ACTOR_LABEL, API_GROUP, GROUP_VERSION, ObjectRef
from skillop.model.problems import Problem
from skillop.model.specs import McpServer
from skillop.model.status import (
    MAX_CREDENTIALS,
    MAX_MESSAGE,
    MAX_OUTDATED_PODS,
    MAX_POLICIES,
    MAX_PRUNED,
    MAX_STATUS_TOOLS,
    MAX_WARNINGS,
    ActorStatus,
    AppliedPolicyStatus,
    Condition,
    CredentialStatus,
    McpServerStatus,
    PolicyStatus,
    PrunedStatus,
    RecordedStatus,
    RecordedToolSet,
    SkillStatus,
    StatusTool,
    clip,
    recorded_tools,
)
from skillop.model.wording import count
from skillop.operator.listing import Listing
from skillop.operator.pinning import PinState
from skillop.resolve.inject import Credentials
from skillop.resolve.resolver import Resolution
from skillop.resolve.toolset import (
    EffectiveTool,
    StoredConfigMap,
    configmap_layout,
    configmap_name,
)

MANAGED_BY = {"app.kubernetes.io/managed-by": "skillop"}
HASH_ANNOTATION = "skillop.dev/tools-hash"
REF_REASONS = (P.REF_NOT_FOUND, P.REF_NOT_PERMITTED, P.INVALID_REF)
#: Problems that may heal with no change to any spec: an object not applied yet
#: (GitOps applies in any order). They make ``Reconciling=True``; every other
#: problem needs someone to change a spec and makes ``Stalled=True``. Flux's
#: kstatus reads only these two conditions (docs/gitops.md).
HEALING_REASONS = frozenset({P.REF_NOT_FOUND})


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
    #: The Actor's ConfigMap (the last to be written: with a packed set it holds
    #: the index, so the parts it names are written before it).
    configmap: dict[str, Any] | None = None
    events: tuple[EventSpec, ...] = ()
    #: The parts of a packed set that differ from what is observed, in order.
    parts: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class ObservedConfigMap:
    """What the operator knows of a ConfigMap it manages."""

    name: str
    owner: str | None
    tools_hash: str | None
    data_digest: str
    #: The uid its Actor ownerReference names (None: none); a ConfigMap whose
    #: owner is not the Actor by uid is rewritten (the garbage collector follows
    #: the uid, and deletes a ConfigMap whose owner is gone).
    owner_uid: str | None = None
    #: Both labels (managed-by, and the Actor's name) are as written.
    labelled: bool = True
    #: The resourceVersion seen (a watch event's, or the answer to its own
    #: write): a rewrite asserts it, so a replica that lost the Lease while its
    #: write was on the way cannot overwrite what the new leader wrote since.
    #: Not part of what the ConfigMap says: an echo of its own write is no news.
    resource_version: str | None = field(default=None, compare=False)

    def needs_rewrite(self, actor: ActorResource, data: str, tools_hash: str) -> bool:
        """Whether the ConfigMap differs from the one ``actor`` should have."""
        return (self.data_digest != data or self.tools_hash != tools_hash
                or self.owner_uid != actor.meta.uid or not self.labelled)


def is_managed(meta: Mapping[str, Any]) -> bool:
    """A ConfigMap skillop writes: its managed-by label, or an Actor as controller
    owner (a user may delete a label; the ownerReference is what ownership is)."""
    return _managed_label(meta.get("labels") or {}) or _actor_owner(meta) is not None


def _managed_label(labels: Mapping[str, Any]) -> bool:
    return all(labels.get(k) == v for k, v in MANAGED_BY.items())


def _actor_owner(meta: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return next((o for o in meta.get("ownerReferences") or []
                 if isinstance(o, Mapping) and o.get("kind") == "Actor"
                 and str(o.get("apiVersion", "")).startswith(f"{API_GROUP}/")), None)


def observe_configmap(body: Mapping[str, Any]) -> ObservedConfigMap:
    """What the store keeps of a managed ConfigMap: enough to tell it from the one
    the operator would write. Its Actor: the ownerReference's, else the label's
    (an ownerless ConfigMap, after ``kubectl delete actor --cascade=orphan``)."""
    meta = body.get("metadata") or {}
    labels = meta.get("labels") or {}
    owner_ref = _actor_owner(meta)
    owner = (owner_ref.get("name") if owner_ref is not None else None) or \
        labels.get(ACTOR_LABEL) or None
    return ObservedConfigMap(
        name=str(meta.get("name", "")), owner=str(owner) if owner else None,
        tools_hash=(meta.get("annotations") or {}).get(HASH_ANNOTATION),
        data_digest=data_digest(body.get("data") or {}, body.get("binaryData") or {}),
        owner_uid=str(owner_ref.get("uid")) if owner_ref is not None else None,
        labelled=(_managed_label(labels) and owner is not None
                  and labels.get(ACTOR_LABEL) == owner),
        resource_version=str(meta["resourceVersion"]) if meta.get("resourceVersion") else None)


def data_digest(data: Mapping[str, str], binary: Mapping[str, str] | None = None) -> str:
    """sha256 of a ConfigMap's data (keys and values, NUL-separated: no re-encoding),
    then of its ``binaryData`` (base64, as the API serves it) when it has any."""
    digest = hashlib.sha256()
    for k in sorted(data):
        digest.update(k.encode())
        digest.update(b"\0")
        digest.update(str(data[k]).encode())
        digest.update(b"\0")
    for k in sorted(binary or {}):
        digest.update(b"\1" + k.encode() + b"\0" + str((binary or {})[k]).encode() + b"\0")
    return digest.hexdigest()


def _base64(binary: Mapping[str, bytes]) -> dict[str, str]:
    return {k: base64.b64encode(v).decode() for k, v in binary.items()}


# -- conditions -----------------------------------------------------------------
def condition(type_: str, ok: bool | None, reason: str, message: str, *, generation: int,
              old: RecordedStatus, now: str) -> Condition:
    """``ok`` None: ``Unknown`` (the operator could not tell); the old status's
    transition time is kept while the condition's status stays."""
    status = "Unknown" if ok is None else "True" if ok else "False"
    previous = old.condition(type_)
    since = previous.last_transition_time if previous and previous.status == status else None
    return Condition(type=type_, status=status, reason=reason,
                     message=clip(message, MAX_MESSAGE), observed_generation=generation,
                     last_transition_time=since or now)


def problem_summary(problems: Sequence[Problem], *, limit: int = 5) -> str:
    lines = [p.short() for p in problems[:limit]]
    if len(problems) > limit:
        lines.append(f"... and {len(problems) - limit} more")
    return "; ".join(lines)


def common_conditions(problems: Sequence[Problem], *, generation: int,
                      old: RecordedStatus, now: str, ready_message: str,
                      stale_note: str = "") -> list[Condition]:
    refs = [p for p in problems if p.reason in REF_REASONS]
    if problems:
        ready = condition("Ready", False, problems[0].reason,
                          problem_summary(problems) + stale_note,
                          generation=generation, old=old, now=now)
    else:
        ready = condition("Ready", True, "Resolved", ready_message,
                          generation=generation, old=old, now=now)
    resolved = condition(
        "ResolvedRefs", not refs, refs[0].reason if refs else "Resolved",
        problem_summary(refs) if refs else "all references resolved",
        generation=generation, old=old, now=now)
    return [ready, resolved, *progress_conditions(problems, generation=generation, old=old,
                                                   now=now)]


def progress_conditions(problems: Sequence[Problem], *, generation: int,
                        old: RecordedStatus, now: str) -> list[Condition]:
    """``Stalled`` or ``Reconciling``, present only while True (as Flux's own
    controllers write them): at most one, so kstatus's answer never depends on
    the order of conditions."""
    stuck = [p for p in problems if p.reason not in HEALING_REASONS]
    if stuck:
        return [condition("Stalled", True, stuck[0].reason, problem_summary(stuck),
                          generation=generation, old=old, now=now)]
    if problems:
        return [condition("Reconciling", True, problems[0].reason,
                          "waiting for " + problem_summary(problems),
                          generation=generation, old=old, now=now)]
    return []


def _status_tools(resolution: Resolution) -> list[StatusTool]:
    return [_status_tool(t) for t in resolution.tools[:MAX_STATUS_TOOLS]]


#: A ToolDef's status items by declaring skill and names (``_status_tool``).
_STATUS_ITEMS: Slot[tuple[ObjectRef, str, str], StatusTool] = Slot("status-item", bound=64)


def _status_tool(tool: EffectiveTool) -> StatusTool:
    """A tool's status item, validated once per definition, skill and names (the
    ToolDef memoizes it: every actor reaching the tool lists the same item)."""
    key = (tool.entry.skill, tool.name, tool.binding_name)
    item = _STATUS_ITEMS.get(tool.entry.tool.memo, key)
    if item is None:
        item = _STATUS_ITEMS.put(tool.entry.tool.memo, key, StatusTool(
            name=tool.name, binding_name=tool.binding_name, source=tool.entry.tool.source,
            skill=tool.entry.skill.canonical, qualified_name=tool.entry.qualified_name,
            digest=tool.entry.tool.digest()))
    return item


def _warnings(warnings: Sequence[str]) -> list[str]:
    return [clip(w) for w in warnings[:MAX_WARNINGS]]


def _credentials(resolution: Resolution) -> list[CredentialStatus] | None:
    """Which Secret the set sends where (``resolve.credentials``); None when none."""
    return [CredentialStatus.model_validate(use.to_dict())
            for use in resolution.credentials[:MAX_CREDENTIALS]] or None


def _tools_from(resolution: Resolution) -> str:
    """The Ready message: "3 tools from 1 skill"."""
    return (f"{count(len(resolution.tools), 'tool')} from"
            f" {count(len(resolution.skills), 'skill')}")


def _pruned(resolution: Resolution) -> tuple[list[PrunedStatus], list[str]]:
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


def _same(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
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
    return None if _same(remembered(kind, old), remembered(kind, status)) else status


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
    return None if _same(old, status) else status


# -- actors ---------------------------------------------------------------------
def actor_plan(actor: ActorResource, resolution: Resolution, *, old_status: Mapping[str, Any],
               observed: ObservedConfigMap | None, now: str,
               extra_warnings: Sequence[str] = (),
               credentials: CredentialState | None = None,
               observed_parts: Mapping[str, ObservedConfigMap] | None = None,
               refused: str | None = None) -> Plan:
    """The writes that bring an Actor's ConfigMaps and status up to date;
    ``credentials`` (injection on) adds ``CredentialsReady`` and ``outdatedPods``.
    ``observed_parts``: the parts of a packed set seen, by name. ``refused``: why
    the API server refused the ConfigMaps this plan would write (``ConfigMapRefused``:
    the status says so, and nothing is written but the status)."""
    problems = list(resolution.problems)
    cm_name = configmap_name(actor)
    if refused is not None:
        problems.append(Problem(resolution.subject, "status.configMapName", P.CONFIGMAP_REFUSED,
                                refused))
    good = not problems
    # An oversized set is already a problem of the resolution (TooLarge).
    stored = (configmap_layout(cm_name, resolution.text, resolution.hash,
                               resolution.tools).configmaps if good else ())
    parts = tuple(_configmap(actor, part, resolution.hash) for part in stored[1:]
                  if _differs(actor, part, resolution.hash, (observed_parts or {}).get(part.name)))
    configmap = (_configmap(actor, stored[0], resolution.hash)
                 if stored and _differs(actor, stored[0], resolution.hash, observed) else None)
    recorded = RecordedStatus.read(old_status)
    built = _actor_status(actor, resolution, problems, old_status, recorded, observed, cm_name,
                          now, extra_warnings)
    # The Event is owed for a change of tool set the status has not recorded yet,
    # whether the ConfigMap is written now or was before (a restart between the
    # ConfigMap and the status); it goes out once that status is written, so once.
    events = list(_events(old_status, recorded, resolution)) if good else []
    if credentials is not None:
        built = _with_credentials(built, credentials, recorded, now,
                                  namespace=actor.meta.namespace)
        events += _outdated_event(recorded, credentials)
    status = built.wire()
    return Plan(None if _same(old_status, status) else status, configmap, tuple(events), parts)


def _differs(actor: ActorResource, stored: StoredConfigMap, tools_hash: str,
             observed: ObservedConfigMap | None) -> bool:
    return observed is None or observed.needs_rewrite(
        actor, data_digest(stored.data, _base64(stored.binary)), tools_hash)


def _with_credentials(status: ActorStatus, state: CredentialState,
                      old: RecordedStatus, now: str, *, namespace: str) -> ActorStatus:
    gen = status.observed_generation or 0
    ns = f"namespace {namespace}"
    if state.missing is None:
        cond = condition("CredentialsReady", None, "SecretsNotReadable",
                         f"{state.unknown_reason}: cannot check Secrets "
                         f"{', '.join(state.needed.secrets)} in {ns}",
                         generation=gen, old=old, now=now)
    elif state.missing:
        reason = ("SecretNotFound" if any("Secret" in m for m in state.missing)
                  else "ConfigMapNotFound")
        cond = condition("CredentialsReady", False, reason,
                         f"missing in {ns}: {'; '.join(state.missing)}",
                         generation=gen, old=old, now=now)
    else:
        found = len(state.needed.secrets) + len(state.needed.configmaps)
        cond = condition("CredentialsReady", True, "CredentialsFound",
                         f"{found} Secrets and CA bundles found in {ns}" if found
                         else "the tool set names no Secret",
                         generation=gen, old=old, now=now)
    outdated = list(state.outdated_pods[:MAX_OUTDATED_PODS]) or None
    return status.model_copy(update={"conditions": [*status.conditions, cond],
                                     "outdated_pods": outdated})


def _outdated_event(old: RecordedStatus, state: CredentialState) -> list[EventSpec]:
    """A Warning when pods newly fall out of date (not again on every pass)."""
    before = set(old.outdated_pods)
    new = [p for p in state.outdated_pods if p not in before]
    if not new:
        return []
    wanted = [*state.needed.secrets, *state.needed.configmaps]
    shown = ", ".join(new[:10]) + (f" and {len(new) - 10} more" if len(new) > 10 else "")
    return [EventSpec("Warning", "PodsOutOfDate",
                      f"pods {shown} do not mount all that the tool set names"
                      f" ({', '.join(wanted)}); restart them (kubectl rollout restart)")]


def _actor_status(actor: ActorResource, resolution: Resolution, problems: list[Problem],
                  old: Mapping[str, Any], recorded: RecordedStatus,
                  observed: ObservedConfigMap | None, cm_name: str, now: str,
                  extra_warnings: Sequence[str]) -> ActorStatus:
    gen = actor.meta.generation
    if problems:
        kept = recorded.tools_hash
        stale = (f"; ConfigMap {cm_name} keeps the last good tool set ({kept})"
                 if kept and observed is not None else "")
        # The last good tool set stays described (it is what the ConfigMap holds).
        kept_set = RecordedToolSet.read(old)
        tools_part = ActorStatus(
            tool_count=kept_set.tool_count, tools_hash=kept_set.tools_hash,
            tool_tokens=kept_set.tool_tokens,
            tools=list(kept_set.tools) if kept_set.tools is not None else None,
            credentials=list(kept_set.credentials) if kept_set.credentials else None)
    else:
        stale = ""
        tools_part = ActorStatus(tool_count=len(resolution.tools), tools_hash=resolution.hash,
                                 tool_tokens=resolution.tokens, tools=_status_tools(resolution),
                                 credentials=_credentials(resolution))
    ready_msg = _tools_from(resolution)
    pruned, cut = _pruned(resolution)
    if len(resolution.credentials) > MAX_CREDENTIALS and not problems:
        cut.append(f"the tool set sends {len(resolution.credentials)} Secrets;"
                   f" status.credentials lists the first {MAX_CREDENTIALS}")
    return ActorStatus(
        observed_generation=gen,
        conditions=common_conditions(problems, generation=gen, old=recorded, now=now,
                                     ready_message=ready_msg, stale_note=stale),
        tool_count=tools_part.tool_count,
        tools_hash=tools_part.tools_hash,
        tool_tokens=tools_part.tool_tokens,
        tools=tools_part.tools,
        config_map_name=cm_name,
        credentials=tools_part.credentials,
        skills=[s.canonical for s in resolution.skills],
        pruned=pruned,
        policies=[AppliedPolicyStatus(kind=p.kind, name=p.name, generation=p.generation)
                  for p in resolution.policies[:MAX_POLICIES]] or None,
        warnings=_warnings([*cut, *resolution.warnings, *extra_warnings]),
    )


def _configmap(actor: ActorResource, stored: StoredConfigMap, tools_hash: str,
               ) -> dict[str, Any]:
    """One ConfigMap of the set: each carries the set's hash (a part too: which
    version it belongs to, for who reads it by hand)."""
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": stored.name,
            "namespace": actor.meta.namespace,
            "labels": {**MANAGED_BY, ACTOR_LABEL: actor.meta.name},
            "annotations": {HASH_ANNOTATION: tools_hash},
            "ownerReferences": [{
                "apiVersion": GROUP_VERSION, "kind": "Actor", "name": actor.meta.name,
                "uid": actor.meta.uid, "controller": True, "blockOwnerDeletion": True,
            }],
        },
        "data": dict(stored.data),
    }
    if stored.binary:
        body["binaryData"] = _base64(stored.binary)
    return body


def _events(old_status: Mapping[str, Any], recorded: RecordedStatus,
            resolution: Resolution) -> list[EventSpec]:
    if not recorded.tools_hash or recorded.tools_hash == resolution.hash:
        return []
    # The tools are read (256 at most) only now, when the set changed.
    old_tools = recorded_tools(old_status)
    new_tools = {t.entry.qualified_name: t for t in resolution.tools}
    added = sorted(new_tools.keys() - old_tools.keys())
    removed = sorted(old_tools.keys() - new_tools.keys())
    changed = sorted(q for q in new_tools.keys() & old_tools.keys()
                     if old_tools[q].digest != new_tools[q].entry.tool.digest())
    events = [EventSpec("Normal", "ToolSetChanged",
                        f"{count(len(resolution.tools), 'tool')} (+{len(added)} -{len(removed)}"
                        f" ~{len(changed)}), hash {resolution.hash[:19]}")]
    for qualified, tool in sorted(new_tools.items()):
        old = old_tools.get(qualified)
        before = old.name if old is not None else None
        if before and before != tool.name:
            # Qualified: another tool took the name; bare again: that one is gone.
            why = "name conflict" if tool.name != tool.entry.tool.name else "conflict resolved"
            events.append(EventSpec("Normal", "ToolRenamed", f"{before} -> {tool.name} ({why})"))
    # Only definitions from outside the cluster get their own warning: in-cluster
    # ones changed through a reviewed Skill or Tool, and ToolSetChanged counts them.
    for qualified in (q for q in changed if new_tools[q].entry.tool.source == "mcp"):
        events.append(EventSpec("Warning", "ToolDefinitionChanged",
                                f"{new_tools[qualified].name} ({qualified}) changed definition:"
                                f" {(old_tools[qualified].digest or '')[:19]} ->"
                                f" {new_tools[qualified].entry.tool.digest()[:19]}"))
    return events[:10]


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
        ready_message=_tools_from(resolution))
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
        tools=_status_tools(resolution),
        skills=[s.canonical for s in resolution.skills],
        warnings=_warnings(resolution.warnings),
        mcp_servers=entries,
    ).wire()
    same = _same(remembered("Skill", old_status), remembered("Skill", status))
    return Plan(None if same else status)
