"""``explain --claims`` and ``tools --claims``: the Actor's set as one caller sees
it, decided by the gateway's own ``caller_policy`` on the compiled ToolSet, so the
CLI and the gateway cannot answer differently (docs/api.md, Caller rules)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from skillop.gateway.caller_policy import Allowed, CallerRules, Denied, decide
from skillop.model.caller import Caller, caller_from_claims
from skillop.model.manifest import ActorResource
from skillop.resolve.resolution import Resolution


def caller_for(actor: ActorResource, claims: dict[str, Any]) -> Caller:
    """The caller ``claims`` name, read by the claim names of the Actor's
    ``spec.callers`` (sub and groups without it)."""
    callers = actor.spec.callers
    if callers is None:
        return caller_from_claims(claims)
    return caller_from_claims(claims, subject_claim=callers.subject_claim,
                              groups_claim=callers.groups_claim)


def who(caller: Caller) -> str:
    return "an anonymous caller" if caller.anonymous else f"caller {caller.subject}"


def _rules(resolution: Resolution) -> CallerRules:
    return CallerRules.of(resolution.toolset.caller_rules or ())


def decision_line(resolution: Resolution, binding: str, caller: Caller) -> str:
    """What ``caller`` may do with the set's tool ``binding``, as one line."""
    decision = decide(_rules(resolution), caller, binding)
    if isinstance(decision, Allowed):
        return f"for {who(caller)}: allowed"
    if isinstance(decision, Denied):
        return f"for {who(caller)}: {decision.reason}"
    return f"for {who(caller)}: needs approval ({decision.reason})"


def seen_by(resolution: Resolution, caller: Caller) -> Resolution:
    """``resolution`` with only the tools ``caller`` may list and call (its
    document too, for ``-o json|yaml``)."""
    rules = _rules(resolution)
    if not rules.rules:
        return resolution
    hidden = rules.hidden(rules.matched(caller), [t.binding_name for t in resolution.tools])
    kept = tuple(t for t in resolution.tools if t.binding_name not in hidden)
    document = resolution.toolset
    shown = document.model_copy(update={
        "tools": tuple(t for t in document.tools if t.binding_name not in hidden)})
    view = replace(resolution, tools=kept, build_document=lambda: shown)
    text = shown.canonical()
    return replace(view, render=lambda: (text, document.hash))
