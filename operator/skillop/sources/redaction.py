"""Secret values out of text that came back from a server: one ``Redactor`` for
discovery and the gateway.

A server may echo what it was sent (a header, an environment variable), on
purpose or by accident, in an error, a result or its stderr. Before such text
is shown to anyone (a Skill's status, an agent, a log, the audit trail), every
secret value is replaced by ``[redacted]``, in each form it is likely to be
carried in, letters in any case:

* as is, and without its scheme (``Bearer <token>`` -> ``<token>``; for
  ``Basic``, the decoded ``user:password`` too);
* inside a JSON string, each character as it is or escaped in any way JSON
  allows (``\\"``, ``\\\\``, ``\\/`` as PHP writes it, ``\\u00XX`` as .NET
  writes ``+``), and a JSON string inside JSON text inside a JSON string
  (escaped twice, as Python writes it);
* URL-encoded, each character as it is or as ``%XX`` (``+`` for a space): the
  whole value, the value with ``/`` kept (path style) or any other mix;
* base64 (standard and URL-safe alphabet, padded or not), also where the value
  sits inside a longer base64 text (the characters that depend only on the
  value, at each of the three alignments);
* split across neighbouring parts (``texts``), such as two text items of one
  result.

Not caught, because no list of forms can be complete: other transformations
(hex, reversed, compressed, encrypted, base64 broken into lines), a part of a
value shown alone (one cookie of a ``Cookie`` header), and a value split across
separate messages, fields of structured data or lines of a log.
docs/security.md says so too.

Values shorter than ``MIN_SECRET_LEN`` are not redacted: a value ``1`` would
erase every digit, and is no secret worth the name.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any, Final, NamedTuple

from skillop.sources.mcp_discovery import MAX_DETAIL_LEN, one_line

__all__ = ["MIN_SECRET_LEN", "REDACTED", "Redactor"]

MIN_SECRET_LEN: Final = 4
REDACTED: Final = "[redacted]"


class Redactor:
    """Replaces every form of the given secret values; see the module docstring."""

    def __init__(self, values: Iterable[str]) -> None:
        forms: set[_Form] = set()
        for value in values:
            if len(value) >= MIN_SECRET_LEN:
                forms.update(_forms(value))
        # Longest first, so a form containing another is removed whole.
        kept = sorted((f for f in forms if f.least >= MIN_SECRET_LEN),
                      key=lambda f: (-f.least, f.pattern))
        # A match starts only at a character some form starts with: the lookahead
        # lets the engine skip every other position at once (about 3x faster).
        starts = "".join(sorted({c for f in kept for c in f.starts}))
        self._pattern = (re.compile(f"(?=[{re.escape(starts)}])(?:"
                                    f"{'|'.join(f.pattern for f in kept)})") if kept else None)

    def __bool__(self) -> bool:
        return self._pattern is not None

    def __call__(self, text: str) -> str:
        """``text`` with every form of every value replaced (not shortened)."""
        if self._pattern is None:
            return text
        return self._pattern.sub(REDACTED, text)

    def json(self, value: Any) -> Any:
        """``value`` (JSON data) with every string in it, keys too, redacted."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self(value)
        if isinstance(value, list):
            return [self.json(v) for v in value]
        if isinstance(value, dict):
            return {self(k): self.json(v) for k, v in value.items()}
        return value

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


class _Form(NamedTuple):
    pattern: str
    #: The fewest characters it matches.
    least: int
    #: The characters a match can start with.
    starts: str


def _literal(text: str) -> _Form:
    return _Form(re.escape(text), len(text), text[0])


def _forms(value: str) -> set[_Form]:
    bases = {value}
    scheme, _, rest = value.partition(" ")
    rest = rest.strip()
    if scheme and rest:
        bases.add(rest)  # the credential without its scheme (Bearer, Basic, Token)
        if scheme.lower() == "basic":
            bases.update(_decoded_basic(rest))
    forms: set[_Form] = set()
    for base in bases:
        if base:
            forms.add(_any_escape(base))
        forms.update(_literal(text) for text in _escaped_twice(base) if text)
        forms.update(_literal(text) for text in _base64_forms(base.encode()) if text)
    return forms


def _any_escape(text: str) -> _Form:
    """``text`` with each character as it is, JSON-escaped in any way JSON allows,
    or percent-encoded, letters in any case (the other forms are matched as they
    are: base64 in another case is another value)."""
    first = text[0]
    return _Form(f"(?i:{''.join(_char_forms(char) for char in text)})", len(text),
                 "%\\+" + first + first.lower() + first.upper())


def _char_forms(char: str) -> str:
    forms = [re.escape(char)]
    forms.append(re.escape("".join(f"%{byte:02x}" for byte in char.encode())))
    if char == " ":
        forms.append(re.escape("+"))
    units = char.encode("utf-16-be")  # one \uXXXX, or a surrogate pair
    forms.append(re.escape("".join(f"\\u{int.from_bytes(units[i:i + 2]):04x}"
                                   for i in range(0, len(units), 2))))
    if char in _JSON_SHORT:
        forms.append(re.escape(_JSON_SHORT[char]))
    return f"(?:{'|'.join(forms)})"


#: JSON's two-character escapes (``\\/`` is optional: PHP writes it by default).
_JSON_SHORT: Final = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f",
                      "\n": "\\n", "\r": "\\r", "\t": "\\t"}


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


def _escaped_twice(text: str) -> set[str]:
    """``text`` inside JSON text inside a JSON string, as Python's encoder writes it
    (one level of escaping in any form is ``_any_escape``'s)."""
    once = {json.dumps(text, ensure_ascii=ascii)[1:-1] for ascii in (False, True)}
    return {json.dumps(t, ensure_ascii=ascii)[1:-1] for t in once for ascii in (False, True)}


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
