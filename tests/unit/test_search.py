"""search_tools' ranking (gateway/search.py) and the Actor's disclosure field."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st
from skillkit import actor, parse_problems

from skillop.gateway import abstain_model, fusion, ranker
from skillop.gateway import search as search_module
from skillop.gateway.search import Document, SearchIndex, terms

DOCS = [
    Document("browser_take_screenshot", "browser_take_screenshot",
             description="Take a screenshot of the current page", skill="team-a/browser"),
    Document("create_merge_request", "create_merge_request", title="Create merge request",
             description="Open a merge request in a GitLab project", skill="team-a/gitlab"),
    Document("read_file", "read_file", description="Read the contents of a file",
             tags=("filesystem",), skill="team-a/files"),
    Document("listPipelines", "listPipelines", description="List CI pipelines",
             skill="team-a/ci"),
]


def test_terms_split_names_stem_and_drop_stop_words() -> None:
    assert terms("browser_take_screenshot") == ["browser", "take", "screenshot"]
    assert terms("listPipelines") == ["list", "pipelin"]
    assert terms("Take the screenshots of my pages") == ["take", "screenshot", "page"]


def test_best_match_first_and_no_overlap_means_no_match() -> None:
    index = SearchIndex(DOCS)
    assert index.search("screenshots of a page", limit=3)[0][0] == "browser_take_screenshot"
    assert index.search("merging requests", limit=1)[0][0] == "create_merge_request"
    assert index.search("pipeline", limit=5)[0][0] == "listPipelines"
    # Tags and the skill's name are searched too.
    assert index.search("filesystem", limit=1)[0][0] == "read_file"
    assert index.search("gitlab", limit=1)[0][0] == "create_merge_request"
    assert index.search("quantum entanglement", limit=5) == []
    assert len(index.search("the file page request pipeline", limit=2)) == 2


def test_the_name_weighs_more_than_the_description() -> None:
    index = SearchIndex([Document("a", "page_reader", description="reads things"),
                         Document("b", "reader", description="reads a page of things")])
    assert [key for key, _ in index.search("page", limit=2)] == ["a", "b"]


@given(st.text(max_size=2000), st.integers(min_value=1, max_value=20))
def test_any_query_ranks_without_error(query: str, limit: int) -> None:
    found = SearchIndex(DOCS).search(query, limit=limit)
    assert len(found) <= min(limit, len(DOCS))
    assert [score for _, score in found] == sorted((s for _, s in found), reverse=True)


def test_the_tables_are_built_once_on_first_use_and_rank_as_built_ahead(
        monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[int] = []
    tables = search_module._tables

    def counted(documents: Sequence[Document]) -> search_module._Tables:
        built.append(len(documents))
        return tables(documents)

    monkeypatch.setattr(search_module, "_tables", counted)
    lazy, ahead = SearchIndex(DOCS), SearchIndex(DOCS)
    assert not lazy.built and built == [] and len(lazy) == len(DOCS)
    ahead.build()
    assert ahead.built and built == [len(DOCS)]
    # Searches racing on threads: the tables are built once, and every answer is
    # the one an index built ahead gives.
    queries = ["screenshots of a page", "merging requests", "pipeline", "file page request"]
    answers: dict[str, object] = {}
    threads = [threading.Thread(target=lambda q=q: answers.update({q: lazy.find(q, limit=3)}))
               for q in queries]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert lazy.built and built == [len(DOCS)] * 2
    assert answers == {q: ahead.find(q, limit=3) for q in queries}
    assert [lazy.search(q, limit=3) for q in queries] == [ahead.search(q, limit=3)
                                                          for q in queries]


def test_an_empty_set_finds_nothing() -> None:
    assert SearchIndex([]).search("anything", limit=5) == []


def test_disclosure_mode_is_checked() -> None:
    problems = parse_problems(actor("a", disclosure={"mode": "Sometimes"}))
    assert [p.field for p in problems] == ["spec.disclosure.mode"]
    assert not parse_problems(actor("a", disclosure={"mode": "Search", "pinned": ["x"]}))


def test_a_long_query_leans_more_on_its_words() -> None:
    weight = search_module.semantic_weight
    assert weight("open a merge request for the login fix") == search_module.SEMANTIC_WEIGHT
    steps = " ".join(["word"] * 4 * search_module.LONG_QUERY_WORDS)
    assert weight(steps) == pytest.approx(search_module.SEMANTIC_WEIGHT / 2)


@given(st.text(max_size=1500), st.text(max_size=300))
def test_the_cosine_counts_less_the_longer_the_query(query: str, more: str) -> None:
    weight = search_module.semantic_weight
    assert 0 < weight(f"{query} {more}") <= weight(query) <= search_module.SEMANTIC_WEIGHT
    if len(query.split()) <= search_module.LONG_QUERY_WORDS:
        assert weight(query) == search_module.SEMANTIC_WEIGHT


def test_the_abstention_threshold_falls_with_the_query_s_length_down_to_its_floor() -> None:
    below = search_module.abstain_below
    floor, step = search_module.ABSTAIN_BELOW, search_module.ABSTAIN_PER_WORD
    assert below("open a merge request for it") == pytest.approx(floor + 6 * step)  # 0.29
    assert below("merge") == pytest.approx(floor + 11 * step)
    steps = " ".join(["word"] * 3 * search_module.LONG_QUERY_WORDS)
    assert below(steps) == below(" ".join(["word"] * search_module.LONG_QUERY_WORDS)) == floor
    # Only the words the search reads count: a query is cut at MAX_QUERY_CHARS.
    assert below("x" * search_module.MAX_QUERY_CHARS + " more words here") == below("x")


@given(st.text(max_size=1500), st.text(max_size=300))
def test_a_longer_query_never_has_a_higher_threshold(query: str, more: str) -> None:
    below = search_module.abstain_below
    top = search_module.ABSTAIN_BELOW + search_module.ABSTAIN_PER_WORD * (
        search_module.LONG_QUERY_WORDS)
    assert search_module.ABSTAIN_BELOW <= below(f"{query} {more}") <= below(query) <= top


def test_a_long_query_is_answered_at_a_cosine_that_a_short_one_abstains_at(
        monkeypatch: pytest.MonkeyPatch) -> None:
    np = pytest.importorskip("numpy")
    # The threshold by length, which decides in the learned model's place when it is off.
    monkeypatch.setattr(abstain_model, "LEARNED", False)
    docs = [Document("a", "first_tool"), Document("b", "second_tool")]
    texts = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    cosine = search_module.ABSTAIN_BELOW + search_module.ABSTAIN_PER_WORD / 2
    wanted = np.array([cosine, -(1 - cosine**2) ** 0.5], dtype=np.float32)
    index = SearchIndex(docs)
    index.attach_vectors(texts, lambda query: wanted)
    short = index.find("show the first tool", limit=2)
    assert short.weak and short.confidence == pytest.approx(cosine)
    long = " ".join(["show me the first tool of the set that does it"] * 2)
    assert not index.find(long, limit=2).weak


def test_a_long_query_s_words_count_more_but_its_abstention_is_the_cosine_s(
        monkeypatch: pytest.MonkeyPatch) -> None:
    np = pytest.importorskip("numpy")
    # The blend's own order: the fusion after it weighs word matches too (test_fusion.py).
    monkeypatch.setattr(fusion, "WEIGHTS", {"blend": 1.0})
    monkeypatch.setattr(ranker, "FOREST", ranker.Forest())
    # a is closer to the query's vector; b shares the query's later words.
    docs = [Document("a", "first_tool"), Document("b", "second_tool",
                                                  description="rerun the failed workflow")]
    texts = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    wanted = np.array([0.75, 0.6614], dtype=np.float32)  # a unit vector
    index = SearchIndex(docs)
    index.attach_vectors(texts, lambda query: wanted)
    short = "rerun the failed workflow"
    assert [key for key, _ in index.find(short, limit=2).matches] == ["a", "b"]
    steps = ("our staging deploy broke after the merge so read the logs of the job and"
             " when I push a fix rerun the failed workflow")
    found = index.find(steps, limit=2)
    assert [key for key, _ in found.matches] == ["b", "a"]
    assert found.confidence == pytest.approx(0.75)  # the cosine's, as calibrated
