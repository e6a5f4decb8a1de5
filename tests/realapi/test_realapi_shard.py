"""Sharding on a real API server: two installations, two selectors, two Leases.

Each ``skillop operator`` process is one shard (docs/install.md, Sharding). The
audit log tells their writes apart by the Lease identity in the user agent, so
who wrote what is counted from the API server's side.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator

import pytest
from realkit import RealCluster, audit_now, operator_process, wait_quiet, writes_by
from skillkit import actor, anon, cluster_policy, namespace, skill

from clusterkit import wait_for
from skillop.model.toolset import TOOLS_KEY, default_configmap_name

pytestmark = pytest.mark.realapi

LABEL = "skillop.dev/shard"
OWN_A, SHARED_B, MOVED = "shard-own-a", "shard-shared-b", "shard-moved"


def shard_env(name: str, *, cluster_owner: bool) -> dict[str, str]:
    return {"SKILLOP_SHARD_SELECTOR": f"{LABEL}={name}", "SKILLOP_LEASE_NAME": f"skillop-{name}",
            "SKILLOP_LEASE_IDENTITY": f"shard-{name}",
            "SKILLOP_SHARD_CLUSTER_OWNER": "true" if cluster_owner else "false"}


def _tools(real: RealCluster, ns: str) -> list[str]:
    cm = real.configmap(ns, default_configmap_name("agent"))
    return [] if cm is None else sorted(t["name"] for t in json.loads(cm.data[TOOLS_KEY])["tools"])


def _written(real: RealCluster, shard: str, since: str) -> set[tuple[str, str, str]]:
    """(namespace, resource, name) of every write but the shard's Lease renewals."""
    return {(r.get("namespace", ""), r.get("resource", ""), r.get("name", ""))
            for w in writes_by(real.plane, f"shard-{shard}", since, leases=False)
            if (r := w["objectRef"])}


@pytest.fixture
def cluster(real: RealCluster) -> Iterator[RealCluster]:
    """Three namespaces: one of shard a, one of shard b whose Skill a's Actor
    includes, and one of shard a the test moves to b."""
    for ns, shard in ((OWN_A, "a"), (SHARED_B, "b"), (MOVED, "a")):
        real.apply(namespace(ns, **{LABEL: shard}))
    real.apply(skill("common", SHARED_B, sharing={"from": "All"},
                     anonymousTools=[anon("read")]))
    real.apply(actor("agent", SHARED_B, skills=["common"]))
    real.apply(actor("agent", OWN_A, skills=[f"{SHARED_B}/common"]))
    real.apply(skill("files", MOVED, anonymousTools=[anon("ls"), anon("rm")]))
    real.apply(actor("agent", MOVED, skills=["files"]))
    real.apply(cluster_policy("shard-nothing", deny=["nowhere/none"]))
    try:
        yield real
    finally:
        real.delete("ClusterSkillPolicy", "", "shard-nothing")
        real.delete_namespaces(OWN_A, SHARED_B, MOVED)


@contextlib.contextmanager
def configmap_versions(real: RealCluster, ns: str) -> Iterator[list[tuple[int, list[str]]]]:
    """Every version of ``ns``'s Actor ConfigMap the API server serves meanwhile,
    as (resourceVersion, tool names), in the order they were written."""
    from kubernetes import watch

    seen: list[tuple[int, list[str]]] = []
    stop = threading.Event()
    name = default_configmap_name("agent")
    start = real.configmap(ns, name).metadata.resource_version

    def follow() -> None:
        while not stop.is_set():
            stream = watch.Watch()
            for event in stream.stream(real.core.list_namespaced_config_map, ns,
                                       field_selector=f"metadata.name={name}",
                                       resource_version=start, timeout_seconds=1):
                body = event["object"]
                if event["type"] in ("ADDED", "MODIFIED"):
                    tools = sorted(t["name"] for t in json.loads(body.data[TOOLS_KEY])["tools"])
                    seen.append((int(body.metadata.resource_version), tools))

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join(timeout=5)


def test_two_shards_write_only_their_namespaces_and_a_move_hands_over(
        cluster: RealCluster) -> None:
    real = cluster
    since = audit_now()
    with operator_process(real.plane, env=shard_env("a", cluster_owner=True), name="a"), \
            operator_process(real.plane, env=shard_env("b", cluster_owner=False), name="b"):
        for ns in (OWN_A, SHARED_B, MOVED):
            real.wait_ready("Actor", ns, "agent", timeout=30)
        assert _tools(real, OWN_A) == ["read"]  # b's Skill, read by a across namespaces
        assert _tools(real, MOVED) == ["ls", "rm"]
        real.wait_ready("ClusterSkillPolicy", "", "shard-nothing", timeout=30)
        wait_quiet(real.plane)

        by_a, by_b = _written(real, "a", since), _written(real, "b", since)
        assert {ns for ns, _, _ in by_a} == {OWN_A, MOVED, ""}  # "": cluster scope
        assert {ns for ns, _, _ in by_b} == {SHARED_B}
        assert ("", "clusterskillpolicies", "shard-nothing") in by_a
        assert not by_a & by_b  # no object written by both

        # The move and a revocation at once: b takes MOVED over, a stops, and rm
        # never comes back once a set without it was written.
        moved = audit_now()
        with configmap_versions(real, MOVED) as versions:
            real.core.patch_namespace(MOVED, {"metadata": {"labels": {LABEL: "b"}}})
            real.patch_spec("Skill", MOVED, "files", {"anonymousTools": [anon("ls")]})
            wait_for(lambda: _tools(real, MOVED) == ["ls"], timeout=30,
                     message="the revocation is written")
            wait_quiet(real.plane)
            time.sleep(1.0)
        revoked = next(i for i, (_, tools) in enumerate(versions) if "rm" not in tools)
        assert all("rm" not in tools for _, tools in versions[revoked:]), versions
        assert [rv for rv, _ in versions] == sorted(rv for rv, _ in versions)

        # From the move on, MOVED is written by b alone (a saw the relabel first or
        # wrote nothing there at all: nothing changed there before it).
        after_a, after_b = _written(real, "a", moved), _written(real, "b", moved)
        assert not {w for w in after_a if w[0] == MOVED}, after_a
        assert {w for w in after_b if w[0] == MOVED}
        ready = real.wait_ready("Actor", MOVED, "agent", timeout=10)
        assert ready["status"] == "True"

        # Business as usual afterwards: each change is written by its namespace's owner.
        later = audit_now()
        real.patch_spec("Skill", MOVED, "files", {"anonymousTools": [anon("ls"), anon("cat")]})
        real.patch_spec("Skill", SHARED_B, "common",
                        {"sharing": {"from": "All"}, "anonymousTools": [anon("read"),
                                                                        anon("grep")]})
        wait_for(lambda: _tools(real, MOVED) == ["cat", "ls"], timeout=30)
        wait_for(lambda: _tools(real, OWN_A) == ["grep", "read"], timeout=30)
        wait_quiet(real.plane)
        last_a, last_b = _written(real, "a", later), _written(real, "b", later)
        assert {ns for ns, _, _ in last_a} == {OWN_A}, last_a
        assert {ns for ns, _, _ in last_b} == {SHARED_B, MOVED}, last_b
