"""gateway/ranker.py: the trees on top of the linear score, and how they are written
(bench/disclosure_cv.py) and fitted (bench/fusion_boost.py)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from searchkit import FOUR_TOOLS
from tests.benchload import BENCH, bench_module

from skillop.gateway import fusion_trees
from skillop.gateway.fusion import FEATURES, Evidence, ToolTerms, features, scored
from skillop.gateway.ranker import FOREST, Forest, ranked_scores, reordered
from skillop.gateway.search import query_terms

np = pytest.importorskip("numpy")

_VALUES = st.floats(min_value=-2, max_value=2, width=32)


@st.composite
def forests(draw: st.DrawFn, *, depth: int | None = None) -> Forest:
    depth = draw(st.integers(1, 3)) if depth is None else depth
    count = draw(st.integers(1, 5))
    splits = tuple(tuple((draw(st.sampled_from([*FEATURES, "not_a_feature"])), draw(_VALUES))
                         for _ in range(depth)) for _ in range(count))
    leaves = tuple(tuple(draw(st.lists(_VALUES, min_size=1 << depth, max_size=1 << depth)))
                   for _ in range(count))
    return Forest(splits, leaves)


def walked(forest: Forest, row: list[float]) -> float:
    """One row's score, each tree walked level by level (what ``score`` vectorises)."""
    total = 0.0
    for splits, leaves in zip(forest.splits, forest.leaves, strict=True):
        leaf = 0
        for name, threshold in splits:
            value = row[FEATURES.index(name)] if name in FEATURES else 0.0
            leaf = 2 * leaf + int(np.float32(value) > np.float32(threshold))
        total += float(np.float32(leaves[leaf]))
    return total


_ROWS = st.integers(0, 6).flatmap(lambda n: st.lists(
    st.lists(_VALUES, min_size=len(FEATURES), max_size=len(FEATURES)), min_size=n, max_size=n))


@settings(max_examples=200, deadline=None)
@given(forests(), _ROWS)
def test_the_vectorised_score_is_each_tree_walked(forest: Forest, rows: list[list[float]],
                                                  ) -> None:
    matrix = np.asarray(rows, dtype=np.float32).reshape(len(rows), len(FEATURES))
    got = forest.score(matrix).tolist()
    assert got == pytest.approx([walked(forest, row) for row in rows], abs=1e-4)


@settings(max_examples=200, deadline=None)
@given(forests(), _ROWS, st.data())
def test_a_reorder_never_adds_or_drops_a_candidate(forest: Forest, rows: list[list[float]],
                                                   data: st.DataObject) -> None:
    matrix = np.asarray(rows, dtype=np.float32).reshape(len(rows), len(FEATURES))
    candidates = data.draw(st.permutations(range(100, 100 + len(rows))))
    assert sorted(reordered(candidates, matrix, forest=forest)) == sorted(candidates)
    assert sorted(reordered(candidates, matrix)) == sorted(candidates)


def test_without_trees_the_order_is_the_linear_score_s() -> None:
    rows = np.asarray([[0.1] * len(FEATURES), [0.9] * len(FEATURES)], dtype=np.float32)
    assert ranked_scores(rows, forest=Forest()).tolist() == scored(rows).tolist()
    assert reordered([7, 8], rows, weights={"blend": -1.0}, forest=Forest()) == [7, 8]
    assert reordered([7, 8], rows, weights={"blend": 1.0}, forest=Forest()) == [8, 7]


def test_a_tree_orders_by_an_interaction_the_linear_score_cannot() -> None:
    """Up only when the query names the service and the verb agrees, both at once."""
    both = Forest(((("skill_named", 0.5), ("verb_agrees", 0.5)),), ((0.0, 0.0, 0.0, 1.0),))
    rows = np.zeros((3, len(FEATURES)), dtype=np.float32)
    rows[0, FEATURES.index("skill_named")] = 1.0
    rows[1, FEATURES.index("verb_agrees")] = 1.0
    rows[2, [FEATURES.index("skill_named"), FEATURES.index("verb_agrees")]] = 1.0
    assert reordered([0, 1, 2], rows, weights={}, forest=both) == [2, 0, 1]


def test_the_committed_trees_are_of_one_depth_and_name_known_features() -> None:
    assert len(FOREST.splits) == len(FOREST.leaves)
    depths = {len(tree) for tree in FOREST.splits}
    assert len(depths) <= 1
    for tree, leaves in zip(FOREST.splits, FOREST.leaves, strict=True):
        assert {name for name, _ in tree} <= set(FEATURES)
        assert len(leaves) == 1 << len(tree)


@pytest.fixture(scope="module")
def cv() -> Iterator[ModuleType]:
    """bench/disclosure_cv.py, which imports its neighbours by their names."""
    sys.path.insert(0, str(BENCH))
    try:
        yield bench_module("disclosure_cv")
    finally:
        sys.path.remove(str(BENCH))


@settings(max_examples=50, deadline=None)
@given(forests(depth=3))
def test_the_written_trees_score_as_the_fitted_ones(
        tmp_path_factory: pytest.TempPathFactory, cv: ModuleType, forest: Forest) -> None:
    """The generated file (bench/disclosure_cv.py's writer) reads back as the same
    trees, to the six decimals the leaves are fitted at."""
    path = tmp_path_factory.mktemp("trees") / "fusion_trees.py"
    path.write_text(Path(fusion_trees.__file__).read_text())
    cv.TREES_FILE = path
    rounded = Forest(forest.splits, tuple(tuple(round(v, 6) for v in leaves)
                                          for leaves in forest.leaves))
    cv.write_trees(rounded)
    spec = importlib.util.spec_from_file_location("written_trees", path)
    assert spec is not None and spec.loader is not None
    written = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(written)
    rows = np.random.default_rng(0).uniform(-2, 2, (64, len(FEATURES))).astype(np.float32)
    again = Forest(written.SPLITS, written.LEAVES)
    assert again.score(rows).tolist() == rounded.score(rows).tolist()


def test_the_fit_is_deterministic_and_learns_an_interaction() -> None:
    """Relevant exactly when two features are both set: the trees put those first."""
    boost = bench_module("fusion_boost")
    rng = np.random.default_rng(1)
    rows = (rng.uniform(size=(200, 10, len(FEATURES))) > 0.5).astype(np.float32)
    a, b = FEATURES.index("skill_named"), FEATURES.index("verb_agrees")
    positive = (rows[:, :, a] * rows[:, :, b]) > 0
    base = np.zeros(positive.shape)
    fitted = boost.boosted(rows, positive, base, trees=20, depth=2)
    assert fitted == boost.boosted(rows, positive, base, trees=20, depth=2)
    scores = fitted.score(rows.reshape(-1, len(FEATURES))).reshape(positive.shape)
    best = scores.argmax(axis=1)
    has = positive.any(axis=1)
    assert positive[np.arange(len(best)), best][has].all()


TOOLS = FOUR_TOOLS


@settings(max_examples=100, deadline=None)
@given(forests(), st.lists(st.floats(-1, 1, width=32), min_size=4, max_size=4),
       st.sets(st.integers(0, 3), max_size=2),
       st.lists(st.floats(-5, 5, width=32), min_size=4, max_size=4))
def test_hidden_tools_never_change_the_order(forest: Forest, blended: list[float],
                                             hidden: set[int], other: list[float]) -> None:
    """However a hidden tool scores, the candidates' order is the same."""
    words = [ToolTerms.of(tool) for tool in TOOLS]
    vectors = np.eye(4, 8, dtype=np.float32)
    shown = [n for n in range(4) if n not in hidden]

    def order(hidden_scores: list[float]) -> list[int]:
        values = np.asarray([s if n in shown else hidden_scores[n]
                             for n, s in enumerate(blended)], dtype=np.float32)
        found = Evidence(np.where(np.isin(np.arange(4), shown), values, -np.inf)
                         .astype(np.float32), values, values, np.abs(values), vectors)
        query = "create an issue on GitHub"
        rows = features(query, query_terms(query), {"creat": 1.0}, found, shown, TOOLS,
                        words, ["github"])
        return reordered(shown, rows, forest=forest)

    assert order(other) == order([-s for s in other])
