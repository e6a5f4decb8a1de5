"""gateway/clauses.py: a request split into its clauses and its main step, and the
learned order weighing the main step's verb (gateway/fusion.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skillop.gateway import fusion
from skillop.gateway.clauses import clauses, main
from skillop.gateway.search import Document, SearchIndex

WORDS = st.sampled_from(["then", "and", "so", "that", "I", "can", "before", "check", "the",
                         "pod", "delete", "it,", "logs.", "once", "if", "package.json",
                         "localhost:3000", "look", ";", ":", "é", "\n", "\t"])


@given(st.one_of(st.text(max_size=400), st.lists(WORDS, max_size=40).map(" ".join)))
def test_any_text_splits_into_clauses_that_hold_its_words_in_order(text: str) -> None:
    said = clauses(text)
    assert [word for clause in said for word in clause.text.split()] == text.split()
    assert all(clause.text.strip() for clause in said)
    assert 0 <= main(said) < max(len(said), 1)


def texts(query: str) -> list[str]:
    return [clause.text for clause in clauses(query)]


def test_a_clause_ends_at_a_sentence_a_connective_or_a_verb_after_a_comma() -> None:
    assert texts("The pod keeps crashing. Before I touch it, read its logs and then "
                 "restart it so that I can test again") == [
        "The pod keeps crashing.", "Before I touch it,", "read its logs",
        "and then restart it", "so that I can test again"]
    # A list of things and a dotted or coloned name stay in their clause.
    assert texts("read package.json, tsconfig.json and README.md at localhost:3000") == [
        "read package.json, tsconfig.json and README.md at localhost:3000"]


def test_the_main_clause_is_the_first_step_past_the_context() -> None:
    said = clauses("the nightly build is stuck: cancel the workflow so I can start it again")
    assert said[main(said)].text == "cancel the workflow"
    assert [clause.subordinate for clause in said] == [False, False, True]
    said = clauses("I need the page's text so I can click things next")
    # No step: the first clause that is no context.
    assert said[main(said)].text == "I need the page's text"
    assert main(clauses("delete the pod")) == 0


# The canceller's text is the longer: by its words alone the starter ranks first.
TOOLS = [Document("ci/start", "start_workflow", description="Start a workflow."),
         Document("ci/cancel", "cancel_workflow",
                  description="Cancel a workflow that is running now, at once.")]


def test_a_long_task_finds_the_tool_doing_its_main_step_not_its_context() -> None:
    np = pytest.importorskip("numpy")
    index = SearchIndex(TOOLS)
    # The same vector for both: the sentence model cannot tell them apart here.
    index.attach_vectors(np.array([[1.0, 0.0], [1.0, 0.0]], dtype=np.float32),
                         lambda query: np.array([0.8, 0.6], dtype=np.float32))
    query = "the nightly build is stuck: cancel the workflow so I can start it again"
    assert [key for key, _ in index.find(query, limit=2).matches] == ["ci/cancel", "ci/start"]
    # Said the other way round, the other tool leads.
    query = "the nightly build is done: start the workflow so I can cancel it later"
    assert [key for key, _ in index.find(query, limit=2).matches] == ["ci/start", "ci/cancel"]


def test_without_the_main_clause_s_verb_the_context_s_tool_would_lead(
        monkeypatch: pytest.MonkeyPatch) -> None:
    np = pytest.importorskip("numpy")
    monkeypatch.setattr(fusion, "WEIGHTS", {**fusion.WEIGHTS, "main_verb_agrees": 0.0,
                                            "main_verb_differs": 0.0})
    index = SearchIndex(TOOLS)
    index.attach_vectors(np.array([[1.0, 0.0], [1.0, 0.0]], dtype=np.float32),
                         lambda query: np.array([0.8, 0.6], dtype=np.float32))
    query = "the nightly build is stuck: cancel the workflow so I can start it again"
    assert index.find(query, limit=2).matches[0][0] == "ci/start"
