"""The learned query adapter (gateway/adapter.py): its shipped weights, how it moves a
query's vector, and that the search ranks by the moved vector while the abstention
reads the query's own, hidden tools counting for nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skillop.gateway import adapter_weights
from skillop.gateway.adapter import adapted, decoded, encoded, packaged, unadapted
from skillop.gateway.search import Document, SearchIndex

np = pytest.importorskip("numpy")

WIDTH = 8


def _unit(rows: Any) -> Any:
    return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)


@given(st.lists(st.floats(min_value=-60000, max_value=60000, width=16), min_size=6,
                max_size=6))
def test_weights_read_back_as_they_were_written(values: list[float]) -> None:
    matrix = np.asarray(values, dtype=np.float32).reshape(2, 3)
    assert np.array_equal(decoded(encoded(matrix), (2, 3)), matrix)


def test_the_shipped_weights_are_small_and_the_file_is_what_they_write() -> None:
    weights = packaged()
    assert weights is not None, "adapter_weights.py holds no adapter"
    a, b = weights
    assert 1 <= adapter_weights.RANK <= 64
    assert a.shape == (adapter_weights.RANK, adapter_weights.WIDTH) == b.T.shape
    assert Path(adapter_weights.__file__).stat().st_size < 200_000
    # Written again from the matrices it holds, the file's text is the same.
    for name, matrix in (("A", a), ("B", b)):
        assert encoded(matrix) == "".join(getattr(adapter_weights, name).split())


def test_an_adapted_vector_is_a_unit_vector_moved_and_another_width_is_left_alone() -> None:
    vector = _unit(np.random.default_rng(1).normal(size=adapter_weights.WIDTH))
    moved = adapted(vector)
    assert abs(float(np.linalg.norm(moved)) - 1.0) < 1e-5
    assert float(moved @ vector) < 0.9999
    other = _unit(np.ones(WIDTH))
    assert adapted(other) is other
    assert unadapted(vector) is vector


def _index(vectors: Any, adapt: Any = adapted) -> tuple[SearchIndex, Any]:
    docs = [Document(f"s/t{n}", f"tool_{n}", description=f"does thing {n}")
            for n in range(len(vectors))]
    query = _unit(np.random.default_rng(7).normal(size=WIDTH))
    index = SearchIndex(docs)
    index.attach_vectors(vectors, lambda _: query, adapt=adapt)
    return index, query


def _moved(vector: Any) -> Any:
    """A fixed adapter of the tests' width: the vector turned towards its last axis."""
    return _unit(vector + np.eye(WIDTH, dtype=np.float32)[-1] * 2 * abs(float(vector[0])))


def test_the_ranking_reads_the_adapted_vector_and_the_abstention_the_querys_own() -> None:
    vectors = _unit(np.random.default_rng(3).normal(size=(12, WIDTH)))
    index, query = _index(vectors, _moved)
    found = index.find("anything at all", limit=12)
    assert found.confidence == pytest.approx(float((vectors @ query).max()), abs=1e-6)
    evidence, cosines = index._evidence("anything at all", {})
    assert np.allclose(cosines, vectors @ query, atol=1e-6)
    assert np.allclose(evidence.ranked, vectors @ _moved(query), atol=1e-6)
    plain, _ = _index(vectors, unadapted)
    assert np.allclose(plain._evidence("anything at all", {})[0].ranked, cosines, atol=1e-6)


@given(st.integers(min_value=0, max_value=2**32 - 1), st.sets(st.integers(0, 11), max_size=6))
def test_hidden_tools_never_change_an_answer(seed: int, hidden: set[int]) -> None:
    rng = np.random.default_rng(seed)
    vectors = _unit(rng.normal(size=(12, WIDTH)))
    keys = {f"s/t{n}" for n in hidden}
    first, _ = _index(vectors, _moved)
    changed = vectors.copy()
    changed[sorted(hidden)] = _unit(rng.normal(size=(len(hidden), WIDTH)))
    second, _ = _index(changed, _moved)
    a = first.find("do the thing", limit=5, hidden=keys)
    b = second.find("do the thing", limit=5, hidden=keys)
    assert a == b
    assert not keys & {key for key, _ in a.matches}
