"""The gateway's token exchange client (gateway/exchange.py) against the real
OpenID provider of the tests: client authentication both ways, one exchange for
concurrent calls of the same caller and server, the cache's key and bound,
failures said in one line without any token or secret and never kept, and the
issuer's answers parsed whatever they hold."""

from __future__ import annotations

import base64
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import jwt
import pytest
from gatewaykit import Volume
from hypothesis import example, given
from hypothesis import strategies as st

from oidc import OidcProvider
from skillop.gateway.errors import CallFailed, Mapped, RpcFailed
from skillop.gateway.exchange import ExchangeFailed, Exchanger, _basic, _issued
from skillop.model.exchange import TokenExchange, TokenExchangeClient
from skillop.sources.redaction import Redactor

pytestmark = pytest.mark.timeout(120)

SERVER = ("team-a/srv", "up")
WANTED = TokenExchange(audience="https://mcp.example.com", scopes=["read"])


@pytest.fixture(scope="module")
def idp() -> Iterator[OidcProvider]:
    with OidcProvider() as provider:
        yield provider


def _exchanger(idp: OidcProvider, tmp_path: Path, *, client_id: str | None = None,
               secret: str | None = None, method: str = "client_secret_basic",
               **options: Any) -> Exchanger:
    Volume(tmp_path / "gw-client").write({"client_id": client_id or idp.client_id,
                                          "client_secret": secret or idp.client_secret})
    client = TokenExchangeClient.model_validate(
        {"clientSecretRef": {"name": "gw-client"}, "authMethod": method})
    return Exchanger(idp.issuer, client, tmp_path, **options)


def _claims(idp: OidcProvider, token: str, audience: str) -> dict[str, Any]:
    key = jwt.PyJWKClient(idp.jwks_uri).get_signing_key_from_jwt(token)
    claims: dict[str, Any] = jwt.decode(token, key.key, algorithms=["RS256"],
                                        audience=audience, issuer=idp.issuer)
    return claims


def test_concurrent_calls_of_one_caller_and_server_share_one_exchange(
        idp: OidcProvider, tmp_path: Path) -> None:
    idp.reset()
    idp.answer_exchanges(delay_ms=300)
    exchanger = _exchanger(idp, tmp_path)
    alice = idp.token("alice")
    got: list[str] = []

    async def main() -> None:
        async def one() -> None:
            got.append((await exchanger.token(alice, SERVER, WANTED)).value)
        async with anyio.create_task_group() as tasks:
            for _ in range(8):
                tasks.start_soon(one)
        got.append((await exchanger.token(alice, SERVER, WANTED)).value)  # kept

    anyio.run(main)
    idp.reset()
    assert exchanger.exchanges == 1 and len(set(got)) == 1 and len(got) == 9
    value = got[0]
    assert value.startswith("Bearer ")
    claims = _claims(idp, value.removeprefix("Bearer "), WANTED.audience)
    assert claims["sub"] == "alice" and claims["scope"] == "read"


def test_each_server_audience_and_scopes_has_its_own_token(idp: OidcProvider,
                                                          tmp_path: Path) -> None:
    exchanger = _exchanger(idp, tmp_path)
    alice = idp.token("alice")
    other_scopes = WANTED.model_copy(update={"scopes": ["write"]})
    other_audience = WANTED.model_copy(update={"audience": "https://other.example.com"})

    async def main() -> list[str]:
        return [(await exchanger.token(alice, server, wanted)).value
                for server, wanted in ((SERVER, WANTED), (("team-a/srv", "two"), WANTED),
                                       (SERVER, other_scopes), (SERVER, other_audience),
                                       (SERVER, WANTED))]

    values = anyio.run(main)
    assert exchanger.exchanges == 4 and len(set(values)) == 4 and values[0] == values[-1]


def test_the_oldest_tokens_are_forgotten_past_the_bound(idp: OidcProvider,
                                                       tmp_path: Path) -> None:
    exchanger = _exchanger(idp, tmp_path, size=2)
    callers = [idp.token(name) for name in ("a", "b", "c")]

    async def main() -> None:
        for token in (*callers, callers[2], callers[0]):
            await exchanger.token(token, SERVER, WANTED)

    anyio.run(main)
    assert exchanger.exchanges == 4  # a, b, c, then a again (c was kept)


def test_the_client_authenticates_in_the_form_too(idp: OidcProvider, tmp_path: Path) -> None:
    exchanger = _exchanger(idp, tmp_path, client_id=idp.post_client_id,
                           method="client_secret_post")
    exchanged = anyio.run(exchanger.token, idp.token("bob"), SERVER, WANTED)
    assert _claims(idp, exchanged.value.removeprefix("Bearer "), WANTED.audience)[
        "sub"] == "bob"


def test_a_refused_exchange_says_why_in_one_line_with_no_secret_and_is_not_kept(
        idp: OidcProvider, tmp_path: Path) -> None:
    alice = idp.token("alice")
    wrong = _exchanger(idp, tmp_path / "wrong", secret="not-the-secret-at-all")
    with pytest.raises(ExchangeFailed) as refused:
        anyio.run(wrong.token, alice, SERVER, WANTED)
    assert str(refused.value) == ("the issuer refused the token exchange (invalid_client:"
                                  " client authentication failed)")
    exchanger = _exchanger(idp, tmp_path / "right")
    idp.answer_exchanges(error="no")
    try:
        with pytest.raises(ExchangeFailed, match=r"refused the token exchange \(invalid_grant"):
            anyio.run(exchanger.token, alice, SERVER, WANTED)
    finally:
        idp.reset()
    assert anyio.run(exchanger.token, alice, SERVER, WANTED).value.startswith("Bearer ")
    assert exchanger.exchanges == 2


def test_a_missing_client_secret_and_a_foreign_issuer_are_named(idp: OidcProvider,
                                                               tmp_path: Path) -> None:
    client = TokenExchangeClient.model_validate({"clientSecretRef": {"name": "absent"}})
    missing = Exchanger(idp.issuer, client, tmp_path)
    with pytest.raises(ExchangeFailed, match="client Secret: key client_id of Secret absent"):
        anyio.run(missing.token, idp.token("a"), SERVER, WANTED)
    lying = _exchanger(idp, tmp_path)
    lying.issuer = idp.issuer + "/"  # not the issuer its discovery document names
    with pytest.raises(ExchangeFailed, match="its issuer is not"):
        anyio.run(lying.token, idp.token("a"), SERVER, WANTED)


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                     | st.text(max_size=20), lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)
_FIELDS = st.sampled_from(["access_token", "token_type", "expires_in", "issued_token_type"])


@given(st.dictionaries(_FIELDS | st.text(max_size=8), _JSON, max_size=5))
@example({"access_token": "0", "issued_token_type": [], "token_type": "bearer"})
def test_any_answer_is_a_token_and_a_lifetime_or_a_one_line_refusal(
        answer: dict[str, Any]) -> None:
    try:
        value, lifetime = _issued(answer)
    except ExchangeFailed as failed:
        assert "\n" not in str(failed)
        return
    assert value == answer["access_token"] and lifetime >= 0


def test_the_issuer_is_trusted_by_the_gateways_ca_file_too(idp: OidcProvider,
                                                          tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_text("not a certificate")
    for ca_file, said in ((tmp_path / "ca.pem", "not PEM certificates"),
                          (tmp_path / "absent.pem", "is not mounted")):
        exchanger = _exchanger(idp, tmp_path, ca_file=ca_file)
        with pytest.raises(ExchangeFailed, match=f"the issuer's trust: .*{said}"):
            anyio.run(exchanger.token, idp.token("a"), SERVER, WANTED)


def test_an_upstream_error_quoting_the_exchanged_token_is_redacted() -> None:
    token = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl"

    def mapped(also: Redactor | None) -> str:
        with pytest.raises(CallFailed) as failed, Mapped("up", Redactor(()), also=also):
            raise RpcFailed(-32000, f"bad token {token} sent")
        return str(failed.value)

    assert token in mapped(None)
    assert mapped(Redactor([token])) == ("upstream up answered MCP error -32000: bad token"
                                         " [redacted] sent")


@given(st.text(max_size=30), st.text(max_size=30))
def test_basic_credentials_are_form_encoded_then_base64(client_id: str, secret: str) -> None:
    scheme, _, encoded = _basic(client_id, secret).partition(" ")
    user, _, password = base64.b64decode(encoded).decode().partition(":")
    assert scheme == "Basic"
    assert (urllib.parse.unquote(user), urllib.parse.unquote(password)) == (client_id, secret)
