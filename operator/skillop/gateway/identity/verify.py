"""A token checked against ``spec.callers``: signature, issuer, audience, times.

Only asymmetric algorithms are accepted (RS*, PS*, ES*, EdDSA): ``none`` proves
nothing, and an HMAC algorithm would take the issuer's public key as a shared
secret that anyone can read. The algorithm is the one the token's header names,
checked against that list first and against the key after (a key whose JWK
names another ``alg``, or of another type, does not verify it). ``iss`` must be
the issuer exactly; ``aud`` must hold one of the audiences; ``exp`` is required;
``exp``, ``nbf`` and ``iat`` are honoured with ``clockSkewSeconds`` of leeway.

A refusal is an ``InvalidToken`` in the gateway's own words: PyJWT's messages and
the token's own values (its claims may be anything the sender wrote) are never
repeated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import jwt

from skillop.gateway.identity.header import InvalidToken
from skillop.gateway.identity.keys import KeySet
from skillop.model.callers import CallersSpec

ASYMMETRIC_ALGORITHMS: Final = frozenset({
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
    "ES256", "ES256K", "ES384", "ES512", "EdDSA"})

#: PyJWT's exceptions, by what the caller is told (the first that matches: subclasses first).
_REASONS: Final[tuple[tuple[type[Exception], str], ...]] = (
    (jwt.ExpiredSignatureError, "the token has expired"),
    (jwt.ImmatureSignatureError, "the token is not valid yet (nbf or iat in the future)"),
    (jwt.InvalidAudienceError, "the token is not for this gateway (aud)"),
    (jwt.InvalidIssuerError, "the token is not from the issuer (iss)"),
    (jwt.MissingRequiredClaimError, "the token lacks a required claim (exp, iss or aud)"),
    (jwt.InvalidSignatureError, "the token's signature does not verify"),
    (jwt.InvalidKeyError, "the token's algorithm does not fit the issuer's key"),
    (jwt.InvalidAlgorithmError, "the token's algorithm does not fit the issuer's key"),
    (jwt.DecodeError, "the token cannot be decoded"),
)


class Verifier:
    """Verifies tokens for one ``spec.callers``, with that issuer's keys."""

    def __init__(self, spec: CallersSpec, keys: KeySet) -> None:
        self.spec = spec
        self.keys = keys
        self._audiences = tuple(spec.audiences)
        self._options: Any = {"require": ["exp", "iss", "aud"], "verify_signature": True}

    async def claims(self, token: str) -> Mapping[str, Any]:
        """The token's claims once verified; ``InvalidToken`` (one line, no part of
        the token) if it is not, ``KeysUnavailable`` if its key cannot be had."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise InvalidToken("the token's header cannot be decoded") from None
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str) or alg not in ASYMMETRIC_ALGORITHMS:
            raise InvalidToken("the token's algorithm is not an asymmetric one"
                               " (RS*, PS*, ES*, EdDSA)")
        if kid is not None and not isinstance(kid, str):
            raise InvalidToken("the token's header has a kid that is no string")
        key = await self.keys.key(kid)
        if key.alg is not None and key.alg != alg:
            raise InvalidToken("the token's algorithm does not fit the issuer's key")
        try:
            claims: dict[str, Any] = jwt.decode(
                token, key.key, algorithms=[alg], audience=self._audiences,
                issuer=self.spec.issuer, leeway=self.spec.clock_skew_seconds,
                options=self._options)
        except jwt.PyJWTError as exc:
            raise InvalidToken(_reason(exc)) from None
        except (ValueError, TypeError):  # a key PyJWT cannot use for this algorithm
            raise InvalidToken("the token's algorithm does not fit the issuer's key") from None
        except Exception:  # anything else: its text could quote the token, never shown
            raise InvalidToken("the token could not be verified") from None
        return claims


def _reason(exc: Exception) -> str:
    for kind, reason in _REASONS:
        if isinstance(exc, kind):
            return reason
    return "the token is invalid"
