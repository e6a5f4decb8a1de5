"""The token in a request header, as ``spec.callers.header`` names it.

``Authorization`` carries ``Bearer <JWT>`` (RFC 6750: the scheme in any case, one
or more spaces); any other header carries the JWT itself, ``Bearer `` optional. A
JWT here is a JWS in compact form: three base64url parts. Anything else in the
header is a token given but not one the gateway can verify (``InvalidToken``):
never the same as no token at all.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

#: The longest token read (a JWT with many groups is a few KiB; more is no token).
MAX_TOKEN_BYTES: Final = 16 * 1024
_JWS: Final = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")
_BEARER: Final = re.compile(r"bearer +", re.IGNORECASE)


class InvalidToken(Exception):
    """A token was given but cannot be verified; the message is the gateway's own
    words, never any part of the token."""


def token_in(headers: Mapping[str, str] | None, header: str) -> str | None:
    """The token in ``headers`` (lower-case names, as the front reads them) under
    ``header``; None when there is none; ``InvalidToken`` when the header holds
    something else than a token."""
    if headers is None:
        return None
    value = headers.get(header.lower())
    if value is None:
        return None
    text = value.strip(" \t")
    scheme = _BEARER.match(text)
    if scheme is not None:
        text = text[scheme.end():]
    elif header.lower() == "authorization":
        raise InvalidToken("the Authorization header is not Bearer")
    if not text:
        raise InvalidToken("the token is empty")
    if len(text) > MAX_TOKEN_BYTES:
        raise InvalidToken(f"the token is longer than {MAX_TOKEN_BYTES} bytes")
    if _JWS.fullmatch(text) is None:
        raise InvalidToken("the token is not a JWT (three base64url parts)")
    return text
