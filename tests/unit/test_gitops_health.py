"""What GitOps tools make of the statuses the operator writes.

* Argo CD: the health script in docs/gitops.md, run by a real Lua runtime (lupa),
  on statuses built by the operator's own planner.
* Flux: kstatus's rules for custom resources (sigs.k8s.io/cli-utils,
  pkg/kstatus/status/generic.go and core.go), transcribed below: only
  ``deletionTimestamp``, ``observedGeneration`` and the abnormal-true conditions
  ``Reconciling`` and ``Stalled`` count; anything else is Current.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import lupa
import pytest
from skillkit import actor, anon, catalog, ref, skill

from skillop.operator.actorplan import actor_plan
from skillop.operator.outputs import skill_plan
from skillop.resolve.resolver import Resolver

DOC = Path(__file__).resolve().parents[2] / "docs" / "gitops.md"
T0 = "2024-01-01T00:00:00Z"
Doc = dict[str, Any]


def argo_script() -> str:
    """The Lua block the docs tell users to paste for Skills (and Actors)."""
    text = DOC.read_text()
    found = re.search(r"resource\.customizations\.health\.skillop\.dev_Skill: \|\n"
                      r"((?:    .*\n|\n)+?)  resource\.customizations", text)
    assert found, "docs/gitops.md has no Argo CD health script for skillop.dev_Skill"
    return "\n".join(line[4:] for line in found.group(1).splitlines())


def argo_health(obj: Doc) -> tuple[str, str]:
    lua = lupa.LuaRuntime(unpack_returned_tuples=True)
    run = lua.eval(f"function(obj)\n{argo_script()}\nend")
    result = run(_to_lua(lua, obj))
    return str(result["status"]), str(result["message"])


def _to_lua(lua: Any, value: Any) -> Any:
    if isinstance(value, dict):
        return lua.table_from({k: _to_lua(lua, v) for k, v in value.items()})
    if isinstance(value, list):
        return lua.table_from([_to_lua(lua, v) for v in value])  # 1-indexed, as ipairs wants
    return value


def kstatus(obj: Doc) -> str:
    """kstatus's GetStatus for a kind it has no special rules for."""
    meta, status = obj.get("metadata", {}), obj.get("status") or {}
    if meta.get("deletionTimestamp"):
        return "Terminating"
    observed = status.get("observedGeneration")
    if observed is not None and observed != meta.get("generation"):
        return "InProgress"
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Reconciling" and cond.get("status") == "True":
            return "InProgress"
        if cond.get("type") == "Stalled" and cond.get("status") == "True":
            return "Failed"
    return "Current"


TOOLS = [anon("lint", description="lint"), anon("fmt", description="format")]


def actor_object(docs: list[Doc], *, generation: int = 3, name: str = "team-a/dev") -> Doc:
    """The Actor as the API server shows it after the operator's status write."""
    cat = catalog(docs)
    resolution = Resolver(cat).resolve_actor(ref(name))
    assert resolution is not None
    plan = actor_plan(cat.actors[ref(name)], resolution, old_status={}, observed=None, now=T0)
    assert plan.status is not None
    return {"metadata": {"name": "dev", "namespace": "team-a", "generation": generation},
            "status": plan.status}


def skill_object(docs: list[Doc], name: str) -> Doc:
    cat = catalog(docs)
    resolution = Resolver(cat).resolve_skill(ref(name))
    assert resolution is not None
    resource = cat.skills[ref(name)]
    plan = skill_plan(resource, resolution, old_status={}, servers=[], now=T0)
    assert plan.status is not None
    return {"metadata": {"generation": resource.meta.generation}, "status": plan.status}


def _dev(*skills: str, **spec: Any) -> Doc:
    doc = actor("dev", skills=skills, **spec)
    doc["metadata"]["generation"] = 3
    return doc


GOOD = [skill("base", anonymousTools=TOOLS), _dev("base")]
CYCLE = [skill("a", includes=[{"skill": "b"}]), skill("b", includes=[{"skill": "a"}]), _dev("a")]
OVER_BUDGET = [skill("base", anonymousTools=TOOLS), _dev("base", skillAccessPolicy={"maxTools": 1})]
MISSING = [_dev("not-applied-yet")]


def test_a_resolved_actor_is_healthy_and_current() -> None:
    obj = actor_object(GOOD)
    assert argo_health(obj)[0] == "Healthy"
    assert kstatus(obj) == "Current"


@pytest.mark.parametrize("docs", [CYCLE, OVER_BUDGET], ids=["cycle", "maxTools"])
def test_a_problem_only_a_spec_change_fixes_is_degraded_and_failed(docs: list[Doc]) -> None:
    obj = actor_object(docs)
    status, message = argo_health(obj)
    assert status == "Degraded"
    assert message.split(":")[0] in {"CycleDetected", "TooManyTools"}
    assert kstatus(obj) == "Failed", "Flux would call this Actor healthy"


def test_a_reference_not_yet_applied_keeps_flux_waiting() -> None:
    # GitOps tools apply objects in any order: a missing Skill may arrive in the
    # same sync, so the Actor is in progress, not failed, and not yet healthy.
    obj = actor_object(MISSING)
    assert argo_health(obj)[0] == "Degraded"
    assert kstatus(obj) == "InProgress"


def test_an_unobserved_generation_is_progressing_for_both() -> None:
    obj = actor_object(GOOD, generation=4)  # status written for generation 3
    assert argo_health(obj)[0] == "Progressing"
    assert kstatus(obj) == "InProgress"


def test_no_status_yet_is_progressing_in_argo() -> None:
    assert argo_health({"metadata": {"generation": 1}})[0] == "Progressing"


def test_skill_statuses_follow_the_same_rules() -> None:
    good = skill_object(GOOD, "team-a/base")
    assert (argo_health(good)[0], kstatus(good)) == ("Healthy", "Current")
    cyclic = skill_object(CYCLE, "team-a/a")
    assert (argo_health(cyclic)[0], kstatus(cyclic)) == ("Degraded", "Failed")


def test_a_recovered_actor_drops_stalled() -> None:
    bad = actor_object(OVER_BUDGET)
    cat = catalog(GOOD)
    resolution = Resolver(cat).resolve_actor(ref("team-a/dev"))
    assert resolution is not None
    plan = actor_plan(cat.actors[ref("team-a/dev")], resolution, old_status=bad["status"],
                      observed=None, now=T0)
    assert plan.status is not None
    types = {c["type"]: c["status"] for c in plan.status["conditions"]}
    assert types.get("Stalled", "False") == "False"
    assert kstatus({"metadata": {"generation": 3}, "status": plan.status}) == "Current"
