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
