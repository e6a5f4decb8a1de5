"""The closest tools cannot do what a query asks (gateway/abstain.py): the operation,
and a thing no text of the closest tools names; tools hidden from a caller never change
the answer."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from searchkit import documents

from skillop.gateway import abstain
from skillop.gateway.actions import Objects, ObjectsByView, named, phrase, telling
from skillop.gateway.products import mentioned, said_in
from skillop.gateway.search import Document

np = pytest.importorskip("numpy")


_GITHUB = documents(("github", "create_repository", "Create a new GitHub repository."),
                ("github", "create_issue", "Create a new issue in a repository."),
                ("github", "create_branch", "Create a new branch in a repository."),
                ("github", "push_files", "Push several files to a repository in one commit."),
                ("slack", "slack_post_message", "Post a new message to a Slack channel."))


def _unable(query: str, docs: list[Document], scores: list[float]) -> bool:
    """``abstain.unable`` as the search calls it, with the documents' ``scores``
    (``-inf``: hidden from the caller)."""
    ranked = np.asarray(scores, dtype=np.float32)
    visible = [n for n in np.argsort(-ranked, kind="stable").tolist() if np.isfinite(ranked[n])]
    skills: dict[str, list[int]] = {}
    for number, doc in enumerate(docs):
        skills.setdefault(phrase(doc.skill), []).append(number)
    hidden = [n for n in range(len(docs)) if not np.isfinite(ranked[n])]
    view = ObjectsByView([(doc.skill, doc.name_words()) for doc in docs]).without(hidden)
    service = [n for skill in named(query, skills) if telling(skill) for n in skills[skill]]
    products = set(mentioned(query))
    saying = [n for n, doc in enumerate(docs)
              if any(products & said_in(text) for text in doc.texts())]
    return abstain.unable(query, docs, visible[:abstain.ACTION_CANDIDATES], ranked,
                          skills={k: np.asarray(v, dtype=np.intp) for k, v in skills.items()},
                          view=view, service=service, saying=saying)


@pytest.mark.parametrize(("query", "weak"), [
    ("create a GitHub gist from this snippet", True),  # no close tool names a gist
    ("set my Slack status to away", True),
    ("create a new branch called fix", False),
    ("create an issue for the crash", False),
    ("post an update to the channel", False),  # an operation's word: what is posted
    ("create a bug report in GitHub", False),  # the thesaurus: a bug is an issue
    ("list the gists of the user", False),  # no operation asked
])
def test_a_thing_no_close_tool_names_fits_nothing(query: str, weak: bool) -> None:
    assert _unable(query, _GITHUB, [1.0] * len(_GITHUB)) is weak


def test_only_a_short_request_is_checked_for_what_it_acts_on() -> None:
    short = "create a gist with the snippet"
    long = f"{short} and then tell everyone on the team where they can find it today"
    assert len(long.split()) > abstain.OBJECT_WORDS
    assert _unable(short, _GITHUB, [1.0] * 5)
    assert not _unable(long, _GITHUB, [1.0] * 5)


@pytest.mark.parametrize(("query", "weak"), [
    ("create a gist with the snippet so that everyone on the team can read it today", True),
    ("create a gist with the snippet. Tell everyone on the team where to find it", False),
    ("create a gist with the snippet, then tell everyone on the team where it is", False),
    ("first task: create a gist with the snippet for everyone on the whole team", False),
])
def test_a_long_query_of_one_request_is_checked_for_what_it_acts_on(query: str,
                                                                    weak: bool) -> None:
    assert len(query.split()) > abstain.OBJECT_WORDS
    assert _unable(query, _GITHUB, [1.0] * 5) is weak


def test_only_the_closest_tools_are_read() -> None:
    far = [*_GITHUB, *documents(*((f"other{n}", f"tool_{n}", "Do something else.")
                              for n in range(abstain.OBJECT_CANDIDATES))),
           *documents(("github", "create_gist", "Create a gist."))]
    close = [0.1] * len(_GITHUB) + [0.9] * abstain.OBJECT_CANDIDATES + [0.5]
    assert _unable("create a gist", far, close)  # create_gist is the eleventh
    close[-1] = 0.95
    assert not _unable("create a gist", far, close)


def test_a_switched_off_check_does_not_abstain(monkeypatch: pytest.MonkeyPatch) -> None:
    long = "create a gist with the snippet so that everyone on the team can read it today"
    monkeypatch.setattr(abstain, "ONE_STEP", False)
    assert not _unable(long, _GITHUB, [1.0] * 5)
    monkeypatch.setattr(abstain, "UNNAMED_OBJECT", False)
    assert _unable("create a GitHub gist", _GITHUB, [1.0] * 5)  # the service's tools
    monkeypatch.setattr(abstain, "SERVICE_OBJECT", False)
    assert not _unable("create a GitHub gist", _GITHUB, [1.0] * 5)
    monkeypatch.setattr(abstain, "OPERATION", False)
    assert not _unable("delete the repository", _GITHUB, [1.0] * 5)


_SERVICES = documents(
    ("slack", "slack_post_message", "Post a new message to a Slack channel."),
    ("slack", "slack_add_reaction", "Add a reaction emoji to a message."),
    ("slack", "slack_list_channels", "List the channels of the workspace."),
    ("airtable", "list_bases", "List the bases you can reach."),
    ("airtable", "create_table", "Create a table in a base."),
    ("profile", "set_user_status", "Set the status text of a user profile."))


@pytest.mark.parametrize(("query", "weak"), [
    # another service's tool names a status: the Slack tools do not
    ("set my Slack status to away", True),
    ("set my status to away", False),  # no service named: any close tool's words
    ("add a reaction to the message in Slack", False),
    ("post my status in Slack", False),  # what is posted, not a kind
    ("create a new Airtable base", True),  # its tools name bases, none creates one
    ("create a table in Airtable", False),
])
def test_a_named_service_whose_closest_tools_cannot_do_it_fits_nothing(query: str,
                                                                       weak: bool) -> None:
    assert _unable(query, _SERVICES, [1.0] * len(_SERVICES)) is weak


@pytest.mark.parametrize(("query", "weak"), [
    ("give @kim write access to my GitHub repo", True),  # no close tool grants
    ("grant the intern the admin role on the repo", True),
    ("give me the issues of the repository", False),  # "give me" reads: no operation
    ("shard the issues across two repositories", True),
])
def test_granting_access_or_sharding_needs_a_tool_that_does_it(query: str, weak: bool) -> None:
    assert _unable(query, _GITHUB, [1.0] * len(_GITHUB)) is weak


@pytest.mark.parametrize("description", [
    "Grant a user access to a repository as a collaborator.",
    "Add a user to a repository as a collaborator.",  # adding is an update too
])
def test_a_hidden_granting_tool_counts_for_nothing(description: str) -> None:
    hidden = documents(("github", "add_collaborator", description))
    docs = [*_GITHUB, *hidden]
    query = "give @kim write access to my GitHub repo"
    assert _unable(query, docs, [1.0] * len(_GITHUB) + [float("-inf")])
    assert not _unable(query, docs, [1.0] * len(_GITHUB) + [2.0])  # seen, it does it


def test_a_named_service_must_merge_or_restore_itself_not_only_update() -> None:
    docs = documents(("crm", "update_contacts", "Update contacts in a batch."),
                     ("crm", "list_contacts", "List the contacts."),
                     ("other", "merge_records", "Merge two records into one."))
    assert _unable("merge two duplicate contacts in the crm", docs, [1.0, 0.9, 0.5])
    assert not _unable("merge two duplicate contacts", docs, [1.0, 0.9, 0.5])
    assert not _unable("update two contacts in the crm", docs, [1.0, 0.9, 0.5])


@pytest.mark.parametrize(("query", "hidden"), [
    ("set my Slack status to away", documents(("slack", "slack_set_status",
                                               "Set the status of the user."))),
    ("create a new Airtable base", documents(("airtable", "create_base",
                                              "Create a new base."))),
])
def test_a_named_service_tool_hidden_from_the_caller_counts_for_nothing(
        query: str, hidden: list[Document]) -> None:
    docs = [*_SERVICES, *hidden]
    assert _unable(query, _SERVICES, [1.0] * len(_SERVICES))
    assert _unable(query, docs, [1.0] * len(_SERVICES) + [float("-inf")])
    assert not _unable(query, docs, [1.0] * len(docs))  # seen, it does it


def test_the_service_checks_switched_off_do_not_abstain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(abstain, "UNNAMED_OBJECT", False)
    monkeypatch.setattr(abstain, "OPERATION", False)
    assert _unable("set my Slack status to away", _SERVICES, [1.0] * 6)
    assert _unable("create a new Airtable base", _SERVICES, [1.0] * 6)
    monkeypatch.setattr(abstain, "SERVICE_OBJECT", False)
    assert not _unable("set my Slack status to away", _SERVICES, [1.0] * 6)
    monkeypatch.setattr(abstain, "SERVICE_OPERATION", False)
    assert not _unable("create a new Airtable base", _SERVICES, [1.0] * 6)


_TABLES = documents(("base", "update_field", "Update a field's name or description."),
                   ("base", "update_table", "Update a table's name or description."),
                   ("base", "delete_records", "Delete records from a table."))


@pytest.mark.parametrize(("query", "weak"), [
    ("remove the Fax field from the Contacts table", True),  # renaming a field is no removal
    ("remove the Fax record from the Contacts table", False),  # a tool deletes records
    ("rename the Fax field of the Contacts table", False),
])
def test_taking_a_thing_away_from_another_needs_a_tool_that_deletes_it(query: str,
                                                                      weak: bool) -> None:
    assert _unable(query, _TABLES, [1.0, 0.9, 0.8]) is weak


def test_a_hidden_tool_that_deletes_the_thing_counts_for_nothing() -> None:
    docs = [*_TABLES, *documents(("base", "delete_field", "Delete a field from a table."))]
    query = "remove the Fax field from the Contacts table"
    assert _unable(query, docs, [1.0, 0.9, 0.8, float("-inf")])
    assert not _unable(query, docs, [1.0, 0.9, 0.8, 2.0])  # seen, it does it


def test_removing_from_switched_off_reads_an_update_as_before(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(abstain, "REMOVED_FROM", False)
    assert not _unable("remove the Fax field from the Contacts table", _TABLES, [1.0, 0.9, 0.8])


def test_a_tool_whose_first_sentence_reads_does_not_do_what_it_names() -> None:
    docs = documents(("crm", "get_workflow",
                      "Purpose:\n  1. This tool retrieves a workflow by its id."),
                     ("crm", "create_property", "Create a property."),
                     ("crm", "create_note", "Create a note."))
    assert _unable("create a new crm workflow that emails leads", docs, [1.0, 0.9, 0.8])
    computing = documents(("calc", "get_sum", "Returns the sum of two numbers."),
                          ("memory", "add_observations", "Add observations to an entity."))
    assert not _unable("add two numbers", computing, [1.0, 0.9])  # "get" alone may compute


def test_of_that_names_what_the_request_acts_on() -> None:
    docs = documents(("ci", "rerun_workflow", "Rerun a workflow from the failed job."),
                     ("ci", "get_job_results", "This tool retrieves the results of a job."))
    assert not _unable("rerun the failed jobs of that workflow", docs, [1.0, 0.9])
    assert _unable("rerun the failed jobs", docs, [1.0, 0.9])


def test_a_capitalised_word_names_one_thing_not_a_kind() -> None:
    docs = documents(("memory", "delete_entities", "Delete entities from the graph."))
    assert not _unable("erase Carol from the memory", docs, [1.0])
    assert _unable("erase the carol from the memory", docs, [1.0])


def test_a_skill_named_by_a_word_that_names_nothing_is_not_a_service() -> None:
    docs = documents(("everything", "echo", "Echo the input back."),
                     ("browser", "record_video", "Record a video of the tab."))
    assert not telling("everything")
    assert not _unable("make a video of everything in the tab", docs, [0.5, 1.0])


_GIT = documents(("git", "git_commit", "Record changes to the repository."),
                 ("git", "git_log", "Show the commit logs."),
                 ("git", "git_checkout", "Switch branches."),
                 ("git", "git_create_branch", "Create a new branch from another one."),
                 ("slack", "slack_post_message", "Post a new message to a Slack channel."))


@pytest.mark.parametrize(("query", "weak"), [
    ("rebase my feature branch onto main", True),  # no close tool says it rebases
    ("stash my local changes", True),
    ("please archive the channel", True),  # a Slack tool posts: none archives
    ("git cherry-pick the fix onto the release branch", True),
    ("switch to the release branch", False),  # no operation of its own: the class reads
    ("kick off a build of the branch", False),  # "kick off": a phrasal verb, not "kick"
])
def test_an_operation_of_its_own_no_close_tool_says_fits_nothing(query: str,
                                                                 weak: bool) -> None:
    assert _unable(query, _GIT, [1.0] * len(_GIT)) is weak


@pytest.mark.parametrize(("query", "tool"), [
    ("git cherry-pick the fix onto the release branch",
     ("git", "git_cherry_pick", "Apply the changes of some commits.")),  # "cherry pick"
    ("rebase my feature branch onto main",
     ("git", "git_rebase", "Reapply commits on top of another base.")),
    ("please archive the channel",
     ("slack", "slack_archive_channel", "Archives a channel.")),  # a form of the verb
    ("please archive the channel",
     ("slack", "slack_close_channel", "Close a channel for good.")),  # a near-synonym
])
def test_a_close_tool_that_says_the_operation_fits_and_hidden_counts_for_nothing(
        query: str, tool: tuple[str, str, str]) -> None:
    docs = [*_GIT, *documents(tool)]
    assert not _unable(query, docs, [1.0] * len(_GIT) + [2.0])
    assert _unable(query, docs, [1.0] * len(_GIT) + [float("-inf")])


def test_the_operations_of_their_own_switched_off_do_not_abstain(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(abstain, "UNSAID_OPERATION", False)
    assert not _unable("rebase my feature branch onto main", _GIT, [1.0] * len(_GIT))


@pytest.mark.parametrize(("labelled", "plain"), [
    ("slack: set my status to away", "set my status to away on slack"),
    ("knowledge graph: rename Jon", "rename Jon on knowledge graph"),
    ("rename the channel: launch", "rename the channel: launch"),  # a request, no label
])
def test_a_leading_label_names_the_service_of_the_request(labelled: str, plain: str) -> None:
    assert abstain.unlabelled(labelled) == plain


def test_a_labelled_request_is_checked_as_the_request_on_its_service(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert _unable("slack: set my status to away", _SERVICES, [1.0] * len(_SERVICES))
    assert not _unable("slack: post a message to the channel", _SERVICES,
                       [1.0] * len(_SERVICES))
    monkeypatch.setattr(abstain, "LABELS", False)
    assert not _unable("slack: set my status to away", _SERVICES, [1.0] * len(_SERVICES))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab: \n.-_")), max_size=40)
       | st.builds("{}: {}".format, st.text(max_size=12), st.text(max_size=20)))
def test_a_label_moved_keeps_every_word_of_the_query(query: str) -> None:
    """Whatever the text, reading a label moves words, never drops or makes one (but
    the "on" before the label)."""
    moved = abstain.unlabelled(query)
    words = sorted(query.replace(":", " ").split())
    assert moved == query or sorted(moved.replace(":", " ").split()) == sorted([*words, "on"])


_LABELS = st.sampled_from(["slack", "github", "git", "my crm", "notion"])
_REQUESTS = st.sampled_from(["delete a message", "rebase the branch", "create a gist",
                             "archive the channel", "list the issues", "pin the message"])


@settings(max_examples=100, deadline=None)
@given(_LABELS, _REQUESTS, st.lists(st.floats(0, 1), min_size=5, max_size=5))
def test_a_label_reads_as_the_service_named_after_the_request(
        label: str, request: str, scores: list[float]) -> None:
    """ "<label>: <request>" gets the answer of "<request> on <label>", whatever the
    closest tools."""
    assert _unable(f"{label}: {request}", _GIT, scores) == _unable(
        f"{request} on {label}", _GIT, scores)


_WORDS = ["gist", "issue", "branch", "status", "message", "channel", "repository", "file"]
_TOOLS = st.lists(
    st.tuples(st.sampled_from(["github", "slack", "git"]),
              st.sampled_from(["create", "delete", "list", "push", "post", "get", "merge",
                               "archive", "rebase"]),
              st.sampled_from(_WORDS), st.sampled_from([0.0, 0.5, 1.0]) | st.floats(0, 1),
              st.sampled_from(["", " in Jira"])),
    min_size=1, max_size=16)
_QUERIES = st.builds(lambda verb, thing, where: f"{verb} a {thing} {where}",
                     st.sampled_from(["create", "delete", "push", "pin", "rename", "post",
                                      "merge", "restore", "archive", "rebase", "slack: cancel",
                                      "github: stash"]),
                     st.sampled_from([*_WORDS, "gist status", "webhook"]),
                     st.sampled_from(["", "in GitHub", "on Slack", "for me", "in git", "in Jira",
                                      "so that everyone on the team can see it in GitHub"]))


@settings(max_examples=200, deadline=None)
@given(_TOOLS, _QUERIES, st.data())
def test_tools_hidden_from_a_caller_never_change_the_answer(
        tools: list[tuple[str, str, str, float, str]], query: str,
        data: st.DataObject) -> None:
    """The answer with some tools hidden is the answer of a set without them, however
    close the hidden ones are, whatever they name and whichever service or product."""
    docs = [Document(f"{skill}/{n}", f"{verb}_{thing}", skill=skill,
                     description=f"{verb.title()} a {thing}{where}.")
            for n, (skill, verb, thing, _, where) in enumerate(tools)]
    scores = [score for _, _, _, score, _ in tools]
    hidden = data.draw(st.sets(st.integers(0, len(docs) - 1), max_size=len(docs) - 1))
    shown = [n for n in range(len(docs)) if n not in hidden]
    with_hidden = [float("-inf") if n in hidden else s for n, s in enumerate(scores)]
    assert _unable(query, docs, with_hidden) == _unable(
        query, [docs[n] for n in shown], [scores[n] for n in shown])
    assert Objects.of((d.skill, d.name_words()) for d in (docs[n] for n in shown)) == (
        ObjectsByView([(d.skill, d.name_words()) for d in docs]).without(hidden))
