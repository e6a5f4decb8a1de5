"""The operation a search asks for and those a tool performs (gateway/actions.py),
and the hybrid search's "nothing fits" when none of the closest performs it."""

from __future__ import annotations

import pytest

from skillop.gateway.actions import TRIGGERS, VERBS, asked, performed


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
