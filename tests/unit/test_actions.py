"""The operation a search asks for and those a tool performs (gateway/actions.py),
and the hybrid search's "nothing fits" when none of the closest performs it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from searchkit import documents

from skillop.gateway import actions
from skillop.gateway.actions import (
    TRIGGERS,
    VERBS,
    Objects,
    ObjectsByView,
    asked,
    named,
    objects,
    performed,
    phrase,
)
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


@pytest.mark.parametrize(("query", "classes"), [
    ("how do I cancel the workflow that is running?", {"stop"}),  # a question how to
    ("is there a way to star this repository", {"star"}),
    ("pls re-run the failed job", {"start"}),  # the hyphen dropped
    ("cherry-pick the fix onto the release branch", {"cherrypick"}),
    ("push my local commits to origin", {"push"}),
    ("pin this message in the channel", {"pin"}),
    ("unzip archive.zip into the data folder", {"decompress"}),
    ("git push my branch to origin", {"push"}),  # a command's own verb
    ("kubectl delete the stuck pod", {"delete"}),
])
def test_a_request_s_lead_is_skipped_and_operations_of_their_own_are_asked(
        query: str, classes: set[str]) -> None:
    assert asked(query) == classes


@pytest.mark.parametrize(("query", "classes"), [
    ("permanently delete the contact", {"delete"}),  # an adverb before the verb
    ("please manually restart the job", {"start", "stop"}),
    ("reply to the thread", {"send", "create"}),  # a verb in "-ly" is the verb
    ("only list the pods", set()),  # the adverb skipped, the verb reads
])
def test_an_adverb_before_the_verb_is_skipped(query: str, classes: set[str]) -> None:
    assert asked(query) == classes


def test_the_adverbs_switched_off_ask_for_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    assert asked("permanently delete the contact") == {"delete"}  # read (and kept) first
    monkeypatch.setattr(actions, "ADVERBS", False)
    assert asked("permanently delete the contact") == frozenset()


@pytest.mark.parametrize("query", [
    "pull the prices out of these pages",  # reading, as often as git's pull
    "follow the links two levels deep",
    "block until the pipeline finishes",
    "how many pods are running",  # a question, no operation verb after its lead
])
def test_verbs_that_as_often_read_or_wait_ask_for_nothing(query: str) -> None:
    assert asked(query) == frozenset()


def test_an_operation_of_its_own_is_performed_only_by_a_tool_that_says_it() -> None:
    assert "push" in performed("push files", "", "Push multiple files in one commit.")
    assert "push" not in performed("create commit", "", "Create a commit on a branch.")
    assert "star" not in performed("create repository", "", "Create a new repository.")
    assert performed("slack post message", "", "Post a message.").isdisjoint(
        asked("pin the message"))


_LEADS = st.lists(st.sampled_from(["please", "pls", "can", "you", "how", "do", "i", "is",
                                   "there", "a", "way", "to", "just"]), max_size=6)


@given(_LEADS, st.sampled_from(sorted(TRIGGERS)), st.text(max_size=60))
def test_words_that_lead_a_request_never_change_the_operation(lead: list[str], verb: str,
                                                              tail: str) -> None:
    """Whatever request words come first, the first other word decides."""
    assert asked(" ".join([*lead, verb, tail])) == VERBS[verb]
    assert asked(" ".join([*lead, tail])) == asked(tail)


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


@pytest.mark.parametrize(("query", "said"), [
    ("delete a Slack message", {"slack", "messag"}),
    ("Please create a new channel called #launch", {"channel"}),
    ("remove the Notes field from the Airtable table", {"note", "field"}),
    ("wipe out a pod that is misbehaving", {"pod"}),  # a phrasal verb's particle
    ("change the Status property of a Notion page", {"status", "properti", "notion", "page"}),
])
def test_the_object_is_what_follows_the_verb_up_to_a_preposition(query: str,
                                                                  said: set[str]) -> None:
    assert objects(query) == said


def test_for_me_after_the_verb_is_not_its_object() -> None:
    assert objects("pls make for me a new Slack channel") == {"slack", "channel"}
    assert objects("git push my branch") == {"branch"}
    assert objects("git") == frozenset() and asked("git") == frozenset()


@pytest.mark.parametrize("query", [
    "comment on a Notion page",  # no direct object
    "stop placing pods on node-3",  # an activity, not a thing
    "which messages mention the outage",  # no operation asked
    "delete",
    "",
])
def test_no_object_when_the_verb_has_none(query: str) -> None:
    assert objects(query) == frozenset()


@given(st.text(max_size=300))
def test_objects_reads_any_text_and_only_when_an_operation_is_asked(query: str) -> None:
    said = objects(query)
    assert said == frozenset() or asked(query)
    assert all(stem and stem.isascii() for stem in said)


_SLACK = documents(("slack", "slack_post_message", "Post a new message to a Slack channel."),
               ("slack", "slack_list_channels", "List the channels of the workspace."),
               ("slack", "slack_add_reaction", "Add a reaction emoji to a message."),
               ("slack", "slack_get_users", "Get the users of the workspace."))


@pytest.mark.parametrize(("query", "missed"), [
    ("delete a Slack message", True),  # a class performed, but on reactions only
    ("create a new Slack channel", True),  # it creates messages; channels it lists
    ("post a message to the team", False),
    ("add a reaction to the message", False),
    ("create something else", False),  # no tool names the object: not judged
    ("comment on the channel", False),
])
def test_an_operation_must_be_performed_on_what_the_query_names(query: str,
                                                                missed: bool) -> None:
    reader = Objects.of((doc.skill, doc.name_words()) for doc in _SLACK)
    assert reader.services == {"slack"}
    assert reader.unable(query, asked(query), _SLACK[:3]) is missed


def test_a_word_most_of_a_service_s_names_share_names_no_object() -> None:
    docs = documents(*(("kubernetes", f"kubectl_{verb}", f"{verb.title()} resources.")
                   for verb in ("get", "delete", "describe", "logs")),
                 ("kubernetes", "exec_in_pod", "Run a command in a pod."))
    reader = Objects.of((doc.skill, doc.name_words()) for doc in docs)
    assert reader.shared["kubernetes"] == {"kubectl"}
    # kubectl_delete's name is its verb alone: it deletes a pod as well as anything.
    assert not reader.unable("remove a pod", asked("remove a pod"), [docs[4], docs[1]])
    assert reader.unable("remove a pod", asked("remove a pod"), [docs[4], docs[3]])


_NAMES = st.lists(st.tuples(st.sampled_from(["slack", "kubernetes", "air table"]),
                            st.lists(st.sampled_from(["kubectl", "get", "delete", "post",
                                                      "message", "channel", "table"]),
                                     min_size=1, max_size=3).map(" ".join)),
                  min_size=1, max_size=12)


@given(_NAMES, st.data())
def test_tools_hidden_from_a_caller_count_for_nothing(tools: list[tuple[str, str]],
                                                      data: st.DataObject) -> None:
    """A caller's view is the set without what it may not see: as if those tools
    did not exist, whatever they are called (the answer must not tell they do)."""
    hidden = data.draw(st.sets(st.integers(0, len(tools) - 1)))
    seen = [tool for n, tool in enumerate(tools) if n not in hidden]
    views = ObjectsByView(tools)
    assert views.without(hidden) == Objects.of(seen)
    assert views.without(()) == Objects.of(tools)


def test_a_hidden_tool_does_not_turn_a_service_word_into_an_object() -> None:
    kubectl = [("kubernetes", f"kubectl {verb}") for verb in ("get", "delete", "describe")]
    tools = [*kubectl, ("kubernetes", "exec in pod"), ("kubernetes", "kubectl logs")]
    views = ObjectsByView(tools)
    assert views.without(()).shared["kubernetes"] == {"kubectl"}
    # with kubectl_logs hidden, three of four names share "kubectl": still its own
    assert views.without({4}).shared["kubernetes"] == {"kubectl"}
    # with two kubectl tools hidden, one of three names says it: an object word now,
    # exactly as for a set that never had the two
    assert views.without({0, 1}) == Objects.of([tools[2], tools[3], tools[4]])



def test_views_made_by_many_threads_at_once_stay_whole() -> None:
    """Searches run in worker threads: views made and let go at once by many of
    them neither fail nor mix one caller's view with another's."""
    from concurrent.futures import ThreadPoolExecutor

    tools = [("kubernetes", f"kubectl {verb}") for verb in ("get", "delete", "describe", "logs")]
    tools += [("slack", f"post message {n}") for n in range(8)]
    views = ObjectsByView(tools)
    hidden_sets = [frozenset({n, (n * 7) % len(tools)}) for n in range(len(tools))] * 20

    def made(hidden: frozenset[int]) -> bool:
        seen = [tool for n, tool in enumerate(tools) if n not in hidden]
        return views.without(hidden) == Objects.of(seen)

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert all(pool.map(made, hidden_sets))


@pytest.mark.parametrize(("description", "classes"), [
    ("Starts a crawl job and polls until it reaches a terminal state.", {"start", "create"}),
    ("Stopped jobs are restarted and the stopping ones copied.",
     {"stop", "start", "move", "create"}),
    ("Made a new copy and undid the rest.", {"create", "update", "move", "restore"}),
    ("General statistics of the database.", set()),  # "general" is no "generate"
])
def test_the_abstention_reads_a_tool_verb_by_its_forms_not_its_stem(
        description: str, classes: set[str]) -> None:
    assert performed("", "", description, forms=True) == classes


def test_the_ranking_reads_a_tool_verb_by_its_stem() -> None:
    assert "stop" in performed("", "", "Polls until it reaches a terminal state.")
    assert "stop" not in performed("", "", "Polls until it reaches a terminal state.",
                                   forms=True)


@given(st.sampled_from(sorted(VERBS)), st.sampled_from(["", "s", "ed", "ing"]))
def test_every_regular_form_of_a_verb_reads_as_the_verb(verb: str, ending: str) -> None:
    word = verb + ending
    if ending and verb.endswith("e"):
        word = verb[:-1] + ending if ending in ("ed", "ing") else word
    if ending == "s" and verb.endswith(("s", "x", "z", "sh", "ch")):
        word = f"{verb}es"
    if ending in ("s", "ed") and verb.endswith("y") and verb[-2] not in "aeiou":
        word = verb[:-1] + ("ies" if ending == "s" else "ied")
    assert performed("", "", f"It {word} the thing.", forms=True) >= VERBS[verb]
