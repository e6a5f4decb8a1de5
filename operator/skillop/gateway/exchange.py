"""Token exchange (RFC 8693) on the caller's behalf: the caller's verified token
for one made for an MCP server's audience (docs/gateway.md, Token exchange).

An ``Exchanger`` serves one Actor's ``spec.callers`` (its issuer and
``tokenExchange`` client). The token endpoint is the one the issuer's discovery
document names (``{issuer}/.well-known/openid-configuration``, whose ``issuer``
must be the issuer itself); the client authenticates with the id and secret of
the mounted client Secret, read at each exchange (a rotated Secret counts from
the next one). An exchanged token is kept per (digest of the caller's token,
server, audience, scopes) until its ``expires_in`` less ``skew``, at most
``MAX_ENTRIES`` of them, the least recently used dropped first; concurrent calls
that need the same one wait for one exchange. A failure is never kept: the next
call tries again.

Tokens are never logged, never in a failure's text (the issuer's own words are
redacted of the caller's token and the client secret), and each exchanged token
comes with its ``Redactor``: a result or an upstream error echoing it is
redacted as a Secret's value is.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

import httpx2
import jwt

from skillop.gateway.identity.issuer import (
    IssuerError,
    discovered,
    issuer_trust,
    read_json,
)
from skillop.gateway.identity.verified import digest
from skillop.gateway.secrets import SecretMissing, secret_value
from skillop.model.exchange import TokenExchange, TokenExchangeClient
from skillop.sources.redaction import Redactor

GRANT_TYPE: Final = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE: Final = "urn:ietf:params:oauth:token-type:access_token"
_ISSUED_TYPES: Final = frozenset({ACCESS_TOKEN_TYPE, "urn:ietf:params:oauth:token-type:jwt"})
#: Kept until this long before the token expires: it must not expire on its way.
EXPIRY_SKEW_SECONDS: Final = 30.0
MAX_ENTRIES: Final = 4096
TIMEOUT_SECONDS: Final = 10.0
MAX_ANSWER_BYTES: Final = 64 * 1024


class ExchangeFailed(Exception):
    """No exchanged token; the message says why in one line, never a token."""


@dataclass(frozen=True, slots=True)
class Exchanged:
    """A token exchanged for one caller and server: the header it goes in, that
    header's value, and what redacts the token wherever it comes back."""

    header: str
    value: str
    redactor: Redactor


#: (digest of the caller's token, the server's (skill, name), audience, scopes).
Key = tuple[bytes, tuple[str, str], str, tuple[str, ...]]


class Exchanger:
    """Exchanges for one ``spec.callers``; see the module docstring."""

    def __init__(self, issuer: str, client: TokenExchangeClient, secrets_dir: Path, *,
                 ca_file: Path | None = None, skew: float = EXPIRY_SKEW_SECONDS,
                 size: int = MAX_ENTRIES, clock: Callable[[], float] = time.monotonic) -> None:
        """``ca_file``: trusted for the issuer besides the system's CAs (``--ca-file``,
        as for the MCP connections and the issuer's keys)."""
        self.issuer = issuer
        self.client = client
        self._secrets_dir = secrets_dir
        self._ca_file = ca_file
        self._skew = skew
        self._size = size
        self._clock = clock
        self._kept: OrderedDict[Key, tuple[Exchanged, float]] = OrderedDict()
        self._running: dict[Key, asyncio.Task[tuple[Exchanged, float]]] = {}
        self._endpoint: str | None = None
        #: Exchanges asked of the issuer so far (a test's and the bench's view).
        self.exchanges = 0

    async def token(self, subject_token: str, server: tuple[str, str],
                    wanted: TokenExchange) -> Exchanged:
        """A token for ``wanted``'s audience and scopes made for the caller whose
        token is ``subject_token``; ``ExchangeFailed`` when there is none."""
        key: Key = (digest(subject_token), server, wanted.audience, tuple(wanted.scopes))
        kept = self._kept.get(key)
        if kept is not None and kept[1] > self._clock():
            self._kept.move_to_end(key)
            return kept[0]
        running = self._running.get(key)
        if running is None:
            running = self._running[key] = asyncio.ensure_future(
                self._exchange(subject_token, wanted))
            running.add_done_callback(lambda done: self._settle(key, done))
        # Shielded: a caller that gives up does not cancel the others' exchange.
        return (await asyncio.shield(running))[0]

    def _settle(self, key: Key, done: asyncio.Task[tuple[Exchanged, float]]) -> None:
        if self._running.get(key) is done:
            del self._running[key]
        if done.cancelled() or done.exception() is not None:
            return
        exchanged, until = done.result()
        if until > self._clock():
            self._kept[key] = (exchanged, until)
            self._kept.move_to_end(key)
            while len(self._kept) > self._size:
                self._kept.popitem(last=False)

    async def _exchange(self, subject_token: str, wanted: TokenExchange,
                        ) -> tuple[Exchanged, float]:
        client_id, secret = self._credentials()
        quiet = Redactor([subject_token, secret])
        form = {"grant_type": GRANT_TYPE, "subject_token": subject_token,
                "subject_token_type": ACCESS_TOKEN_TYPE,
                "requested_token_type": ACCESS_TOKEN_TYPE, "audience": wanted.audience}
        if wanted.scopes:
            form["scope"] = " ".join(wanted.scopes)
        headers = {"accept": "application/json"}
        if self.client.auth_method == "client_secret_basic":
            headers["authorization"] = _basic(client_id, secret)
        else:
            form |= {"client_id": client_id, "client_secret": secret}
        started = self._clock()
        self.exchanges += 1
        try:
            async with httpx2.AsyncClient(timeout=TIMEOUT_SECONDS, follow_redirects=False,
                                          verify=issuer_trust(self.issuer, self._ca_file)) as http:
                if self._endpoint is None:
                    self._endpoint = await discovered(http, self.issuer, "token_endpoint",
                                                      limit=MAX_ANSWER_BYTES)
                status, answer = await read_json(http, "POST", self._endpoint, data=form,
                                                 headers=headers, limit=MAX_ANSWER_BYTES)
        except IssuerError as failed:
            raise ExchangeFailed(str(failed)) from None
        if status != 200:
            raise ExchangeFailed(_refusal(status, answer, quiet))
        value, lifetime = _issued(answer)
        # Its every form, as a regular expression: about a quarter of a second of
        # CPU for a JWT, once per exchanged token, in a worker thread rather than
        # in the event loop every call runs in.
        redactor = await asyncio.to_thread(Redactor, [value])
        exchanged = Exchanged(wanted.header, wanted.value(value), redactor)
        return exchanged, started + lifetime - self._skew

    def _credentials(self) -> tuple[str, str]:
        ref = self.client.client_secret_ref
        try:
            return (secret_value(ref.name, ref.client_id_key, self._secrets_dir),
                    secret_value(ref.name, ref.client_secret_key, self._secrets_dir))
        except SecretMissing as missing:
            raise ExchangeFailed(f"the token exchange's client Secret: {missing}") from None


def _basic(client_id: str, secret: str) -> str:
    """RFC 6749, 2.3.1: each part form-encoded, then joined and base64-encoded."""
    pair = f"{quote(client_id, safe='')}:{quote(secret, safe='')}"
    return "Basic " + base64.b64encode(pair.encode()).decode("ascii")


def _refusal(status: int, answer: dict[str, Any], quiet: Redactor) -> str:
    error, said = answer.get("error"), answer.get("error_description")
    why = f"{error}" if isinstance(error, str) else f"HTTP {status}"
    if isinstance(said, str) and said:
        why += f": {said}"
    return f"the issuer refused the token exchange ({quiet.line(why, 200)})"


def _issued(answer: dict[str, Any]) -> tuple[str, float]:
    """The exchanged token and how long it lives (seconds), from the answer."""
    value = answer.get("access_token")
    if not isinstance(value, str) or not value or len(value) > MAX_ANSWER_BYTES:
        raise ExchangeFailed("the issuer's answer has no access_token")
    kind = answer.get("issued_token_type")
    if kind is not None and (not isinstance(kind, str) or kind not in _ISSUED_TYPES):
        raise ExchangeFailed("the issuer issued a token that is no access token")
    token_type = answer.get("token_type")
    if not isinstance(token_type, str) or token_type.lower() not in ("bearer", "n_a"):
        raise ExchangeFailed("the issuer's token is not a bearer token")
    lifetime = answer.get("expires_in")
    if isinstance(lifetime, int | float) and not isinstance(lifetime, bool) and lifetime > 0:
        return value, float(lifetime)
    return value, _jwt_lifetime(value)


def _jwt_lifetime(value: str) -> float:
    """Without ``expires_in``: the seconds to the token's own ``exp``, if it is a
    JWT that says (else 0: used for this call, not kept)."""
    try:
        claims = jwt.decode(value, options={"verify_signature": False})
    except jwt.PyJWTError:
        return 0.0
    expiry = claims.get("exp")
    if not isinstance(expiry, int | float) or isinstance(expiry, bool):
        return 0.0
    return max(0.0, float(expiry) - time.time())
