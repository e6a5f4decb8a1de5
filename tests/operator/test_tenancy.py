"""Tenants stay apart in discovery, and credentials in URLs are called out (API "Secrets
and tenancy").

The real operator, the emulated API and one real MCP server that lists
different tools depending on the Authorization header, as a multi-tenant
gateway would. Discovery is keyed by (URL, Secret): each namespace's Actor gets
the listing made with its own Skill's Secret, a namespace without a Secret
never gets a listing made with someone else's token, and there is one
connection per (URL, Secret), however many Skills share it.
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from typing import Any

import skillkit
from mcp_servers import ServerHandle, make_tool
from operatorkit import Cluster, wait_for

from skillop.model.toolset import TOOLS_KEY, default_configmap_name

TIMEOUT = 15.0
TOKENS = {"tenant-a": "Bearer token-of-tenant-a-4f1c", "tenant-b": "Bearer token-of-tenant-b-9d2e"}


def namespace(cluster: Cluster, name: str) -> None:
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def secret(cluster: Cluster, ns: str, name: str, authorization: str) -> None:
    cluster.core.create_namespaced_secret(ns, {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns},
        "data": {"Authorization": base64.b64encode(authorization.encode()).decode()}})


def skill(ns: str, name: str, url: str, secret_name: str | None = None) -> dict[str, Any]:
    server: dict[str, Any] = {"name": "gateway", "url": url,
                              "tools": [{"name": f"declared_{ns.replace('-', '_')}"}]}
    if secret_name is not None:
        server["headersFrom"] = {"secretRef": {"name": secret_name}}
    return skillkit.skill(name, ns, description="the shared gateway", mcpServers=[server])


def actor(ns: str, name: str, *skills: str) -> dict[str, Any]:
    return skillkit.actor(name, ns, skills=skills)


def cm_tools(cluster: Cluster, ns: str, actor_name: str) -> set[str] | None:
    cm = cluster.configmap(ns, default_configmap_name(actor_name))
    if cm is None:
        return None
    return {t["name"] for t in json.loads(cm.data[TOOLS_KEY])["tools"]}


def wait_tools(cluster: Cluster, ns: str, actor_name: str, expected: set[str]) -> None:
    wait_for(lambda: cm_tools(cluster, ns, actor_name) == expected, timeout=TIMEOUT,
             message=f"ConfigMap of {ns}/{actor_name} lists {sorted(expected)}"
                     f" (has {cm_tools(cluster, ns, actor_name)})")


def sessions_by_auth(srv: ServerHandle) -> Counter[str | None]:
    """How many MCP sessions (initialize requests) the server saw per Authorization header."""
    return Counter(r.headers.get("authorization") for r in srv.requests
                   if r.rpc_method == "initialize")


def test_each_tenant_gets_the_listing_made_with_its_own_secret(running: Cluster) -> None:
    cluster = running
    public = [make_tool("public_search")]
    by_auth = {TOKENS["tenant-a"]: [make_tool("a_deploy"), make_tool("a_search")],
               TOKENS["tenant-b"]: [make_tool("b_billing")]}
    with ServerHandle(tools=public, tools_by_auth=by_auth, list_changed=True) as srv:
        for ns in ("tenant-a", "tenant-b", "tenant-c"):
            namespace(cluster, ns)
        secret(cluster, "tenant-a", "gateway-auth", TOKENS["tenant-a"])
        secret(cluster, "tenant-b", "gateway-auth", TOKENS["tenant-b"])
        # tenant-a registers first: before discovery was keyed by (URL, Secret), every
        # Skill naming the URL shared its session and its token.
        cluster.apply(skill("tenant-a", "gw", srv.url, "gateway-auth"))
        cluster.apply(actor("tenant-a", "agent", "gw"))
        wait_tools(cluster, "tenant-a", "agent", {"a_deploy", "a_search"})

        # Same Secret name, other namespace: another Secret, another listing.
        cluster.apply(skill("tenant-b", "gw", srv.url, "gateway-auth"))
        cluster.apply(actor("tenant-b", "agent", "gw"))
        # No Secret at all: what the server serves without credentials.
        cluster.apply(skill("tenant-c", "gw", srv.url))
        cluster.apply(actor("tenant-c", "agent", "gw"))
        # A second Skill with tenant-a's Secret shares tenant-a's session.
        cluster.apply(skill("tenant-a", "gw-again", srv.url, "gateway-auth"))
        cluster.apply(actor("tenant-a", "other", "gw-again"))

        wait_tools(cluster, "tenant-b", "agent", {"b_billing"})
        wait_tools(cluster, "tenant-c", "agent", {"public_search"})
        wait_tools(cluster, "tenant-a", "other", {"a_deploy", "a_search"})
        assert cm_tools(cluster, "tenant-a", "agent") == {"a_deploy", "a_search"}

        for ns, count in (("tenant-a", 2), ("tenant-b", 1), ("tenant-c", 1)):
            status = cluster.get("Skill", ns, "gw")["status"]
            assert status["mcpServers"][0]["toolCount"] == count, (ns, status)

        # One session per (URL, Secret), however many Skills share it.
        assert sessions_by_auth(srv) == {TOKENS["tenant-a"]: 1, TOKENS["tenant-b"]: 1, None: 1}

        # A change the server announces reaches only the tenant it was made for.
        srv.tools_by_auth[TOKENS["tenant-b"]] = [make_tool("b_billing"), make_tool("b_refund")]
        srv.notify_list_changed()
        wait_tools(cluster, "tenant-b", "agent", {"b_billing", "b_refund"})
        assert cm_tools(cluster, "tenant-a", "agent") == {"a_deploy", "a_search"}
        assert cm_tools(cluster, "tenant-c", "agent") == {"public_search"}


def test_a_skill_without_a_secret_never_gets_a_token_made_listing(running: Cluster) -> None:
    """The server lists nothing without credentials, and that is what tenant-c gets."""
    cluster = running
    by_auth = {TOKENS["tenant-a"]: [make_tool("a_deploy")]}
    with ServerHandle(tools=[], tools_by_auth=by_auth, list_changed=True) as srv:
        for ns in ("tenant-a", "tenant-c"):
            namespace(cluster, ns)
        secret(cluster, "tenant-a", "gateway-auth", TOKENS["tenant-a"])
        cluster.apply(skill("tenant-a", "gw", srv.url, "gateway-auth"))
        cluster.apply(actor("tenant-a", "agent", "gw"))
        wait_tools(cluster, "tenant-a", "agent", {"a_deploy"})
        cluster.apply(skill("tenant-c", "gw", srv.url))
        cluster.apply(actor("tenant-c", "agent", "gw"))
        # The server lists nothing without credentials: an empty set, not a_deploy.
        wait_tools(cluster, "tenant-c", "agent", set())
        cluster.wait_ready("Actor", "tenant-c", "agent")
        assert sessions_by_auth(srv) == {TOKENS["tenant-a"]: 1, None: 1}


def test_credential_query_parameters_warn_in_skill_and_actor_status(running: Cluster) -> None:
    """The URL is written to ConfigMaps every reaching namespace can read: say so."""
    cluster = running
    namespace(cluster, "tenant-a")
    url = "http://gateway.tools.svc/mcp?region=eu&api_key=k3y-v4lue-77"
    cluster.apply(skill("tenant-a", "gw", url))
    cluster.apply(actor("tenant-a", "agent", "gw"))

    def warned(kind: str, name: str) -> list[str]:
        status = cluster.get(kind, "tenant-a", name).get("status") or {}
        return [w for w in status.get("warnings", []) if "api_key" in w]

    for kind, name in (("Skill", "gw"), ("Actor", "agent")):
        [warning] = wait_for(lambda: warned(kind, name), timeout=TIMEOUT,  # noqa: B023
                             message=f"the {kind} warns about api_key")
        assert "spec.mcpServers[0].url" in warning and "ConfigMaps" in warning
        assert "k3y-v4lue-77" not in warning and "region" not in warning
    cluster.wait_ready("Actor", "tenant-a", "agent")
