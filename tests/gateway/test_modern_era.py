"""The 2026-07-28 revision, as fastmcp's default client speaks it (``server/discover``,
no session, an envelope per request): the gateway lists and forwards the set,
approves through the input-required flow (the client's elicitation handler is
asked, and the retry carrying its answer runs once), tells listeners of
``list_changed`` over ``subscriptions/listen``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from gatewaykit import Volume, echo_tool, fastmcp_answering, serving, text_of, toolset_files
from mcp.client.subscriptions import listen
from mcp_servers import ServerHandle, make_tool
from skillkit import actor, skill

fastmcp = pytest.importorskip("fastmcp", reason="fastmcp (the 'test' extra) is not installed")

pytestmark = pytest.mark.timeout(90)

TOOLS = [echo_tool("echo", "up"),
         {**echo_tool("guarded", "up"), "capabilities": {"requiresApproval": True}}]


@pytest.fixture
def upstream() -> Iterator[ServerHandle]:
    with ServerHandle(tools=[make_tool("echo"), make_tool("guarded"), make_tool("extra")],
                      list_changed=True) as srv:
        yield srv


def test_the_default_fastmcp_client_lists_calls_and_is_asked_to_approve(
        tmp_path: Path, upstream: ServerHandle) -> None:
    asked: list[str] = []

    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with serving(tmp_path, upstream, tools=TOOLS) as gateway:
            async with fastmcp.Client(gateway.url,
                                      elicitation_handler=fastmcp_answering("accept", asked)) as c:
                out["version"] = c.protocol_version
                out["listed"] = sorted(t.name for t in await c.list_tools())
                out["echo"] = await c.call_tool("echo", {"k": "v"})
                out["approved"] = await c.call_tool("guarded", {"target": "prod"})
            async with fastmcp.Client(gateway.url,
                                      elicitation_handler=fastmcp_answering("decline", asked)) as c:
                out["declined"] = await c.call_tool("guarded", {"target": "dev"},
                                                    raise_on_error=False)
            async with fastmcp.Client(gateway.url) as c:  # no elicitation handler
                out["unasked"] = await c.call_tool("guarded", {"target": "qa"},
                                                   raise_on_error=False)
        return out

    out = anyio.run(main)
    assert out["version"] == "2026-07-28"
    assert out["listed"] == ["echo", "guarded"]
    assert json.loads(text_of(out["echo"])) == {"tool": "echo", "arguments": {"k": "v"}}
    assert not out["approved"].is_error
    assert len(asked) == 2 and "guarded" in asked[0] and "prod" in asked[0]
    assert out["declined"].is_error and "approval declined" in text_of(out["declined"])
    assert out["unasked"].is_error and "does not support MCP elicitation" in text_of(
        out["unasked"])
    assert upstream.calls == [("echo", {"k": "v"}), ("guarded", {"target": "prod"})]


async def _modern_call(http: httpx2.AsyncClient, url: str, ident: int, name: str,
                       arguments: dict[str, Any], **extra: Any) -> httpx2.Response:
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "by-hand", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}
    return await http.post(url, headers={
        "accept": "application/json, text/event-stream", "content-type": "application/json",
        "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": name},
        json={"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": {
            "name": name, "arguments": arguments, "_meta": meta, **extra}})


def test_an_approval_runs_one_call_with_the_arguments_shown(
        tmp_path: Path, upstream: ServerHandle) -> None:
    accept = {"skillop.dev/approval": {"action": "accept", "content": {"approve": True}}}

    async def main() -> dict[str, Any]:
        async with serving(tmp_path, upstream, tools=TOOLS) as gateway, \
                httpx2.AsyncClient(timeout=30) as http:
            url = gateway.url
            first = (await _modern_call(http, url, 1, "guarded", {"t": "a"})).json()["result"]
            state = first["requestState"]
            return {
                "first": first,
                "forged": (await _modern_call(http, url, 2, "guarded", {"t": "a"},
                                              inputResponses=accept,
                                              requestState="v1.forged")).json(),
                "other arguments": (await _modern_call(
                    http, url, 3, "guarded", {"t": "b"}, inputResponses=accept,
                    requestState=state)).json(),
                "approved": (await _modern_call(http, url, 4, "guarded", {"t": "a"},
                                                inputResponses=accept,
                                                requestState=state)).json()["result"],
                "again": (await _modern_call(http, url, 5, "guarded", {"t": "a"},
                                             inputResponses=accept,
                                             requestState=state)).json()["result"],
            }

    out = anyio.run(main)
    assert out["first"]["resultType"] == "input_required"
    ask = out["first"]["inputRequests"]["skillop.dev/approval"]
    assert ask["method"] == "elicitation/create" and '"t": "a"' in ask["params"]["message"]
    assert out["forged"]["error"]["message"] == "Invalid or expired requestState"
    assert out["other arguments"]["error"]["message"] == "Invalid or expired requestState"
    assert not out["approved"].get("isError")
    assert out["again"]["isError"] and "already used" in out["again"]["content"][0]["text"]
    assert upstream.calls == [("guarded", {"t": "a"})]  # once


def test_listeners_are_told_when_the_set_changes(tmp_path: Path,
                                                 upstream: ServerHandle) -> None:
    async def main() -> tuple[list[str], list[str], bool]:
        async with serving(tmp_path, upstream, tools=TOOLS) as gateway, \
                fastmcp.Client(gateway.url) as c:
            before = sorted(t.name for t in await c.list_tools())
            async with listen(c.session, tools_list_changed=True) as events:
                Volume(tmp_path / "tools").write(toolset_files([
                    skill("srv", mcpServers=[{"name": "up", "url": upstream.url, "tools": [
                        *TOOLS, echo_tool("extra", "up")]}]),
                    actor("dev", skills=["srv"], approval={"via": "Elicitation"})],
                    "team-a/dev"))
                with anyio.fail_after(10):
                    event = await events.__anext__()
            after = sorted(t.name for t in await c.list_tools())
        return before, after, type(event).__name__ == "ToolsListChanged"

    before, after, told = anyio.run(main)
    assert told
    assert before == ["echo", "guarded"] and after == ["echo", "extra", "guarded"]

