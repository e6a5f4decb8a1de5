"""Pages of a listing sent as an event stream: a cursor names a page of one set."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from skillop.gateway.listing import cursor_of as _cursor
from skillop.gateway.listing import page_of as _page_of

HASH = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32
STARTS = (0, 120, 260, 400)


def test_each_cursor_names_its_page_of_its_set_only() -> None:
    assert _page_of(None, HASH, STARTS) == 0
    for page in (1, 2, 3):
        assert _page_of(_cursor(HASH, page), HASH, STARTS) == page
        assert _page_of(_cursor(HASH, page), OTHER, STARTS) is None  # after a reload
    assert _page_of(_cursor(HASH, 4), HASH, STARTS) is None  # past the last page
    assert _page_of(_cursor(HASH, 0), HASH, STARTS) is None  # the first has no cursor


@given(st.text(max_size=40))
def test_any_other_cursor_names_no_page(cursor: str) -> None:
    valid = {_cursor(HASH, page) for page in (1, 2, 3)}
    found = _page_of(cursor, HASH, STARTS)
    assert found is None if cursor not in valid else found in (1, 2, 3)


def test_digits_that_are_not_ascii_are_no_page() -> None:
    prefix = _cursor(HASH, 1).partition(".")[0]
    assert _page_of(f"{prefix}.\u00b2", HASH, STARTS) is None
    assert _page_of(f"{prefix}.{'9' * 5000}", HASH, STARTS) is None
    assert _page_of(f"{prefix}.01", HASH, STARTS) is None  # one spelling per page
