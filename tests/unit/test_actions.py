"""The operation a search asks for and those a tool performs (gateway/actions.py),
and the hybrid search's "nothing fits" when none of the closest performs it."""

from __future__ import annotations

from typing import Any

import pytest

from skillop.gateway.actions import TRIGGERS, VERBS, asked, named, performed, phrase
from skillop.gateway.search import Document, SearchIndex
from skillop.gateway.vectors import SemanticRanker


@pytest.mark.parametrize(("query", "classes"), [
    ("delete a message in Slack", {"delete"}),
    ("Please cancel the running workflow", {"stop"}),
    ("can you rename the branch", {"update"}),
    ("I want to add a label to the issue", {"create", "update"}),  # adding to it updates it
    ("remove the user from the project", {"delete", "update"}),
    ("post the release notes to the team", {"send", "create"}),
])
def test_a_leading_operation_verb_is_what_the_query_asks(query: str, classes: set[str]) -> None:
    assert asked(query) == classes


@pytest.mark.parametrize("query", [
    "which messages mention the outage",  # a question: to find or read
    "show me the open pull requests",
    "we changed the image tag and want the cluster to apply it",  # not an imperative
    "deleted files in the last commit",  # not the base form
    "the message I posted yesterday",
    "record of the last deployment",  # a noun as often as a verb: not a trigger
    "",
])
def test_a_query_without_a_leading_imperative_asks_for_nothing(query: str) -> None:
    assert asked(query) == frozenset()


def test_a_tool_performs_what_its_name_title_and_first_sentence_say() -> None:
    post = performed("slack post message", "", "Post a new message to a Slack channel.")
    assert "send" in post and "delete" not in post
    deletes = performed("delete file", "Delete file", "Deletes a file. Cannot be undone.")
    assert "delete" in deletes and "restore" not in deletes  # only the first sentence
    assert performed("maps elevation", "", "Get elevation data for locations.") == frozenset()
    assert performed("node management", "", "Manage Kubernetes nodes.") >= {"delete", "stop"}


def test_every_trigger_is_a_verb_of_the_lexicon() -> None:
    assert set(TRIGGERS) <= set(VERBS)


def test_a_skill_is_named_as_whole_words() -> None:
    skills = [phrase(s) for s in ("circleci", "google-maps", "git", "github")]
    assert skills[1] == "google maps"
    assert named("cancel the CircleCI workflow on Google-Maps' repo", skills) == [
        "circleci", "google maps"]
    assert named("open a GitHub issue", skills) == ["github"]  # not "git"
    assert named("bake a cake", skills) == []


class _Flat:
    """A stand-in encoder that finds every text equally close (cosine 1): what is
    left to decide is the operation."""

    identity, dimension = "flat@1", 2

    def encode(self, texts: list[str], *, tokens: int = 64) -> Any:
        np = pytest.importorskip("numpy")
        return np.full((len(texts), 2), 2 ** -0.5, dtype=np.float32)


@pytest.mark.parametrize(("query", "weak"), [
    # GitLab's tool cancels, CircleCI's only reruns: not for CircleCI.
    ("cancel the CircleCI workflow", True),
    ("cancel the GitLab pipeline", False),
    ("cancel the pipeline", False),  # no service named: the three closest
    ("rerun the CircleCI workflow", False),
])
def test_a_named_service_must_perform_the_operation_itself(query: str, weak: bool) -> None:
    pytest.importorskip("numpy")
    docs = [Document("ci/rerun", "rerun_workflow", skill="circleci",
                     description="Rerun a workflow from the start."),
            Document("gl/cancel", "cancel_pipeline", skill="gitlab",
                     description="Cancel a running pipeline."),
            Document("gl/list", "list_pipelines", skill="gitlab",
                     description="List the pipelines of a project.")]
    index = SearchIndex(docs)
    assert SemanticRanker(None, lambda _: None, loader=lambda: _Flat()).prepare(  # type: ignore[arg-type,return-value]
        index)
    assert index.find(query, limit=1).weak is weak
