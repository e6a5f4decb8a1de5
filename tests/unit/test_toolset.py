"""The ToolSet document: the contract's shape, sorted, deterministic to the byte."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

from skillkit import actor, anon, by_name, catalog, resolve_actor, skill, skill_md, tool

from skillop.cli.load import load_paths
from skillop.model.canonical import canonical_json
from skillop.model.names import ObjectRef
from skillop.model.toolset import TOOLS_KEY, ToolSetDocument, agent_skill_key
from skillop.resolve.catalog import Catalog
from skillop.resolve.resolver import Resolver
from skillop.resolve.toolset import configmap_data, tools_json

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TOP_KEYS = ["apiVersion", "kind", "actor", "hash", "tools", "mcpServers", "agentSkills",
            "tokens"]
#: Every tool's keys, in order; the optional ones are there only when set, and
#: ``digest`` pins the definition (docs/decisions.md).
TOOL_KEYS = ["name", "bindingName", "qualifiedName", "source", "skill", "title", "description",
             "inputSchema", "outputSchema", "capabilities", "runtime", "mcpServer", "upstreamName",
             "path", "digest", "tokens", "upstreamDigest"]
OPTIONAL = {"title": "title", "outputSchema": "output_schema", "runtime": "runtime",
            "mcpServer": "mcp_server", "upstreamName": "mcp_server",
            "upstreamDigest": "upstream_digest"}
SOURCES = {"builtin", "tool", "mcp", "anonymous", "agent_skill"}


def _every_source() -> list[dict[str, Any]]:
    return [
        tool("run-pytest", name="run_pytest", title="Run pytest",
             outputSchema={"type": "object"}, runtime={"command": ["pytest"]}),
        skill("all", tools=[{"ref": "run-pytest"}], builtins=["git_operations"],
              anonymousTools=[anon("lint")], agentSkills=[{"inline": skill_md("notes")}],
              mcpServers=[{"name": "docker", "url": "http://d/mcp", "tools": [anon("build")]}]),
        actor("dev", skills=["all"]),
    ]


def test_document_shape() -> None:
    doc = resolve_actor(_every_source(), "team-a/dev").document
    assert list(doc) == TOP_KEYS
    assert (doc["apiVersion"], doc["kind"], doc["actor"]) == (
        "skillop.dev/v1alpha1", "ToolSet", "team-a/dev")
    assert doc["hash"].startswith("sha256:") and len(doc["hash"]) == 7 + 64
    assert {t["source"] for t in doc["tools"]} == SOURCES
    resolution = resolve_actor(_every_source(), "team-a/dev")
    for t, effective in zip(doc["tools"], resolution.tools, strict=True):
        tooldef = effective.entry.tool
        expected = [k for k in TOOL_KEYS
                    if k not in OPTIONAL or getattr(tooldef, OPTIONAL[k]) is not None]
        assert list(t) == expected, t["name"]
        assert ("mcpServer" in t) == (t["source"] == "mcp")
        assert ("upstreamDigest" in t) == (t["source"] == "mcp")
        assert t["digest"] == tooldef.digest()
        assert isinstance(t["capabilities"], dict)
        assert t["path"] == ["team-a/all"]
        assert t["qualifiedName"] == f"team-a/all.{t['name']}"
    assert doc["mcpServers"] == [{"name": "docker", "skill": "team-a/all",
                                  "transport": "streamable-http", "url": "http://d/mcp"}]
    assert doc["agentSkills"] == [{"name": "notes", "skill": "team-a/all",
                                   "key": "agent-skill.notes.md"}]
    run = by_name(resolution)["run_pytest"]
    assert (run["title"], run["outputSchema"], run["runtime"]) == (
        "Run pytest", {"type": "object"}, {"command": ["pytest"]})
    assert "title" not in by_name(resolution)["lint"]


def test_tools_are_sorted_by_name() -> None:
    doc = resolve_actor(_every_source(), "team-a/dev").document
    tool_names = [t["name"] for t in doc["tools"]]
    assert tool_names == sorted(tool_names)


def test_hash_is_the_sha256_of_the_canonical_document_without_it() -> None:
    doc = resolve_actor(_every_source(), "team-a/dev").document
    body = {k: v for k, v in doc.items() if k != "hash"}
    assert doc["hash"] == "sha256:" + hashlib.sha256(canonical_json(body).encode()).hexdigest()


def test_tools_json_is_the_configmaps_bytes_and_parses_back() -> None:
    resolution = resolve_actor(_every_source(), "team-a/dev")
    text = tools_json(resolution.text)
    assert text.endswith("\n")
    assert json.loads(text) == resolution.document
    assert text == configmap_data(resolution.text, resolution.tools)[TOOLS_KEY]


def test_configmap_data_holds_the_document_and_the_bodies() -> None:
    resolution = resolve_actor(_every_source(), "team-a/dev")
    data = configmap_data(resolution.text, resolution.tools)
    assert sorted(data) == [agent_skill_key("notes"), TOOLS_KEY]
    assert json.loads(data[TOOLS_KEY]) == resolution.document


def test_the_assembled_text_is_the_models_canonical_json() -> None:
    """The writer joins cached fragments (the fast path); the model, built whole
    or read back from those bytes, must spell exactly the same text."""
    resolver = Resolver(_examples_catalog())
    searching = [*_every_source()[:-1], actor("dev", skills=["all"], disclosure={
        "mode": "Search", "pinned": ["notes"]})]
    resolutions = [resolve_actor(_every_source(), "team-a/dev"),
                   resolve_actor(searching, "team-a/dev")] + [
        resolver.resolve_actor(ObjectRef("team-a", name)) for name in ("developer", "reviewer")]
    assert resolutions[1].toolset.disclosure is not None
    assert resolutions[0].toolset.disclosure is None
    for resolution in resolutions:
        assert resolution is not None
        assert resolution.toolset.canonical() == resolution.text
        assert ToolSetDocument.parse(resolution.text).canonical() == resolution.text


def test_an_mcp_tool_names_its_upstream_tool_even_when_qualified() -> None:
    docs = [skill("a", mcpServers=[{"name": "s", "url": "http://a/mcp", "tools": [anon("x")]}]),
            skill("b", anonymousTools=[anon("x")]), actor("dev", skills=["a", "b"])]
    tools = resolve_actor(docs, "team-a/dev").toolset.tools
    mcp = next(t for t in tools if t.source == "mcp")
    assert (mcp.name, mcp.upstream_name) == ("team-a/a.x", "x")
    assert next(t for t in tools if t.source == "anonymous").upstream_name is None


def _examples_catalog(order: int | None = None) -> Catalog:
    loaded = load_paths([str(EXAMPLES)])
    assert not loaded.problems
    objects = list(loaded.objects)
    if order is not None:
        random.Random(order).shuffle(objects)
    return Catalog.of(objects)


def test_deterministic_across_runs_and_manifest_order() -> None:
    actor_ref = ObjectRef("team-a", "developer")
    rendered = set()
    for order in (None, 1, 2, 3):
        resolution = Resolver(_examples_catalog(order)).resolve_actor(actor_ref)
        assert resolution is not None and resolution.ok
        rendered.add(resolution.text)
    assert len(rendered) == 1


def test_hash_changes_when_a_description_changes() -> None:
    docs = _every_source()
    before = resolve_actor(docs, "team-a/dev").hash
    docs[0]["spec"]["description"] = "Run the suite, quietly"
    after = resolve_actor(docs, "team-a/dev").hash
    assert before != after


def test_hash_changes_with_an_override_and_not_with_a_comment() -> None:
    base = [tool("t"), skill("s", tools=[{"ref": "t"}]), actor("a", skills=["s"])]
    overridden = [tool("t"), skill("s", tools=[{"ref": "t", "overrides": {"title": "T"}}]),
                  actor("a", skills=["s"])]
    relabelled = [tool("t"), skill("s", labels={"team": "x"}, tools=[{"ref": "t"}]),
                  actor("a", skills=["s"])]
    h = resolve_actor(base, "team-a/a").hash
    assert resolve_actor(overridden, "team-a/a").hash != h
    assert resolve_actor(relabelled, "team-a/a").hash == h


def test_skill_document_names_the_skill() -> None:
    resolution = Resolver(catalog(_every_source())).resolve_skill(ObjectRef("team-a", "all"))
    assert resolution is not None
    doc = resolution.document
    assert list(doc) == ["apiVersion", "kind", "skill", "hash", "tools", "mcpServers",
                         "agentSkills", "tokens"]
    assert doc["skill"] == "team-a/all"


def test_examples_developer_and_reviewer() -> None:
    resolver = Resolver(_examples_catalog())
    dev = resolver.resolve_actor(ObjectRef("team-a", "developer"))
    rev = resolver.resolve_actor(ObjectRef("team-a", "reviewer"))
    assert dev is not None and rev is not None
    assert dev.ok and rev.ok
    dev_tools = by_name(dev)
    assert dev_tools["push_image"]["capabilities"]["requiresApproval"] is True
    assert "system_prune" not in dev_tools
    # examples/10-policies.yaml: the tenants ClusterSkillPolicy governs team-a.
    assert [p.label for p in dev.policies] == ["ClusterSkillPolicy tenants"]
    assert dev_tools["delete_file"]["capabilities"]["requiresApproval"] is True
    assert "requiresApproval" not in dev_tools["write_file"]["capabilities"]
    assert {"team-a/code-analysis.lint", "team-a/testing.lint"} <= set(dev_tools)
    assert dev_tools["coverage-report"]["description"] == "Coverage for the changed files only"
    assert dev_tools["git_log"]["path"] == ["team-a/full-stack-dev", "team-a/code-analysis",
                                           "platform/read-only-git"]
    rev_tools = by_name(rev)
    assert all(t["capabilities"].get("readOnly") is True for t in rev_tools.values())
    assert not any(t["skill"] in ("team-a/docker-tools", "team-a/deploy")
                   for t in rev_tools.values())
    assert "release-notes" not in rev_tools


def test_the_fast_hash_equals_the_hash_of_the_whole_document() -> None:
    # The ToolSet hash is assembled from cached per-tool JSON; it must stay the
    # sha256 of the whole document's canonical JSON, whatever the document holds.
    from pathlib import Path

    from skillop.cli.load import load_paths
    from skillop.model.names import ObjectRef
    from skillop.resolve.catalog import Catalog
    from skillop.resolve.resolver import Resolver
    from skillop.resolve.toolset import document_hash

    examples = Path(__file__).resolve().parents[2] / "examples"
    resolver = Resolver(Catalog.of(load_paths([str(examples)]).objects))
    for ref in (ObjectRef("team-a", "developer"), ObjectRef("team-a", "reviewer")):
        resolution = resolver.resolve_actor(ref)
        assert resolution is not None
        assert document_hash(resolution.document) == resolution.document["hash"]
    skill = resolver.resolve_skill(ObjectRef("team-a", "full-stack-dev"))
    assert skill is not None and document_hash(skill.document) == skill.document["hash"]


def test_upstream_digest_is_the_servers_definition_and_survives_overrides() -> None:
    """``digest`` follows overrides; ``upstreamDigest`` stays what the server gave
    (the definition the gateway compares with the live listing at call time)."""
    from skillop.sources.mcp_tools import McpToolInfo, info_digest

    build = anon("build", inputSchema={"type": "object"})
    base = [skill("srv", mcpServers=[{"name": "d", "url": "http://d/mcp", "tools": [build]}]),
            skill("top", includes=[{"skill": "srv", "overrides": {
                "build": {"description": "Build, as team-a says"}}}]),
            actor("plain", skills=["srv"]), actor("over", skills=["top"])]
    plain = by_name(resolve_actor(base, "team-a/plain"))["build"]
    over = by_name(resolve_actor(base, "team-a/over"))["build"]
    assert over["description"] == "Build, as team-a says"
    assert plain["digest"] != over["digest"]
    expected = info_digest(McpToolInfo(name="build", description="inline build",
                                       input_schema={"type": "object"}))
    assert plain["upstreamDigest"] == over["upstreamDigest"] == expected
