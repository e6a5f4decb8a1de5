"""Secret values out of text that came back from a server: one ``Redactor`` for
discovery and the gateway.

A server may echo what it was sent (a header, an environment variable), on
purpose or by accident, in an error, a result or its stderr. Before such text
is shown to anyone (a Skill's status, an agent, a log, the audit trail), every
secret value is replaced by ``[redacted]``, in each form it is likely to be
carried in:

* as is, and without its scheme (``Bearer <token>`` -> ``<token>``; for
  ``Basic``, the decoded ``user:password`` too);
* JSON-escaped, once and twice (a value with ``"`` or ``\\`` inside a JSON
  string, or inside JSON text inside a JSON string), with non-ASCII kept or
  escaped;
* URL-encoded (``%XX`` in upper or lower case, ``+`` or ``%20`` for spaces);
* base64 (standard and URL-safe alphabet, padded or not), also where the value
  sits inside a longer base64 text (the characters that depend only on the
  value, at each of the three alignments);
* split across neighbouring parts (``texts``), such as two text items of one
  result.

Not caught, because no list of forms can be complete: other transformations
(hex, reversed, case changed, compressed, encrypted, partially encoded) and a
value split across separate messages or lines of a log. docs/security.md says
so too.

Values shorter than ``MIN_SECRET_LEN`` are not redacted: a value ``1`` would
erase every digit, and is no secret worth the name.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable, Sequence
from typing import Final
from urllib.parse import quote, quote_plus

from skillop.sources.mcp_discovery import MAX_DETAIL_LEN, one_line

__all__ = ["MIN_SECRET_LEN", "REDACTED", "Redactor"]

MIN_SECRET_LEN: Final = 4
REDACTED: Final = "[redacted]"
_PERCENT: Final = re.compile(r"%[0-9A-F]{2}")


class Redactor:
    """Replaces every form of the given secret values; see the module docstring."""

    def __init__(self, values: Iterable[str]) -> None:
        forms: set[str] = set()
        for value in values:
            if len(value) >= MIN_SECRET_LEN:
                forms.update(_forms(value))
        # Longest first, so a form containing another is removed whole.
        ordered = sorted((f for f in forms if len(f) >= MIN_SECRET_LEN), key=lambda f: (-len(f), f))
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    def __bool__(self) -> bool:
        return self._pattern is not None

    def __call__(self, text: str) -> str:
        """``text`` with every form of every value replaced (not shortened)."""
        if self._pattern is None:
            return text
        return self._pattern.sub(REDACTED, text)

    def line(self, text: str, limit: int = MAX_DETAIL_LEN) -> str:
        """``text`` redacted, then made one line of at most ``limit`` characters:
        redacted first, so that a bound never cuts a value into a part that is
        no longer recognised (and again after whitespace runs are joined)."""
        return one_line(self(one_line(self(text), len(text) + 1)), limit)

    def texts(self, parts: Sequence[str]) -> list[str]:
        """Each part redacted, and a value split across neighbouring parts too
        (each part's share of it replaced)."""
        clean = [self(part) for part in parts]
        if self._pattern is None or len(clean) < 2:
            return clean
        joined = "".join(clean)
        spans = [m.span() for m in self._pattern.finditer(joined)]
        if not spans:
            return clean
        out: list[str] = []
        start = 0
        for part in clean:
            end = start + len(part)
            cut = [(max(a, start) - start, min(b, end) - start) for a, b in spans
                   if a < end and b > start]
            out.append(_blank(part, cut))
            start = end
        return out


def _blank(text: str, cuts: list[tuple[int, int]]) -> str:
    for a, b in sorted(cuts, reverse=True):
        text = text[:a] + REDACTED + text[b:]
    return text


def _forms(value: str) -> set[str]:
    bases = {value}
    scheme, _, rest = value.partition(" ")
    rest = rest.strip()
    if scheme and rest:
        bases.add(rest)  # the credential without its scheme (Bearer, Basic, Token)
        if scheme.lower() == "basic":
            bases.update(_decoded_basic(rest))
    forms: set[str] = set()
    for base in bases:
        for text in _escaped(base):
            forms.add(text)
            forms.update(_url_encoded(text))
        forms.update(_base64_forms(base.encode()))
    return forms


def _decoded_basic(credential: str) -> set[str]:
    try:
        decoded = base64.b64decode(credential, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return set()
    found = {decoded}
    password = decoded.partition(":")[2]
    if password:
        found.add(password)
    return found


def _escaped(text: str) -> set[str]:
    """``text`` as it is, and as it appears inside JSON strings (one and two levels)."""
    once = {json.dumps(text, ensure_ascii=ascii)[1:-1] for ascii in (False, True)}
    twice = {json.dumps(t, ensure_ascii=ascii)[1:-1] for t in once for ascii in (False, True)}
    return {text} | once | twice


def _url_encoded(text: str) -> set[str]:
    forms = {quote(text, safe=""), quote_plus(text, safe="")}
    return forms | {_PERCENT.sub(lambda m: m.group().lower(), f) for f in forms}


def _base64_forms(raw: bytes) -> set[str]:
    forms: set[str] = set()
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        whole = encode(raw).decode()
        forms.update((whole, whole.rstrip("=")))
        for shift in range(3):
            # ``raw`` behind ``shift`` unknown bytes and before unknown ones: keep the
            # characters whose six bits all come from ``raw``.
            text = encode(b"\0" * shift + raw).decode().rstrip("=")
            first = -(-8 * shift // 6)
            last = 8 * (shift + len(raw)) // 6
            forms.add(text[first:last])
    return forms
