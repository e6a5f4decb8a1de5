"""The OpenID provider of the tests (tests/oidc.py) is a real one: its tokens verify
against its published keys, a rotation retires the old key, and its RFC 8693 token
exchange answers a confidential client with a token for the asked audience and the
same subject."""

from __future__ import annotations

import time
from collections.abc import Iterator

import jwt
import pytest

from oidc import OidcProvider, ProviderRefused

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def idp() -> Iterator[OidcProvider]:
    with OidcProvider() as provider:
        yield provider


def _verified(idp: OidcProvider, token: str, audience: str) -> dict[str, object]:
    keys = jwt.PyJWKClient(idp.jwks_uri, cache_keys=False)
    key = keys.get_signing_key_from_jwt(token)
    claims: dict[str, object] = jwt.decode(token, key.key, algorithms=["RS256"],
                                           issuer=idp.issuer, audience=audience,
                                           options={"require": ["exp", "iat", "sub"]})
    return claims


def test_a_minted_token_verifies_against_the_providers_keys(idp: OidcProvider) -> None:
    token = idp.token("alice@example.com", groups=["sre", "dev"], audience="skillop-gateway",
                      expires_in=120, extra_claims={"dept": "eng"})
    claims = _verified(idp, token, "skillop-gateway")
    assert claims["sub"] == "alice@example.com"
    assert claims["groups"] == ["sre", "dev"] and claims["dept"] == "eng"
    assert claims["exp"] == claims["iat"] + 120  # type: ignore[operator]
    assert jwt.get_unverified_header(token)["kid"] in {k["kid"] for k in idp.jwks()["keys"]}
    with pytest.raises(jwt.InvalidAudienceError):
        _verified(idp, token, "someone-else")


def test_an_expired_token_does_not_verify(idp: OidcProvider) -> None:
    token = idp.token("bob", expires_in=1)
    time.sleep(2)
    with pytest.raises(jwt.ExpiredSignatureError):
        _verified(idp, token, "skillop-gateway")


def test_rotation_retires_the_old_key() -> None:
    with OidcProvider() as idp:
        before = idp.token("alice")
        old_kid = jwt.get_unverified_header(before)["kid"]
        new_kid = idp.rotate()
        after = idp.token("alice")
        published = {key["kid"] for key in idp.jwks()["keys"]}
        assert new_kid != old_kid
        assert jwt.get_unverified_header(after)["kid"] == new_kid
        assert published == {new_kid}
        _verified(idp, after, "skillop-gateway")
        with pytest.raises(jwt.PyJWKClientError):
            _verified(idp, before, "skillop-gateway")
        with pytest.raises(ProviderRefused, match="invalid_grant"):
            idp.exchange(before, audience="https://mcp.example.com")


def test_an_exchange_answers_the_asked_audience_for_the_same_subject() -> None:
    with OidcProvider() as idp:
        token = idp.token("carol", groups=["sre"])
        answer = idp.exchange(token, audience="https://mcp.example.com", scope="read write")
        claims = _verified(idp, answer["access_token"], "https://mcp.example.com")
        assert claims["sub"] == "carol"
        assert claims["scope"] == "read write"
        assert answer["issued_token_type"] == "urn:ietf:params:oauth:token-type:access_token"
        assert answer["token_type"] == "Bearer" and answer["expires_in"] > 0
        assert idp.exchange_count() == 1
        assert idp.exchanges()[0]["audience"] == "https://mcp.example.com"


def test_an_exchange_refuses_a_bad_client_secret_or_a_foreign_token() -> None:
    with OidcProvider() as idp:
        token = idp.token("dave")
        with OidcProvider(client_secret="another") as other:
            foreign = other.token("dave")
            assert other.exchange(foreign, audience="x")["access_token"]
            other.client_secret = "wrong"
            with pytest.raises(ProviderRefused, match="invalid_client"):
                other.exchange(foreign, audience="x")
        with pytest.raises(ProviderRefused, match="invalid_grant"):
            idp.exchange(foreign, audience="x")
        idp.answer_exchanges(error="refused for the test")
        with pytest.raises(ProviderRefused, match="invalid_grant"):
            idp.exchange(token, audience="x")
        assert idp.exchange_count() == 0
