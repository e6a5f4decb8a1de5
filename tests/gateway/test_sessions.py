"""The gateway's HTTP sessions, with the gateway in this process (to see what it holds):
clients are forgotten when their session ends, an idle session is ended, and the
JSON front refuses nothing the SDK's server would not have refused."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from gatewaykit import Volume, agent, echo_tool, text_of, toolset_files
from mcp.shared.exceptions import MCPError
from mcp_servers import ServerHandle, make_tool
from skillkit import actor, skill

from skillop.gateway.audit import AuditLog
from skillop.gateway.server import Gateway, Options


@pytest.fixture
def upstream() -> Iterator[ServerHandle]:
    with ServerHandle(tools=[make_tool("echo")]) as srv:
        yield srv


@asynccontextmanager
async def serving(tmp_path: Path, upstream: ServerHandle, **options: Any,
                  ) -> AsyncIterator[Gateway]:
    Volume(tmp_path / "tools").write(toolset_files([
        skill("srv", mcpServers=[{"name": "up", "url": upstream.url,
                                  "tools": [echo_tool("echo", "up")]}]),
        actor("dev", skills=["srv"])], "team-a/dev"))
    (tmp_path / "secrets").mkdir()
    gateway = Gateway(Options(toolset_dir=tmp_path / "tools", secrets_dir=tmp_path / "secrets",
                              allow=("127.0.0.1:*",), poll_interval=0.05, **options),
                      audit=AuditLog(lambda: io.StringIO()))
    async with gateway.running(), anyio.create_task_group() as tasks:
        tasks.start_soon(gateway.serve_http, "127.0.0.1", 0)
        with anyio.fail_after(10):
            while gateway.url is None:
                await anyio.sleep(0.01)
        try:
            yield gateway
        finally:
            tasks.cancel_scope.cancel()


def test_a_client_is_forgotten_when_its_session_ends(
        tmp_path: Path, upstream: ServerHandle) -> None:
    async def main() -> list[int]:
        counts = []
        async with serving(tmp_path, upstream) as gateway:
            assert gateway.url is not None
            async with agent(gateway.url) as one:
                await one.call_tool("echo", {})
                counts.append(gateway.connected_clients)
                async with agent(gateway.url) as two:
                    await two.list_tools()
                    counts.append(gateway.connected_clients)
                counts.append(gateway.connected_clients)  # `two` ended its session (DELETE)
            counts.append(gateway.connected_clients)
            for _ in range(5):
                async with agent(gateway.url) as session:
                    await session.call_tool("echo", {})
            counts.append(gateway.connected_clients)
        return counts

    assert anyio.run(main) == [1, 2, 1, 0, 0]


def test_an_idle_session_is_ended_and_a_busy_one_is_not(
        tmp_path: Path, upstream: ServerHandle) -> None:
    async def main() -> tuple[int, str, types.CallToolResult]:
        async with serving(tmp_path, upstream, session_idle_timeout=0.5) as gateway:
            assert gateway.url is not None
            async with agent(gateway.url) as idle, agent(gateway.url) as busy:
                await idle.list_tools()
                # Only plain-JSON calls, which the SDK's server never sees: still busy.
                for _ in range(15):
                    await busy.call_tool("echo", {})
                    await anyio.sleep(0.1)
                left = gateway.connected_clients
                with pytest.raises(MCPError) as ended:
                    await idle.call_tool("echo", {})
                return left, ended.value.error.message, await busy.call_tool("echo", {})

    left, message, result = anyio.run(main)
    assert left == 1
    assert "session" in message.lower()  # the SDK's server no longer knows it either
    assert not result.is_error and text_of(result)


async def _handshake(http: httpx2.AsyncClient, url: str) -> dict[str, str]:
    """A session opened by hand: the headers a request in it carries."""
    headers = {"accept": "application/json, text/event-stream",
               "content-type": "application/json"}
    opened = await http.post(url, headers=headers, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "by-hand", "version": "0"}}})
    headers |= {"mcp-session-id": opened.headers["mcp-session-id"],
                "mcp-protocol-version": "2025-11-25"}
    ready = await http.post(url, headers=headers,
                            json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert ready.status_code == 202
    return headers


def test_the_json_front_refuses_what_the_sdk_refuses(
        tmp_path: Path, upstream: ServerHandle) -> None:
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"k": "v"}}}

    async def main() -> dict[str, httpx2.Response]:
        async with serving(tmp_path, upstream) as gateway, httpx2.AsyncClient() as http:
            assert gateway.url is not None
            headers = await _handshake(http, gateway.url)
            post = lambda **extra: http.post(  # noqa: E731
                gateway.url or "", headers={**headers, **extra}, json=call)
            return {
                "plain": await post(),
                # DNS rebinding: a browser page's request, or one for another host name.
                "origin": await post(origin="http://evil.example"),
                "host": await post(host="evil.example:80"),
                "version": await post(**{"mcp-protocol-version": "1999-01-01"}),
                "session": await post(**{"mcp-session-id": "not-a-session"}),
            }

    answers = anyio.run(main)
    plain = answers["plain"]
    assert plain.status_code == 200 and plain.headers["content-type"] == "application/json"
    assert plain.json()["id"] == 7 and not plain.json()["result"].get("isError")
    assert answers["origin"].status_code == 403
    assert answers["host"].status_code == 421
    assert answers["version"].status_code == 400
    assert answers["session"].status_code == 404
    assert upstream.calls == [("echo", {"k": "v"})]  # only the plain one reached it
