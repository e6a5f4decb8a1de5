"""The operator with only the chart's RBAC: a real API server enforces it.

The chart is rendered by Helm; its ServiceAccount, (Cluster)Roles and bindings
are applied as rendered, and the operator runs with a token of that
ServiceAccount (TokenRequest, as the kubelet would mount it) and the settings
the chart's Deployment gives it (leader election on a Lease in the release
namespace included). Every request it
makes while it reconciles, posts events and restores ConfigMaps is in the audit
log; none may be Forbidden.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from controlplane import free_port
from realkit import RealCluster, chart_objects, operator_process
from skillkit import actor, skill

import chartkit
from clusterkit import wait_for
from skillop.model.toolset import default_configmap_name
from skillop.operator import webhook

pytestmark = pytest.mark.realapi

SA_USER = f"system:serviceaccount:{chartkit.NAMESPACE}:{chartkit.RELEASE}"
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


def rendered_rbac(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for d in chart_objects(values) if d["kind"] in RBAC_KINDS]


def token(real: RealCluster) -> str:
    from kubernetes import client

    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600))
    made = real.core.create_namespaced_service_account_token(
        chartkit.RELEASE, chartkit.NAMESPACE, request)
    return str(made.status.token)


def _namespace_terminating(status: dict[str, Any]) -> bool:
    causes = (status.get("details") or {}).get("causes") or []
    return any(c.get("reason") == "NamespaceTerminating" for c in causes)


NOTES = "---\nname: notes\ndescription: How we write release notes\n---\n# Notes\n"


def values_of(mode: str, ns: str) -> dict[str, Any]:
    return {} if mode == "cluster-wide" else {"namespaces": [ns]}


def deployment_env(values: dict[str, Any], certs: Path) -> dict[str, str]:
    """The settings the chart's Deployment gives the operator (the Lease's namespace
    too), with the webhook's certificate (injection is on by default) from ``certs``."""
    (dep,) = [d for d in chartkit.objects(chartkit.load(), values) if d["kind"] == "Deployment"]
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    env["POD_NAME"] = "skillop-0"  # the downward API's metadata.name
    cert, key = webhook.self_signed_certificate(["127.0.0.1"])
    for name, data in (("tls.crt", cert), ("tls.key", key), ("ca.crt", cert)):
        (certs / name).write_bytes(data)
    env.update(SKILLOP_WEBHOOK_CERT=str(certs / "tls.crt"), SKILLOP_WEBHOOK_PORT=str(free_port()),
               SKILLOP_WEBHOOK_KEY=str(certs / "tls.key"), SKILLOP_WEBHOOK_CA=str(certs / "ca.crt"))
    return env


@pytest.fixture(params=["cluster-wide", "namespaced"])
def bound(request: pytest.FixtureRequest, real: RealCluster) -> Iterator[tuple[str, str]]:
    """(mode, namespace): the chart's RBAC applied as rendered, and a workload namespace."""
    mode = request.param
    ns = f"realapi-rbac-{mode}"
    values = values_of(mode, ns)
    real.namespace(ns)
    if real.kubectl("get", "namespace", chartkit.NAMESPACE).returncode != 0:
        real.namespace(chartkit.NAMESPACE)
    rbac = rendered_rbac(values)
    listing = json.dumps({"apiVersion": "v1", "kind": "List", "items": rbac})
    applied = real.kubectl("apply", "-f", "-", stdin=listing)
    assert applied.returncode == 0, applied.stderr
    try:
        yield mode, ns
    finally:
        real.kubectl("delete", "-f", "-", "--ignore-not-found", "--wait=false", stdin=listing)
        real.delete_namespaces(ns)


def test_the_chart_rbac_is_enough(real: RealCluster, bound: tuple[str, str],
                                  tmp_path: Path) -> None:
    mode, ns = bound
    kubeconfig = real.plane.kubeconfig_for_token(token(real), f"sa-{mode}")
    env = {**deployment_env(values_of(mode, ns), tmp_path),
           "SKILLOP_LIVENESS": f"http://127.0.0.1:{free_port()}/healthz",
           "SKILLOP_MCP_ALLOW": "127.0.0.1"}
    with operator_process(real.plane, kubeconfig=kubeconfig, user=SA_USER, env=env,
                          name=f"rbac-{mode}") as proc:
        real.apply({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "notes", "namespace": ns},
                    "data": {"SKILL.md": NOTES}})
        real.apply({"apiVersion": "skillop.dev/v1alpha1", "kind": "Tool",
                    "metadata": {"name": "lint", "namespace": ns},
                    "spec": {"description": "Lint the code", "capabilities": {"readOnly": True}}})
        real.apply(skill("base", ns, builtins=["git_operations"], tools=[{"ref": "lint"}],
                         agentSkills=[{"configMapRef": {"name": "notes"}}]))
        real.apply(skill("top", ns, includes=[{"skill": "base"}]))
        real.apply(actor("agent", ns, skills=["top"]))
        real.wait_ready("Actor", ns, "agent", timeout=30)
        cm = wait_for(lambda: real.configmap(ns, default_configmap_name("agent")), timeout=10)
        first = cm.metadata.annotations["skillop.dev/tools-hash"]
        # A change that renames nothing but adds a tool: status, ConfigMap update, Event.
        real.patch_spec("Skill", ns, "top", {"builtins": ["file_operations"]})
        wait_for(lambda: real.get("Actor", ns, "agent")["status"]["toolsHash"] != first,
                 timeout=30, message="agent re-resolved")
        wait_for(lambda: any(e.reason == "ToolSetChanged"
                             for e in real.core.list_namespaced_event(ns).items),
                 timeout=10, message="ToolSetChanged event posted")
        # A ConfigMap deleted by hand is created again.
        real.core.delete_namespaced_config_map(default_configmap_name("agent"), ns)
        wait_for(lambda: real.configmap(ns, default_configmap_name("agent")), timeout=30,
                 message="ConfigMap restored")
        # A reference that breaks: the Actor's status says so.
        real.delete("Skill", ns, "base")
        real.wait_ready("Actor", ns, "agent", "False", timeout=30)
        output = proc.output()
    requests = [e for e in real.plane.audit() if e.get("user", {}).get("username") == SA_USER]
    assert len(requests) > 20
    # A create in a namespace another test is deleting is refused with 403 too, for
    # that reason and not for RBAC (the operator then stops writing there).
    denied = sorted({(e["verb"], e.get("requestURI", "")) for e in requests
                     if e.get("responseStatus", {}).get("code") == 403
                     and not _namespace_terminating(e["responseStatus"])})
    assert denied == []
    # (Not a bare "403": log timestamps and digests contain it.)
    assert "Forbidden" not in output and "HTTP 403" not in output
