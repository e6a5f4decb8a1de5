"""The one Redactor (discovery and the gateway): every form a value is carried in."""

from __future__ import annotations

import base64
import json
from urllib.parse import quote

from hypothesis import given
from hypothesis import strategies as st

from skillop.sources.redaction import REDACTED, Redactor

secrets = st.text(st.characters(blacklist_categories=("Cs",)), min_size=4, max_size=40)
around = st.text(max_size=30)


@given(secrets, around, around)
def test_a_value_is_gone_whatever_surrounds_it(value: str, before: str, after: str) -> None:
    redact = Redactor([value])
    for form in (value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=True)[1:-1],
                 quote(value, safe="")):
        assert form not in redact(before + form + after)


@given(st.binary(min_size=6, max_size=40).map(lambda b: base64.b64encode(b).decode()),
       st.binary(max_size=5), st.binary(max_size=5))
def test_base64_of_a_value_inside_longer_base64_is_caught(value: str, before: bytes,
                                                           after: bytes) -> None:
    text = base64.b64encode(before + value.encode() + after).decode()
    redacted = Redactor([value])(text)
    assert REDACTED in redacted
    # What is left is the encoding of what surrounds the value, and a character or
    # two at each end of it.
    assert len(redacted.replace(REDACTED, "")) <= (len(before) + len(after)) * 4 // 3 + 8


def test_scheme_basic_credentials_and_short_values() -> None:
    basic = "Basic " + base64.b64encode(b"alice:hunter22").decode()
    redact = Redactor(["Bearer abcdefgh12345678", basic, "1"])
    assert redact("token abcdefgh12345678 used") == f"token {REDACTED} used"
    assert redact("user alice:hunter22, password hunter22") == (
        f"user {REDACTED}, password {REDACTED}")
    assert redact("version 1.1") == "version 1.1"  # too short to be a secret


def test_a_bound_never_cuts_a_value_before_it_is_redacted() -> None:
    redact = Redactor(["Bearer abcdefghijklmnopqrstuvwx"])
    line = redact.line("p" * 170 + " Bearer abcdefghijklmnopqrstuvwx", 200)
    assert "abcd" not in line and len(line) <= 200


def test_a_value_split_across_parts_is_removed_from_each() -> None:
    value = "s3cr3t-value-0123456789"
    parts = Redactor([value]).texts(["head " + value[:9], value[9:] + " tail"])
    assert parts == [f"head {REDACTED}", f"{REDACTED} tail"]


def _escaped_char(char: str, how: int) -> str:
    """``char`` as one encoder or another writes it (``how`` picks the form)."""
    units = char.encode("utf-16-be")
    json_escape = "".join(f"\\u{int.from_bytes(units[i:i + 2]):04X}"
                          for i in range(0, len(units), 2))
    forms = [char, json_escape, json_escape.lower(),
             "".join(f"%{b:02X}" for b in char.encode()),
             "".join(f"%{b:02x}" for b in char.encode())]
    if char == "/":
        forms.append("\\/")  # PHP's json_encode
    if char in '"\\':
        forms.append("\\" + char)
    return forms[how % len(forms)]


@given(secrets, st.lists(st.integers(0, 9), min_size=40, max_size=40), around, around)
def test_a_value_is_gone_whatever_mix_of_escapes_writes_it(
        value: str, hows: list[int], before: str, after: str) -> None:
    # PHP writes / as \/, .NET writes + as \u002B, a path-style encoder keeps /: any
    # character of a value may be escaped one way or another, or not at all.
    written = "".join(_escaped_char(char, how) for char, how in zip(value, hows, strict=False))
    redacted = Redactor([value])(before + written + after)
    assert written not in redacted and REDACTED in redacted


@given(secrets.filter(lambda v: v.upper() != v or v.lower() != v), around, around)
def test_a_value_is_gone_in_another_case(value: str, before: str, after: str) -> None:
    # An SDK or an HTTP stack that lowercases a header value it quotes.
    for changed in (value.lower(), value.upper(), value.swapcase()):
        if len(changed) == len(value):
            assert changed not in Redactor([value])(before + changed + after)


def test_php_and_dotnet_json_of_a_key_is_caught() -> None:
    key = "k3y/With+Slash=Mixed/Case9"
    redact = Redactor([key])
    assert redact('{"key": "k3y\\/With+Slash=Mixed\\/Case9"}') == f'{{"key": "{REDACTED}"}}'
    assert redact('{"key": "k3y/With\\u002BSlash\\u003DMixed/Case9"}') == (
        f'{{"key": "{REDACTED}"}}')
    assert redact("/callback/k3y/With%2BSlash%3DMixed/Case9?x=1") == f"/callback/{REDACTED}?x=1"
