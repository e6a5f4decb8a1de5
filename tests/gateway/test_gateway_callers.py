"""Callers through the gateway, with tokens from a real OpenID provider (npm
oidc-provider, ``tests/oidc.py``) and the official SDK's clients of both protocol
eras: each call and listing is made for the caller its token names (the front's
fast path and the SDK's own path alike), the MCP authorization flow's 401 and
resource metadata, anonymous Allow and Deny, tokens the gateway must refuse, and
a reload that changes the issuer."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from gatewaykit import (
    Volume,
    echo_tool,
    fastmcp_answering,
    serving,
    stdio_agent,
    text_of,
    toolset_files,
)
from identitykit import JwksServer, Key
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_servers import ServerHandle, make_tool
from skillkit import actor, skill

from oidc import OidcProvider
from skillop.gateway import pipeline
from skillop.gateway.identity import keys as keys_module
from skillop.model.caller import Caller

fastmcp = pytest.importorskip("fastmcp", reason="fastmcp (the 'test' extra) is not installed")

pytestmark = pytest.mark.timeout(120)

TOOLS = [echo_tool("echo", "up"),
         {**echo_tool("guarded", "up"), "capabilities": {"requiresApproval": True}}]
AUDIENCE = "skillop-gateway"


@pytest.fixture(scope="module")
def idp() -> Iterator[OidcProvider]:
    with OidcProvider() as provider:
        yield provider


@pytest.fixture
def upstream() -> Iterator[ServerHandle]:
    with ServerHandle(tools=[make_tool("echo"), make_tool("guarded")]) as srv:
        yield srv


def _callers(issuer: str, **more: Any) -> dict[str, Any]:
    return {"issuer": issuer, "audiences": [AUDIENCE], **more}


class Seen:
    """A first guard recording each call's caller (what the guards after it see)."""

    def __init__(self) -> None:
        self.callers: list[tuple[str, Caller]] = []

    async def __call__(self, call: pipeline.Call) -> pipeline.Verdict:
        self.callers.append((call.name, call.caller))
        return pipeline.CONTINUE


def _watch(gateway: Any) -> Seen:
    seen = Seen()
    gateway.calls.guards = (seen, *gateway.calls.guards)
    return seen


@asynccontextmanager
async def handshake_agent(url: str, token: str | None, *,
                          elicitation: Any = None) -> AsyncIterator[ClientSession]:
    """The SDK's client of the initialize handshake, sending ``token`` on every request."""
    headers = {"authorization": f"Bearer {token}"} if token is not None else {}
    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers, timeout=30))
        read, write = await stack.enter_async_context(
            streamable_http_client(url, http_client=http))
        session = await stack.enter_async_context(
            ClientSession(read, write, elicitation_callback=elicitation))
        await session.initialize()
        yield session


async def _approve(ctx: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"approve": True})


def _lines(audit: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in audit.getvalue().splitlines() if line.strip()]


@pytest.mark.parametrize("fast_path", [True, False])
def test_two_callers_of_both_eras_are_each_themselves_on_every_path(
        tmp_path: Path, upstream: ServerHandle, idp: OidcProvider, fast_path: bool) -> None:
    alice = idp.token("alice@example.com", groups=["sre"])
    bob = idp.token("bob@example.com", groups=["dev", "qa"])
    audit = io.StringIO()

    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with serving(tmp_path, upstream, tools=TOOLS, callers=_callers(idp.issuer),
                           audit=audit, fast_path=fast_path) as gateway:
            seen = out["seen"] = _watch(gateway)
            async with handshake_agent(gateway.url, alice, elicitation=_approve) as session:
                out["alice_listed"] = [t.name for t in (await session.list_tools()).tools]
                out["alice_echo"] = await session.call_tool("echo", {"who": "alice"})
                # Approval by elicitation: the SDK's own path, not the front's.
                out["alice_guarded"] = await session.call_tool("guarded", {})
            async with fastmcp.Client(gateway.url, auth=bob,
                                      elicitation_handler=fastmcp_answering("accept", [])) as c:
                out["bob_version"] = c.protocol_version
                out["bob_listed"] = [t.name for t in await c.list_tools()]
                out["bob_echo"] = await c.call_tool("echo", {"who": "bob"})
                out["bob_guarded"] = await c.call_tool("guarded", {})
            assert seen.callers
        return out

    out = anyio.run(main)
    assert out["bob_version"] == "2026-07-28"
    assert sorted(out["alice_listed"]) == sorted(out["bob_listed"]) == ["echo", "guarded"]
    for name in ("alice_echo", "alice_guarded", "bob_echo", "bob_guarded"):
        assert not out[name].is_error, text_of(out[name])
    by_call = [(name, caller.subject, caller.groups) for name, caller in out["seen"].callers]
    assert ("echo", "alice@example.com", ("sre",)) in by_call
    assert ("guarded", "alice@example.com", ("sre",)) in by_call
    assert ("echo", "bob@example.com", ("dev", "qa")) in by_call
    assert ("guarded", "bob@example.com", ("dev", "qa")) in by_call
    lines = _lines(audit)
    assert [(line["bindingName"], line["caller"]) for line in lines] == [
        ("echo", "alice@example.com"), ("guarded", "alice@example.com"),
        ("echo", "bob@example.com"), ("guarded", "bob@example.com")]
    assert alice not in audit.getvalue() and bob not in audit.getvalue()


def _post(url: str, token: str | None = None, **headers: str) -> httpx2.Response:
    sent = {"accept": "application/json, text/event-stream",
            "content-type": "application/json", **headers}
    if token is not None:
        sent["authorization"] = f"Bearer {token}"
    return httpx2.post(url, headers=sent, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "by-hand", "version": "0"}}})


@pytest.mark.parametrize("fast_path", [True, False])
def test_deny_answers_401_with_the_resource_metadata_of_the_mcp_authorization_flow(
        tmp_path: Path, upstream: ServerHandle, idp: OidcProvider, fast_path: bool) -> None:
    other_audience = idp.token("alice", audience="someone-else")

    async def main() -> dict[str, Any]:
        async with serving(tmp_path, upstream, callers=_callers(idp.issuer),
                           fast_path=fast_path) as gateway:
            url = gateway.url
            base = url.removesuffix("/mcp")
            return await anyio.to_thread.run_sync(lambda: {
                "none": _post(url), "invalid": _post(url, other_audience),
                "garbled": _post(url, None, authorization="Basic YTpi"),
                "valid": _post(url, idp.token("alice")),
                "metadata": httpx2.get(f"{base}/.well-known/oauth-protected-resource"),
                "by_path": httpx2.get(f"{base}/.well-known/oauth-protected-resource/mcp"),
                "url": url, "base": base})

    out = anyio.run(main)
    none, invalid = out["none"], out["invalid"]
    assert none.status_code == 401
    assert none.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{out["base"]}/.well-known/oauth-protected-resource"')
    assert "anonymous: Deny" in none.text
    assert invalid.status_code == 401 and out["garbled"].status_code == 401
    challenge = invalid.headers["www-authenticate"]
    assert challenge.startswith(f'Bearer resource_metadata="{out["base"]}/.well-known/')
    assert 'error="invalid_token"' in challenge and "(aud)" in challenge
    assert 'error="invalid_token"' in out["garbled"].headers["www-authenticate"]
    assert out["valid"].status_code == 200
    for answer in (out["metadata"], out["by_path"]):
        assert answer.status_code == 200
        assert answer.json() == {"resource": out["url"], "authorization_servers": [idp.issuer],
                                 "bearer_methods_supported": ["header"]}


def test_allow_serves_a_request_without_a_token_as_anonymous_but_never_an_invalid_token(
        tmp_path: Path, upstream: ServerHandle, idp: OidcProvider) -> None:
    audit = io.StringIO()

    async def main() -> dict[str, Any]:
        async with serving(tmp_path, upstream, callers=_callers(idp.issuer, anonymous="Allow"),
                           audit=audit) as gateway:
            seen = _watch(gateway)
            async with handshake_agent(gateway.url, None) as session:
                anonymous = await session.call_tool("echo", {})
            invalid = await anyio.to_thread.run_sync(
                lambda: _post(gateway.url, idp.token("a", audience="other")))
            metadata = await anyio.to_thread.run_sync(lambda: httpx2.get(
                gateway.url.removesuffix("/mcp") + "/.well-known/oauth-protected-resource"))
            return {"anonymous": anonymous, "invalid": invalid, "seen": seen,
                    "metadata": metadata}

    out = anyio.run(main)
    assert not out["anonymous"].is_error
    assert [caller.anonymous for _, caller in out["seen"].callers] == [True]
    assert "caller" not in _lines(audit)[0]
    assert out["invalid"].status_code == 401
    assert 'error="invalid_token"' in out["invalid"].headers["www-authenticate"]
    assert out["metadata"].json()["authorization_servers"] == [idp.issuer]


def test_without_callers_nothing_changes(tmp_path: Path, upstream: ServerHandle) -> None:
    async def main() -> tuple[types.CallToolResult, int]:
        async with serving(tmp_path, upstream) as gateway:
            async with handshake_agent(gateway.url, "not.a.token") as session:
                result = await session.call_tool("echo", {})
            metadata = await anyio.to_thread.run_sync(lambda: httpx2.get(
                gateway.url.removesuffix("/mcp") + "/.well-known/oauth-protected-resource"))
            return result, metadata.status_code

    result, status = anyio.run(main)
    assert not result.is_error and status == 404


def test_expired_and_rotated_tokens_from_the_provider(
        tmp_path: Path, upstream: ServerHandle, idp: OidcProvider,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The refetch bound, shortened so that the test need not wait 30 s for it.
    monkeypatch.setattr(keys_module, "REFETCH_SECONDS", 0.2)
    before = idp.token("carol")

    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with serving(tmp_path, upstream,
                           callers=_callers(idp.issuer, clockSkewSeconds=0)) as gateway:
            post = lambda token: anyio.to_thread.run_sync(lambda: _post(gateway.url, token))  # noqa: E731
            short = await anyio.to_thread.run_sync(lambda: idp.token("carol", expires_in=2))
            out["short"] = (await post(short)).status_code
            out["before"] = (await post(before)).status_code
            await anyio.sleep(3.2)
            out["expired"] = await post(short)
            await anyio.to_thread.run_sync(idp.rotate)
            await anyio.sleep(0.3)
            out["after_rotation"] = (await post(idp.token("carol"))).status_code
            # The old key left the JWKS: a token it signed, not cached, is refused.
            gateway.door.callers.verified = type(gateway.door.callers.verified)()
            await anyio.sleep(0.3)
            out["old_key"] = await post(before)
        return out

    out = anyio.run(main)
    assert (out["short"], out["before"], out["after_rotation"]) == (200, 200, 200)
    assert out["expired"].status_code == 401 and "has expired" in out["expired"].text
    assert out["old_key"].status_code == 401 and "does not publish" in out["old_key"].text


def test_a_reload_with_another_issuer_drops_what_was_verified(
        tmp_path: Path, upstream: ServerHandle, idp: OidcProvider) -> None:
    token = idp.token("dave")

    async def main() -> tuple[int, int, int]:
        with JwksServer(Key("n1")) as other:
            async with serving(tmp_path, upstream, callers=_callers(idp.issuer)) as gateway:
                post = lambda t: anyio.to_thread.run_sync(lambda: _post(gateway.url, t))  # noqa: E731
                first = (await post(token)).status_code
                Volume(tmp_path / "tools").write(toolset_files([
                    skill("srv", mcpServers=[{"name": "up", "url": upstream.url,
                                              "tools": [echo_tool("echo", "up")]}]),
                    actor("dev", skills=["srv"], callers=_callers(other.issuer))], "team-a/dev"))
                with anyio.fail_after(10):
                    while gateway.door.spec is None or gateway.door.spec.issuer != other.issuer:
                        await anyio.sleep(0.05)
                old = (await post(token)).status_code
                new = (await post(other.keys[0].sign({**other.claims("dave")}))).status_code
        return first, old, new

    assert anyio.run(main) == (200, 401, 200)


def test_stdio_under_deny_lists_nothing_and_refuses_every_call_saying_why(
        tmp_path: Path, upstream: ServerHandle, idp: OidcProvider) -> None:
    Volume(tmp_path / "tools").write(toolset_files([
        skill("srv", mcpServers=[{"name": "up", "url": upstream.url,
                                  "tools": [echo_tool("echo", "up")]}]),
        actor("dev", skills=["srv"], callers=_callers(idp.issuer))], "team-a/dev"))
    (tmp_path / "secrets").mkdir()
    errlog = tmp_path / "stderr"

    async def main() -> tuple[list[str], types.CallToolResult]:
        with errlog.open("w") as err:
            async with stdio_agent(tmp_path / "tools", tmp_path / "secrets", err) as session:
                listed = [t.name for t in (await session.list_tools()).tools]
                return listed, await session.call_tool("echo", {})

    listed, result = anyio.run(main)
    assert listed == [] and result.is_error
    assert text_of(result).startswith("refused: no caller token: ")
    assert "anonymous: Deny" in text_of(result) and "stdio carries none" in text_of(result)
    assert upstream.calls == []
    audit = [json.loads(line) for line in errlog.read_text().splitlines()
             if line.startswith("{")]
    assert [(a["bindingName"], a["outcome"]) for a in audit] == [("echo", "refused")]
    assert audit[0]["reason"].startswith("no caller token")
