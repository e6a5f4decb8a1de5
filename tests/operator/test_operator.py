"""The real kopf operator against the emulated API: outputs, cascade, failures, restarts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from operatorkit import ROOT, Cluster, operator, wait_for

from skillop.cli.load import load_paths
from skillop.model.names import ObjectRef
from skillop.model.toolset import TOOLS_KEY, default_configmap_name
from skillop.resolve.catalog import Catalog
from skillop.resolve.resolver import Resolver

EXAMPLES = ROOT / "examples"


def offline_hash(actor: str, path: Path = EXAMPLES) -> str:
    resolver = Resolver(Catalog.of(load_paths([str(path)]).objects))
    resolution = resolver.resolve_actor(ObjectRef(*actor.split("/")))
    assert resolution is not None and resolution.ok
    return resolution.hash


def cm_hash(cluster: Cluster, ns: str, name: str) -> str | None:
    cm = cluster.configmap(ns, name)
    return None if cm is None else cm.metadata.annotations.get("skillop.dev/tools-hash")


def test_examples_become_configmaps_and_statuses(running: Cluster) -> None:
    running.apply_dir(EXAMPLES)
    ready = running.wait_ready("Actor", "team-a", "developer")
    running.wait_ready("Actor", "team-a", "reviewer")
    assert ready["reason"] == "Resolved"
    status = running.get("Actor", "team-a", "developer")["status"]
    cm = wait_for(lambda: running.configmap("team-a", default_configmap_name("developer")))
    doc = json.loads(cm.data[TOOLS_KEY])
    # The operator and the offline CLI agree to the byte on the hash.
    assert doc["hash"] == status["toolsHash"] == offline_hash("team-a/developer")
    assert cm.metadata.annotations["skillop.dev/tools-hash"] == doc["hash"]
    assert cm.metadata.labels["app.kubernetes.io/managed-by"] == "skillop"
    owner = cm.metadata.owner_references[0]
    assert (owner.kind, owner.name) == ("Actor", "developer")
    assert cm.data["agent-skill.release-notes.md"].startswith("# Release notes")
    assert status["toolCount"] == len(doc["tools"]) == len(status["tools"])
    assert status["observedGeneration"] == 1
    assert status["configMapName"] == default_configmap_name("developer")
    reviewer = running.get("Actor", "team-a", "reviewer")["status"]
    assert running.configmap("team-a", default_configmap_name("reviewer")) is not None
    assert {"kind": "Skill", "name": "team-a/devops-toolkit",
            "reason": "denied by skillAccessPolicy.deny '*/devops-*'"} in reviewer["pruned"]
    skill = running.wait_ready("Skill", "team-a", "full-stack-dev")
    assert skill["status"] == "True"


def test_deep_change_updates_every_dependent_actor(running: Cluster) -> None:
    running.apply_dir(EXAMPLES)
    running.wait_ready("Actor", "team-a", "developer")
    running.wait_ready("Actor", "team-a", "reviewer")
    before = {a: running.get("Actor", "team-a", a)["status"]["toolsHash"]
              for a in ("developer", "reviewer")}
    # platform/read-only-git is reached by both actors, two levels down for one of them.
    running.patch_spec("Skill", "platform", "read-only-git",
                       {"description": "Git history", "builtins": ["git_operations",
                                                                   "shell_operations"]})
    wait_for(lambda: running.get("Actor", "team-a", "developer")["status"]["toolsHash"]
             != before["developer"], message="developer re-resolved")
    dev = running.get("Actor", "team-a", "developer")["status"]
    assert cm_hash(running, "team-a", default_configmap_name("developer")) == dev["toolsHash"]
    assert "shell_execute" in {t["name"] for t in dev["tools"]}
    # unsafe and destructive: the reviewer's policy drops it, says so, and its
    # tool set (and ConfigMap) stay as they were.
    wait_for(lambda: any(p["kind"] == "Tool" and p["name"] == "shell_execute"
                         for p in running.get("Actor", "team-a", "reviewer")["status"]["pruned"]),
             message="reviewer reports the dropped tool")
    assert running.get("Actor", "team-a", "reviewer")["status"]["toolsHash"] == before["reviewer"]


def test_cycle_then_fix_keeps_last_good_configmap(running: Cluster) -> None:
    running.apply_dir(EXAMPLES)
    running.wait_ready("Actor", "team-a", "developer")
    good = cm_hash(running, "team-a", default_configmap_name("developer"))
    running.patch_spec("Skill", "team-a", "deploy", {"includes": [{"skill": "full-stack-dev"}]})
    ready = running.wait_ready("Actor", "team-a", "developer", "False")
    assert ready["reason"] == "CycleDetected"
    assert "team-a/deploy -> team-a/full-stack-dev" in ready["message"]
    assert "keeps the last good tool set" in ready["message"]
    skill = running.wait_ready("Skill", "team-a", "deploy", "False")
    assert skill["reason"] == "CycleDetected"
    assert cm_hash(running, "team-a", default_configmap_name("developer")) == good
    running.patch_spec("Skill", "team-a", "deploy", {"includes": None})
    running.wait_ready("Actor", "team-a", "developer")
    assert cm_hash(running, "team-a", default_configmap_name("developer")) == good


def test_deleted_skill_makes_dependents_unready_and_keeps_configmap(running: Cluster) -> None:
    running.apply_dir(EXAMPLES)
    running.wait_ready("Actor", "team-a", "developer")
    good = cm_hash(running, "team-a", default_configmap_name("developer"))
    running.delete("Skill", "team-a", "testing")
    ready = running.wait_ready("Actor", "team-a", "developer", "False")
    assert ready["reason"] == "RefNotFound"
    assert "skill team-a/testing not found" in ready["message"]
    status = running.get("Actor", "team-a", "developer")["status"]
    refs = next(c for c in status["conditions"] if c["type"] == "ResolvedRefs")
    assert refs["status"] == "False"
    assert status["toolsHash"] == good == cm_hash(running, "team-a",
                                                  default_configmap_name("developer"))


def test_restart_of_an_unchanged_cluster_writes_nothing(cluster: Cluster) -> None:
    with operator():
        cluster.apply_dir(EXAMPLES)
        cluster.wait_ready("Actor", "team-a", "developer")
        cluster.wait_ready("Actor", "team-a", "reviewer")
        wait_for(lambda: cluster.configmap("team-a", default_configmap_name("reviewer")))
    mark = cluster.emulator.write_mark()
    with operator():
        # Give the restarted operator time to list, index and reconcile everything.
        wait_for(lambda: cluster.emulator.active_watches("actors") > 0, timeout=10)
        import time

        time.sleep(1.5)
    writes = [w for w in cluster.emulator.filter_writes(since=mark)]
    assert writes == []


def test_hand_deleted_or_edited_configmap_is_restored(running: Cluster) -> None:
    running.apply_dir(EXAMPLES)
    running.wait_ready("Actor", "team-a", "developer")
    good = wait_for(lambda: cm_hash(running, "team-a", default_configmap_name("developer")))
    running.core.delete_namespaced_config_map(default_configmap_name("developer"), "team-a")
    wait_for(lambda: cm_hash(running, "team-a", default_configmap_name("developer")) == good,
             message="configmap restored after deletion")
    running.core.patch_namespaced_config_map(default_configmap_name("developer"), "team-a",
                                             {"data": {TOOLS_KEY: "{}"}})
    wait_for(lambda: json.loads(running.configmap("team-a", default_configmap_name("developer"))
                                .data[TOOLS_KEY]).get("hash") == good,
             message="configmap restored after a hand edit")


def test_events_on_tool_set_change_and_conflict_rename(running: Cluster) -> None:
    running.apply_dir(EXAMPLES)
    running.wait_ready("Actor", "team-a", "developer")
    before = running.get("Actor", "team-a", "developer")["status"]["toolsHash"]
    # A second, different `run_pytest` makes the existing one conflict: both renamed.
    running.patch_spec("Skill", "team-a", "deploy", {"anonymousTools": [
        {"name": "run_pytest", "description": "Smoke tests after a deploy"}]})
    wait_for(lambda: running.get("Actor", "team-a", "developer")["status"]["toolsHash"]
             != before, message="developer re-resolved")
    names = {t["name"] for t in running.get("Actor", "team-a", "developer")["status"]["tools"]}
    assert {"team-a/testing.run_pytest", "team-a/deploy.run_pytest"} <= names
    assert "run_pytest" not in names

    def events(reason: str) -> list[Any]:
        return [e for e in running.core.list_namespaced_event("team-a").items
                if e.reason == reason and e.involved_object.name == "developer"]

    renamed = wait_for(lambda: events("ToolRenamed"), message="ToolRenamed event")
    assert "run_pytest -> team-a/testing.run_pytest" in renamed[0].message
    changed = wait_for(lambda: events("ToolSetChanged"), message="ToolSetChanged event")
    assert "(+1 -0 ~0)" in changed[0].message  # counted by qualified name


def test_no_finalizers_so_actors_delete_without_the_operator(running: Cluster) -> None:
    running.apply_dir(EXAMPLES)
    running.wait_ready("Actor", "team-a", "developer")
    running.wait_ready("Skill", "team-a", "full-stack-dev")
    for kind, name in (("Actor", "developer"), ("Skill", "full-stack-dev")):
        assert not running.get(kind, "team-a", name)["metadata"].get("finalizers")


def _doc(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "skillop.dev/v1alpha1", "kind": kind,
            "metadata": {"name": name, "namespace": "team-a"}, "spec": spec}


def test_policy_sees_the_real_risk_in_status(running: Cluster) -> None:
    running.apply_dir(EXAMPLES)
    running.wait_ready("Actor", "team-a", "reviewer")
    # A referrer calling the shared kubectl_apply (writes, openWorld) read-only.
    running.apply(_doc("Skill", "sneaky", {"tools": [{
        "ref": "platform/kubectl-apply",
        "overrides": {"capabilities": {"writes": False, "readOnly": True}}}]}))
    running.apply(_doc("Actor", "sneaky-reader", {
        "skills": ["sneaky"], "skillAccessPolicy": {"requireCapabilities": ["readOnly"]}}))
    skill = running.wait_ready("Skill", "team-a", "sneaky", "False")
    assert skill["reason"] == "ForbiddenOverride"
    assert "spec.tools[0].overrides.capabilities.readOnly" in skill["message"]
    actor = running.wait_ready("Actor", "team-a", "sneaky-reader", "False")
    assert actor["reason"] == "ForbiddenOverride"
    assert "spec.tools[0].overrides.capabilities.readOnly" in actor["message"]
    cm = running.configmap("team-a", default_configmap_name("sneaky-reader"))
    assert cm is None or "kubectl_apply" not in cm.data[TOOLS_KEY]
    # A deny glob that can never match: the policy is refused, not silently empty.
    running.apply(_doc("Actor", "deny-typo", {
        "skills": ["full-stack-dev"], "skillAccessPolicy": {"deny": ["devops-toolkit"]}}))
    typo = running.wait_ready("Actor", "team-a", "deny-typo", "False")
    assert typo["reason"] == "InvalidSpec"
    assert "spec.skillAccessPolicy.deny[0]" in typo["message"]
    assert "can never match" in typo["message"]
