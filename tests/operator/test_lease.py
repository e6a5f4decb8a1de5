"""Leader election (``leader.Elector``) and the Lease calls of ``kube.Kube``, on the emulated API.

The clock is the test's (expiry is judged by each replica's own clock, as in
client-go), the API is real HTTP: a create of an existing Lease and a write of
a stale version both answer 409, so of two racing replicas exactly one wins.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace

import kmock
import pytest
from operatorkit import Cluster

from skillop.model.toolset import default_configmap_name
from skillop.operator.kube import Kube, LeaseConflict, LeaseRecord, LeaseUnavailable, NotLeader
from skillop.operator.leader import Elector
from skillop.operator.settings import LeaseConfig

NS, NAME = "default", "skillop"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Replica:
    def __init__(self, kube: Kube, identity: str, clock: Clock) -> None:
        self.events: list[str] = []
        config = LeaseConfig(identity=identity, namespace=NS, name=NAME)
        self.elector = Elector(kube, config, clock=clock,
                               on_lead=lambda: self.events.append("lead"),
                               on_follow=lambda: self.events.append("follow"),
                               on_resume=lambda: self.events.append("resume"))

    def step(self) -> bool:
        asyncio.run(self.elector.step())
        return self.elector.is_leader


@pytest.fixture
def kube(cluster: Cluster) -> Iterator[Kube]:
    client = Kube(threads=2)
    yield client
    client.close()


def spec(cluster: Cluster) -> dict[str, object]:
    body = cluster.emulator.get_object("coordination.k8s.io/v1/leases", NS, NAME)
    assert body is not None
    return dict(body["spec"])


def test_one_leader_expiry_takeover_and_step_down(cluster: Cluster, kube: Kube) -> None:
    clock = Clock()
    a, b = Replica(kube, "a", clock), Replica(kube, "b", clock)
    assert a.step() and a.events == ["lead"]
    first = spec(cluster)
    assert first["holderIdentity"] == "a" and first["leaseDurationSeconds"] == 15
    assert first["leaseTransitions"] == 0 and first["acquireTime"] == first["renewTime"]
    assert not b.step() and b.events == []

    clock.now += 10  # A renews: the Lease is fresh again for B
    assert a.step()
    renewed = spec(cluster)
    assert renewed["renewTime"] != first["renewTime"]
    assert renewed["acquireTime"] == first["acquireTime"]
    assert not b.step()
    assert b.elector.next_look() == 1.0  # the retry period while the Lease is fresh
    clock.now += 14.5
    assert b.elector.next_look() == pytest.approx(0.51)  # then exactly at its expiry
    clock.now += 0.4
    assert not b.step(), "taken before 15 s without a renewal"
    clock.now += 0.2  # A stopped renewing 15.1 s ago (as B's own clock says)
    assert b.step() and b.events == ["lead"]
    taken = spec(cluster)
    assert taken["holderIdentity"] == "b" and taken["leaseTransitions"] == 1
    assert taken["acquireTime"] != first["acquireTime"]

    # A comes back (a long GC pause, a partition): it sees B and stops writing.
    assert not a.step() and a.events == ["lead", "follow"]
    assert spec(cluster)["holderIdentity"] == "b"


def test_a_leader_that_cannot_renew_steps_down_after_the_renew_deadline(
        cluster: Cluster, kube: Kube) -> None:
    clock = Clock()
    a = Replica(kube, "a", clock)
    assert a.step()
    # The API fails every Lease write from now on.
    cluster.emulator[kmock.method.PUT, kmock.resource("coordination.k8s.io", "v1", "leases")] \
        << 503
    clock.now += 9
    assert not asyncio.run(_renewed(a))
    assert a.elector.is_leader  # within the 10 s deadline: still leading
    clock.now += 2
    asyncio.run(a.elector.step())
    assert not a.elector.is_leader and a.events == ["lead", "follow"]


class Unreachable:
    """A Lease API that does not answer (the API server restarting)."""

    async def read_lease(self, *args: object, **kwargs: object) -> LeaseRecord | None:
        raise LeaseUnavailable("connection refused")

    async def write_lease(self, *args: object, **kwargs: object) -> str:
        raise LeaseUnavailable("connection refused")


def test_a_leader_cut_off_takes_its_lease_back_without_a_full_pass(
        cluster: Cluster, kube: Kube) -> None:
    clock = Clock()
    a = Replica(kube, "a", clock)
    assert a.step()
    a.elector.api = Unreachable()  # type: ignore[assignment]
    clock.now += 11  # past the renew deadline: it stops writing
    assert not a.step() and a.events == ["lead", "follow"]
    a.elector.api = kube  # back: the Lease still names it, no one else led
    clock.now += 2
    assert a.step() and a.events == ["lead", "follow", "resume"]
    # A new process of the same identity knows nothing of what was written: it
    # leads with a full pass, though the Lease names it.
    again = Replica(kube, "a", clock)
    assert again.step() and again.events == ["lead"]


def test_a_leader_whose_lease_another_held_meanwhile_leads_with_a_full_pass(
        cluster: Cluster, kube: Kube) -> None:
    clock = Clock()
    a, b = Replica(kube, "a", clock), Replica(kube, "b", clock)
    assert a.step()
    a.elector.api = Unreachable()  # type: ignore[assignment]
    clock.now += 16
    assert not b.step()  # B first sees the Lease now: expiry by its own clock
    clock.now += 16
    assert b.step() and not a.step()
    assert asyncio.run(b.elector.release()) is None
    a.elector.api = kube
    assert a.step() and a.events == ["lead", "follow", "lead"]


def test_a_paused_leader_may_not_write_past_the_renew_deadline_before_it_looks_again(
        cluster: Cluster, kube: Kube) -> None:
    clock = Clock()
    a = Replica(kube, "a", clock)
    assert a.step() and a.elector.may_write()
    clock.now += 9.9  # the last renewal is 9.9 s old: within the 10 s deadline
    assert a.elector.may_write()
    clock.now += 0.2  # paused (SIGSTOP) past it: its election loop has not run yet
    assert a.elector.is_leader and not a.elector.may_write()
    kube.may_write = a.elector.may_write
    with pytest.raises(NotLeader):
        asyncio.run(kube.apply_configmap(
            {"metadata": {"namespace": NS, "name": "x"}, "data": {}}, exists=False))
    assert a.step() and a.elector.may_write()  # renewed: writing again


async def _renewed(replica: Replica) -> bool:
    before = replica.elector._renewed_at
    await replica.elector.step()
    return replica.elector._renewed_at != before


def test_release_lets_the_standby_take_over_at_its_next_look(
        cluster: Cluster, kube: Kube) -> None:
    clock = Clock()
    a, b = Replica(kube, "a", clock), Replica(kube, "b", clock)
    assert a.step() and not b.step()
    # A renewal the stop cut short: it reached the API, the elector never saw the
    # answer. The release must not fail on the version it last knew.
    read = asyncio.run(kube.read_lease(NS, NAME, timeout=5))
    assert read is not None
    asyncio.run(kube.write_lease(NS, NAME, replace(read, renew_time="2026-01-01T00:00:01.000000Z"),
                                 timeout=5))
    asyncio.run(a.elector.release())
    released = spec(cluster)
    assert "holderIdentity" not in released and released["leaseDurationSeconds"] == 1
    assert a.events == ["lead", "follow"] and not a.elector.is_leader
    assert b.step(), "a released Lease is free at once, no expiry to wait for"
    assert spec(cluster)["leaseTransitions"] == 1


def test_racing_writes_one_wins_the_other_gets_409(cluster: Cluster, kube: Kube) -> None:
    mine = LeaseRecord(holder="a", duration_seconds=15, acquire_time="2026-01-01T00:00:00.000000Z",
                       renew_time="2026-01-01T00:00:00.000000Z")
    version = asyncio.run(kube.write_lease(NS, NAME, mine, timeout=5))
    with pytest.raises(LeaseConflict):  # a second create: someone made it first
        asyncio.run(kube.write_lease(NS, NAME, replace(mine, holder="b"), timeout=5))
    read = asyncio.run(kube.read_lease(NS, NAME, timeout=5))
    assert read is not None and read.resource_version == version and read.holder == "a"
    asyncio.run(kube.write_lease(NS, NAME, replace(read, holder="b"), timeout=5))
    with pytest.raises(LeaseConflict):  # the version both read is stale now
        asyncio.run(kube.write_lease(NS, NAME, replace(read, holder="c"), timeout=5))
    assert spec(cluster)["holderIdentity"] == "b"


def test_the_write_gate_refuses_before_any_request(cluster: Cluster, kube: Kube) -> None:
    from skillop.model.names import ObjectRef

    kube.may_write = lambda: False
    mark = cluster.emulator.write_mark()
    with pytest.raises(NotLeader):
        asyncio.run(kube.patch_status("Actor", ObjectRef("team-a", "x"), {"a": 1}, {}))
    with pytest.raises(NotLeader):
        asyncio.run(kube.apply_configmap(
            {"metadata": {"namespace": "team-a", "name": default_configmap_name("x")}},
            exists=False))
    asyncio.run(kube.post_event("Actor", ObjectRef("team-a", "x"), "uid", "Normal", "R", "m"))
    assert cluster.emulator.filter_writes(since=mark, include_events=True) == []
