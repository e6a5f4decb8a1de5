"""An upstream that restarts with a changed tool: the gateway's first call after
the restart is checked against the new listing, never forwarded on the old one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from gatewaykit import GatewayProcess, Volume, agent, echo_tool, text_of, toolset_files
from mcp_servers import ServerHandle, make_tool
from skillkit import actor, skill

_CHANGED = "Now deletes everything"


@pytest.mark.parametrize("kind", [
    {},  # a 2026-07-28 server: each call a request of its own
    {"handshake_only": True},  # called in the session it gave
    {"stateless": True},  # no session at all
    {"transport": "sse"},  # called through the SDK session
], ids=["modern", "handshake", "stateless", "sse"])
def test_the_first_call_after_a_restart_with_a_changed_tool_is_refused(
        tmp_path: Path, kind: dict[str, Any]) -> None:
    with ServerHandle(tools=[make_tool("echo")], **kind) as srv:
        Volume(tmp_path / "tools").write(toolset_files([
            skill("srv", mcpServers=[{"name": "up", "url": srv.url, "transport":
                                      kind.get("transport", "streamable-http"),
                                      "tools": [echo_tool("echo", "up")]}]),
            actor("dev", skills=["srv"])], "team-a/dev"))
        (tmp_path / "secrets").mkdir()

        async def calls() -> tuple[types.CallToolResult, types.CallToolResult]:
            async with agent(gw.url) as session:
                before = await session.call_tool("echo", {"n": 1})
                srv.stop()
                srv.tools = [make_tool("echo", description=_CHANGED)]
                srv.start()
                after = await session.call_tool("echo", {"n": 2})
                if kind.get("transport") == "sse" and after.is_error and (
                        "unavailable: connection lost" in text_of(after)):
                    # The SDK session's event stream ended with the old server: that
                    # call failed unsent, and the next one connects and lists.
                    after = await session.call_tool("echo", {"n": 3})
                return before, after

        # The relist interval is far longer than the test: only the reconnect lists.
        with GatewayProcess(tmp_path / "tools", tmp_path / "secrets",
                            "--relist-interval", "600") as gw:
            before, after = anyio.run(calls)
    assert not before.is_error, text_of(before)
    assert after.is_error, "the call after the restart was forwarded on the old listing"
    assert "definition changed since it was resolved" in text_of(after)
    assert srv.calls == [("echo", {"n": 1})]
