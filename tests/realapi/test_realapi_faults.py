"""Faults against a real control plane: a watch gap, foreign writes, a paused leader.

Each test is a way a revoked tool could stay granted, or a wrong set be written
(docs/operations.md lists them and what each costs). The watch gap is a real one:
the operator is paused (SIGSTOP) while kube-apiserver restarts and objects change,
so when it resumes its watches find a new server that no longer has their
resourceVersion ("410 Gone") and list again, with no DELETED event for what
vanished meanwhile.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest
from realkit import (
    OperatorProcess,
    RealCluster,
    audit_now,
    lease_holder,
    operator_process,
    wait_quiet,
    writes_by,
)
from skillkit import anon, skill

from clusterkit import GROUP, VERSION, wait_for

pytestmark = pytest.mark.realapi

NS = "realapi-faults"
#: One replica, no Lease: a restart of the API server must not also be a handover.
SOLO = {"SKILLOP_LEADER_ELECTION": "false"}
#: A short Lease of its own (4 s, renew deadline 3 s), so a takeover is quick.
LEASE = {"SKILLOP_LEASE_NAMESPACE": "default", "SKILLOP_LEASE_NAME": "realapi-faults",
         "SKILLOP_LEASE_DURATION_SECONDS": "4", "SKILLOP_LEASE_RENEW_DEADLINE_SECONDS": "3",
         "SKILLOP_LEASE_RETRY_SECONDS": "0.5"}


def tools_skill(name: str, *tools: str) -> dict[str, Any]:
    return skill(name, NS, anonymousTools=[anon(t, capabilities={"readOnly": True})
                                           for t in tools])


def actor(name: str, skills: list[str]) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Actor",
            "metadata": {"name": name, "namespace": NS}, "spec": {"skills": skills}}


@contextlib.contextmanager
def paused(proc: OperatorProcess) -> Iterator[None]:
    """The operator stopped (SIGSTOP) for the block, resumed (SIGCONT) after it."""
    os.kill(proc.popen.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(proc.popen.pid, signal.SIGCONT)


def reason(real: RealCluster, name: str) -> str | None:
    ready = real.ready("Actor", NS, name)
    return ready["reason"] if ready else None


def owner_uid(real: RealCluster, configmap: str) -> str | None:
    cm = real.configmap(NS, configmap)
    owners = (cm.metadata.owner_references or []) if cm is not None else []
    return owners[0].uid if owners else None


def writes_to(real: RealCluster, name: str, since: str) -> list[tuple[str, str]]:
    return [(w["verb"], w["objectRef"].get("resource", "")) for w in real.plane.writes(since=since)
            if w["objectRef"].get("name") == name]


def test_a_watch_gap_drops_what_vanished_and_renews_what_was_recreated(
        real: RealCluster) -> None:
    real.namespace(NS)
    real.apply(tools_skill("base", "base_tool"))
    real.apply(tools_skill("extra", "extra_tool"))
    real.apply(actor("agent", ["base", "extra"]))
    real.apply(actor("doomed", ["base"]))
    real.apply(actor("reborn", ["base"]))
    with operator_process(real.plane, env=SOLO, name="gap") as op:
        for name in ("agent", "doomed", "reborn"):
            real.wait_ready("Actor", NS, name, timeout=30)
        old_uid = real.get("Actor", NS, "reborn")["metadata"]["uid"]
        with paused(op):
            real.plane.restart_apiserver()
            real.delete("Skill", NS, "extra")
            real.delete("Actor", NS, "doomed")
            real.delete("Actor", NS, "reborn")
            real.apply(actor("reborn", ["base"]))  # the same spec, a new object
        resumed = audit_now()
        # The deleted Skill is gone for the operator too: its user is not Ready.
        wait_for(lambda: reason(real, "agent") == "RefNotFound", timeout=30, interval=0.2,
                 message="agent Ready=False RefNotFound after its Skill was deleted")
        # The re-created Actor is a new object: a status, a ConfigMap owned by it.
        new_uid = real.get("Actor", NS, "reborn")["metadata"]["uid"]
        assert new_uid != old_uid
        real.wait_ready("Actor", NS, "reborn", timeout=30)
        wait_for(lambda: owner_uid(real, "reborn-tools") == new_uid, timeout=30, interval=0.2,
                 message="reborn-tools owned by the new Actor")
        # The deleted Actor's ConfigMap is collected, and never written again.
        wait_for(lambda: real.configmap(NS, "doomed-tools") is None, timeout=60, interval=0.2,
                 message="doomed-tools garbage-collected")
        wait_quiet(real.plane, quiet=2.0)
        assert writes_to(real, "doomed-tools", resumed) == []
        assert writes_to(real, "doomed", resumed) == []


def configmap_hashes(real: RealCluster, namespace: str) -> dict[str, str | None]:
    return {cm.metadata.name: (cm.metadata.annotations or {}).get("skillop.dev/tools-hash")
            for cm in real.core.list_namespaced_config_map(namespace).items}


def test_a_leader_paused_past_its_lease_writes_nothing_when_it_resumes(
        real: RealCluster) -> None:
    """A leader stopped (SIGSTOP) mid-batch while the standby takes over and writes a
    newer set: once resumed, the old leader must not put the older set back."""
    ns, count = "realapi-paused", 60
    real.namespace(ns)
    description = {"v": 1}

    def shared() -> dict[str, Any]:
        return skill("shared", ns, anonymousTools=[anon(
            "probe", description=f"probe v{description['v']}",
            capabilities={"readOnly": True})])

    real.apply(shared())
    names = [f"agent-{i:02d}" for i in range(count)]
    for name in names:
        real.apply({**actor(name, ["shared"]), "metadata": {"name": name, "namespace": ns}})

    def all_hashes(excluding: set[str | None]) -> dict[str, str | None] | None:
        hashes = configmap_hashes(real, ns)
        done = len(hashes) == count and not set(hashes.values()) & excluding
        return hashes if done else None

    # A writes one object at a time, so that its batch is long enough to pause in.
    a_env = {**LEASE, "SKILLOP_LEASE_IDENTITY": "paused-a", "SKILLOP_WRITE_CONCURRENCY": "1"}
    b_env = {**LEASE, "SKILLOP_LEASE_IDENTITY": "paused-b"}
    with operator_process(real.plane, env=a_env, name="paused-a") as a, \
            operator_process(real.plane, env=b_env, name="paused-b", lead=False):
        v1 = wait_for(lambda: all_hashes({None}), timeout=60, interval=0.2,
                      message="every ConfigMap written")
        description["v"] = 2
        real.patch_spec("Skill", ns, "shared", shared()["spec"])
        wait_for(lambda: configmap_hashes(real, ns) != v1, timeout=20, interval=0.02,
                 message="the leader starts writing the change")
        with paused(a):
            at_pause = configmap_hashes(real, ns)
            old = set(v1.values())
            assert sum(h in old for h in at_pause.values()) > count // 4  # mid-batch
            wait_for(lambda: lease_holder(real.plane, LEASE) == "paused-b", timeout=20,
                     interval=0.1, message="the standby takes over")
            v2 = wait_for(lambda: all_hashes(old), timeout=30, interval=0.2,
                          message="the new leader writes the change")
            description["v"] = 3
            real.patch_spec("Skill", ns, "shared", shared()["spec"])
            v3 = wait_for(lambda: all_hashes(set(v2.values())), timeout=30, interval=0.2,
                          message="the new leader writes a newer change")
            resumed = audit_now()
        wait_for(lambda: "lost" in a.output(), timeout=10, interval=0.1,
                 message="the old leader notices it lost the Lease")
        wait_quiet(real.plane, quiet=1.0)
        late = [(w["verb"], w["objectRef"].get("resource"), w["objectRef"].get("name"))
                for w in writes_by(real.plane, "paused-a", resumed, leases=False)]
        assert late == []
        assert configmap_hashes(real, ns) == v3
