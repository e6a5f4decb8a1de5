"""What an Actor's ConfigMaps and status should be, and the Events a change owes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from skillop.model import problems as P
from skillop.model.manifest import ActorResource
from skillop.model.problems import Problem
from skillop.model.status import (
    MAX_CREDENTIALS,
    MAX_OUTDATED_PODS,
    MAX_POLICIES,
    ActorStatus,
    AppliedPolicyStatus,
    RecordedStatus,
    RecordedToolSet,
    recorded_tools,
)
from skillop.model.wording import count
from skillop.operator.conditions import common_conditions, condition
from skillop.operator.configmaps import (
    ObservedConfigMap,
    configmap_body,
    stored_set,
    written_configmap,
)
from skillop.operator.outputs import (
    CredentialState,
    EventSpec,
    Plan,
    clipped_warnings,
    credential_statuses,
    pruned_statuses,
    same_status,
    status_tools,
    tools_from,
)
from skillop.resolve.resolver import Resolution
from skillop.resolve.toolset import StoredConfigMap, configmap_layout, configmap_name


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
    seen = observed_parts or {}
    stored = (configmap_layout(cm_name, resolution.text, resolution.hash, resolution.tools,
                               stored=stored_set(actor, cm_name, observed, seen)).configmaps
              if good else ())
    # A part is written only when it lacks a chunk the index names there.
    parts = tuple(configmap_body(actor, part, None) for part in stored[1:]
                  if (found := seen.get(part.name)) is None or not found.holds(actor, part))
    written = (written_configmap(actor, stored[0], resolution.hash, observed)
               if stored else None)
    stale = _stale_parts(actor, stored, seen)
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
    return Plan(None if same_status(old_status, status) else status, written, tuple(events),
                parts, stale)


def _stale_parts(actor: ActorResource, stored: Sequence[StoredConfigMap],
                 observed_parts: Mapping[str, ObservedConfigMap]) -> tuple[ObservedConfigMap, ...]:
    """The Actor's parts its set no longer has (it shrank, or fits one ConfigMap now):
    deleted after the index (``writing``), once their grace is over (``runtime``,
    ``staleparts``: a pod whose kubelet still shows the index before reads them).
    Only with a set to write (``stored``): while the Actor is not Ready its
    ConfigMaps keep the last good set, parts and all. A ConfigMap of that name that
    another Actor owns is not this one's to delete."""
    if not stored:
        return ()
    kept = {s.name for s in stored}
    return tuple(seen for name, seen in sorted(observed_parts.items())
                 if name not in kept and seen.owner == actor.meta.name)


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
                                 tool_tokens=resolution.tokens, tools=status_tools(resolution),
                                 credentials=credential_statuses(resolution))
    ready_msg = tools_from(resolution)
    pruned, cut = pruned_statuses(resolution)
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
        warnings=clipped_warnings([*cut, *resolution.warnings, *extra_warnings]),
    )


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
