"""Statuses a real API server would refuse or prune, and how the operator avoids them.

Every status is built from the status models the CRD schemas are generated from
(``skillop.model.status``), cut to the schema's limits. Without that, the two
cases below were HTTP 422 on every retry: the object never showed its state.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from realkit import RealCluster, assert_statuses_kept, operator_process, wait_quiet
from skillkit import actor, skill

from clusterkit import wait_for
from skillop.model.status import MAX_PRUNED

pytestmark = pytest.mark.realapi

NS = "realapi-status"


@pytest.fixture(scope="module")
def running(real: RealCluster) -> Iterator[RealCluster]:
    real.namespace(NS)
    try:
        with operator_process(real.plane, name="status-operator"):
            yield real
            wait_quiet(real.plane)
    finally:
        real.delete_namespaces(NS)


def test_more_pruned_items_than_a_status_holds(running: RealCluster) -> None:
    for k in range(2):
        running.apply(skill(f"wide-{k}", NS, anonymousTools=[
            {"name": f"write_{k}_{i}", "capabilities": {"writes": True}} for i in range(700)]))
    running.apply(actor("careful", NS, skills=["wide-0", "wide-1"],
                        skillAccessPolicy={"denyCapabilities": ["writes"]}))
    ready = running.wait_ready("Actor", NS, "careful", timeout=60)
    status = running.get("Actor", NS, "careful")["status"]
    assert ready["reason"] == "Resolved" and status["toolCount"] == 0
    assert len(status["pruned"]) == MAX_PRUNED
    assert status["pruned"][0] == {"kind": "Tool", "name": "write_0_0",
                                   "reason": "has denied capability writes",
                                   "skill": f"{NS}/wide-0"}
    assert f"1400 items pruned; status.pruned lists the first {MAX_PRUNED}" in status["warnings"]


def test_a_skill_whose_spec_stops_parsing_says_so(running: RealCluster) -> None:
    running.apply(skill("tools", NS, builtins=["git_operations"]))
    running.wait_ready("Skill", NS, "tools", timeout=30)
    # Accepted by the schema, refused by the model: two servers of one name.
    servers = [{"name": "m", "command": ["a"], "tools": [{"name": "x"}]},
               {"name": "m", "command": ["b"], "tools": [{"name": "y"}]}]
    running.patch_spec("Skill", NS, "tools", {"mcpServers": servers})
    ready = running.wait_ready("Skill", NS, "tools", "False", timeout=30)
    assert ready["reason"] == "InvalidSpec"
    assert "spec.mcpServers" in ready["message"]
    status = running.get("Skill", NS, "tools")["status"]
    assert status["observedGeneration"] == 2 == ready["observedGeneration"]
    # Fixed again: Ready, with its tool set.
    running.patch_spec("Skill", NS, "tools", {"mcpServers": servers[:1]})
    wait_for(lambda: (running.get("Skill", NS, "tools")["status"].get("toolCount") == 6),
             timeout=30, message="skill resolved again")
    # The token count survives the schema (an integer field of the status).
    assert running.get("Skill", NS, "tools")["status"]["toolTokens"] > 6
    assert running.wait_ready("Skill", NS, "tools", timeout=30)["observedGeneration"] == 3


def test_every_status_of_this_module_was_kept_whole(running: RealCluster) -> None:
    wait_quiet(running.plane)
    assert assert_statuses_kept(running.plane) > 0
