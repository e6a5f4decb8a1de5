"""The cascade benchmark's objects: a base Skill, a chain of Skills over it, top
Skills over the chain, and Actors spread over the tops (``bench/cascade.py``)."""

from __future__ import annotations

from typing import Any

GROUP, VERSION = "skillop.dev", "v1alpha1"


def skill(ns: str, name: str, *, includes: list[str] = (), tool: str,  # type: ignore[assignment]
          description: str, builtins: list[str] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    spec: dict[str, Any] = {
        "description": f"skill {name}",
        "anonymousTools": [{
            "name": tool, "description": description,
            "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
            "capabilities": {"readOnly": True},
        }],
    }
    if includes:
        spec["includes"] = [{"skill": s} for s in includes]
    if builtins:
        spec["builtins"] = list(builtins)
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Skill",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}


def actor(ns: str, name: str, skills: list[str]) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Actor",
            "metadata": {"name": name, "namespace": ns}, "spec": {"skills": skills}}


def cascade_objects(ns: str, actors: int, depth: int, tops: int,
                    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    skills = [skill(ns, "base", tool="probe", description="probe v1",
                    builtins=["git_operations"])]
    previous = "base"
    for k in range(1, depth + 1):
        skills.append(skill(ns, f"chain-{k}", includes=[previous], tool=f"step_{k}",
                            description=f"chain step {k}"))
        previous = f"chain-{k}"
    for t in range(tops):
        skills.append(skill(ns, f"top-{t}", includes=[previous], tool=f"top_{t}",
                            description=f"top skill {t}"))
    return skills, [actor(ns, f"actor-{i:05d}", [f"top-{i % tops}"]) for i in range(actors)]
