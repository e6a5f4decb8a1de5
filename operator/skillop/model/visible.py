"""Text made safe to show a person: every character that could hide, reorder or
forge what they read, escaped.

Apart from the models (no pydantic here): every line the CLI prints goes
through ``visible`` (``cli.safetext``), so importing it must cost the CLI's
start-up nothing; the approval requests and the gateway's approval prompt use
the same function (docs/security.md, Text shown to a person).
"""

from __future__ import annotations

import re
from typing import Final

#: Characters printable by Python's reckoning that still show nothing or blank
#: (combining grapheme joiner, variation selectors, Mongolian variation selectors,
#: Hangul fillers, braille blank): they can pad or split a word unseen.
_BLANK: Final = re.compile("[\u034f\u115f\u1160\u180b-\u180f\u2800\u3164\ufe00-\ufe0f"
                           "\uffa0\U000e0100-\U000e01ef]")


def visible(text: str) -> str:
    """``text`` with every character that could hide, reorder or forge what a person
    reads escaped as ``\\uXXXX`` (``\\UXXXXXXXX`` beyond the BMP): controls (C0, DEL,
    C1, so ESC and every terminal sequence it starts), format characters (bidi
    embeddings, overrides and isolates, marks, zero-width ones, tag characters),
    line and paragraph separators, spaces other than the ASCII one, surrogates,
    private-use and unassigned code points, and the blank ones ``_BLANK`` lists.
    The same function guards approval requests, approval prompts and every table
    and line the CLI prints (docs/security.md, Text shown to a person)."""
    if text.isprintable() and _BLANK.search(text) is None:
        return text
    return "".join(_escaped(ch) if not ch.isprintable() or _BLANK.match(ch) else ch
                   for ch in text)


def _escaped(ch: str) -> str:
    code = ord(ch)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
