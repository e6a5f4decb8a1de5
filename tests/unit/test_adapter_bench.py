"""The query adapter's fit and the servers' split of bench/adapter_cv.py (bench/adapter_fit.py):
that it learns a style shared by every query, that it reproduces, and that the tools a
held-out group's queries ask for are never among those it was fitted on."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from benchload import bench_module

fitting = bench_module("adapter_fit")


def _unit(rows: Any) -> Any:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _styled(seed: int) -> tuple[Any, Any, Any]:
    """Tools, and one query per tool: the tool's vector moved by one shared offset (a
    style) and noise; positive: the query's own tool."""
    rng = np.random.default_rng(seed)
    tools = _unit(rng.normal(size=(60, 24)))
    style = 1.2 * _unit(rng.normal(size=(1, 24)))
    queries = _unit(tools + style + 0.25 * rng.normal(size=tools.shape))
    return tools, queries, np.eye(len(tools))


def _top1(queries: Any, tools: Any, first: int, a: Any = None, b: Any = None) -> float:
    """The share of ``queries`` (those of the tools from ``first`` on) whose own tool
    is the closest of ``tools``."""
    moved = queries if a is None else np.stack([fitting.adapted(q, a, b) for q in queries])
    found = np.argmax(moved @ tools.T, axis=1)
    return float(np.mean(found == first + np.arange(len(queries))))


def test_a_style_every_query_shares_is_learnt_on_some_tools_and_helps_the_others() -> None:
    tools, queries, positive = _styled(3)
    settings = fitting.Settings(rank=4, penalty=0.1, temperature=10.0, steps=300, rate=0.02)
    # Fitted on the first 40 tools and their queries only, judged on the other 20's
    # queries among all 60 tools.
    a, b = fitting.fit_adapter(queries[:40], positive[:40, :40], tools[:40], settings)
    assert _top1(queries[40:], tools, 40, a, b) > _top1(queries[40:], tools, 40) + 0.1


def test_the_same_queries_give_the_same_weights() -> None:
    tools, queries, positive = _styled(5)
    settings = fitting.Settings(rank=2, penalty=0.01, temperature=10.0, steps=20)
    first = fitting.fit_adapter(queries, positive, tools, settings)
    again = fitting.fit_adapter(queries, positive, tools, settings)
    assert all(np.array_equal(x, y) for x, y in zip(first, again, strict=True))


def test_an_adapted_vector_is_a_unit_vector_and_no_weights_leave_it_as_it_is() -> None:
    vector = _unit(np.arange(1.0, 9.0)[None, :])[0]
    rng = np.random.default_rng(0)
    moved = fitting.adapted(vector, rng.normal(size=(2, 8)), rng.normal(size=(8, 2)))
    assert abs(float(np.linalg.norm(moved)) - 1.0) < 1e-6
    unchanged = fitting.adapted(vector, np.zeros((2, 8)), np.zeros((8, 2)))
    assert np.allclose(unchanged, vector, atol=1e-6)


servers = st.lists(st.text(alphabet="abcdefgh", min_size=1, max_size=4), min_size=2,
                   max_size=12, unique=True)


@given(servers=servers, groups=st.integers(min_value=2, max_value=6), data=st.data())
def test_a_held_out_groups_queries_are_never_fitted_on(servers: list[str], groups: int,
                                                       data: st.DataObject) -> None:
    labels = frozenset(data.draw(st.lists(
        st.sampled_from(servers).map(lambda server: f"{server}/tool"), min_size=1,
        max_size=4)))
    splits = fitting.server_splits(servers, groups)
    held = [name for name, (outside, inside) in splits if inside(labels)]
    fitted_on = [name for name, (outside, inside) in splits if outside(labels)]
    assert not set(held) & set(fitted_on)
    assert len(held) <= 1  # a query is judged in one fold at most
    # Every server is held out exactly once, in one group.
    names = [name.split("+") for name, _ in splits if name]
    assert sorted(s for group in names for s in group) == sorted(servers[:groups * len(servers)])
