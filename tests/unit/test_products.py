"""Well-known products a query names (gateway/products.py), and the hybrid search's
"nothing fits" when the set serves none of them."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skillop.gateway import products
from skillop.gateway.products import (
    CATEGORIES,
    NAMES,
    SELF,
    SELF_HOSTED,
    mentioned,
    said_in,
)
from skillop.gateway.search import Document, SearchIndex
from skillop.gateway.vectors import SemanticRanker


@pytest.mark.parametrize(("query", "names"), [
    ("Create a Jira ticket for the login bug", [("jira",)]),
    ("post the summary on Discord", [("discord",)]),
    ("upload the backup to S3", [("s3",)]),
    ("charge the customer 20 EUR with Stripe", [("stripe",)]),
    ("save it in Google Drive, then tell me on WhatsApp", [("google", "drive"), ("whatsapp",)]),
    ("upload to AWS S3", [("aws", "s3")]),  # the longest name at a place, read once
    ("SALESFORCE: add a lead", [("salesforce",)]),  # case ignored
])
def test_a_query_names_products_as_whole_words(query: str, names: list[tuple[str, ...]]) -> None:
    assert mentioned(query) == names


@pytest.mark.parametrize("query", [
    "read ~/notes/jira-export.csv",  # a path
    "open https://stripe.example.com/pay",  # an address
    "summarise report.slack.txt and jira.md",  # file names
    "tell @discord and #stripe-alerts",  # handles and channels
    'commit with the message "move off Jira"',  # quoted: a message's own words
    "directions from Paris to Lyon for Maria",  # places and people
    "jiraffe stripes discordant",  # not whole words
    "",
])
def test_what_is_not_a_service_name_names_none(query: str) -> None:
    assert mentioned(query) == []


def test_the_list_is_several_hundred_names_of_one_to_three_words() -> None:
    written = [" ".join(name.split()) for products in CATEGORIES.values()
               for name in products.split(",")]
    hosted = [" ".join(name.split()) for names in SELF_HOSTED.values()
              for name in names.split(",")]
    assert len(written) == len(set(written)) == len(NAMES - SELF) >= 300
    assert len(hosted) == len(set(hosted)) == len(SELF) and not set(written) & set(hosted)
    assert all(re.fullmatch(r"[a-z0-9]+( [a-z0-9]+){0,2}", name)
               for name in [*written, *hosted])


def test_a_tool_serves_the_names_its_text_says() -> None:
    assert said_in("Create an issue in Jira Cloud; send via AMAZON SES") == {
        ("jira",), ("amazon", "ses")}
    assert said_in("jiraffe, the amazon sesame") == frozenset()


_FILLER = st.lists(st.sampled_from(["please", "the", "ticket", "report", "to", "and", "now",
                                    "issue", "channel", "Paris", "Maria"]), max_size=6)


@given(before=_FILLER, name=st.sampled_from(sorted(NAMES)), after=_FILLER)
def test_a_name_among_plain_words_is_found(before: list[str], name: tuple[str, ...],
                                           after: list[str]) -> None:
    query = " ".join([*before, *name, *after])
    said = mentioned(query)
    assert said and all(found in NAMES for found in said)
    # Each word is read once, the longest name first: the name or a longer one holding it.
    assert any(" ".join(name) in " ".join(found) for found in said)
    assert mentioned(f'{" ".join(before)} "{" ".join(name)}"') == []


@given(st.text(max_size=300))
def test_any_query_is_read_without_error(query: str) -> None:
    said = mentioned(query)
    assert all(name in NAMES for name in said)


class _Flat:
    """A stand-in encoder that finds every text equally close (cosine 1): what is
    left to decide is what the query names."""

    identity, dimension = "flat@1", 2

    def encode(self, texts: list[str], *, tokens: int = 64) -> Any:
        np = pytest.importorskip("numpy")
        return np.full((len(texts), 2), 2 ** -0.5, dtype=np.float32)


def _index(*extra: Document) -> SearchIndex:
    pytest.importorskip("numpy")
    docs = [Document("gl/create_issue", "create_issue", skill="gitlab",
                     description="Create a new issue in a GitLab project."),
            Document("slack/post", "slack_post_message", skill="slack",
                     description="Post a new message to a Slack channel."), *extra]
    index = SearchIndex(docs)
    assert SemanticRanker(None, lambda _: None, loader=lambda: _Flat()).prepare(  # type: ignore[arg-type,return-value]
        index)
    return index


@pytest.mark.parametrize(("query", "weak"), [
    ("create a Jira ticket for the login bug", True),
    ("post the release notes on Discord", True),
    ("create a GitLab issue for the login bug", False),
    ("copy the Jira ticket into a GitLab issue", False),  # the set may do a part
    ("post it in Slack and on Discord", False),
    ("create an issue for the login bug", False),  # no product named
])
def test_a_product_the_set_never_names_fits_nothing(query: str, weak: bool) -> None:
    index = _index()
    assert index.elsewhere(query) is weak
    assert index.find(query, limit=1).weak is weak


def test_a_product_one_tool_names_is_served() -> None:
    index = _index(Document("gl/import", "import_issues", skill="gitlab",
                            description="Import issues from Jira into a project."))
    assert not index.find("create a Jira ticket", limit=1).weak
    assert index.find("post the release notes on Discord", limit=1).weak


def test_a_product_or_skill_only_hidden_tools_name_is_not_served() -> None:
    # The answer must not tell a caller that a hidden tool names it.
    index = _index(Document("gl/import", "import_issues", skill="gitlab",
                            description="Import issues from Jira into a project."),
                   Document("zd/ticket", "create_ticket", skill="zendesk",
                            description="Create a support ticket."))
    assert not index.find("create a Jira ticket", limit=1).weak
    assert index.find("create a Jira ticket", limit=1, hidden={"gl/import"}).weak
    assert not index.find("create a Zendesk ticket", limit=1).weak  # a skill of the set
    assert index.find("create a Zendesk ticket", limit=1, hidden={"zd/ticket"}).weak


@pytest.mark.parametrize(("query", "names"), [
    ("add a row to my Google Sheet", [("google", "sheets")]),  # the other number
    ("open a Google Doc", [("google", "docs")]),
    ("post it in the Microsoft Team channel", [("microsoft", "teams")]),
    ("ping both Discords", []),  # a one-word name is not inflected
])
def test_a_name_of_several_words_is_read_in_either_number(
        query: str, names: list[tuple[str, ...]]) -> None:
    assert mentioned(query) == names


@given(st.sampled_from(sorted(name for name in NAMES if len(name) > 1)), st.booleans())
def test_every_spelling_of_a_name_reads_as_the_name(name: tuple[str, ...], other: bool) -> None:
    last = name[-1]
    if other and last.isalpha() and len(last) >= 4:
        last = last[:-1] if last.endswith("s") and not last.endswith(("ss", "us", "is")) else (
            last if last.endswith("s") else f"{last}s")
    said = mentioned(" ".join((*name[:-1], last)))
    assert said[0] == name or (len(said[0]) > len(name) and said[0][:len(name)] == name)
    assert said_in(" ".join((*name[:-1], last))) >= {said[0]}


def test_a_name_in_the_other_number_is_served_by_a_tool_saying_it() -> None:
    index = _index(Document("gs/row", "append_row", skill="sheets",
                            description="Append a row to a Google Sheets spreadsheet."))
    assert not index.find("add a row to my Google Sheet", limit=1).weak
    assert _index().find("add a row to my Google Sheet", limit=1).weak


@pytest.mark.parametrize(("query", "names"), [
    ("trigger the Jenkins job nightly-build", [("jenkins",)]),
    ("get the value of key session:1 from Redis", [("redis",)]),
    ("create a user in Active Directory", [("active", "directory")]),
    ("put redis on the cluster from the bitnami chart", []),  # where it runs
    ("remove the grafana release", []),
    ("install mysql locally", []),
    ("what do I know about kafka", []),  # a topic, not the thing acted on
    ("find docs on redis streams", []),
])
def test_self_hosted_software_is_a_product_unless_the_query_says_where_it_runs(
        query: str, names: list[tuple[str, ...]]) -> None:
    assert mentioned(query) == names


def test_self_hosted_software_switched_off_is_no_product(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(products, "SELF_HOSTED_PRODUCTS", False)
    assert mentioned("trigger the Jenkins job") == []
    assert mentioned("trigger the Jenkins job on Discord") == [("discord",)]


def test_self_hosted_software_a_tool_names_is_served_and_hidden_ones_count_nothing() -> None:
    assert SELF <= NAMES
    index = _index(Document("ci/jenkins", "build_job", skill="ci",
                            description="Start a build of a Jenkins job."))
    assert not index.find("trigger the Jenkins job nightly", limit=1).weak
    assert index.find("trigger the Jenkins job nightly", limit=1, hidden={"ci/jenkins"}).weak
    assert _index().find("trigger the Jenkins job nightly", limit=1).weak


@pytest.mark.parametrize(("query", "names"), [
    ("create a Linear issue for the bug", [("linear",)]),  # a capital inside a sentence
    ("post it on Zoom chat", [("zoom",)]),
    ("fit a linear regression", []),  # the word, not the product
    ("Linear issues: list them", []),  # a sentence's first word
    ("Create A Linear Issue", []),  # a title's words
    ("it went wrong. Square up the totals", []),  # after a sentence's end
])
def test_a_product_named_by_a_common_word_counts_only_when_capitalised(
        query: str, names: list[tuple[str, ...]]) -> None:
    assert mentioned(query) == names


def test_a_capitalised_product_switched_off_is_no_product(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(products, "CAPITALISED_PRODUCTS", False)
    assert mentioned("create a Linear issue") == []


def test_a_capitalised_product_a_visible_tool_names_is_served() -> None:
    index = _index(Document("lin/issue", "create_issue", skill="tracker",
                            description="Create an issue in Linear."))
    assert not index.find("create a Linear issue", limit=1).weak
    assert index.find("create a Linear issue", limit=1, hidden={"lin/issue"}).weak


def test_a_named_skill_tool_hidden_from_the_caller_never_changes_the_answer() -> None:
    # The search end to end: the skill's own tools that the caller may not see count
    # for nothing in the named service's checks.
    profile = Document("profile/status", "set_user_status", skill="profile",
                       description="Set the status text of a user profile.")
    status = Document("slack/status", "slack_set_status", skill="slack",
                      description="Set the status of the user.")
    index = _index(profile, status)
    assert not index.find("set my Slack status to away", limit=1).weak
    assert index.find("set my Slack status to away", limit=1, hidden={"slack/status"}).weak
    assert _index(profile).find("set my Slack status to away", limit=1).weak
