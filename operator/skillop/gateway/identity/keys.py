"""The issuer's signing keys: fetched over HTTPS, cached, fetched again on a key
the cache does not know.

The keys are the JWKS document at ``jwksUri``, or, without one, at the
``jwks_uri`` the issuer's discovery document names
(``{issuer}/.well-known/openid-configuration``, whose ``issuer`` must be the
issuer itself, OpenID Connect Discovery 4.3). Only public keys of asymmetric
algorithms are kept (RSA, EC, OKP): a symmetric key in a JWKS would let a
token be signed by anyone who read it. A token naming a ``kid`` the cache does
not hold (the issuer rotated its keys) fetches the document again, at most once
every ``REFETCH_SECONDS``; a key the issuer no longer publishes is then gone.
Everything fetched is bounded: the time, the size, the number of keys. An https
issuer is trusted by the system's CAs and the gateway's ``--ca-file`` (the CA
file every MCP connection trusts: an in-house issuer is signed by the same CA).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import anyio
import httpx2
import jwt

from skillop.gateway.identity.header import InvalidToken
from skillop.gateway.identity.issuer import (
    IssuerError,
    discovered,
    issuer_trust,
    read_json,
)

#: An unknown ``kid`` fetches the keys again at most this often (seconds).
REFETCH_SECONDS: Final = 30.0
#: A fetch that failed is tried again after this long, not before (seconds).
RETRY_SECONDS: Final = 5.0
FETCH_TIMEOUT: Final = 5.0
MAX_DOCUMENT_BYTES: Final = 1024 * 1024
MAX_KEYS: Final = 64
_ASYMMETRIC_TYPES: Final = frozenset({"RSA", "EC", "OKP"})


class KeysUnavailable(Exception):
    """The issuer's keys could not be had; the message says why, in one line."""


@dataclass(frozen=True, slots=True)
class PublishedKey:
    """A public key the issuer publishes, and the ``alg`` its JWK names (if any)."""

    key: Any
    alg: str | None


class KeySet:
    """One issuer's keys by ``kid``, and when they were fetched."""

    def __init__(self, issuer: str, jwks_uri: str | None, *, ca_file: Path | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._issuer = issuer
        self._ca_file = ca_file
        self._jwks_uri = jwks_uri
        self._clock = clock
        self._keys: dict[str, PublishedKey] | None = None
        self._fetched_at: float | None = None
        self._failed = False
        self._lock = anyio.Lock()
        #: How many times the keys were fetched (a test's and the bench's view).
        self.fetches = 0

    async def key(self, kid: str | None) -> PublishedKey:
        """The key ``kid`` names (without a ``kid``: the issuer's only key);
        ``InvalidToken`` when the issuer does not publish it, ``KeysUnavailable``
        when its keys cannot be fetched."""
        found = self._find(kid)
        if found is None and self._may_fetch():
            async with self._lock:
                found = self._find(kid)
                if found is None and self._may_fetch():
                    await self._fetch()
                    found = self._find(kid)
        if found is not None:
            return found
        if self._keys is None:
            raise KeysUnavailable("the issuer's signing keys could not be fetched")
        raise InvalidToken("the token is signed with a key the issuer does not publish")

    def _find(self, kid: str | None) -> PublishedKey | None:
        keys = self._keys
        if keys is None:
            return None
        if kid is None:
            return next(iter(keys.values())) if len(keys) == 1 else None
        return keys.get(kid)

    def _may_fetch(self) -> bool:
        if self._fetched_at is None:
            return True
        wait = RETRY_SECONDS if self._failed else REFETCH_SECONDS
        return self._clock() - self._fetched_at >= wait

    async def _fetch(self) -> None:
        self._fetched_at = self._clock()
        self.fetches += 1
        try:
            async with httpx2.AsyncClient(timeout=FETCH_TIMEOUT, follow_redirects=False,
                                          verify=issuer_trust(self._issuer, self._ca_file)) as http:
                uri = self._jwks_uri or await self._discover(http)
                keys = parse_jwks(await _get_json(http, uri))
        except KeysUnavailable:
            self._failed = True
            raise
        except IssuerError as failed:
            self._failed = True
            raise KeysUnavailable(str(failed)) from None
        self._failed = False
        self._keys = keys

    async def _discover(self, http: httpx2.AsyncClient) -> str:
        self._jwks_uri = await discovered(http, self._issuer, "jwks_uri",
                                          limit=MAX_DOCUMENT_BYTES)
        return self._jwks_uri


async def _get_json(http: httpx2.AsyncClient, url: str) -> dict[str, Any]:
    """The JSON object at ``url``, read within the bounds."""
    status, document = await read_json(http, "GET", url, limit=MAX_DOCUMENT_BYTES,
                                        headers={"accept": "application/json"})
    if status != 200:
        raise KeysUnavailable(f"{url}: HTTP {status}")
    return document


def parse_jwks(document: dict[str, Any]) -> dict[str, PublishedKey]:
    """The usable public keys of a JWKS document by ``kid`` (a key without one is
    kept under "" and found only when it is the only key); symmetric and private
    keys are left out, as are keys PyJWT cannot read."""
    listed = document.get("keys")
    if not isinstance(listed, list):
        raise KeysUnavailable("the JWKS document has no keys list")
    keys: dict[str, PublishedKey] = {}
    for entry in listed[:MAX_KEYS]:
        if (not isinstance(entry, dict) or not isinstance(entry.get("kty"), str)
                or entry.get("kty") not in _ASYMMETRIC_TYPES
                or "d" in entry or entry.get("use", "sig") != "sig"):
            continue
        try:
            key = jwt.PyJWK(entry).key
        except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError):
            continue
        kid, alg = entry.get("kid"), entry.get("alg")
        keys.setdefault(kid if isinstance(kid, str) else "",
                        PublishedKey(key, alg if isinstance(alg, str) else None))
    return keys
