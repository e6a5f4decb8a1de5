"""gateway/categories.py: kinds of service a query names by what they are."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from skillop.gateway.categories import KINDS, asked_products, of_kind, service_terms
from skillop.gateway.lexical import terms


def test_a_generic_kind_reaches_its_products_and_not_others() -> None:
    products = asked_products("ask the team chat who is on call tonight")
    assert of_kind(service_terms("slack", "slack_post_message"), products)
    assert of_kind(service_terms("discord", "send_message"), products)
    assert not of_kind(service_terms("github", "create_issue"), products)


def test_plurals_and_case_match_through_stemming() -> None:
    assert ("notion",) in asked_products("the team Wikis")
    assert ("airtabl",) in asked_products("rows of our SPREADSHEETS")


def test_a_product_of_several_words_needs_them_all() -> None:
    products = asked_products("the web search")
    assert of_kind(service_terms("brave-search", "brave_web_search"), products)
    assert not of_kind(service_terms("brave", "open_tab"), products)


def test_a_query_of_no_kind_names_no_product() -> None:
    assert asked_products("add 17 and 25") == frozenset()
    assert asked_products("") == frozenset()


def test_a_kind_is_matched_as_a_run_of_words_not_scattered() -> None:
    assert ("github",) not in asked_products("the host runs my code")
    assert ("github",) in asked_products("my code host")


def test_every_kind_has_words_and_products() -> None:
    for words, products in KINDS.values():
        assert all(terms(part) for part in words.split(","))
        assert all(terms(part) for part in products.split(","))


@given(st.text(max_size=200))
def test_any_text_gives_products_of_known_kinds(text: str) -> None:
    known = {tuple(terms(part)) for _, products in KINDS.values()
             for part in products.split(",")}
    assert asked_products(text) <= known


@given(st.text(max_size=80), st.text(max_size=80))
def test_a_tool_is_of_a_kind_only_when_its_terms_hold_a_product(skill: str, name: str) -> None:
    service = service_terms(skill, name)
    assert of_kind(service, asked_products("team chat")) == any(
        product <= service for product in map(frozenset, asked_products("team chat")))
