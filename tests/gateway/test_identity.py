"""The gateway's token checks (gateway/identity), against keys and a JWKS server of
the test's own: what verifies, what is refused and in which words, the keys'
rotation and refetch bounds, the verified-token cache, the header's grammar."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from typing import Any

import anyio
import jwt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from identitykit import AUDIENCE, JwksServer, Key

from skillop.gateway.identity import keys as keys_module
from skillop.gateway.identity.callers import Callers, Refusal
from skillop.gateway.identity.door import Door
from skillop.gateway.identity.header import MAX_TOKEN_BYTES, InvalidToken, token_in
from skillop.gateway.identity.http import Authenticated
from skillop.gateway.identity.keys import KeySet
from skillop.model.caller import ANONYMOUS, Caller
from skillop.model.callers import CallersSpec


@pytest.fixture
def idp() -> Iterator[JwksServer]:
    with JwksServer(Key("k1"), Key("e1", kind="EC")) as server:
        yield server


def _callers(idp: JwksServer, **fields: Any) -> Callers:
    return Callers(CallersSpec.model_validate({"issuer": idp.issuer, "audiences": [AUDIENCE],
                                               **fields}))


def _identify(callers: Callers, token: str | None) -> Caller | Refusal:
    headers = {"authorization": f"Bearer {token}"} if token is not None else {}
    return anyio.run(callers.identify, headers)


def _b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def _hs256(claims: dict[str, Any], secret: bytes) -> str:
    """A token MACed with ``secret`` (PyJWT refuses to sign with a PEM key: by hand)."""
    signing = f"{_b64({'alg': 'HS256', 'typ': 'JWT', 'kid': 'k1'})}.{_b64(claims)}"
    mac = hmac.new(secret, signing.encode(), hashlib.sha256).digest()
    return f"{signing}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"


def test_a_valid_token_names_its_caller_and_groups(idp: JwksServer) -> None:
    callers = _callers(idp)
    rsa = _identify(callers, idp.keys[0].sign(idp.claims("alice", groups=["sre", "dev"])))
    ec = _identify(callers, idp.keys[1].sign(idp.claims("bob", groups="ops")))
    assert isinstance(rsa, Caller) and (rsa.subject, rsa.groups) == ("alice", ("sre", "dev"))
    assert isinstance(ec, Caller) and (ec.subject, ec.groups) == ("bob", ("ops",))


def test_claim_names_and_audiences_as_the_actor_sets_them(idp: JwksServer) -> None:
    callers = _callers(idp, audiences=["other", AUDIENCE], subjectClaim="email",
                       groupsClaim="roles")
    found = _identify(callers, idp.keys[0].sign(idp.claims(
        "x", email="a@example.com", roles=["r"], aud=["someone", AUDIENCE])))
    assert isinstance(found, Caller) and (found.subject, found.groups) == (
        "a@example.com", ("r",))


def _refusal(callers: Callers, token: str | None) -> str:
    found = _identify(callers, token)
    assert isinstance(found, Refusal), found
    assert token is None or not any(part and part in found.reason for part in token.split("."))
    return found.reason


def test_invalid_tokens_are_refused_in_the_gateways_words(idp: JwksServer) -> None:
    callers = _callers(idp)
    key = idp.keys[0]
    now = int(time.time())
    cases = {
        "expired": key.sign(idp.claims(exp=now - 120, iat=now - 600)),
        "wrong audience": key.sign(idp.claims(aud="someone-else")),
        "wrong issuer": key.sign(idp.claims(iss=idp.issuer + "/other")),
        "no exp": key.sign({k: v for k, v in idp.claims().items() if k != "exp"}),
        "future nbf": key.sign(idp.claims(nbf=now + 600)),
        "future iat": key.sign(idp.claims(iat=now + 600)),
        "no subject": key.sign(idp.claims(sub="")),
        "unknown kid": key.sign(idp.claims(), headers={"kid": "nobody"}),
        "alg none": f"{_b64({'alg': 'none', 'kid': 'k1'})}.{_b64(idp.claims())}.",
        "alg a list": f"{_b64({'alg': ['RS256'], 'kid': 'k1'})}.{_b64(idp.claims())}.{_b64({})}",
        # The public key, read as an HMAC secret by a careless verifier.
        "HS256 with the public key": _hs256(idp.claims(), key.public_pem()),
        "RS256 header on the EC key": ".".join([
            _b64({"alg": "RS256", "kid": "e1"}),
            *idp.keys[1].sign(idp.claims()).split(".")[1:]]),
        "signed by another key with a known kid": Key("k1").sign(idp.claims()),
    }
    reasons = {name: _refusal(callers, token) for name, token in cases.items()}
    assert reasons["expired"] == "invalid caller token: the token has expired"
    assert "(aud)" in reasons["wrong audience"]
    assert "(iss)" in reasons["wrong issuer"]
    assert "required claim" in reasons["no exp"]
    assert "not valid yet" in reasons["future nbf"] and "not valid yet" in reasons["future iat"]
    assert "names no subject" in reasons["no subject"]
    assert "does not publish" in reasons["unknown kid"]
    assert "not an asymmetric one" in reasons["alg none"]
    assert "not an asymmetric one" in reasons["alg a list"]
    assert "not an asymmetric one" in reasons["HS256 with the public key"]
    assert "does not fit" in reasons["RS256 header on the EC key"]
    assert "signature does not verify" in reasons["signed by another key with a known kid"]
    assert all(r.startswith("invalid caller token: ") for r in reasons.values())


def test_the_skew_is_honoured_both_ways(idp: JwksServer) -> None:
    now = int(time.time())
    late = idp.keys[0].sign(idp.claims(exp=now - 20))
    assert isinstance(_identify(_callers(idp, clockSkewSeconds=60), late), Caller)
    assert isinstance(_identify(_callers(idp, clockSkewSeconds=0), late), Refusal)


def test_missing_is_anonymous_or_refused_and_invalid_is_refused_either_way(
        idp: JwksServer) -> None:
    allow, deny = _callers(idp, anonymous="Allow"), _callers(idp)
    assert _identify(allow, None) is ANONYMOUS
    missing = _identify(deny, None)
    assert isinstance(missing, Refusal) and missing.kind == "missing"
    assert missing.status == 401 and "anonymous: Deny" in missing.reason
    assert anyio.run(deny.identify, None) == missing  # stdio: no headers at all
    for callers in (allow, deny):
        for header in ("Bearer not-a-jwt", "Basic dXNlcjpwdw==", "Bearer "):
            found = anyio.run(callers.identify, {"authorization": header})
            assert isinstance(found, Refusal) and found.kind == "invalid", header


def test_a_repeated_token_is_looked_up_not_verified_again(idp: JwksServer,
                                                          monkeypatch: Any) -> None:
    callers = _callers(idp)
    token = idp.keys[0].sign(idp.claims())
    first = _identify(callers, token)
    verified: list[str] = []
    monkeypatch.setattr(callers.verifier, "claims",
                        lambda t: verified.append(t))  # would fail if it were awaited
    assert _identify(callers, token) is first
    assert verified == [] and idp.fetches == 1
    assert len(callers.verified) == 1


def test_the_cache_forgets_an_expired_token() -> None:
    from skillop.gateway.identity.verified import Verified, digest

    now = [1000.0]
    cache = Verified(size=2, clock=lambda: now[0])
    alice, bob, carol = Caller("alice"), Caller("bob"), Caller("carol")
    cache.put(digest("a"), alice, 1010)
    cache.put(digest("b"), bob, 2000)
    assert cache.get(digest("a")) is alice
    cache.put(digest("c"), carol, 2000)  # bounded: the least recently used (b) goes
    assert cache.get(digest("b")) is None and cache.get(digest("a")) is alice
    now[0] = 1010
    assert cache.get(digest("a")) is None and len(cache) == 1


def test_rotation_fetches_the_new_key_once_and_the_old_key_is_gone(idp: JwksServer) -> None:
    clock = [0.0]
    callers = Callers(_callers(idp).spec,
                      keys=KeySet(idp.issuer, None, clock=lambda: clock[0]))
    old_token = idp.keys[0].sign(idp.claims("alice"))
    assert isinstance(_identify(callers, old_token), Caller)
    callers.verified = type(callers.verified)()  # as after a restart: nothing cached
    new = Key("k2")
    idp.keys = [new]
    clock[0] = 31.0
    found = _identify(callers, new.sign(idp.claims("alice")))
    assert isinstance(found, Caller) and idp.fetches == 2
    assert "does not publish" in _refusal(callers, old_token)
    # Unknown kids within REFETCH_SECONDS of the last fetch fetch nothing more.
    for i in range(5):
        _refusal(callers, Key(f"made-up-{i}").sign(idp.claims()))
    assert idp.fetches == 2
    clock[0] += keys_module.REFETCH_SECONDS
    _refusal(callers, Key("made-up-late").sign(idp.claims()))
    assert idp.fetches == 3


def test_an_issuer_out_of_reach_is_unavailable_not_invalid() -> None:
    with JwksServer(Key("k1")) as gone:
        issuer = gone.issuer
    callers = Callers(CallersSpec(issuer=issuer, audiences=[AUDIENCE]))
    found = _identify(callers, Key("k1").sign({"iss": issuer, "aud": AUDIENCE, "sub": "a",
                                               "exp": int(time.time()) + 60}))
    assert isinstance(found, Refusal) and found.kind == "unavailable" and found.status == 503


def test_a_discovery_document_naming_another_issuer_is_not_trusted(idp: JwksServer) -> None:
    keys = KeySet(idp.issuer + "/", None)  # the document says idp.issuer, without the slash
    with pytest.raises(keys_module.KeysUnavailable, match="its issuer is not"):
        anyio.run(keys.key, "k1")


def test_symmetric_and_private_keys_in_a_jwks_are_never_used(idp: JwksServer) -> None:
    secret = {"kty": "oct", "kid": "k1", "k": _b64({"x": 1})}
    private = {**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(idp.keys[0].private)),
               "kid": "p"}
    assert set(keys_module.parse_jwks({"keys": [secret, private, idp.keys[1].jwk()]})) == {"e1"}


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=10)


@given(st.lists(st.dictionaries(st.sampled_from(["kty", "kid", "use", "alg", "n", "e", "d"])
                                | st.text(max_size=4), _JSON, max_size=6), max_size=4))
def test_any_jwks_document_parses_to_its_usable_keys_or_none(entries: list[Any]) -> None:
    # An issuer's JWKS is input from the network: no shape of it may crash the door.
    keys = keys_module.parse_jwks({"keys": [*entries, {"kty": [], "kid": "odd"}]})
    assert "odd" not in keys


# -- the header ------------------------------------------------------------------------

_PART = st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
                min_size=1, max_size=60)
_JWT = st.builds(lambda a, b, c: f"{a}.{b}.{c}", _PART, _PART, _PART)


@given(_JWT, st.sampled_from(["Bearer", "bearer", "BEARER", "BeArEr"]),
       st.integers(min_value=1, max_value=3))
def test_a_bearer_token_in_any_case_and_spacing_is_read(token: str, scheme: str,
                                                        spaces: int) -> None:
    value = f"{scheme}{' ' * spaces}{token}"
    assert token_in({"authorization": value}, "Authorization") == token
    assert token_in({"x-user-token": token}, "X-User-Token") == token
    assert token_in({"x-user-token": value}, "X-User-Token") == token


_HEADER_REASONS = {"the Authorization header is not Bearer", "the token is empty",
                   f"the token is longer than {MAX_TOKEN_BYTES} bytes",
                   "the token is not a JWT (three base64url parts)"}


@settings(max_examples=300)
@given(st.text(max_size=200))
def test_any_header_value_is_a_token_or_refused_in_one_fixed_line(value: str) -> None:
    try:
        token = token_in({"authorization": value}, "Authorization")
    except InvalidToken as exc:
        assert str(exc) in _HEADER_REASONS  # fixed words: nothing of the value
    else:
        assert token is not None and token.count(".") == 2 and token in value


def test_no_header_is_no_token_and_an_oversized_one_is_refused() -> None:
    assert token_in(None, "Authorization") is None
    assert token_in({"other": "x"}, "Authorization") is None
    with pytest.raises(InvalidToken, match="longer than"):
        token_in({"authorization": "Bearer " + "a." * MAX_TOKEN_BYTES + "a"}, "Authorization")


def test_an_https_issuer_signed_by_the_gateways_ca_file_is_trusted(tmp_path: Any) -> None:
    from bad_servers import make_ca

    ca = make_ca(tmp_path)
    ca_file = tmp_path / "ca.pem"
    ca_file.write_text(ca.ca_pem)
    with JwksServer(Key("k1"), tls=ca.server_context()) as idp:
        token = idp.keys[0].sign(idp.claims("alice"))
        spec = CallersSpec(issuer=idp.issuer, audiences=[AUDIENCE])
        assert isinstance(_identify(Callers(spec, ca_file=ca_file), token), Caller)
        untrusted = _identify(Callers(spec), token)
        assert isinstance(untrusted, Refusal) and untrusted.kind == "unavailable"



def test_an_unforeseen_failure_of_the_decoder_is_a_refusal_quoting_nothing(
        idp: JwksServer, monkeypatch: pytest.MonkeyPatch) -> None:
    token = idp.keys[0].sign(idp.claims())

    def broken(raw: str, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"cannot read {raw}")

    monkeypatch.setattr(jwt, "decode", broken)
    assert _refusal(_callers(idp), token) == (
        "invalid caller token: the token could not be verified")


def test_each_refusal_is_counted_under_its_own_fixed_kind(idp: JwksServer) -> None:
    from skillop.gateway.metrics import REFUSAL_KINDS, refusal_kind

    deny = _callers(idp)
    missing = _identify(deny, None)
    invalid = _identify(deny, "a.b.c")
    with JwksServer(Key("k1")) as gone:
        issuer = gone.issuer
    unreachable = _identify(Callers(CallersSpec(issuer=issuer, audiences=[AUDIENCE])),
                            Key("k1").sign({"iss": issuer, "aud": AUDIENCE, "sub": "a",
                                            "exp": int(time.time()) + 60}))
    kinds = [refusal_kind(r.reason) for r in (missing, invalid, unreachable)
             if isinstance(r, Refusal)]
    assert kinds == ["caller_missing", "caller_invalid", "caller_unavailable"]
    assert set(kinds) <= REFUSAL_KINDS


class _Front:
    """The front as the door sees it: a direct answer and a body limit."""

    max_body_bytes = 1024

    async def direct(self, scope: Any, body: bytes) -> None:
        return None


def test_the_front_answers_directly_with_no_door_between_until_the_set_has_callers() -> None:
    door, front = Door(), _Front()
    authenticated = Authenticated(front, door)  # type: ignore[arg-type]
    assert authenticated.direct == front.direct and authenticated.max_body_bytes == 1024
    spec = CallersSpec(issuer="https://issuer.example", audiences=[AUDIENCE])
    assert door.update(spec)
    assert authenticated.direct != front.direct  # each request's token is checked first
    assert not door.update(spec)  # the same settings: nothing changes
    assert authenticated.direct != front.direct
    assert door.update(None)
    assert authenticated.direct == front.direct
