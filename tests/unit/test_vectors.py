"""search_tools' hybrid ranking without the model: the blend, abstention, and the
vectors computed once per text and cached by digest (gateway/search.py,
gateway/vectors.py). A counting stand-in encoder; the model itself is tested in
test_embedding.py and through the gateway in tests/gateway/test_disclosure.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from skillop.gateway.abstain_model import BAND, BAND_UNDER
from skillop.gateway.embedding import Unavailable
from skillop.gateway.search import (
    NAME_WEIGHT,
    SEMANTIC_WEIGHT,
    Document,
    SearchIndex,
    abstain_below,
)
from skillop.gateway.vectors import SemanticRanker, VectorCache, digest

np = pytest.importorskip("numpy", reason="the hybrid ranking needs numpy")

DOCS = [Document("elevation", "maps_elevation", description="Get elevation data for locations"),
        Document("post", "slack_post_message", description="Post a new message to a channel"),
        Document("read", "read_file", description="Read the contents of a file")]
#: Each text's vector: one axis per topic the stand-in knows.
TOPICS = ("elevation", "message", "file")


class Counting:
    """An encoder that puts a text on the axes of the topics it names; counts texts."""

    identity = "stand-in@1"
    dimension = len(TOPICS) + 1

    def __init__(self) -> None:
        self.read: list[str] = []

    def encode(self, texts: list[str], *, tokens: int = 64) -> Any:
        self.read += texts
        rows = np.array([[1.0 if t in text.lower() else 0.0 for t in TOPICS] + [0.1]
                         for text in texts], dtype=np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _ranker(cache: Path | None, encoder: Counting, said: list[str]) -> SemanticRanker:
    return SemanticRanker(cache, said.append, loader=lambda: encoder)  # type: ignore[arg-type,return-value]


def test_the_cosine_ranks_what_shares_no_word_and_a_far_query_is_weak() -> None:
    index = SearchIndex(DOCS)
    assert index.find("how high is Denver", limit=3).matches == ()  # no shared word
    _ranker(None, Counting(), []).prepare(index)
    # The stand-in reads "elevation" into the query: no word of it is in the set.
    found = index.find("how high above sea level (elevation)", limit=3)
    assert found.ranking == "hybrid" and found.matches[0][0] == "elevation"
    assert not found.weak and found.confidence is not None and found.confidence > 0.9
    far = index.find("book a flight", limit=3)
    assert far.weak and far.confidence is not None
    assert far.confidence < abstain_below("book a flight")
    assert len(far.matches) == 3  # the closest are still there, to show as weak
    # Lexical evidence still counts: both name a file, the one with the words wins.
    assert index.find("read the contents of a file", limit=1).matches[0][0] == "read"


def test_vectors_are_computed_once_per_text_and_a_restart_reads_the_cache(
        tmp_path: Path) -> None:
    encoder, said = Counting(), []
    _ranker(tmp_path, encoder, said).prepare(SearchIndex(DOCS))
    assert "6 texts read by the model, 0 from the cache" in said[-1]
    # Two texts a tool: what it does, and what it is called.
    assert sorted(encoder.read) == sorted([*(d.sentence() for d in DOCS),
                                           *(d.label() for d in DOCS)])
    first = _written(tmp_path)
    restarted = Counting()
    index = SearchIndex(DOCS)
    _ranker(tmp_path, restarted, said).prepare(index)
    assert restarted.read == [] and "0 texts read by the model, 6 from the cache" in said[-1]
    assert _written(tmp_path) == first  # an unchanged set is not written again
    assert index.find("elevation", limit=1).matches[0][0] == "elevation"
    restarted.read.clear()  # the query's own vector
    # A changed description is read again; the unchanged tools are not.
    changed = [*DOCS[:2], Document("read", "read_file", description="Read a file as text")]
    _ranker(tmp_path, restarted, said).prepare(SearchIndex(changed))
    assert restarted.read == [changed[2].sentence()]


def _written(directory: Path) -> tuple[int, int]:
    """The cache file's inode and modification time: a write replaces the file."""
    path = VectorCache(directory, Counting.identity).path
    assert path is not None
    stat = path.stat()
    return stat.st_ino, stat.st_mtime_ns


def test_an_unwritable_cache_keeps_the_vectors_in_memory_and_says_why(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    said: list[str] = []
    index = SearchIndex(DOCS)
    assert _ranker(blocked / "cache", Counting(), said).prepare(index)
    assert index.hybrid
    assert any("search vectors are not cached: cannot write" in line for line in said)


def test_a_corrupt_cache_file_is_computed_again(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path, Counting.identity)
    assert cache.path is not None
    cache.path.write_bytes(b"not an npz")
    encoder = Counting()
    _ranker(tmp_path, encoder, []).prepare(SearchIndex(DOCS))
    assert len(encoder.read) == 6
    assert VectorCache(tmp_path, Counting.identity).get(digest(DOCS[0].sentence())) is not None


def test_a_truncated_cache_file_is_computed_again_and_the_search_turns_hybrid(
        tmp_path: Path) -> None:
    _ranker(tmp_path, Counting(), []).prepare(SearchIndex(DOCS))
    path = VectorCache(tmp_path, Counting.identity).path
    assert path is not None
    path.write_bytes(path.read_bytes()[:100])  # a file cut short (disk full, a copy)
    encoder, index = Counting(), SearchIndex(DOCS)
    assert _ranker(tmp_path, encoder, []).prepare(index)
    assert len(encoder.read) == 6 and index.hybrid


@pytest.mark.parametrize("rows", [np.ones((3, 2), dtype=np.float32),  # another width
                                  np.ones(3, dtype=np.float32),  # not rows at all
                                  np.ones((3, 4), dtype=np.int32)])  # not float32
def test_cached_vectors_of_the_wrong_shape_are_computed_again(tmp_path: Path,
                                                              rows: Any) -> None:
    cache = VectorCache(tmp_path, Counting.identity)
    assert cache.path is not None
    keys = np.frombuffer(b"".join(digest(d.sentence()) for d in DOCS), dtype=np.uint8)
    np.savez(cache.path, digests=keys.reshape(-1, 32), vectors=rows)
    encoder, index = Counting(), SearchIndex(DOCS)
    assert _ranker(tmp_path, encoder, []).prepare(index)
    assert len(encoder.read) == 6
    assert index.find("elevation", limit=1).matches[0][0] == "elevation"
    restarted = Counting()  # the file was rewritten with the right vectors
    _ranker(tmp_path, restarted, []).prepare(SearchIndex(DOCS))
    assert restarted.read == []


@pytest.mark.parametrize(("query", "weak"), [
    ("book a flight to Lisbon", True),
    ("how high above sea level (elevation)", False),
    # Near misses: close to a tool (the stand-in's cosine is 1), an operation none does.
    ("delete the last message in the channel", True),
    ("please cancel the file upload", True),
    ("post a message to the channel", False),
    ("which messages are in the channel", False),
])
def test_whether_nothing_fits_does_not_depend_on_the_size_of_the_set(query: str,
                                                                     weak: bool) -> None:
    # 3 tools, then the same 3 among 600 renamed copies (an Actor of 600 tools).
    copies = [Document(f"{d.key}#{i}", d.name, description=d.description, skill=f"copy{i}")
              for i in range(200) for d in DOCS]
    for docs in (DOCS, [*DOCS, *copies]):
        index = SearchIndex(docs)
        _ranker(None, Counting(), []).prepare(index)
        assert index.find(query, limit=3).weak is weak


def test_a_repeated_query_is_read_by_the_model_once() -> None:
    encoder, index = Counting(), SearchIndex(DOCS)
    _ranker(None, encoder, []).prepare(index)
    encoder.read.clear()
    first = index.find("how high is it (elevation)", limit=2)
    again = index.find("how high is it (elevation)", limit=2)
    assert encoder.read == ["how high is it (elevation)"] and first == again
    index.find("post it (message)", limit=2)
    assert len(encoder.read) == 2


def test_without_a_model_the_index_stays_lexical_and_it_is_said_once() -> None:
    said: list[str] = []
    ranker = SemanticRanker(None, said.append, loader=lambda: Unavailable("numpy not installed"))
    first, second = SearchIndex(DOCS), SearchIndex(DOCS)
    assert not ranker.prepare(first) and not ranker.prepare(second)
    assert not first.hybrid and not second.hybrid
    # The background thread builds the lexical tables, model or not.
    assert first.built and second.built
    assert said == ["search_tools ranks lexically only (BM25): numpy not installed"]
    assert first.find("elevation data", limit=1).matches[0][0] == "elevation"


def test_vectors_must_match_the_documents() -> None:
    with pytest.raises(ValueError, match="2 vectors for 3 documents"):
        SearchIndex(DOCS).attach_vectors(np.zeros((2, 4), dtype=np.float32), lambda q: q)
    with pytest.raises(ValueError, match="4 vectors for 3 documents"):
        SearchIndex(DOCS).attach_vectors(np.zeros((3, 4), dtype=np.float32), lambda q: q,
                                         names=np.zeros((4, 4), dtype=np.float32))


def test_a_tool_s_name_vector_ranks_beside_its_text_s_but_does_not_decide_abstention(
        ) -> None:
    # Two tools whose texts are equally close to the query, whose names are not, and
    # which share no word with it (BM25 adds nothing).
    docs = [Document("a", "first_tool"), Document("b", "second_tool")]
    query = np.array([0.6, 0.0, 0.8], dtype=np.float32)
    texts = np.array([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]], dtype=np.float32)
    names = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=np.float32)
    alone = SearchIndex(docs)
    alone.attach_vectors(texts, lambda q: query)
    assert [key for key, _ in alone.find("zzz", limit=2).matches] == ["a", "b"]  # a tie
    index = SearchIndex(docs)
    index.attach_vectors(texts, lambda q: query, names=names)
    found = index.find("zzz", limit=2)
    assert [key for key, _ in found.matches] == ["b", "a"]
    (_, b), (_, a) = found.matches
    assert b - a == pytest.approx(SEMANTIC_WEIGHT * NAME_WEIGHT * 0.8)
    # The abstention reads the text's cosine, as its threshold was calibrated.
    assert found.confidence == pytest.approx(0.6)
    query[:] = [0.2, 0.0, 0.98]  # close to b's name, far from every text
    assert index.find("yyy", limit=2).weak


@settings(max_examples=200, deadline=None)
@given(query=st.text(max_size=1200), limit=st.integers(min_value=1, max_value=20))
@example(query="Generat", limit=3)  # the learned order lifts a tool the blend scores lower
@example(query="Mapping", limit=1)  # a name's word matched, its cosine in the model's band
def test_any_query_is_answered_within_the_limit(query: str, limit: int) -> None:
    found = _HYBRID.find(query, limit=limit)
    assert len(found.matches) == min(limit, len(DOCS))
    assert found.confidence is not None
    # Far from the length's threshold it decides; near it, the learned model does
    # (gateway/abstain_model.py, tested in test_abstain_model.py).
    margin = found.confidence - abstain_below(query)
    if margin < -BAND_UNDER:
        assert found.weak
    elif margin > BAND:
        assert not found.weak
    assert [s for _, s in found.matches] == sorted((s for _, s in found.matches), reverse=True)


_HYBRID = SearchIndex(DOCS)
_ranker(None, Counting(), []).prepare(_HYBRID)
