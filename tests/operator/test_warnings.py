"""Warning Events for failing conditions, against the emulated API: one per
transition into failure, whatever else the operator writes, and none on a restart."""

from __future__ import annotations

import time
from functools import partial
from typing import Any

from operatorkit import ROOT, Cluster, operator, wait_for
from skillkit import skill

EXAMPLES = ROOT / "examples"
NS = "team-a"


def warnings(cluster: Cluster, kind: str, name: str) -> list[tuple[str, str]]:
    """(reason, message) of every Warning on the object, each Event once."""
    return [(e.reason, e.message) for e in cluster.core.list_namespaced_event(NS).items
            if e.type == "Warning" and (e.involved_object.kind, e.involved_object.name)
            == (kind, name)]


def test_one_warning_per_transition_and_none_after_a_restart(cluster: Cluster) -> None:
    with operator():
        cluster.apply_dir(EXAMPLES)
        cluster.wait_ready("Actor", NS, "developer")
        assert warnings(cluster, "Actor", "developer") == []  # only Normal on success
        cluster.delete("Skill", NS, "testing")
        lost = cluster.wait_ready("Actor", NS, "developer", "False")
        # ping's first status is the cycle (pong, applied first, may go through
        # RefNotFound on its way: a transition of its own).
        cluster.apply(skill("pong", NS, includes=[{"skill": "ping"}]))
        cluster.apply(skill("ping", NS, includes=[{"skill": "pong"}]))
        cycle = cluster.wait_ready("Skill", NS, "ping", "False")
        expected: dict[tuple[str, str], list[tuple[str, str]]] = {
            ("Actor", "developer"): [("RefNotFound", lost["message"])],
            ("Skill", "ping"): [("CycleDetected", cycle["message"])]}
        for (kind, name), events in expected.items():
            assert wait_for(partial(warnings, cluster, kind, name), timeout=10,
                            message=f"a Warning on {kind} {name}") == events
        # Still failing for the same reason, with another status to write: no new Warning.
        cluster.patch_spec("Skill", NS, "ping", {"description": "still a cycle"})
        wait_for(lambda: cluster.get("Skill", NS, "ping")["status"]["observedGeneration"] == 2,
                 timeout=10, message="ping reconciled again")
        time.sleep(0.5)
        assert warnings(cluster, "Skill", "ping") == expected["Skill", "ping"]
    mark = cluster.emulator.write_mark()
    with operator():
        wait_for(lambda: cluster.emulator.active_watches("actors") > 0, timeout=10)
        time.sleep(1.5)  # time to list, index and reconcile everything
    assert cluster.writes(since=mark) == []
    for (kind, name), events in expected.items():
        assert warnings(cluster, kind, name) == events


def test_a_first_status_that_fails_warns(running: Cluster) -> None:
    running.apply(skill("alone", NS, includes=[{"skill": "nowhere"}]))
    ready = running.wait_ready("Skill", NS, "alone", "False")
    found: list[Any] = wait_for(lambda: warnings(running, "Skill", "alone"), timeout=10,
                                message="a Warning on Skill alone")
    assert found == [("RefNotFound", ready["message"])]
