"""Token counts only where something reads them: resolving for problems alone
(``skillop validate``) without a ``maxToolTokens`` counts nothing, and decides the
ToolSet's size from an upper bound of the counts (``resolve.limits``)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st
from skillkit import actor, anon, catalog, noise, resolve_actor, skill

from skillop.model import problems as P
from skillop.model.toolset import MAX_CONFIGMAP_BYTES
from skillop.resolve import tokens
from skillop.resolve.layout import configmap_data, data_size
from skillop.resolve.resolver import Resolution, Resolver
from skillop.resolve.tokens import count_tokens, token_bound, tool_tokens

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}


def _docs(description: str = "Reads a file.", **policy: object) -> list[dict[str, object]]:
    return [skill("s", anonymousTools=[anon("read", description=description,
                                            inputSchema=SCHEMA),
                                       anon("write", description="Writes a file.")]),
            actor("a", skills=["s"], skillAccessPolicy=policy)]


def _refuse_counting(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a fresh process: no tokenizer loaded, and any count fails the test."""
    def refused(text: str) -> int:
        raise AssertionError(f"counted {text[:40]!r}")

    tokens.encoding_counter.cache_clear()
    monkeypatch.setattr(tokens, "count_tokens", refused)


def test_problems_alone_count_no_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    _refuse_counting(monkeypatch)
    assert Resolver(catalog(_docs())).all_problems() == []
    assert not tokens.counting()


def test_a_token_budget_still_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    tokens.encoding_counter.cache_clear()
    problems = Resolver(catalog(_docs(maxToolTokens=5))).all_problems()
    assert [p.reason for p in problems] == [P.TOO_MANY_TOOL_TOKENS]
    assert tokens.counting()


def _full(edge: str) -> list[dict[str, object]]:
    """Noise tools that nearly fill one ConfigMap, and one whose description is ``edge``."""
    made = [anon(f"tool{i:03d}", description=noise(f"t{i}", 4000)) for i in range(214)]
    return [skill("s", anonymousTools=[*made, anon("edge", description=edge)]),
            actor("a", skills=["s"])]


def _size(edge: str) -> tuple[int, Resolution]:
    resolution = resolve_actor(_full(edge), "team-a/a")
    return data_size(configmap_data(resolution.text, resolution.tools)), resolution


def test_a_set_at_the_configmap_limit_is_sized_with_its_real_counts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A set that fills one ConfigMap to the byte: with an upper bound for its
    # counts it would not fit, so the bound cannot decide; the counts are made and
    # the set is found to fit, as ever.
    size, counted = _size("")
    edge = ""
    for _ in range(10):
        gap = MAX_CONFIGMAP_BYTES - size
        if not gap:
            break
        edge = edge + "x" * gap if gap > 0 else edge[:gap]
        size, counted = _size(edge)
    assert size == MAX_CONFIGMAP_BYTES
    bounded = [t.bounded() for t in counted.tools]
    assert sum(t.tokens for t in bounded) > 2 * counted.tokens
    counts: list[str] = []
    monkeypatch.setattr(tokens, "count_tokens",
                        lambda text: counts.append(text) or count_tokens(text))
    tokens.encoding_counter.cache_clear()
    again = resolve_actor(_full(edge), "team-a/a")
    assert again.problems == () and "edge" in counts
    assert (again.text, again.hash) == (counted.text, counted.hash)


@given(st.text(st.characters(codec=None, exclude_categories=())),
       st.text(st.characters(codec=None, exclude_categories=())))
def test_the_bound_is_never_below_the_count(name: str, description: str) -> None:
    # Lone surrogates included: JSON may carry them, and they are counted as U+FFFD.
    tool = dataclasses.replace(resolve_actor(_docs(), "team-a/a").tools[0].entry.tool,
                               description=description)
    assert token_bound(name, tool) >= tool_tokens(name, tool)
    assert token_bound(name, tool) >= count_tokens(name) + count_tokens(description)
