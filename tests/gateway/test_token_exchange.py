"""Token exchange through the gateway, end to end: a real OpenID provider (npm
oidc-provider, ``tests/oidc.py``), an upstream that lets in only requests with a
valid token for its own audience (``exchangekit``), and the official SDK's
client sending each caller's token. Each caller's calls reach the upstream with
a token exchanged for their own (their ``sub``, the server's ``aud``), never the
server's shared Secret; one exchange per caller, server and expiry; an anonymous
call and one the issuer cannot answer are refused, saying why; an exchanged token
echoed back is redacted in every form the Secrets' values are, and appears in no
audit line."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from exchangekit import AUDIENCE, WHOAMI, CheckingUpstream
from gatewaykit import Volume, serving, text_of
from mcp_servers import LEAKS
from test_gateway_callers import handshake_agent

from oidc import OidcProvider

fastmcp = pytest.importorskip("fastmcp", reason="fastmcp (the 'test' extra) is not installed")

pytestmark = pytest.mark.timeout(180)

GATEWAY_AUDIENCE = "skillop-gateway"
SECRET = "up-token"
CLIENT = "xchg-client"
EXCHANGE = {"audience": AUDIENCE, "scopes": ["tickets.read"]}
#: The upstream checks every request's token: on a loaded machine its first
#: answers (the provider's keys fetched) take a while.
SLOW = 60.0


@pytest.fixture(scope="module")
def idp() -> Iterator[OidcProvider]:
    with OidcProvider() as provider:
        yield provider


@pytest.fixture
def upstream(idp: OidcProvider) -> Iterator[CheckingUpstream]:
    with CheckingUpstream(idp.issuer, idp.jwks_uri) as srv:
        yield srv


def _mounted(tmp_path: Path, idp: OidcProvider) -> None:
    """The server's Secret (the gateway's own token, for its listings) and the
    exchange's client Secret."""
    own = idp.token("skillop-gateway", audience=AUDIENCE, expires_in=3600)
    Volume(tmp_path / "secrets" / SECRET).write({"Authorization": f"Bearer {own}"})
    Volume(tmp_path / "secrets" / CLIENT).write(
        {"client_id": idp.client_id, "client_secret": idp.client_secret})


def _callers(idp: OidcProvider, **more: Any) -> dict[str, Any]:
    return {"issuer": idp.issuer, "audiences": [GATEWAY_AUDIENCE],
            "tokenExchange": {"clientSecretRef": {"name": CLIENT}}, **more}


def _server() -> dict[str, Any]:
    return {"headersFrom": {"secretRef": {"name": SECRET}}, "tokenExchange": EXCHANGE}


async def _whoami(url: str, token: str | None, times: int = 1,
                  **arguments: str) -> list[types.CallToolResult]:
    async with handshake_agent(url, token) as session:
        return [await session.call_tool("whoami", arguments) for _ in range(times)]


def test_each_caller_reaches_the_upstream_with_a_token_exchanged_for_their_own(
        tmp_path: Path, idp: OidcProvider, upstream: CheckingUpstream) -> None:
    _mounted(tmp_path, idp)
    idp.reset()
    alice, bob = idp.token("alice@example.com"), idp.token("bob@example.com")

    at_once: list[types.CallToolResult] = []

    async def sessions_at_once(url: str) -> None:
        at_once.extend(await _whoami(url, alice, 2))

    async def main() -> list[types.CallToolResult]:
        async with serving(tmp_path, upstream, tools=[WHOAMI], callers=_callers(idp),
                           server=_server(), connect_timeout=SLOW) as gateway:
            with anyio.fail_after(60):
                async with anyio.create_task_group() as tasks:
                    # Alice's two sessions at once: one exchange between them.
                    for _ in range(2):
                        tasks.start_soon(sessions_at_once, gateway.url)
                return [*await _whoami(gateway.url, alice), *await _whoami(gateway.url, bob)]

    alice_said, bob_said = (json.loads(text_of(r)) for r in anyio.run(main))
    assert [json.loads(text_of(r))["sub"] for r in at_once] == ["alice@example.com"] * 4, [
        text_of(r) for r in at_once]
    # The client id is a value of a mounted Secret: redacted like any.
    assert alice_said == {"sub": "alice@example.com", "aud": AUDIENCE,
                          "scope": "tickets.read", "client_id": "[redacted]"}
    assert bob_said["sub"] == "bob@example.com" and bob_said["aud"] == AUDIENCE
    # Every call carried an exchanged token: none the server's own Secret.
    assert sorted({c["sub"] for c in upstream.calls}) == ["alice@example.com",
                                                         "bob@example.com"]
    assert len(upstream.calls) == 6
    exchanges = idp.exchanges()
    assert idp.exchange_count() == 2 and len(exchanges) == 2
    assert [(e["sub"], e["audience"], e["scope"]) for e in exchanges] == [
        ("alice@example.com", AUDIENCE, "tickets.read"),
        ("bob@example.com", AUDIENCE, "tickets.read")]


def test_a_token_is_exchanged_again_once_the_last_one_is_near_its_expiry(
        tmp_path: Path, idp: OidcProvider, upstream: CheckingUpstream) -> None:
    _mounted(tmp_path, idp)
    idp.reset()
    # 40 s to live, less the gateway's 30 s of skew: kept for ten seconds.
    idp.answer_exchanges(expires_in=40)
    alice = idp.token("alice@example.com")

    async def main() -> None:
        async with serving(tmp_path, upstream, tools=[WHOAMI], callers=_callers(idp),
                           server=_server(), connect_timeout=SLOW) as gateway:
            await _whoami(gateway.url, alice, 2)
            assert idp.exchange_count() == 1
            await anyio.sleep(10.5)
            await _whoami(gateway.url, alice)

    anyio.run(main)
    idp.reset()
    assert len(upstream.calls) == 3 and {c["sub"] for c in upstream.calls} == {
        "alice@example.com"}
    assert len({(c["sub"], c["aud"]) for c in upstream.calls}) == 1


def test_an_anonymous_call_is_refused_and_never_sent_the_shared_secret(
        tmp_path: Path, idp: OidcProvider, upstream: CheckingUpstream) -> None:
    _mounted(tmp_path, idp)
    idp.reset()
    audit = io.StringIO()

    async def main() -> list[types.CallToolResult]:
        async with serving(tmp_path, upstream, tools=[WHOAMI], audit=audit,
                           callers=_callers(idp, anonymous="Allow"),
                           server=_server(), connect_timeout=SLOW) as gateway:
            return await _whoami(gateway.url, None)

    (result,) = anyio.run(main)
    assert result.is_error
    assert text_of(result) == ("refused: server up is called with tokens exchanged for the"
                               " caller's (tokenExchange), and this call has no verified"
                               " caller")
    assert upstream.calls == [] and idp.exchanges() == []
    (line,) = [json.loads(x) for x in audit.getvalue().splitlines()]
    assert line["outcome"] == "refused" and "no verified caller" in line["reason"]


def test_an_issuer_that_cannot_be_reached_refuses_the_call_saying_so(
        tmp_path: Path, upstream: CheckingUpstream) -> None:
    with OidcProvider() as idp, CheckingUpstream(idp.issuer, idp.jwks_uri) as checking:
        _mounted(tmp_path, idp)
        alice, bob = idp.token("alice@example.com"), idp.token("bob@example.com")

        async def main() -> list[types.CallToolResult]:
            async with serving(tmp_path, checking, tools=[WHOAMI], callers=_callers(idp),
                               server=_server(), connect_timeout=SLOW) as gateway:
                first = await _whoami(gateway.url, alice)
                idp.stop()
                # Bob's token verifies with the keys already fetched; his exchange
                # cannot be made.
                return [*first, *await _whoami(gateway.url, bob),
                        *await _whoami(gateway.url, alice)]

        ok, refused, kept = anyio.run(main)
    assert json.loads(text_of(ok))["sub"] == "alice@example.com"
    text = text_of(refused)
    assert refused.is_error and text.startswith(
        "refused: server up is called with tokens exchanged for the caller's, and the"
        " exchange failed: ")
    assert "could not be reached (ConnectError)" in text, text
    # Alice's exchanged token is still good: her call goes on.
    assert json.loads(text_of(kept))["sub"] == "alice@example.com"
    assert [c["sub"] for c in checking.calls] == ["alice@example.com"] * 2


def test_an_echoed_exchanged_token_is_redacted_in_every_form_and_audited_nowhere(
        tmp_path: Path, idp: OidcProvider, upstream: CheckingUpstream,
        capfd: pytest.CaptureFixture[str]) -> None:
    _mounted(tmp_path, idp)
    idp.reset()
    idp.answer_exchanges(claims={"note": "exchanged"})
    alice = idp.token("alice@example.com")
    audit = io.StringIO()
    forms = sorted(form for form in LEAKS if form != "no-scheme")

    async def main() -> list[types.CallToolResult]:
        async with (serving(tmp_path, upstream, tools=[WHOAMI], callers=_callers(idp),
                            server=_server(), connect_timeout=SLOW, audit=audit) as gateway,
                    handshake_agent(gateway.url, alice) as session):
            return [await session.call_tool("whoami", {"leak": form}) for form in forms]

    results = anyio.run(main)
    idp.reset()
    (exchanged,) = set(upstream.tokens)  # one exchange, the token of every call
    for form, result in zip(forms, results, strict=True):
        seen = result.model_dump_json() + text_of(result)
        assert "[redacted]" in text_of(result), form
        assert exchanged[20:40] not in seen and exchanged[-20:] not in seen, form
    logs = "".join(capfd.readouterr())
    toolset = "".join(p.read_text() for p in (tmp_path / "tools").rglob("*.json"))
    for seen in (*audit.getvalue().splitlines(), logs, toolset):
        for secret in (exchanged, alice, idp.client_secret):
            assert secret[-20:] not in seen and secret[:20] not in seen
