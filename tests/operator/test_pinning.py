"""Tool-definition pinning and ToolDefinitionChanged, with the real operator and servers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from mcp_servers import ServerHandle, make_tool
from operatorkit import Cluster, wait_for
from test_discovery import NS, TIMEOUT, actor, skill

from skillop.model.toolset import TOOLS_KEY, default_configmap_name
from skillop.sources.mcp_tools import McpToolInfo, info_digest


@pytest.fixture
def ns(running: Cluster) -> Iterator[Cluster]:
    running.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    yield running


def descriptions(cluster: Cluster, actor_name: str) -> dict[str, str]:
    cm = cluster.configmap(NS, default_configmap_name(actor_name))
    if cm is None:
        return {}
    return {t["name"]: t["description"] for t in json.loads(cm.data[TOOLS_KEY])["tools"]}


def condition(cluster: Cluster, kind: str, name: str, type_: str) -> dict[str, Any] | None:
    status = cluster.get(kind, NS, name).get("status") or {}
    return next((c for c in status.get("conditions", []) if c["type"] == type_), None)


def digest(name: str, description: str) -> str:
    tool = make_tool(name, description=description)
    return info_digest(McpToolInfo(name=tool.name, description=tool.description or "",
                                   title=tool.title, input_schema=tool.input_schema,
                                   output_schema=tool.output_schema, annotations={}))


def test_pinned_server_change_is_held_until_its_digest_is_accepted(ns: Cluster) -> None:
    with ServerHandle(tools=[make_tool("deploy", description="Deploy v1")],
                      list_changed=True) as srv:
        ns.apply(skill("pinned", {"name": "srv", "url": srv.url, "pin": True}))
        ns.apply(actor("agent", "pinned"))
        wait_for(lambda: descriptions(ns, "agent") == {"deploy": "Deploy v1"}, timeout=TIMEOUT)
        old = digest("deploy", "Deploy v1")
        wait_for(lambda: (c := condition(ns, "Skill", "pinned", "Pinned")) and
                 c["status"] == "True", timeout=TIMEOUT, message="Pinned=True")
        status = ns.get("Skill", NS, "pinned")["status"]
        assert status["mcpServers"][0]["pinnedDigests"] == {"deploy": old}

        srv.set_tools([make_tool("deploy", description="Deploy v2, now also deletes things")])
        new = digest("deploy", "Deploy v2, now also deletes things")
        pinned = wait_for(lambda: (c := condition(ns, "Skill", "pinned", "Pinned")) and
                          c["status"] == "False" and c, timeout=TIMEOUT,
                          message="PinViolation")
        assert pinned["reason"] == "PinViolation"
        assert old in pinned["message"] and new in pinned["message"]
        # The changed definition is not taken: the actor keeps the accepted one.
        assert descriptions(ns, "agent") == {"deploy": "Deploy v1"}
        ns.wait_ready("Actor", NS, "agent")

        ns.custom.patch_namespaced_custom_object(
            "skillop.dev", "v1alpha1", NS, "skills", "pinned",
            {"metadata": {"annotations": {"skillop.dev/accept-digests": new}}})
        wait_for(lambda: descriptions(ns, "agent") ==
                 {"deploy": "Deploy v2, now also deletes things"}, timeout=TIMEOUT,
                 message="accepted definition served")
        wait_for(lambda: (c := condition(ns, "Skill", "pinned", "Pinned")) and
                 c["status"] == "True", timeout=TIMEOUT, message="Pinned=True again")


def test_unpinned_definition_change_warns_and_posts_an_event(ns: Cluster) -> None:
    with ServerHandle(tools=[make_tool("query", description="Read rows")],
                      list_changed=True) as srv:
        ns.apply(skill("db", {"name": "db", "url": srv.url}))
        ns.apply(actor("analyst", "db"))
        wait_for(lambda: descriptions(ns, "analyst") == {"query": "Read rows"}, timeout=TIMEOUT)
        srv.set_tools([make_tool("query", description="Read and write rows")])
        wait_for(lambda: descriptions(ns, "analyst") == {"query": "Read and write rows"},
                 timeout=TIMEOUT)
        warnings = wait_for(lambda: [w for w in ns.get("Actor", NS, "analyst")["status"]
                                     .get("warnings", []) if "ToolDefinitionChanged" in w],
                            timeout=TIMEOUT, message="ToolDefinitionChanged warning")
        assert "tool query" in warnings[0] and "description" in warnings[0]
        events = wait_for(lambda: [e for e in ns.core.list_namespaced_event(NS).items
                                   if e.reason == "ToolDefinitionChanged"],
                          timeout=TIMEOUT, message="ToolDefinitionChanged event")
        assert events[0].involved_object.name == "analyst"
        assert "query" in events[0].message
