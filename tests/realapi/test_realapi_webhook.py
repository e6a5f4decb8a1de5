"""The admission webhook called by a real API server.

The chart's ValidatingWebhookConfiguration (rendered by Helm, namespaced mode so
that it only matches this test's namespace) is registered with a ``url``
clientConfig instead of its Service (nothing routes Services here), pointing at
the operator's HTTPS port on loopback, with the serving certificate as caBundle.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from realkit import OperatorProcess, RealCluster, webhook_operator
from skillkit import actor, skill

from clusterkit import wait_for

pytestmark = pytest.mark.realapi

NS = "realapi-webhook"


@pytest.fixture(scope="module")
def hooked(real: RealCluster, tmp_path_factory: pytest.TempPathFactory,
           ) -> Iterator[tuple[RealCluster, OperatorProcess]]:
    real.namespace(NS)
    try:
        with webhook_operator(real, tmp_path_factory.mktemp("webhook"),
                              kind="ValidatingWebhookConfiguration", webhook="webhook",
                              values={"webhook": {"enabled": True}, "namespaces": [NS]},
                              env={"SKILLOP_WEBHOOK": "true"}, name="webhook-operator") as proc:
            # The API server picks the configuration up within a moment; a server-side
            # dry run of an object only the webhook rejects says when.
            probe = json.dumps(actor("probe", NS, skills=["x"],
                                     skillAccessPolicy={"allow": [f"{NS}/[x"]}))
            wait_for(lambda: "denied the request" in real.kubectl(
                "apply", "--dry-run=server", "-f", "-", stdin=probe).stderr,
                timeout=30, interval=0.2, message="webhook called by the API server")
            yield real, proc
    finally:
        real.delete_namespaces(NS)


def apply(real: RealCluster, doc: dict[str, Any]) -> Any:
    return real.kubectl("apply", "-f", "-", stdin=json.dumps(doc))


def test_a_cycle_is_rejected_and_a_missing_reference_admitted(
        hooked: tuple[RealCluster, OperatorProcess]) -> None:
    real, _ = hooked
    # a includes b, which does not exist yet: admitted (GitOps applies in any order).
    first = apply(real, skill("a", NS, includes=[{"skill": "b"}], builtins=["git_operations"]))
    assert first.returncode == 0, first.stderr
    ready = real.wait_ready("Skill", NS, "a", "False", timeout=30)
    assert ready["reason"] == "RefNotFound"
    # An Actor naming a Skill that does not exist yet: admitted too.
    later = apply(real, actor("agent", NS, skills=["not-yet"]))
    assert later.returncode == 0, later.stderr
    # b including a would close the cycle: the API server refuses it with our message.
    cycle = apply(real, skill("b", NS, includes=[{"skill": "a"}]))
    assert cycle.returncode == 1
    assert ('admission webhook "skills.validate.skillop.dev" denied the request: '
            f"spec.includes[0].skill: CycleDetected: include cycle: {NS}/b -> {NS}/a -> {NS}/b"
            ) in cycle.stderr, cycle.stderr
    assert real.kubectl("get", "skill", "b", "-n", NS).returncode == 1
    # Without the cycle, b is admitted, and a becomes Ready.
    fixed = apply(real, skill("b", NS, builtins=["file_operations"]))
    assert fixed.returncode == 0, fixed.stderr
    assert real.wait_ready("Skill", NS, "a", timeout=30)["reason"] == "Resolved"


def test_an_actor_with_an_invalid_policy_is_rejected(
        hooked: tuple[RealCluster, OperatorProcess]) -> None:
    real, _ = hooked
    bad = apply(real, actor("bad", NS, skills=["a"], skillAccessPolicy={"allow": [f"{NS}/[x"]}))
    assert bad.returncode == 1
    assert ('admission webhook "actors.validate.skillop.dev" denied the request: '
            "spec.skillAccessPolicy.allow[0]: InvalidSpec: ") in bad.stderr, bad.stderr
