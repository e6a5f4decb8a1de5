"""The operator against a real kube-apiserver: what the emulated API cannot show.

One operator process runs for the module over the examples (and a cascade
namespace of its own); the audit log is the write counter.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
import skillkit
from controlplane import ControlPlane
from realkit import (
    ROOT,
    SKILLOP,
    RealCluster,
    assert_statuses_kept,
    operator_process,
    wait_quiet,
)

from clusterkit import GROUP, VERSION, wait_for
from skillop.model.toolset import TOOLS_KEY, default_configmap_name

pytestmark = pytest.mark.realapi

EXAMPLES = ROOT / "examples"
EXAMPLE_NAMESPACES = ("team-a", "platform")
CASCADE = "realapi-cascade"
ACTORS = [("team-a", "developer"), ("team-a", "reviewer")]


class Running:
    """The module's operator process, which a test may restart."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self._stack: Any = None
        self.proc: Any = None

    def start(self) -> None:
        import contextlib

        self._stack = contextlib.ExitStack()
        self.proc = self._stack.enter_context(operator_process(self.plane))

    def stop(self) -> None:
        if self._stack is not None:
            self._stack.close()
            self._stack = None


@pytest.fixture(scope="module")
def examples(real: RealCluster) -> Iterator[Running]:
    real.apply_dir(EXAMPLES)
    running = Running(real.plane)
    running.start()
    try:
        for ns, name in ACTORS:
            real.wait_ready("Actor", ns, name, timeout=30)
        yield running
    finally:
        running.stop()
        real.delete_namespaces(*EXAMPLE_NAMESPACES, CASCADE)
        # Cluster-scoped: outlives the namespaces, and would govern later tests' Actors.
        real.delete("ClusterSkillPolicy", "", "tenants")


def offline(actor: str) -> dict[str, Any]:
    """The offline CLI's ToolSet for an example actor."""
    out = subprocess.run([SKILLOP, "tools", actor, "-f", str(EXAMPLES), "-o", "json"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def test_examples_reach_ready_with_owned_configmaps(real: RealCluster, examples: Running) -> None:
    for ns, name in ACTORS:
        actor = real.get("Actor", ns, name)
        status = actor["status"]
        assert status["observedGeneration"] == actor["metadata"]["generation"]
        cm = wait_for(lambda n=status["configMapName"], s=ns: real.configmap(s, n), timeout=10)
        (owner,) = cm.metadata.owner_references
        assert (owner.api_version, owner.kind, owner.name, owner.uid) == (
            f"{GROUP}/{VERSION}", "Actor", name, actor["metadata"]["uid"])
        assert owner.controller is True
        doc = json.loads(cm.data[TOOLS_KEY])
        # The operator and the offline CLI agree on the ToolSet, hash first.
        expected = offline(f"{ns}/{name}")
        assert doc["hash"] == status["toolsHash"] == expected["hash"]
        assert cm.metadata.annotations["skillop.dev/tools-hash"] == expected["hash"]
        assert doc["tools"] == expected["tools"]
    for skill in real.list("Skill", "team-a"):
        ready = next(c for c in skill["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "True", (skill["metadata"]["name"], ready)


def test_restart_writes_nothing(real: RealCluster, examples: Running) -> None:
    wait_quiet(real.plane)
    examples.stop()
    before = {(o["metadata"]["namespace"], o["metadata"]["name"]): o["metadata"]["resourceVersion"]
              for kind in ("Skill", "Actor") for ns in EXAMPLE_NAMESPACES
              for o in real.list(kind, ns)}
    examples.start()  # returns once its watches are open, i.e. the cluster is listed
    time.sleep(2.0)
    writes = real.plane.writes(since=examples.proc.started)
    assert [(w["verb"], w["requestURI"]) for w in writes] == []
    after = {(o["metadata"]["namespace"], o["metadata"]["name"]): o["metadata"]["resourceVersion"]
             for kind in ("Skill", "Actor") for ns in EXAMPLE_NAMESPACES
             for o in real.list(kind, ns)}
    assert after == before


def skill(name: str, *, includes: tuple[str, ...] = (), description: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"anonymousTools": [{
        "name": f"{name.replace('-', '_')}_tool", "description": description or f"from {name}",
        "capabilities": {"readOnly": True}}]}
    if includes:
        spec["includes"] = [{"skill": s} for s in includes]
    return skillkit.skill(name, CASCADE, **spec)


def actor(name: str, skills: list[str]) -> dict[str, Any]:
    return skillkit.actor(name, CASCADE, skills=skills)


def cascade_hashes(real: RealCluster) -> dict[str, tuple[str | None, str | None]]:
    """Actor -> (status.toolsHash, its ConfigMap's hash annotation)."""
    cms = {cm.metadata.name: (cm.metadata.annotations or {}).get("skillop.dev/tools-hash")
           for cm in real.core.list_namespaced_config_map(CASCADE).items}
    return {a["metadata"]["name"]: ((a.get("status") or {}).get("toolsHash"),
                                    cms.get(default_configmap_name(a['metadata']['name'])))
            for a in real.list("Actor", CASCADE)}


def test_a_deep_change_reaches_every_dependent_actor(real: RealCluster,
                                                     examples: Running) -> None:
    real.namespace(CASCADE)
    real.apply(skill("base", description="probe v1"))
    for k in range(1, 5):
        real.apply(skill(f"chain-{k}", includes=("base" if k == 1 else f"chain-{k - 1}",)))
    for t in range(2):
        real.apply(skill(f"top-{t}", includes=("chain-4",)))
    actors = [f"actor-{i:02d}" for i in range(12)]
    for i, name in enumerate(actors):
        real.apply(actor(name, [f"top-{i % 2}"]))

    def settled() -> dict[str, tuple[str | None, str | None]] | None:
        hashes = cascade_hashes(real)
        ok = len(hashes) == len(actors) and all(h and h == c for h, c in hashes.values())
        return hashes if ok else None

    before = wait_for(settled, timeout=30, interval=0.2, message="cascade actors ready")
    real.patch_spec("Skill", CASCADE, "base", skill("base", description="probe v2")["spec"])

    def all_changed() -> bool:
        now = settled()
        return now is not None and all(now[a][0] != before[a][0] for a in actors)

    wait_for(all_changed, timeout=30, interval=0.2, message="every actor has the new hash")
    for name in actors:
        cm = real.configmap(CASCADE, default_configmap_name(name))
        tools = {t["name"]: t for t in json.loads(cm.data[TOOLS_KEY])["tools"]}
        assert tools["base_tool"]["description"] == "probe v2"


def test_deleting_an_actor_collects_its_configmap(real: RealCluster, examples: Running) -> None:
    name = default_configmap_name("reviewer")
    assert real.configmap("team-a", name) is not None
    real.delete("Actor", "team-a", "reviewer")
    # The controller manager's garbage collector, following the ownerReference.
    wait_for(lambda: real.configmap("team-a", name) is None, timeout=60, interval=0.2,
             message=f"ConfigMap team-a/{name} garbage-collected")
    assert real.configmap("team-a", default_configmap_name("developer")) is not None


def test_every_status_written_survives_the_schema(real: RealCluster, examples: Running) -> None:
    """What the operator sent is what the server kept: nothing pruned, nothing rejected."""
    wait_quiet(real.plane)
    assert assert_statuses_kept(real.plane) >= 10
    # And read back now: each object's status is the last one written to it.
    last: dict[tuple[str, str, str], dict[str, Any]] = {}
    for event in real.plane.writes():
        ref = event["objectRef"]
        if ref.get("subresource") == "status" and "requestObject" in event:
            last[ref["resource"], ref["namespace"], ref["name"]] = event["responseObject"]
    kinds = {"skills": "Skill", "actors": "Actor"}
    for (resource, ns, name), obj in last.items():
        if resource in kinds and ns in (*EXAMPLE_NAMESPACES, CASCADE) \
                and (ns, name) != ("team-a", "reviewer"):
            assert real.get(kinds[resource], ns, name)["status"] == obj["status"]


