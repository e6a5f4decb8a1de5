"""The upstreams' warm-up: a gateway in this process, a set of many upstream servers
(one real SDK server behind them all, counting what it is asked), the SDK client as
the agent. The agent's handshake and listing are answered before any upstream is
contacted; then every upstream is opened and listed without a call, a few at a
time, and a call finds its upstream open. An agent that calls without listing
starts the warm-up with its call."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from gatewaykit import Volume, agent, echo_tool, gateway_on, text_of, toolset_files
from mcp_servers import ServerHandle, make_tool
from skillkit import actor, skill

from skillop.gateway import upstream as upstream_module

SERVERS = 12


@asynccontextmanager
async def serving(tmp_path: Path, srv: ServerHandle) -> AsyncIterator[Any]:
    """A gateway serving ``SERVERS`` upstream servers (all of them ``srv``), one tool each."""
    skills = [skill(f"srv{i}", mcpServers=[{"name": "up", "url": srv.url,
                                            "tools": [echo_tool(f"t{i}", "up")]}])
              for i in range(SERVERS)]
    Volume(tmp_path / "tools").write(toolset_files(
        [*skills, actor("dev", skills=[f"srv{i}" for i in range(SERVERS)])], "team-a/dev"))
    async with gateway_on(tmp_path) as gateway:
        yield gateway


async def _until(condition: Any, seconds: float = 15) -> None:
    with anyio.move_on_after(seconds):
        while not condition():
            await anyio.sleep(0.02)


def test_the_agents_listing_comes_first_then_every_upstream_is_warmed_without_a_call(
        tmp_path: Path) -> None:

    async def main(srv: ServerHandle) -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with serving(tmp_path, srv) as gateway, agent(gateway.url) as session:
            await anyio.sleep(0.5)  # time enough to have opened them, were they opened at start
            out["before listing"] = srv.count("initialize")
            out["listed"] = sorted(t.name for t in (await session.list_tools()).tools)
            await _until(lambda: srv.count("tools/list") >= SERVERS)
            out["warmed"] = (srv.count("initialize"), srv.count("tools/list"))
            out["call"] = await session.call_tool("t3", {"n": 1})
            out["after call"] = srv.count("initialize")
        return out

    with ServerHandle(tools=[make_tool(f"t{i}") for i in range(SERVERS)]) as srv:
        out = anyio.run(main, srv)
    assert out["before listing"] == 0
    assert out["listed"] == sorted(f"t{i}" for i in range(SERVERS))
    assert out["warmed"] == (SERVERS, SERVERS)  # each opened and listed once, no call made
    assert not out["call"].is_error and '"tool": "t3"' in text_of(out["call"])
    assert out["after call"] == SERVERS  # the call found its upstream open
    assert srv.calls == [("t3", {"n": 1})]


def test_an_agent_calling_without_a_listing_starts_the_warm_up_too(tmp_path: Path) -> None:
    async def main(srv: ServerHandle) -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with serving(tmp_path, srv) as gateway, agent(gateway.url) as session:
            await anyio.sleep(0.5)
            out["before call"] = srv.count("initialize")
            out["call"] = await session.call_tool("t3", {})
            await _until(lambda: srv.count("tools/list") >= SERVERS)
            out["warmed"] = (srv.count("initialize"), srv.count("tools/list"))
        return out

    with ServerHandle(tools=[make_tool(f"t{i}") for i in range(SERVERS)]) as srv:
        out = anyio.run(main, srv)
    assert out["before call"] == 0 and not out["call"].is_error
    assert out["warmed"] == (SERVERS, SERVERS)


def test_a_few_upstreams_are_opened_at_a_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server slow to list: while the first links list, the others wait their turn."""
    monkeypatch.setattr(upstream_module, "WARM_AT_ONCE", 4)

    async def main(srv: ServerHandle) -> tuple[int, int]:
        async with serving(tmp_path, srv) as gateway, agent(gateway.url) as session:
            await session.list_tools()
            await _until(lambda: srv.count("initialize") >= 4)
            await anyio.sleep(0.3)  # the first four are listing (2 s each)
            opened = srv.count("initialize")
            await _until(lambda: srv.count("tools/list") >= SERVERS)
            return opened, srv.count("tools/list")

    with ServerHandle(tools=[make_tool(f"t{i}") for i in range(SERVERS)],
                      list_delay=2.0) as srv:
        assert anyio.run(main, srv) == (4, SERVERS)
