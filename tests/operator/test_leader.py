"""Two ``skillop operator`` processes, one Lease: only the leader writes.

The replicas are child processes (the real command, ``replicas.Replica``); the
emulated API runs in a third process (``replicas.EmulatorProcess``) and logs
every write with the writer's User-Agent, which carries the replica's Lease
identity: that is how writes are counted per process. Lease timings are
shortened (a 5 s lease instead of 15 s) to keep the crash test short; the
bounds checked are the documented ones for whatever the settings are: a crash
is taken over within the lease duration plus 2 s, a graceful stop (SIGTERM)
within 2 s.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from operatorkit import ROOT, Cluster
from replicas import Replica, emulator_process, free_port, holder, lease, wait_holder

from kube_emulator import wait_for
from skillop.model.toolset import default_configmap_name

EXAMPLES = ROOT / "examples"
DURATION = 5.0
FAST_LEASE = {"SKILLOP_LEASE_DURATION_SECONDS": str(DURATION),
              "SKILLOP_LEASE_RENEW_DEADLINE_SECONDS": "3"}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """The emulated API in a process of its own (not conftest's in-process one)."""
    with emulator_process(tmp_path) as api:
        yield Cluster(api)  # type: ignore[arg-type]  # duck-types EmulatorHandle


@pytest.fixture
def replicas(cluster: Cluster, tmp_path: Path) -> Iterator[list[Replica]]:
    started: list[Replica] = []
    yield started
    for replica in started:
        replica.stop()


def start(cluster: Cluster, replicas: list[Replica], identity: str, tmp_path: Path,
          **env: str) -> Replica:
    replica = Replica(cluster.handle, identity, tmp_path, **{**FAST_LEASE, **env}).start()
    replicas.append(replica)
    return replica


def operator_writes(cluster: Cluster, since: int) -> list[Any]:
    """Every write since ``since`` but the test's own (the client's default User-Agent)."""
    return [w for w in cluster.emulator.filter_writes(since=since, include_events=True,
                                                      include_leases=True)
            if not (w.user_agent or "").startswith("OpenAPI-Generator/")]


def tools_hash(cluster: Cluster, actor: str = "developer") -> str | None:
    return (cluster.get("Actor", "team-a", actor).get("status") or {}).get("toolsHash")


def change_skill(cluster: Cluster, builtins: list[str]) -> None:
    """A change reaching team-a/developer (and reviewer) through platform/read-only-git."""
    cluster.patch_spec("Skill", "platform", "read-only-git",
                       {"description": "Git history", "builtins": builtins})


def resolved(cluster: Cluster, before: str | None) -> bool:
    return tools_hash(cluster) not in (None, before) and tools_hash(cluster, "reviewer") is not None


def test_standby_writes_nothing_and_sigterm_hands_over_within_2s(
        cluster: Cluster, replicas: list[Replica], tmp_path: Path) -> None:
    a = start(cluster, replicas, "replica-a", tmp_path)
    wait_holder(cluster.handle, "replica-a", timeout=10)
    cluster.apply_dir(EXAMPLES)
    cluster.wait_ready("Actor", "team-a", "developer", timeout=20)

    b_started = cluster.emulator.write_mark()
    b = start(cluster, replicas, "replica-b", tmp_path)
    # B is up, watching: its store is as warm as A's (same Ready counts), not leading.
    wait_for(lambda: b.scrape().get('skillop_objects{kind="Actor",ready="True"}') == 2,
             timeout=20, message="replica-b sees both Actors Ready")
    assert b.scrape()["skillop_leader"] == 0 and a.scrape()["skillop_leader"] == 1

    # Changes while B stands by: A writes them all, B nothing (not even to the Lease).
    before = tools_hash(cluster)
    change_skill(cluster, ["git_operations", "shell_operations"])
    wait_for(lambda: resolved(cluster, before), timeout=10, message="A writes the change")
    time.sleep(2.5)  # a few of B's looks at the Lease, a few of A's renewals
    assert b.writes(since=b_started) == []
    assert [w for w in a.writes(since=b_started) if w.resource != "leases"]
    assert any(w.resource == "leases" for w in a.writes(since=b_started))  # renewals
    assert operator_writes(cluster, b_started) == a.writes(since=b_started)  # kopf's included

    # A rolling upgrade: SIGTERM the leader; B holds the Lease within 2 s.
    old = lease(cluster.handle)["spec"]
    sent = time.monotonic()
    a.sigterm()
    taken = wait_holder(cluster.handle, "replica-b", timeout=10)
    print(f"\nSIGTERM handover: {taken - sent:.2f}s (bound 2 s)", flush=True)
    assert taken - sent < 2.0, f"handover took {taken - sent:.2f}s"
    assert a.process is not None and a.process.wait(20) == 0
    assert "released" in a.log()
    new = lease(cluster.handle)["spec"]
    assert new["leaseTransitions"] == old["leaseTransitions"] + 1
    assert new["leaseDurationSeconds"] == int(DURATION)
    assert new["acquireTime"] != old["acquireTime"]

    # And B writes from now on.
    handed = cluster.emulator.write_mark()
    before = tools_hash(cluster)
    change_skill(cluster, ["git_operations"])
    wait_for(lambda: resolved(cluster, before), timeout=10, message="B writes the change")
    assert {w.resource for w in b.writes(since=handed)} >= {"actors", "configmaps"}
    wait_for(lambda: b.scrape()["skillop_leader"] == 1, timeout=5)


def test_kill_9_the_leader_and_the_standby_writes_the_change_within_the_bound(
        cluster: Cluster, replicas: list[Replica], tmp_path: Path) -> None:
    a = start(cluster, replicas, "replica-a", tmp_path)
    wait_holder(cluster.handle, "replica-a", timeout=10)
    b = start(cluster, replicas, "replica-b", tmp_path)
    cluster.apply_dir(EXAMPLES)
    cluster.wait_ready("Actor", "team-a", "developer", timeout=20)
    cluster.wait_ready("Actor", "team-a", "reviewer", timeout=20)

    before = tools_hash(cluster)
    a.kill()  # SIGKILL: no release, the Lease stays A's until it expires
    crashed = time.monotonic()
    mark = cluster.emulator.write_mark()
    change_skill(cluster, ["git_operations", "shell_operations"])  # during the failover
    wait_for(lambda: resolved(cluster, before), timeout=DURATION + 10,
             message="the change is written after the failover")
    written = time.monotonic() - crashed
    print(f"\nkill -9 failover, change written after {written:.2f}s"
          f" (lease {DURATION:g}s, bound {DURATION + 2:g}s)", flush=True)
    assert written <= DURATION + 2.0, f"failover took {written:.2f}s"
    # B waited for the Lease to expire (A's last renewal was at most one retry
    # period before the crash): it did not steal a live Lease.
    assert written >= DURATION - 1.5, f"taken after {written:.2f}s: before expiry"
    assert holder(cluster.handle) == "replica-b"
    every = operator_writes(cluster, mark)
    ours = b.writes(since=mark)  # read second: B's Events may still be landing
    assert {w.resource for w in every} >= {"leases", "actors", "configmaps"}
    assert every == ours[:len(every)]  # every write since the crash is B's
    cm = cluster.configmap("team-a", default_configmap_name("developer"))
    assert cm.metadata.annotations["skillop.dev/tools-hash"] == tools_hash(cluster)


def test_the_standby_answers_the_webhook_and_takes_over_writing_nothing_new(
        cluster: Cluster, replicas: list[Replica], tmp_path: Path) -> None:
    """The standby's webhook judges by its own (warm) view; on taking over, its full
    pass writes only what changed: here, nothing."""
    a = start(cluster, replicas, "replica-a", tmp_path)
    wait_holder(cluster.handle, "replica-a", timeout=10)
    cluster.apply_dir(EXAMPLES)
    cluster.wait_ready("Actor", "team-a", "developer", timeout=20)
    cluster.wait_ready("Actor", "team-a", "reviewer", timeout=20)
    b = start(cluster, replicas, "replica-b", tmp_path, SKILLOP_WEBHOOK="true",
              SKILLOP_WEBHOOK_PORT=str(free_port()), SKILLOP_WEBHOOK_HOST="127.0.0.1")
    wait_for(lambda: b.scrape().get('skillop_objects{kind="Actor",ready="True"}') == 2,
             timeout=20, message="replica-b sees both Actors Ready")
    # Including full-stack-dev in code-analysis closes a cycle only the cluster's
    # Skills reveal (full-stack-dev includes code-analysis): the standby knows them.
    old = cluster.get("Skill", "team-a", "code-analysis")
    new = {**old, "spec": {**old["spec"], "includes": [
        *old["spec"]["includes"], {"skill": "full-stack-dev"}]}}
    allowed, message = b.admit(new, operation="UPDATE", old=old)
    assert not allowed and "CycleDetected" in message, message
    assert b.scrape()["skillop_leader"] == 0
    mark = cluster.emulator.write_mark()
    a.sigterm()
    wait_holder(cluster.handle, "replica-b", timeout=10)
    wait_for(lambda: b.scrape().get("skillop_reconcile_batches_total", 0) >= 1, timeout=10,
             message="replica-b ran its full pass")
    time.sleep(1.0)
    writes: list[Any] = [w for w in b.writes(since=mark) if w.resource != "leases"]
    assert writes == []
