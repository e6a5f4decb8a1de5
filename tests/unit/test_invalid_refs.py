"""A reference to an object that exists but is invalid says so, not "not found"."""

from __future__ import annotations

from typing import Any

from skillop.model.names import ObjectRef
from skillop.operator.store import Store
from skillop.resolve.resolver import Resolver


def body(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "skillop.dev/v1alpha1", "kind": kind,
            "metadata": {"name": name, "namespace": "team-a", "generation": 1}, "spec": spec}


def test_operator_names_the_invalid_dependency_and_heals_when_fixed() -> None:
    store = Store()
    store.upsert(body("Skill", "base", {"bogus": True}))
    store.upsert(body("Skill", "top", {"includes": [{"skill": "base"}]}))
    store.upsert(body("Actor", "agent", {"skills": ["top", "base"]}))
    resolution = Resolver(store.catalog).resolve_actor(ObjectRef("team-a", "agent"))
    assert resolution is not None
    reasons = {(p.subject.name, p.reason) for p in resolution.problems}
    assert reasons == {("agent", "DependencyFailed"), ("top", "DependencyFailed")}
    assert all("team-a/base is invalid" in p.message and "spec.bogus" in p.message
               for p in resolution.problems)
    store.upsert(body("Skill", "base", {"builtins": ["git_operations"]}))
    healed = Resolver(store.catalog).resolve_actor(ObjectRef("team-a", "agent"))
    assert healed is not None and healed.ok and len(healed.tools) == 5
