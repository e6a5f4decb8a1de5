"""Leader election against a real kube-apiserver: two operator processes, one Lease.

What the emulated API cannot show: that the real API server takes skillop's
Lease bodies (MicroTime times, optimistic concurrency) and that the handover
works through it. Both processes authenticate as the same user (as two pods of
one ServiceAccount would); the audit log's ``userAgent`` carries each one's
Lease identity, which tells their writes apart.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import pytest
from realkit import RealCluster, audit_now, operator_process, writes_by

from clusterkit import wait_for

pytestmark = pytest.mark.realapi

NS = "realapi-leader"
LEASE = ("default", "realapi-leader")


def lease_spec(real: RealCluster) -> dict[str, Any]:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        lease = client.CoordinationV1Api(real.api_client).read_namespaced_lease(
            LEASE[1], LEASE[0])
    except ApiException as err:
        if err.status == 404:
            return {}
        raise
    spec: dict[str, Any] = real.api_client.sanitize_for_serialization(lease)["spec"]
    return spec


def env(identity: str) -> dict[str, str]:
    return {"SKILLOP_LEASE_IDENTITY": identity, "SKILLOP_LEASE_NAMESPACE": LEASE[0],
            "SKILLOP_LEASE_NAME": LEASE[1]}


def tools_hash(real: RealCluster) -> str | None:
    return (real.get("Actor", NS, "agent").get("status") or {}).get("toolsHash")


def test_two_replicas_one_writer_and_sigterm_hands_over(real: RealCluster) -> None:
    real.namespace(NS)
    real.apply({"apiVersion": "skillop.dev/v1alpha1", "kind": "Skill",
                "metadata": {"name": "git", "namespace": NS},
                "spec": {"description": "git", "builtins": ["git_operations"]}})
    real.apply({"apiVersion": "skillop.dev/v1alpha1", "kind": "Actor",
                "metadata": {"name": "agent", "namespace": NS}, "spec": {"skills": ["git"]}})
    with contextlib.ExitStack() as stack:
        a = stack.enter_context(operator_process(real.plane, env=env("real-a"), name="a"))
        wait_for(lambda: lease_spec(real).get("holderIdentity") == "real-a", timeout=20,
                 message="real-a holds the Lease")
        real.wait_ready("Actor", NS, "agent", timeout=30)
        b_started = audit_now()
        stack.enter_context(operator_process(real.plane, env=env("real-b"), name="b",
                                             lead=False))
        before = tools_hash(real)
        real.patch_spec("Skill", NS, "git", {"description": "git and shell",
                                             "builtins": ["git_operations", "shell_operations"]})
        wait_for(lambda: tools_hash(real) not in (None, before), timeout=20,
                 message="the leader writes the change")
        time.sleep(2.0)
        assert writes_by(real.plane, "real-b", b_started) == []  # not even the Lease
        assert any(w["objectRef"]["resource"] == "leases"
                   for w in writes_by(real.plane, "real-a", b_started))  # A renews

        spec = lease_spec(real)
        assert spec["leaseDurationSeconds"] == 15 and spec["leaseTransitions"] == 0
        sent = time.monotonic()
        a.popen.terminate()  # SIGTERM, as a rolling upgrade sends it
        wait_for(lambda: lease_spec(real).get("holderIdentity") == "real-b", timeout=10,
                 interval=0.02, message="real-b holds the Lease")
        handover = time.monotonic() - sent
        print(f"\nreal API: SIGTERM handover in {handover:.2f}s", flush=True)
        assert handover < 2.0
        assert a.popen.wait(20) == 0
        assert lease_spec(real)["leaseTransitions"] == 1

        handed = audit_now()
        before = tools_hash(real)
        real.patch_spec("Skill", NS, "git", {"description": "git", "builtins": ["git_operations"]})
        wait_for(lambda: tools_hash(real) not in (None, before), timeout=20,
                 message="the new leader writes the change")
        resources = {w["objectRef"]["resource"] for w in writes_by(real.plane, "real-b", handed)}
        assert {"actors", "configmaps"} <= resources
    # The namespace stays: the session's audit log keeps these writes, and other
    # modules read every status written back from the server.
