"""Managed-webhook mode (kopf writes the configurations) on a real API server: when
the operator stops, kopf empties what it manages except the persistent webhooks,
so the pod injector stays, fails closed, and a labelled pod is refused rather
than created without the gateway; Skill/Actor validation goes (it fails open)."""

from __future__ import annotations

import contextlib
import json
import signal
from collections.abc import Iterator
from typing import Any

import pytest
from controlplane import free_port
from realkit import RealCluster, operator_process

from clusterkit import wait_for

pytestmark = pytest.mark.realapi

NS = "realapi-managed"
MANAGED = "skillop.dev"  # the configurations' name (webhook.configure)


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS,
                         "labels": {"skillop.dev/actor": "reviewer"}},
            "spec": {"containers": [{"name": "agent", "image": "example/agent:1"}]}}


def hooks(real: RealCluster, kind: str) -> dict[str, str]:
    """Webhook name -> failurePolicy in the managed configuration ``kind``."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    api = client.AdmissionregistrationV1Api(real.api_client)
    read = (api.read_mutating_webhook_configuration if kind == "mutating"
            else api.read_validating_webhook_configuration)
    try:
        found = read(MANAGED)
    except ApiException as err:
        if err.status == 404:
            return {}
        raise
    return {h.name: h.failure_policy for h in found.webhooks or []}


@contextlib.contextmanager
def managed_configurations(real: RealCluster) -> Iterator[None]:
    """Delete kopf's configurations after the test: their persistent webhooks would
    refuse every labelled pod and approval of the tests that follow."""
    from kubernetes import client

    api = client.AdmissionregistrationV1Api(real.api_client)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            api.delete_mutating_webhook_configuration(MANAGED)
        with contextlib.suppress(Exception):
            api.delete_validating_webhook_configuration(MANAGED)


def test_a_stopped_managed_operator_leaves_the_injector_failing_closed(
        real: RealCluster) -> None:
    real.namespace(NS)
    env = {"SKILLOP_INJECTION": "true", "SKILLOP_WEBHOOK": "true",
           "SKILLOP_WEBHOOK_MANAGED": "true", "SKILLOP_WEBHOOK_HOST": "127.0.0.1",
           "SKILLOP_WEBHOOK_PORT": str(free_port()), "SKILLOP_MCP_DISCOVERY": "false",
           "SKILLOP_LEADER_ELECTION": "false"}
    try:
        with managed_configurations(real), \
                operator_process(real.plane, env=env, name="managed") as proc:
            wait_for(lambda: len(hooks(real, "mutating")) == 2
                     and len(hooks(real, "validating")) == 2,
                     timeout=30, interval=0.2, message="kopf configured its webhooks")
            running = {**hooks(real, "mutating"), **hooks(real, "validating")}
            served = real.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-",
                                  stdin=json.dumps(pod("served")))
            assert served.returncode == 0, served.stderr
            assert "initContainers" in json.loads(served.stdout)["spec"]
            proc.popen.send_signal(signal.SIGTERM)
            assert proc.popen.wait(30) == 0, proc.output()[-3000:]
            stopped = {**hooks(real, "mutating"), **hooks(real, "validating")}
            refused = real.kubectl("create", "-f", "-", stdin=json.dumps(pod("unguarded")))
    finally:
        real.delete_namespaces(NS)
    assert sorted(running.values()) == ["Fail", "Fail", "Ignore", "Ignore"], running
    assert sorted(stopped) == sorted(n for n, p in running.items() if p == "Fail"), stopped
    assert set(stopped.values()) == {"Fail"}
    assert refused.returncode == 1 and "failed calling webhook" in refused.stderr, (
        refused.stdout + refused.stderr)
