"""Who is calling through the gateway: the end user behind the agent, as the
verified claims of their token name them (docs/gateway.md, Callers).

The gateway builds one ``Caller`` per request from a token it has verified; the
CLI builds one from claims given on the command line (``explain --claims``), so
the rules that decide per caller read the same value offline and at call time.
A call without a valid token is ``ANONYMOUS``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

_NO_CLAIMS: Final[Mapping[str, Any]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Caller:
    """The end user a call is made for."""

    #: The claim the Actor names as the user's (``sub`` by default); None: anonymous.
    subject: str | None = None
    #: The values of the claim the Actor names as the user's groups.
    groups: tuple[str, ...] = ()
    #: Every claim of the verified token, for rules that match other claims.
    claims: Mapping[str, Any] = field(default_factory=lambda: _NO_CLAIMS, hash=False)
    #: The token itself, kept only for a token exchange on the caller's behalf: never
    #: printed (not in ``repr``), logged, compared or written anywhere.
    token: str | None = field(default=None, repr=False, compare=False, hash=False)

    @property
    def anonymous(self) -> bool:
        return self.subject is None


#: A call without a valid token.
ANONYMOUS: Final = Caller()


def caller_from_claims(claims: Mapping[str, Any], *, subject_claim: str = "sub",
                       groups_claim: str = "groups", token: str | None = None) -> Caller:
    """The caller verified ``claims`` name, by the claims an Actor's ``spec.callers``
    reads: a subject that is no non-empty string is anonymous; groups are a list of
    strings or one string (other values are not groups)."""
    subject = claims.get(subject_claim)
    if not isinstance(subject, str) or not subject:
        return ANONYMOUS
    raw = claims.get(groups_claim)
    items = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
    groups = tuple(dict.fromkeys(g for g in items if isinstance(g, str)))
    return Caller(subject, groups, MappingProxyType(dict(claims)), token)
