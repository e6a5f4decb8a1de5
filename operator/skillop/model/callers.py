"""An Actor's ``spec.callers``: whose tokens the gateway verifies, and what it reads
of them (docs/api.md, Actor; docs/gateway.md, Callers).

The gateway takes the end user's OpenID Connect token from one request header,
verifies it against the issuer's published keys and names the caller by two of
its claims (``model.caller``). The same fields, camelCase, are copied into the
ToolSet document, so the gateway reads them from its mount.
"""

from __future__ import annotations

import re
from typing import Annotated, Final, Literal

from pydantic import Field, StringConstraints

from skillop.model.specbase import Rule, SpecModel, field_rules

#: http is for an issuer on the gateway's own host only (a test or a sidecar IdP):
#: keys fetched over plain HTTP from elsewhere could be anyone's.
_LOOPBACK_HTTP: Final = r"^http://(localhost|127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}|\[::1\])(:[0-9]{1,5})?(/[^?#@\s]*)?$"
_HTTPS: Final = r"^https://[^/?#@\s]+(/[^?#@\s]*)?$"


def _secure_url(field: str) -> Rule[str]:
    # A CEL string takes a backslash doubled.
    https, loopback = (p.replace("\\", "\\\\") for p in (_HTTPS, _LOOPBACK_HTTP))
    return Rule(f"self.matches('{https}') || self.matches('{loopback}')",
                f"{field} must be an https URL without user, query or fragment (http only"
                " for a loopback host: localhost, 127.x.x.x, [::1])",
                lambda url: bool(re.match(_HTTPS, url) or re.match(_LOOPBACK_HTTP, url)),
                detail=lambda url: repr(url[:200]))


#: An issuer as the tokens' ``iss`` names it, exactly.
IssuerUrl = Annotated[str, StringConstraints(min_length=9, max_length=2048),
                      *field_rules(_secure_url("issuer"))]
JwksUrl = Annotated[str, StringConstraints(min_length=9, max_length=2048),
                    *field_rules(_secure_url("jwksUri"))]
#: An HTTP header name (RFC 9110 token).
HeaderName = Annotated[str, StringConstraints(min_length=1, max_length=128,
                                              pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")]
ClaimName = Annotated[str, StringConstraints(min_length=1, max_length=256)]
Audience = Annotated[str, StringConstraints(min_length=1, max_length=1024)]

#: The most seconds ``clockSkewSeconds`` allows: a token may not outlive ``exp`` longer.
MAX_SKEW: Final = 300


class CallersSpec(SpecModel):
    """Who may call through the gateway: the OpenID Connect issuer whose tokens it
    verifies, and how it reads the caller from them."""

    issuer: IssuerUrl
    """The issuer's URL, exactly as its tokens' iss names it: https, or http for a
    loopback host only. Its keys come from {issuer}/.well-known/openid-configuration."""
    audiences: list[Audience] = Field(min_length=1, max_length=8)
    """A token's aud must hold one of these (1 to 8)."""
    header: HeaderName = "Authorization"
    """The request header holding the token: Authorization takes "Bearer <JWT>"; any
    other header the JWT, "Bearer " optional."""
    subject_claim: ClaimName = "sub"
    """The claim naming the caller (a non-empty string)."""
    groups_claim: ClaimName = "groups"
    """The claim listing the caller's groups (a list of strings, or one string)."""
    anonymous: Literal["Deny", "Allow"] = "Deny"
    """Deny (default): a request without a token is refused (401 over HTTP, with the
    MCP authorization flow's resource metadata). Allow: it is served as anonymous.
    An invalid token is refused either way."""
    clock_skew_seconds: int = Field(default=60, ge=0, le=MAX_SKEW)
    """Leeway for exp, nbf and iat, in seconds (0 to 300)."""
    jwks_uri: JwksUrl | None = None
    """Where the issuer's keys are (a JWKS document); default: the jwks_uri of the
    issuer's discovery document."""
