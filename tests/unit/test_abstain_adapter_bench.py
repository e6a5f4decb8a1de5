"""bench/abstain_adapter.py (abstain_cv.py ``--adapter-folds``): the checks asked on the
adapted ranking and on the model's own, and how the two verdicts combine."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from searchkit import documents

from benchload import BENCH, bench_module

np = pytest.importorskip("numpy")

WIDTH = 8
#: A set that can only post messages (three tools near the query's own vector) and one
#: that deletes them (where the adapter moves the query).
_TOOLS = documents(("chat", "post_message", "Post a message to a channel."),
                   ("chat", "post_reply", "Post a reply in a thread."),
                   ("chat", "post_notice", "Post a notice to everyone."),
                   ("chat", "delete_message", "Delete a message from a channel."))


@pytest.fixture(scope="module")
def folds() -> Iterator[ModuleType]:
    # The module reads its neighbours (adapter_fit, abstain_cv) as a script does.
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCH))
        yield bench_module("abstain_adapter")


def _axis(n: int) -> Any:
    return np.eye(WIDTH, dtype=np.float32)[n]


def _index(folds: ModuleType, adapt: Any) -> Any:
    vectors = np.stack([_axis(0), _axis(0), _axis(0), _axis(1)])
    index = folds.TwoRankings(_TOOLS)
    index.attach_vectors(vectors, lambda _: _axis(0), adapt=adapt)
    return index


def _verdicts(folds: ModuleType, index: Any, query: str) -> tuple[bool, bool, float]:
    rows = list(folds.verdicts(index, [("set", "none", query, set())], None))
    assert len(rows) == 1
    on, off, level = rows[0]
    return bool(on), bool(off), float(level)


def test_the_checks_read_each_ranking_and_the_answer_stays_adapted(folds: ModuleType) -> None:
    index = _index(folds, lambda _: _axis(1))  # the adapter moves the query to deleting
    on, off, _ = _verdicts(folds, index, "delete a message")
    # Adapted, the closest tool deletes; on the model's own vector the three closest
    # only post: the raw ranking's checks say nothing fits.
    assert (on, off) == (False, True)
    assert index.find("delete a message", limit=1).matches[0][0] == "chat/delete_message"


def test_without_an_adapter_the_two_rankings_agree(folds: ModuleType) -> None:
    index = _index(folds, lambda vector: vector)
    for query in ("delete a message", "post a message", "archive the channel", "messages"):
        on, off, _ = _verdicts(folds, index, query)
        assert on == off


def test_the_variants_combine_the_two_verdicts(folds: ModuleType) -> None:
    on, off = np.array([True, True, False, False]), np.array([True, False, True, False])
    variants = folds.combined(on, off)
    assert variants["adapted"].tolist() == on.tolist()
    assert variants["raw"].tolist() == off.tolist()
    assert variants["both"].tolist() == [True, False, False, False]
    assert variants["either"].tolist() == [True, True, True, False]
