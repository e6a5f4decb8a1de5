"""Caller rules and rate limits through the gateway, for two callers whose tokens
come from a real OpenID provider (``tests/oidc.py``), with the official SDK's
clients of both protocol eras, on the front's fast path and the SDK's own: each
is listed only what they may call, a denied call names the rule, a rule's
RequireApproval asks, and a rate limit says when to retry."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from gatewaykit import (
    Volume,
    agent,
    echo_tool,
    fastmcp_answering,
    serving,
    text_of,
    toolset_files,
)
from mcp_servers import ServerHandle, make_tool
from skillkit import actor, skill
from test_gateway_callers import AUDIENCE, handshake_agent

from oidc import OidcProvider

fastmcp = pytest.importorskip("fastmcp", reason="fastmcp (the 'test' extra) is not installed")

pytestmark = pytest.mark.timeout(120)

TOOLS = [echo_tool("echo", "up"), echo_tool("wipe", "up"), echo_tool("status", "up")]
SPEC = {
    "skillAccessPolicy": {"callerRules": [
        {"callers": {"groups": ["contractors"]}, "effect": "Deny", "tools": ["wipe"]},
        {"callers": {"groups": ["contractors"]}, "effect": "RequireApproval",
         "tools": ["echo"]}]},
    "rateLimits": [{"calls": 1, "perSeconds": 3600, "per": "Caller", "tools": ["status"]}],
}


@pytest.fixture(scope="module")
def idp() -> Iterator[OidcProvider]:
    with OidcProvider() as provider:
        yield provider


@pytest.fixture
def upstream() -> Iterator[ServerHandle]:
    with ServerHandle(tools=[make_tool("echo"), make_tool("wipe"), make_tool("status")]) as srv:
        yield srv


@pytest.mark.parametrize("fast_path", [True, False])
def test_two_callers_each_see_and_call_what_their_rules_allow(
        tmp_path: Path, upstream: ServerHandle, idp: OidcProvider, fast_path: bool) -> None:
    alice = idp.token("alice@example.com", groups=["sre"])
    carl = idp.token("carl@example.com", groups=["contractors"])
    audit = io.StringIO()
    asked: list[str] = []

    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with serving(tmp_path, upstream, tools=TOOLS, spec=SPEC, audit=audit,
                           callers={"issuer": idp.issuer, "audiences": [AUDIENCE]},
                           fast_path=fast_path) as gateway:
            async with handshake_agent(gateway.url, alice) as session:
                out["alice_listed"] = sorted(t.name for t in (await session.list_tools()).tools)
                out["alice_wipe"] = await session.call_tool("wipe", {})
                out["alice_echo"] = await session.call_tool("echo", {})
                out["alice_status"] = [await session.call_tool("status", {}) for _ in range(2)]
            async with fastmcp.Client(gateway.url, auth=carl,
                                      elicitation_handler=fastmcp_answering("accept", asked)
                                      ) as client:
                out["carl_listed"] = sorted(t.name for t in await client.list_tools())
                out["carl_wipe"] = await client.call_tool("wipe", {}, raise_on_error=False)
                out["carl_echo"] = await client.call_tool("echo", {}, raise_on_error=False)
                out["carl_status"] = await client.call_tool("status", {}, raise_on_error=False)
        return out

    out = anyio.run(main)
    assert out["alice_listed"] == ["echo", "status", "wipe"]
    assert out["carl_listed"] == ["echo", "status"]
    assert not out["alice_wipe"].is_error and not out["alice_echo"].is_error
    first, second = out["alice_status"]
    assert not first.is_error
    assert text_of(second) == ("refused: rate limited by Actor team-a/dev: rate limit 1 (1 calls"
                               " per 3600 s per caller); retry after 3600 s")
    assert second.meta == {"skillop.dev/retryAfterSeconds": 3600}
    # Carl's own bucket: alice's empty one is not his.
    assert not out["carl_status"].is_error
    assert out["carl_wipe"].is_error and out["carl_wipe"].content[0].text == (
        "refused: denied by Actor team-a/dev: rule 1 (groups: [contractors])")
    assert not out["carl_echo"].is_error and len(asked) == 1 and "echo" in asked[0]
    lines = [json.loads(line) for line in audit.getvalue().splitlines() if line.strip()]
    assert [(x["bindingName"], x["caller"], x["outcome"]) for x in lines] == [
        ("wipe", "alice@example.com", "ok"), ("echo", "alice@example.com", "ok"),
        ("status", "alice@example.com", "ok"), ("status", "alice@example.com", "refused"),
        ("wipe", "carl@example.com", "refused"), ("echo", "carl@example.com", "ok"),
        ("status", "carl@example.com", "ok")]


def test_a_reload_that_changes_only_the_rules_tells_clients_the_listing_changed(
        tmp_path: Path, upstream: ServerHandle) -> None:
    notified = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            notified.set()

    async def main() -> tuple[list[str], list[str]]:
        async with serving(tmp_path, upstream, tools=TOOLS) as gateway, \
                agent(gateway.url, on_message=on_message) as session:
            before = sorted(t.name for t in (await session.list_tools()).tools)
            # The same tools, now with a rule denying wipe to every caller.
            Volume(tmp_path / "tools").write(toolset_files([
                skill("srv", mcpServers=[{"name": "up", "url": upstream.url, "tools": TOOLS}]),
                actor("dev", skills=["srv"], approval={"via": "Elicitation"},
                      skillAccessPolicy={"callerRules": [{"effect": "Deny",
                                                          "tools": ["wipe"]}]})],
                "team-a/dev"))
            with anyio.fail_after(10):
                await notified.wait()
            return before, sorted(t.name for t in (await session.list_tools()).tools)

    before, after = anyio.run(main)
    assert before == ["echo", "status", "wipe"] and after == ["echo", "status"]
