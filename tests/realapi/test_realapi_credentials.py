"""A tenant's Secret goes only where the tenant bound it, on a real API server.

team-b shares a Skill whose MCP server is team-b's own host and names the
Secret ``docker-auth``; for calls that is the consuming Actor's namespace's
Secret (docs/security.md). The operator refuses the team-a Actor's set until
team-a binds its Secret to that host (``spec.credentials``), then writes it and
says in status where the Secret goes; when the sharer moves the server, the
binding no longer matches: refused again, and the ConfigMap never names the
new host.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from realkit import RealCluster, operator_process
from skillkit import actor, anon, skill

from clusterkit import wait_for
from skillop.model.toolset import TOOLS_KEY, default_configmap_name

pytestmark = pytest.mark.realapi

OLD_HOST, NEW_HOST = "mcp.team-b.svc", "collect.team-b.example"


@pytest.fixture
def tenants(real: RealCluster, request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """(consumer, sharer): two namespaces for this test only."""
    tag = hashlib.sha256(request.node.name.encode()).hexdigest()[:6]
    consumer, sharer = f"cred-{tag}-a", f"cred-{tag}-b"
    real.namespace(consumer)
    real.namespace(sharer)
    try:
        yield consumer, sharer
    finally:
        real.delete_namespaces(consumer, sharer)


def _server(host: str) -> dict[str, Any]:
    return {"name": "helper", "url": f"http://{host}:8080/mcp", "tools": [anon("build")],
            "headersFrom": {"secretRef": {"name": "docker-auth"}}}


def _ready(real: RealCluster, ns: str) -> dict[str, Any] | None:
    return real.ready("Actor", ns, "agent")


def _servers(real: RealCluster, ns: str) -> list[dict[str, Any]]:
    cm = real.configmap(ns, default_configmap_name("agent"))
    return [] if cm is None else list(json.loads(cm.data[TOOLS_KEY])["mcpServers"])


def test_a_shared_skill_gets_the_tenants_secret_only_where_the_tenant_bound_it(
        real: RealCluster, tenants: tuple[str, str]) -> None:
    consumer, sharer = tenants
    real.apply(skill("helper", sharer, sharing={"from": "All"}, mcpServers=[_server(OLD_HOST)]))
    real.apply(actor("agent", consumer, skills=[f"{sharer}/helper"]))
    with operator_process(real.plane, name="credentials"):
        refused = real.wait_ready("Actor", consumer, "agent", value="False", timeout=30)
        assert refused["reason"] == "CredentialNotBound", refused
        for part in (f"Actor {consumer}/agent", "'helper'", f"skill {sharer}/helper",
                     "Secret docker-auth", f"http://{OLD_HOST}:8080"):
            assert part in refused["message"], part
        assert _servers(real, consumer) == []  # no ConfigMap sends it anywhere

        # team-a binds its Secret to team-b's host: accepted, and status says where.
        binding = [{"secretRef": {"name": "docker-auth"}, "hosts": [f"{OLD_HOST}:8080"]}]
        real.patch_spec("Actor", consumer, "agent", {"credentials": binding})
        real.wait_ready("Actor", consumer, "agent", timeout=30)
        [server] = _servers(real, consumer)
        assert server["url"] == f"http://{OLD_HOST}:8080/mcp"
        assert server["headersFrom"] == {"secretRef": {"name": "docker-auth"}}
        status = real.get("Actor", consumer, "agent")["status"]
        assert status["credentials"] == [{
            "secret": "docker-auth", "server": "helper", "skill": f"{sharer}/helper",
            "host": f"http://{OLD_HOST}:8080"}]

        # The sharer moves the server: the binding no longer matches.
        real.patch_spec("Skill", sharer, "helper", {"mcpServers": [_server(NEW_HOST)]})
        again = wait_for(lambda: (c := _ready(real, consumer)) and c["status"] == "False" and c,
                         timeout=30, message="the Actor refused again")
        assert again["reason"] == "CredentialNotBound"
        assert f"http://{NEW_HOST}:8080" in again["message"]
        assert "keeps the last good tool set" in again["message"]
        assert [s["url"] for s in _servers(real, consumer)] == [f"http://{OLD_HOST}:8080/mcp"]
        status = real.get("Actor", consumer, "agent")["status"]
        assert [c["host"] for c in status["credentials"]] == [f"http://{OLD_HOST}:8080"]
