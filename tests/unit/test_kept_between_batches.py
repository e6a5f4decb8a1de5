"""What the operator keeps from one batch to the next is what it would compute again.

MCP ToolDefs (and the JSON and status items memoized on them) are reused while a
Skill's server spec and the server's tool list are the same objects; anything
else that changes them makes new ones (the ToolSet text assembled from those
memos is checked against the document in test_properties).
"""

from __future__ import annotations

import copy
from typing import Any

import kopf
from skillkit import actor, anon, cluster_policy, namespace, ref, skill, skill_md, tool

from skillop.operator.handlers import StatuslessDiffBaseStorage
from skillop.operator.store import Store
from skillop.resolve.resolver import Resolver
from skillop.sources.mcp_tools import McpToolInfo

URL = "https://mcp.example.com/mcp"
SKILL = ref("team-a/web")


def _infos(*names: str) -> tuple[McpToolInfo, ...]:
    return tuple(McpToolInfo(name=n, description=f"{n} things",
                             annotations={"readOnlyHint": True}) for n in names)


def _loaded() -> tuple[Store, Any]:
    store = Store()
    store.upsert(skill("web", mcpServers=[{"name": "web", "url": URL}]))
    store.upsert(actor("dev", skills=["web"]))
    key = store.catalog.skills[SKILL].spec.mcp_servers[0].discovery_key("team-a")
    store.set_discovered(key, _infos("fetch", "search"))
    return store, key


def _defs(store: Store) -> dict[str, Any]:
    resolution = Resolver(store.catalog).resolve_actor(ref("team-a/dev"))
    assert resolution is not None
    return {t.entry.tool.name: t.entry.tool for t in resolution.tools}


def test_tool_defs_are_reused_across_batches_and_a_status_echo() -> None:
    store, _ = _loaded()
    first = _defs(store)
    echo = skill("web", mcpServers=[{"name": "web", "url": URL}])
    echo["status"] = {"observedGeneration": 1, "toolCount": 2}
    # The echo of a status the operator wrote itself (a foreign one is news: it is repaired).
    store.record_status("Skill", SKILL, echo["status"])
    assert store.upsert(echo) == set()  # only the status differs: no news
    again = _defs(store)
    assert all(again[name] is first[name] for name in first)


def test_a_new_tool_list_gives_new_defs() -> None:
    store, key = _loaded()
    first = _defs(store)
    store.set_discovered(key, _infos("fetch", "search", "crawl"))
    again = _defs(store)
    assert set(again) == {"fetch", "search", "crawl"}
    assert again["fetch"] is not first["fetch"] and again["fetch"] == first["fetch"]


def test_a_changed_server_spec_gives_new_defs() -> None:
    store, _ = _loaded()
    assert _defs(store)["fetch"].description == "fetch things"
    store.upsert(skill("web", mcpServers=[{"name": "web", "url": URL, "overrides": {
        "fetch": {"description": "fetch one page"}}}]))
    assert _defs(store)["fetch"].description == "fetch one page"


def test_a_deleted_skill_is_forgotten() -> None:
    store, _ = _loaded()
    _defs(store)
    assert len(store.catalog.tool_defs) == 1
    store.remove("Skill", "team-a", "web")
    assert len(store.catalog.tool_defs) == 0


def test_declared_tools_are_reused_too() -> None:
    store = Store()
    store.upsert(skill("web", mcpServers=[{"name": "web", "url": URL, "tools": [
        {"name": "fetch", "description": "declared"}]}]))
    store.upsert(actor("dev", skills=["web"]))
    first, again = _defs(store), _defs(store)
    assert again["fetch"] is first["fetch"] and first["fetch"].description == "declared"


def _actor_body(status: dict[str, Any] | None) -> kopf.Body:
    body: dict[str, Any] = {
        "apiVersion": "skillop.dev/v1alpha1", "kind": "Actor",
        "metadata": {"name": "dev", "namespace": "team-a", "labels": {"team": "a"},
                     "annotations": {"note": "x",
                                     "skillop.dev/last-handled-configuration": "{}"}},
        "spec": {"skills": ["web"]},
    }
    if status is not None:
        body["status"] = status
    return kopf.Body(copy.deepcopy(body))  # type: ignore[arg-type]


def test_the_statusless_diff_base_is_kopfs_essence() -> None:
    ours = StatuslessDiffBaseStorage(prefix="skillop.dev", key="last-handled-configuration")
    kopfs = kopf.AnnotationsDiffBaseStorage(prefix="skillop.dev",
                                            key="last-handled-configuration")
    status = {"toolCount": 2, "tools": [{"name": f"t{i}"} for i in range(256)],
              "conditions": [{"type": "Ready", "status": "True"}]}
    for body in (_actor_body(status), _actor_body(None)):
        assert ours.build(body=body) == kopfs.build(body=body)
    fields = [("status", "toolCount")]
    assert (ours.build(body=_actor_body(status), extra_fields=fields)
            == kopfs.build(body=_actor_body(status), extra_fields=fields))
    assert "status" not in ours.build(body=_actor_body(status))


# -- registry Tools and inline tools --------------------------------------------------
def _shared_store() -> Store:
    store = Store()
    store.upsert(tool("lint", inputSchema={"type": "object", "properties": {
        "path": {"type": "string"}}}))
    store.upsert(skill("review", tools=[{"ref": "lint"}], anonymousTools=[anon("note")]))
    store.upsert(skill("ci", tools=[{"ref": "lint", "overrides": {
        "capabilities": {"requiresApproval": True}}}]))
    store.upsert(actor("dev", skills=["review"]))
    store.upsert(actor("bot", skills=["ci"]))
    return store


def _tool_of(store: Store, actor_name: str, name: str) -> Any:
    resolution = Resolver(store.catalog).resolve_actor(ref(f"team-a/{actor_name}"))
    assert resolution is not None
    return next(t.entry.tool for t in resolution.tools if t.name == name)


def test_registry_and_inline_tool_defs_are_reused_across_batches() -> None:
    store = _shared_store()
    lint, note = _tool_of(store, "dev", "lint"), _tool_of(store, "dev", "note")
    assert _tool_of(store, "dev", "lint") is lint
    assert _tool_of(store, "dev", "note") is note
    # The overriding skill gets its own view, built on the same definition.
    approved = _tool_of(store, "bot", "lint")
    assert approved is not lint and approved.capabilities.requires_approval
    assert lint.capabilities.requires_approval is None


def test_a_changed_tool_spec_gives_a_new_def_and_a_deleted_tool_is_forgotten() -> None:
    store = _shared_store()
    before = _tool_of(store, "dev", "lint")
    store.upsert(tool("lint", description="lint harder"))
    after = _tool_of(store, "dev", "lint")
    assert after is not before and after.description == "lint harder"
    kept = len(store.catalog.defs)
    store.remove("Tool", "team-a", "lint")
    assert len(store.catalog.defs) == kept - 1
    resolution = Resolver(store.catalog).resolve_actor(ref("team-a/dev"))
    assert resolution is not None and "lint" not in {t.name for t in resolution.tools}


def test_a_changed_inline_tool_gives_a_new_def() -> None:
    store = _shared_store()
    before = _tool_of(store, "dev", "note")
    store.upsert(skill("review", tools=[{"ref": "lint"}],
                       anonymousTools=[anon("note", description="write it down")]))
    after = _tool_of(store, "dev", "note")
    assert after is not before and after.description == "write it down"
    store.remove("Skill", "team-a", "review")
    store.upsert(skill("review", anonymousTools=[anon("note")]))
    assert _tool_of(store, "dev", "note").description == "inline note"


def test_overridden_and_skill_md_tool_defs_are_reused_until_their_spec_changes() -> None:
    store = _shared_store()
    store.upsert(skill("docs", agentSkills=[{"inline": skill_md("style")}]))
    store.upsert(actor("writer", skills=["docs"]))
    approved, style = _tool_of(store, "bot", "lint"), _tool_of(store, "writer", "style")
    assert _tool_of(store, "bot", "lint") is approved  # the override's ToolDef, kept
    assert _tool_of(store, "writer", "style") is style  # SKILL.md parsed once
    store.upsert(skill("ci", tools=[{"ref": "lint", "overrides": {
        "description": "lint, then ask"}}]))
    changed = _tool_of(store, "bot", "lint")
    assert changed is not approved and changed.description == "lint, then ask"
    assert changed.capabilities.requires_approval is None
    store.upsert(skill("docs", agentSkills=[{"inline": skill_md("style", "house style")}]))
    assert _tool_of(store, "writer", "style").description == "house style"


def test_a_namespaces_rules_are_kept_until_its_policies_change() -> None:
    store = _shared_store()
    store.upsert(namespace("team-a"))
    floor = store.catalog.namespace_rules("team-a")
    assert store.catalog.namespace_rules("team-a") is floor  # no policy: kept all the same
    store.upsert(cluster_policy("tenants", namespaceSelector={"matchLabels": {"tier": "t"}},
                                denyCapabilities=["sideEffects"]))
    assert store.catalog.namespace_rules("team-a") is floor  # the selector does not match yet
    store.upsert(namespace("team-a", tier="t"))
    governed = store.catalog.namespace_rules("team-a")
    assert governed is not floor and store.catalog.namespace_rules("team-a") is governed
    assert _tool_of(store, "dev", "note")  # the inline note declares no side effects
    store.upsert(cluster_policy("tenants", namespaceSelector={"matchLabels": {"tier": "t"}},
                                requireCapabilities=["readOnly"]))
    edited = store.catalog.namespace_rules("team-a")
    assert edited is not governed
    resolution = Resolver(store.catalog).resolve_actor(ref("team-a/dev"))
    assert resolution is not None and resolution.tools == ()
    assert {p.name for p in resolution.pruned} == {"lint", "note"}
