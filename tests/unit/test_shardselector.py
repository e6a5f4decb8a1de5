"""The shard's namespace label selector (``SKILLOP_SHARD_SELECTOR``): parsed as
kubectl's ``-l`` reads equality-based selectors, refused in one line otherwise."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skillop.model.settings import SHARD_SELECTOR, SettingsError
from skillop.model.shardselector import LabelSelector, Requirement

_KEYS = st.from_regex(r"([a-z]([a-z0-9.-]{0,10}[a-z0-9])?/)?[A-Za-z]([A-Za-z0-9_.-]{0,8}"
                      r"[A-Za-z0-9])?", fullmatch=True)
_VALUES = st.from_regex(r"([A-Za-z0-9]([A-Za-z0-9_.-]{0,8}[A-Za-z0-9])?)?", fullmatch=True)
_REQUIREMENTS = st.one_of(
    st.builds(Requirement, _KEYS, st.sampled_from(["=", "!="]), _VALUES),
    st.builds(Requirement, _KEYS, st.sampled_from(["exists", "absent"])))


@given(st.lists(_REQUIREMENTS, max_size=4))
def test_what_it_prints_parses_back(requirements: list[Requirement]) -> None:
    selector = LabelSelector(tuple(requirements))
    assert LabelSelector.parse(str(selector)) == selector


@given(st.text(max_size=40))
def test_any_text_parses_or_is_one_clear_line(text: str) -> None:
    try:
        SHARD_SELECTOR.read({"SKILLOP_SHARD_SELECTOR": text})
    except SettingsError as err:
        assert str(err).startswith("SKILLOP_SHARD_SELECTOR: ") and "\n" not in str(err)


@pytest.mark.parametrize(("text", "labels", "matches"), [
    ("skillop.dev/shard=a", {"skillop.dev/shard": "a"}, True),
    ("skillop.dev/shard==a", {"skillop.dev/shard": "b"}, False),
    ("tier!=frozen", {}, True),
    ("tier!=frozen", {"tier": "frozen"}, False),
    ("team", {"team": ""}, True),
    ("!legacy,team", {"team": "x", "legacy": "y"}, False),
    (" a = b , c ", {"a": "b", "c": "d"}, True),
])
def test_requirements_hold_as_kubernetes_says(text: str, labels: dict[str, str],
                                              matches: bool) -> None:
    assert LabelSelector.parse(text).matches(labels) is matches


@pytest.mark.parametrize(("text", "words"), [
    ("a in (b,c)", "set-based requirements (in, notin) are not supported"),
    ("a=b,,c", "an empty requirement"),
    ("=b", "'' is not a label key"),
    ("a=b c", "'b c' is not a label value"),
])
def test_what_it_cannot_read_is_refused_by_name(text: str, words: str) -> None:
    with pytest.raises(SettingsError, match=r"^SKILLOP_SHARD_SELECTOR: ") as err:
        SHARD_SELECTOR.read({"SKILLOP_SHARD_SELECTOR": text})
    assert words in str(err.value)
