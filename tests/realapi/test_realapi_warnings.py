"""What a new user's mistakes show in ``kubectl get events``, on a real API server.

A cycle, a missing reference, an Actor over its ``maxTools`` and a Secret not
created yet each make one Warning Event on the object concerned, with the
condition's reason and message; an operator restarted over the same cluster
posts none and, its batch log says, writes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
from realkit import RealCluster, operator_process, wait_quiet
from skillkit import actor, anon, skill

from clusterkit import wait_for

pytestmark = pytest.mark.realapi

NS = "realapi-warnings"
#: Injection on and Secrets readable: the operator checks an Actor's Secrets
#: (``CredentialsReady``); discovery off: the MCP server is declared only.
ENV = {"SKILLOP_INJECTION": "true", "SKILLOP_SECRETS_READABLE": "true",
       "SKILLOP_MCP_DISCOVERY": "false", "SKILLOP_INJECT_IMAGE": "example/skillop:test"}
CATALOG = [
    # The cycle: loop-b first, so loop-a's first status is the cycle itself.
    skill("loop-b", NS, includes=[{"skill": "loop-a"}]),
    skill("loop-a", NS, includes=[{"skill": "loop-b"}]),
    actor("orphan", NS, skills=["nowhere"]),
    skill("many", NS, anonymousTools=[anon(f"tool_{i}") for i in range(3)]),
    actor("greedy", NS, skills=["many"], skillAccessPolicy={"maxTools": 2}),
    skill("remote", NS, mcpServers=[{
        "name": "docker", "url": "https://docker.tools.svc/mcp",
        "headersFrom": {"secretRef": {"name": "docker-auth"}},
        "tools": [{"name": "build", "description": "build an image"}]}]),
    actor("needs-secret", NS, skills=["remote"]),
]
#: (kind, name, condition type, the Warning's reason)
EXPECTED = [("Skill", "loop-a", "Ready", "CycleDetected"),
            ("Actor", "orphan", "Ready", "RefNotFound"),
            ("Actor", "greedy", "Ready", "TooManyTools"),
            ("Actor", "needs-secret", "CredentialsReady", "SecretNotFound")]


def warnings(real: RealCluster, kind: str, name: str) -> list[tuple[str, str]]:
    """(reason, message) of each Warning Event on the object, as kubectl lists them."""
    return [(e.reason, e.message) for e in real.core.list_namespaced_event(NS).items
            if e.type == "Warning" and (e.involved_object.kind, e.involved_object.name)
            == (kind, name)]


def condition(real: RealCluster, kind: str, name: str, type_: str) -> dict[str, Any] | None:
    status = real.get(kind, NS, name).get("status") or {}
    return next((c for c in status.get("conditions") or []
                 if c["type"] == type_ and c["status"] == "False"), None)


@pytest.fixture(scope="module")
def failing(real: RealCluster) -> Iterator[RealCluster]:
    real.namespace(NS)
    try:
        with operator_process(real.plane, env=ENV, name="warnings-operator"):
            for doc in CATALOG:
                real.apply(doc)
            for kind, name, type_, _ in EXPECTED:
                wait_for(partial(condition, real, kind, name, type_), timeout=30,
                         message=f"{kind} {name} {type_}=False")
            wait_quiet(real.plane)
        # Stopped: what it posted is all there is, and a restart can lead at once.
        yield real
    finally:
        real.delete_namespaces(NS)


def test_each_mistake_is_one_warning_with_the_conditions_message(
        failing: RealCluster) -> None:
    for kind, name, type_, reason in EXPECTED:
        cond = condition(failing, kind, name, type_)
        assert cond is not None and cond["reason"] == reason
        assert warnings(failing, kind, name) == [(reason, cond["message"])], (kind, name)
    # Names the Secret, never a value (there is none yet: the name is all it has).
    assert "Secret docker-auth" in warnings(failing, "Actor", "needs-secret")[0][1]
    # `kubectl describe` finds it: the Event names the Actor by its uid.
    described = failing.kubectl("describe", "actor", "greedy", "-n", NS)
    assert re.search(r"Warning\s+TooManyTools", described.stdout), described.stdout


def test_a_restarted_operator_posts_no_warning_and_writes_nothing(
        failing: RealCluster) -> None:
    before = {(kind, name): warnings(failing, kind, name) for kind, name, _, _ in EXPECTED}
    with operator_process(failing.plane, env=ENV, name="warnings-restarted") as proc:
        wait_for(lambda: "batch 1:" in proc.output(), timeout=30,
                 message="the restarted operator's first batch")
        wait_quiet(failing.plane)
        log = proc.output()
    assert {(kind, name): warnings(failing, kind, name)
            for kind, name, _, _ in EXPECTED} == before
    (line,) = [x for x in log.splitlines() if "batch 1:" in x]
    assert "0 objects written (0 statuses, 0 ConfigMaps)" in line, line
