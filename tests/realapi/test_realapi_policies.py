"""SkillPolicy and ClusterSkillPolicy on a real API server: its schema refuses rules
that cannot work, the chart's aggregated roles keep tenants (bound to ``edit``) from
writing policies, and the operator applies a policy to exactly the Actors it
selects, and takes it back when the policy is deleted."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from mcp_servers import ServerHandle, make_tool
from realkit import RealCluster, chart_objects, operator_process
from skillkit import actor, anon, cluster_policy, skill, skill_policy

from clusterkit import wait_for
from mcp import types
from skillop.model.toolset import TOOLS_KEY, default_configmap_name

pytestmark = pytest.mark.realapi

GROUP, VERSION = "skillop.dev", "v1alpha1"


def _namespace(real: RealCluster, name: str, **labels: str) -> None:
    real.core.create_namespace({"apiVersion": "v1", "kind": "Namespace",
                                "metadata": {"name": name, "labels": labels}})


@pytest.fixture
def two_namespaces(real: RealCluster, request: pytest.FixtureRequest,
                   ) -> Iterator[tuple[str, str]]:
    """(tenant, free): a namespace labelled tier=tenant and one not, for this test
    only (a namespace deleted by the previous test may still be terminating)."""
    tag = hashlib.sha256(request.node.name.encode()).hexdigest()[:6]
    tenant, free = f"pol-{tag}-tenant", f"pol-{tag}-free"
    _namespace(real, tenant, tier="tenant")
    _namespace(real, free)
    try:
        yield tenant, free
    finally:
        real.delete_namespaces(tenant, free)


def _status(real: RealCluster, kind: str, ns: str, name: str) -> dict[str, Any]:
    return real.get(kind, ns, name).get("status") or {}


def _tools(real: RealCluster, ns: str, name: str) -> tuple[str, list[str], str]:
    """(resourceVersion, tool names, hash) of an Actor's ConfigMap."""
    cm = real.configmap(ns, default_configmap_name(name))
    assert cm is not None
    doc = json.loads(cm.data[TOOLS_KEY])
    return cm.metadata.resource_version, [t["name"] for t in doc["tools"]], doc["hash"]


def test_a_cluster_policy_shrinks_exactly_the_selected_configmaps_and_its_deletion_restores(
        real: RealCluster, two_namespaces: tuple[str, str]) -> None:
    tenant, free = two_namespaces
    tools = [anon("rm", capabilities={"writes": True, "destructive": True}),
             anon("ls", capabilities={"readOnly": True})]
    for ns in (tenant, free):
        real.apply(skill("files", ns, anonymousTools=tools))
        real.apply(actor("agent", ns, skills=["files"]))
    with operator_process(real.plane, name="policies"):
        for ns in (tenant, free):
            real.wait_ready("Actor", ns, "agent", timeout=30)
        tenant_before, free_before = _tools(real, tenant, "agent"), _tools(real, free, "agent")
        assert tenant_before[1] == free_before[1] == ["ls", "rm"]

        real.apply(cluster_policy("tier-tenant",
                                  namespaceSelector={"matchLabels": {"tier": "tenant"}},
                                  denyCapabilities=["destructive"]))
        wait_for(lambda: _tools(real, tenant, "agent")[1] == ["ls"], timeout=30,
                 message="the tenant Actor's ConfigMap lost rm")
        ready = wait_for(lambda: next((c for c in _status(real, "ClusterSkillPolicy", "",
                                                           "tier-tenant").get("conditions", [])
                                       if c["type"] == "Ready"), None), timeout=30)
        assert ready["status"] == "True"
        status = wait_for(lambda: (s := _status(real, "Actor", tenant, "agent")).get("policies")
                          and s, timeout=30)
        assert status["policies"] == [{"kind": "ClusterSkillPolicy", "name": "tier-tenant",
                                       "generation": 1}]
        assert {"kind": "Tool", "name": "rm", "skill": f"{tenant}/files",
                "policy": "ClusterSkillPolicy tier-tenant", "rule": "denyCapabilities",
                "reason": "has denied capability destructive (ClusterSkillPolicy tier-tenant:"
                          " denyCapabilities)"} in status["pruned"]
        # The other namespace was never written: same ConfigMap, no policies in status.
        assert _tools(real, free, "agent") == free_before
        assert "policies" not in _status(real, "Actor", free, "agent")

        real.delete("ClusterSkillPolicy", "", "tier-tenant")
        wait_for(lambda: _tools(real, tenant, "agent")[2] == tenant_before[2], timeout=30,
                 message="the tenant Actor's tools restored")
        assert _tools(real, tenant, "agent")[1] == ["ls", "rm"]
        assert _tools(real, free, "agent") == free_before


def _toolset(real: RealCluster, ns: str, name: str) -> dict[str, dict[str, Any]]:
    cm = real.configmap(ns, default_configmap_name(name))
    doc = json.loads(cm.data[TOOLS_KEY]) if cm is not None else {"tools": []}
    return {t["name"]: t for t in doc["tools"]}


def test_a_tenant_cannot_describe_the_platforms_server_more_safely_than_the_platform(
        real: RealCluster, two_namespaces: tuple[str, str]) -> None:
    """A tenant's Skill re-declares the platform's MCP server and, in its server
    entry's overrides, calls drop_table and danger read-only. The platform's
    ClusterSkillPolicy denies destructive tools, asks approval for writing ones
    and fixes what those two tools are (mcpServers.tools): the operator's ToolSet
    drops drop_table and marks danger for approval, whatever the tenant said."""
    tenant = two_namespaces[0]
    tools = [make_tool("drop_table", annotations=types.ToolAnnotations(
                 readOnlyHint=False, destructiveHint=True)),
             make_tool("danger"), make_tool("list_tables", annotations=types.ToolAnnotations(
                 readOnlyHint=True))]
    with ServerHandle(tools=tools) as upstream, operator_process(real.plane, name="describe"):
        read_only = {"capabilities": {"readOnly": True}}
        real.apply(skill("mine", tenant, mcpServers=[{
            "name": "db", "url": upstream.url,
            "overrides": {"drop_table": read_only, "danger": read_only}}]))
        real.apply(cluster_policy(
            "platform", namespaceSelector={"matchLabels": {"tier": "tenant"}},
            denyCapabilities=["destructive"], requireApproval=["writes"],
            mcpServers={"tools": [
                {"hosts": ["127.0.0.1"], "names": ["drop_table"],
                 "capabilities": {"destructive": True}},
                {"hosts": ["127.0.0.1"], "names": ["danger"], "capabilities": {"writes": True}}]}))
        real.apply(actor("agent", tenant, skills=["mine"]))
        found = wait_for(lambda: (t := _toolset(real, tenant, "agent")).get("danger") and t,
                         timeout=30, message="the tenant Actor's ConfigMap has the server's tools")
        assert sorted(found) == ["danger", "list_tables"]
        danger = found["danger"]["capabilities"]
        assert (danger["readOnly"], danger["writes"], danger["requiresApproval"]) == (
            False, True, True)
        # The ConfigMap is written before the status.
        status = wait_for(lambda: (s := _status(real, "Actor", tenant, "agent")).get("pruned")
                          and s, timeout=30, message="the Actor's status names what was dropped")
        assert {"kind": "Tool", "name": "drop_table", "skill": f"{tenant}/mine",
                "policy": "ClusterSkillPolicy platform", "rule": "denyCapabilities",
                "reason": "has denied capability destructive (ClusterSkillPolicy platform:"
                          " denyCapabilities)"} in status["pruned"]
        assert (f"Actor {tenant}/agent: Skill {tenant}/mine declares MCP server db on host"
                " 127.0.0.1, whose tools' capabilities ClusterSkillPolicy platform fixes"
                " (mcpServers.tools): what the skill says of them is overruled"
                ) in status["warnings"]
        real.delete("ClusterSkillPolicy", "", "platform")


def _as_user(real: RealCluster, user: str) -> Any:
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=str(real.plane.admin_kubeconfig))
    api.set_default_header("Impersonate-User", user)
    return client.CustomObjectsApi(api)


def _status_code(call: Any) -> int:
    from kubernetes.client.exceptions import ApiException

    try:
        call()
    except ApiException as err:
        return int(err.status)
    return 201


@pytest.fixture
def aggregated_roles(real: RealCluster) -> Iterator[None]:
    roles = [d for d in chart_objects({}) if d["kind"] == "ClusterRole"
             and any(k.startswith("rbac.authorization.k8s.io/aggregate-to-")
                     for k in d["metadata"].get("labels", {}))]
    listing = json.dumps({"apiVersion": "v1", "kind": "List", "items": roles})
    applied = real.kubectl("apply", "-f", "-", stdin=listing)
    assert applied.returncode == 0, applied.stderr
    try:
        yield
    finally:
        real.kubectl("delete", "-f", "-", "--ignore-not-found", stdin=listing)


def test_a_tenant_bound_to_edit_writes_skills_but_not_policies(
        real: RealCluster, two_namespaces: tuple[str, str], aggregated_roles: None) -> None:
    tenant = two_namespaces[0]
    real.kubectl("create", "rolebinding", "alice-edit", "--clusterrole=edit", "--user=alice",
                 f"--namespace={tenant}")
    real.kubectl("create", "rolebinding", "bob-admin", "--clusterrole=admin", "--user=bob",
                 f"--namespace={tenant}")
    alice, bob = _as_user(real, "alice"), _as_user(real, "bob")
    # The aggregation controller adds the chart's rules to edit: a Skill goes through.
    wait_for(lambda: _status_code(lambda: alice.create_namespaced_custom_object(
        GROUP, VERSION, tenant, "skills", skill("mine", tenant))) == 201, timeout=30,
        message="edit aggregated the chart's skillop rules")
    assert _status_code(lambda: alice.create_namespaced_custom_object(
        GROUP, VERSION, tenant, "actors", actor("agent", tenant, skills=["mine"]))) == 201
    assert _status_code(lambda: alice.create_namespaced_custom_object(
        GROUP, VERSION, tenant, "skillpolicies", skill_policy("loose", tenant))) == 403
    assert _status_code(lambda: alice.create_cluster_custom_object(
        GROUP, VERSION, "clusterskillpolicies", cluster_policy("loose"))) == 403
    # A namespace's admins may write its SkillPolicies; ClusterSkillPolicies stay
    # cluster-admin's.
    assert _status_code(lambda: bob.create_namespaced_custom_object(
        GROUP, VERSION, tenant, "skillpolicies", skill_policy("floor", tenant,
                                                              deny=["*/shell-*"]))) == 201
    assert _status_code(lambda: bob.create_cluster_custom_object(
        GROUP, VERSION, "clusterskillpolicies", cluster_policy("floor"))) == 403


@pytest.mark.parametrize(("spec", "words"), [
    ({"deny": ["shell-tools"]}, "can never match namespace/name"),
    ({"mcpServers": {"allow": ["https://*.svc"]}}, "host glob is the host only"),
    ({"denyCapabilities": ["dangerous"]}, "Unsupported value"),
    ({"sources": {"deny": ["shell"]}}, "Unsupported value"),
    ({"mcpServers": {}}, "mcpServers needs allow, allowFor or tools"),
    ({"mcpServers": {"tools": [{"hosts": ["db.svc"], "names": ["*"],
                                "capabilities": {"readOnly": True}}]}},
     "a policy's capabilities only add risk"),
    ({"mcpServers": {"tools": [{"hosts": ["db.svc"], "names": ["*"], "capabilities": {}}]}},
     "capabilities must set at least one flag"),
    ({"mcpServers": {"allowFor": [{"skills": ["team-a"], "hosts": ["*.svc"]}]}},
     "can never match namespace/name"),
])
def test_the_api_server_refuses_rules_that_cannot_work(real: RealCluster, spec: dict[str, Any],
                                                       words: str) -> None:
    from kubernetes.client.exceptions import ApiException

    with pytest.raises(ApiException) as raised:
        real.apply(cluster_policy("broken", **spec))
    assert raised.value.status == 422
    assert words in str(raised.value.body)
