"""The conditions of every status (KEP-1623): ``Ready`` always present,
``lastTransitionTime`` kept unless the condition's status changes; ``Stalled`` or
``Reconciling`` as Flux's kstatus reads them (docs/gitops.md)."""

from __future__ import annotations

from collections.abc import Sequence

from skillop.model import problems as P
from skillop.model.problems import Problem
from skillop.model.status import MAX_MESSAGE, Condition, RecordedStatus, clip

REF_REASONS = (P.REF_NOT_FOUND, P.REF_NOT_PERMITTED, P.INVALID_REF)
#: Problems that may heal with no change to any spec: an object not applied yet
#: (GitOps applies in any order). They make ``Reconciling=True``; every other
#: problem needs someone to change a spec and makes ``Stalled=True``. Flux's
#: kstatus reads only these two conditions (docs/gitops.md).
HEALING_REASONS = frozenset({P.REF_NOT_FOUND})


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
