"""gateway/fusion.py: the features of the blend's best candidates, and their order."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from searchkit import FOUR_TOOLS

from skillop.gateway import fusion
from skillop.gateway.fusion import FEATURES, Evidence, ToolTerms, features, reordered, scored
from skillop.gateway.fusion_weights import WEIGHTS
from skillop.gateway.search import query_terms

np = pytest.importorskip("numpy")

TOOLS = FOUR_TOOLS
WORDS = [ToolTerms.of(tool) for tool in TOOLS]
SKILLS = ["github", "gitlab", "slack"]


def evidence(blended: list[float]) -> Evidence:
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(len(TOOLS), 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    values = np.asarray(blended, dtype=np.float32)
    return Evidence(values, values * 0.9, values * 0.8, np.abs(values) * 4, vectors)


def column(rows: object, name: str) -> list[float]:
    return [round(float(x), 6) for x in np.asarray(rows)[:, FEATURES.index(name)]]


def rows_for(query: str, candidates: list[int], blended: list[float]) -> object:
    named = [skill for skill in SKILLS if skill in query.lower()]
    return features(query, query_terms(query), {"creat": 1.0, "issu": 1.0}, evidence(blended),
                    candidates, TOOLS, WORDS, named)


def test_a_query_naming_a_service_marks_its_tools_and_the_others() -> None:
    rows = rows_for("create an issue on GitHub", [0, 1, 2, 3], [0.9, 0.8, 0.7, 0.1])
    assert column(rows, "skill_named") == [1.0, 0.0, 1.0, 0.0]
    assert column(rows, "other_skill") == [0.0, 1.0, 0.0, 1.0]


def test_a_leading_verb_agrees_with_the_tools_that_perform_it() -> None:
    rows = rows_for("create an issue on GitHub", [0, 2, 3], [0.9, 0.8, 0.7, 0.1])
    # create_issue creates; list_issues lists; slack_post_message posts (send, create).
    assert column(rows, "verb_agrees") == [1.0, 0.0, 1.0]
    assert column(rows, "verb_differs") == [0.0, 1.0, 0.0]


def test_the_main_clauses_verb_agrees_where_the_leading_word_says_nothing() -> None:
    rows = rows_for("our tracker moved. Please create an issue on GitHub", [0, 2, 3],
                    [0.9, 0.8, 0.7, 0.1])
    assert column(rows, "verb_agrees") == column(rows, "verb_differs") == [0.0, 0.0, 0.0]
    assert column(rows, "main_verb_agrees") == [1.0, 0.0, 1.0]
    assert column(rows, "main_verb_differs") == [0.0, 1.0, 0.0]
    # A query of one clause has its verb read once, by ``verb_agrees``.
    rows = rows_for("create an issue on GitHub", [0, 2, 3], [0.9, 0.8, 0.7, 0.1])
    assert column(rows, "main_verb_agrees") == [0.0, 0.0, 0.0]


def test_word_matches_are_shares_of_the_query_words_by_field() -> None:
    rows = rows_for("create issue", [0, 3], [0.9, 0.8, 0.7, 0.1])
    assert column(rows, "name_terms") == [1.0, 0.0]
    assert column(rows, "cover") == [1.0, 0.0]
    assert column(rows, "name_covered") == [1.0, 0.0]
    rows = rows_for("new issue", [0, 3], [0.9, 0.8, 0.7, 0.1])
    assert column(rows, "cover") == [1.0, 0.5]  # "new" is in the Slack tool's text


def test_scores_are_relative_to_the_sets_best() -> None:
    rows = rows_for("create issue", [1, 0], [0.5, 0.9, 0.2, 0.1])
    assert column(rows, "blend_gap") == [0.0, -0.4]
    assert column(rows, "bm25_share") == [1.0, round(0.5 / 0.9, 6)]
    assert column(rows, "reciprocal_rank") == [1.0, 0.5]


def test_hidden_tools_are_not_the_sets_best() -> None:
    found = evidence([0.5, 0.9, 0.2, 0.1])
    found.blended[1] = -np.inf  # hidden, as SearchIndex.find marks them
    rows = features("create issue", query_terms("create issue"), {}, found, [0, 2],
                    TOOLS, WORDS, [])
    assert column(rows, "bm25_share") == [1.0, 0.4]


def test_no_candidates_no_rows() -> None:
    assert np.asarray(rows_for("create issue", [], [0.9, 0.8, 0.7, 0.1])).shape == (
        0, len(FEATURES))


def test_the_blend_alone_keeps_the_blends_order() -> None:
    rows = rows_for("create issue", [2, 0, 1], [0.8, 0.7, 0.9, 0.1])
    assert reordered([2, 0, 1], rows, {"blend": 1.0}) == [2, 0, 1]
    # Equal scores keep the blend's order too.
    assert reordered([2, 0, 1], rows, {}) == [2, 0, 1]


def test_a_weight_reorders_the_candidates() -> None:
    rows = rows_for("create an issue on GitLab", [0, 1], [0.9, 0.8, 0.7, 0.1])
    assert reordered([0, 1], rows, {"blend": 1.0, "skill_named": 1.0}) == [1, 0]


def test_the_committed_weights_name_known_features() -> None:
    assert set(WEIGHTS) <= set(FEATURES)
    assert scored(np.zeros((2, len(FEATURES)), dtype=np.float32)).tolist() == [0.0, 0.0]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300),
       st.lists(st.floats(min_value=-1, max_value=1), min_size=4, max_size=4),
       st.permutations([0, 1, 2, 3]))
def test_any_query_gives_finite_features_and_a_permutation(
        query: str, blended: list[float], order: list[int]) -> None:
    named = [skill for skill in SKILLS if skill in query.lower()]
    found = evidence(blended)
    rows = features(query, query_terms(query), {"creat": 1.0}, found, order, TOOLS, WORDS,
                    named)
    assert np.isfinite(np.asarray(rows)).all()
    assert sorted(reordered(order, rows)) == sorted(order)
    assert len(fusion.reordered(order[:2], np.asarray(rows)[:2])) == 2


def test_a_query_naming_a_kind_marks_the_tools_of_its_products() -> None:
    rows = rows_for("tell the team chat the build is green", [0, 1, 2, 3],
                    [0.9, 0.8, 0.7, 0.1])
    assert column(rows, "kind_named") == [0.0, 0.0, 0.0, 1.0]
    rows = rows_for("create an issue", [0, 3], [0.9, 0.8, 0.7, 0.1])
    assert column(rows, "kind_named") == [0.0, 0.0]


def test_what_the_verb_acts_on_agrees_with_the_tools_named_for_it() -> None:
    rows = rows_for("create an issue in the tracker", [0, 2, 3], [0.9, 0.8, 0.7, 0.1])
    # create_issue and list_issues name issues; slack_post_message names messages.
    assert column(rows, "object_agrees") == [1.0, 1.0, 0.0]
    assert column(rows, "object_differs") == [0.0, 0.0, 1.0]
    rows = rows_for("comment on it", [0, 3], [0.9, 0.8, 0.7, 0.1])
    assert column(rows, "object_agrees") == column(rows, "object_differs") == [0.0, 0.0]
