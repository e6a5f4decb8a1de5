"""One Actor's ``spec.callers`` at work: a request's headers to its caller, or to
the reason it is refused.

No token: the anonymous caller where ``anonymous: Allow``, else a refusal (over
HTTP a 401 inviting the client to the MCP authorization flow, ``http``). A token
that does not verify: always a refusal, whatever ``anonymous`` says (a client
that sends one expects to be someone; serving it as anonymous would hide its
mistake). The issuer's keys out of reach: a refusal too, as unavailable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from skillop.gateway.identity.header import InvalidToken, token_in
from skillop.gateway.identity.keys import KeySet, KeysUnavailable
from skillop.gateway.identity.verified import Verified, digest
from skillop.gateway.identity.verify import Verifier
from skillop.model.caller import ANONYMOUS, Caller, caller_from_claims
from skillop.model.callers import CallersSpec

#: Why a request was refused, as metrics count it (a fixed set: never the text).
RefusalKind = Literal["missing", "invalid", "unavailable"]
REFUSAL_KINDS: Final = ("missing", "invalid", "unavailable")
#: The first words of every refusal's reason (``metrics.refusal_kind`` reads them).
MISSING: Final = "no caller token"
INVALID: Final = "invalid caller token"
UNAVAILABLE: Final = "caller token not verifiable"


@dataclass(frozen=True, slots=True)
class Refusal:
    """A request refused for its token (or its lack of one)."""

    kind: RefusalKind
    #: The gateway's own words, one line; never any part of the token.
    reason: str

    @property
    def status(self) -> int:
        """The HTTP status: 401 (the client is to get a token), 503 (the keys)."""
        return 503 if self.kind == "unavailable" else 401


class Callers:
    """Tokens to callers for one ``spec.callers``: verified once, then looked up."""

    def __init__(self, spec: CallersSpec, *, keys: KeySet | None = None,
                 ca_file: Path | None = None) -> None:
        self.spec = spec
        self.keys = keys or KeySet(spec.issuer, spec.jwks_uri, ca_file=ca_file)
        self.verifier = Verifier(spec, self.keys)
        self.verified = Verified()
        self._missing: Caller | Refusal = (
            ANONYMOUS if spec.anonymous == "Allow" else Refusal(
                "missing", f"{MISSING}: this gateway serves only callers with a token from"
                f" {spec.issuer} (spec.callers.anonymous: Deny), in the {spec.header}"
                " header (stdio carries none)"))

    async def identify(self, headers: Mapping[str, str] | None) -> Caller | Refusal:
        """Who ``headers`` (lower-case names; None over stdio) name as the caller."""
        try:
            token = token_in(headers, self.spec.header)
        except InvalidToken as exc:
            return Refusal("invalid", f"{INVALID}: {exc}")
        if token is None:
            return self._missing
        key = digest(token)
        known = self.verified.get(key)
        if known is not None:
            return known
        try:
            claims = await self.verifier.claims(token)
        except InvalidToken as exc:
            return Refusal("invalid", f"{INVALID}: {exc}")
        except KeysUnavailable as exc:
            return Refusal("unavailable", f"{UNAVAILABLE}: {exc}")
        caller = caller_from_claims(claims, subject_claim=self.spec.subject_claim,
                                    groups_claim=self.spec.groups_claim, token=token)
        if caller.anonymous:
            return Refusal("invalid", f"{INVALID}: it names no subject"
                                      f" ({self.spec.subject_claim})")
        self.verified.put(key, caller, float(claims["exp"]) + self.spec.clock_skew_seconds)
        return caller
