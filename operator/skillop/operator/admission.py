"""Admission review: which Skill and Actor changes the validating webhook rejects.

Pure: ``review(body, catalog)`` returns one line per reason to reject
(``field: Reason: message``); an empty list means the object is admitted. The
kopf handlers in ``webhook`` only call it and turn the lines into an
``AdmissionError``.

Rejected are the problems that are the object's own fault and cannot go away by
applying other objects: schema errors (unknown fields, bad values, malformed
policy globs), forbidden overrides, malformed references (``server:ns/name``),
invalid inline SKILL.md frontmatter (or a known ConfigMap's) and include cycles
through the object. Unknown or not-shared references are admitted, because
GitOps tools apply objects in any order; they surface in status instead.

The candidate is checked against an overlay of the operator's catalog (the
catalog's tables are copied, never modified), so a Skill that would close an
include cycle is rejected with the cycle's path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from skillop.model import problems as P
from skillop.model.manifest import ActorResource, Resource, SkillResource, parse_object
from skillop.model.problems import Problem, one_line
from skillop.model.specs import ActorSpec, SkillSpec
from skillop.resolve.catalog import Catalog
from skillop.resolve.resolver import Resolver

#: Problem reasons the webhook rejects; every other one (RefNotFound,
#: RefNotPermitted, TooManyTools ...) depends on other objects and is admitted.
REJECTED = frozenset({
    P.INVALID_SPEC,
    P.INVALID_REF,
    P.CYCLE_DETECTED,
    P.FORBIDDEN_OVERRIDE,
    P.INVALID_AGENT_SKILL,
})


#: What goes back to kubectl: each line and all of them together are bounded,
#: whatever the object (a 1 MB field name must not come back as a 1 MB reply).
MAX_LINE = 1024
MAX_LINES = 20
MAX_TOTAL = 8192


def review(body: Any, catalog: Catalog, *, old: Any = None,
           namespace: str | None = None) -> list[str]:
    """Why ``body`` (a Skill or Actor) must be rejected; empty when it is admitted.

    ``old`` is the stored object on an UPDATE: when the spec and labels did not
    change (finalizers, annotations, kopf's own bookkeeping), the update is
    admitted whatever the object's state, so an object can always be cleaned up.
    ``namespace`` is the request's namespace, for objects that carry none yet.
    Whatever ``body`` is (the API server sends objects, but a reviewer must not
    trust that), the answer is a short list of short lines, never an exception.
    """
    if not isinstance(body, Mapping):
        return [f"{P.INVALID_SPEC}: the object must be a mapping, not {type(body).__name__}"]
    if isinstance(old, Mapping) and _same_content(old, body):
        return []
    return bounded(_review(body, catalog, namespace))


def _review(body: Mapping[str, Any], catalog: Catalog, namespace: str | None) -> list[str]:
    kind = body.get("kind")
    if kind not in ("Skill", "Actor"):
        return []
    default_ns = namespace or "default"
    result = parse_object(body, default_namespace=default_ns)
    if result.problems or result.obj is None:
        return _lines(result.problems)
    obj = result.obj
    if not isinstance(obj, Resource):
        return []
    if isinstance(obj.spec, SkillSpec):
        return _lines(_skill_problems(obj, catalog))
    if isinstance(obj.spec, ActorSpec):
        return _lines(_actor_problems(obj, catalog))
    return []


def _skill_problems(skill: SkillResource, catalog: Catalog) -> tuple[Problem, ...]:
    overlay = dataclasses.replace(catalog, skills={**catalog.skills, skill.ref: skill})
    return Resolver(overlay).skill_problems(skill.ref)


def _actor_problems(actor: ActorResource, catalog: Catalog) -> tuple[Problem, ...]:
    overlay = dataclasses.replace(catalog, actors={**catalog.actors, actor.ref: actor})
    resolution = Resolver(overlay).resolve_actor(actor.ref)
    if resolution is None:
        return ()
    # The actor's own problems only; those of the skills it reaches are theirs.
    return tuple(p for p in resolution.problems if p.subject == actor.subject)


def _lines(problems: tuple[Problem, ...]) -> list[str]:
    out: dict[str, None] = {}
    for p in problems:
        if p.reason in REJECTED:
            out[line(p)] = None
    return list(out)


def line(problem: Problem) -> str:
    """``field: Reason: message`` (the object is the one under review)."""
    parts = [problem.shown_field] if problem.field else []
    return ": ".join([*parts, problem.reason, problem.shown_message])


def bounded(lines: list[str]) -> list[str]:
    """At most ``MAX_LINES`` lines of at most ``MAX_LINE`` characters, ``MAX_TOTAL``
    in all; what is left out is counted in a last line."""
    out: list[str] = []
    total = 0
    for text in lines:
        text = one_line(text, MAX_LINE)
        if len(out) == MAX_LINES or total + len(text) > MAX_TOTAL:
            break
        out.append(text)
        total += len(text)
    if len(out) < len(lines):
        out.append(f"... and {len(lines) - len(out)} more")
    return out


def _same_content(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    def labels(obj: Mapping[str, Any]) -> Any:
        meta = obj.get("metadata")
        return meta.get("labels") if isinstance(meta, Mapping) else None

    try:
        return bool(old.get("spec") == new.get("spec") and labels(old) == labels(new))
    except RecursionError:  # objects nested too deep to compare: review the new one
        return False
