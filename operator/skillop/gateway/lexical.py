"""The words of search_tools' lexical ranking: index terms, and BM25's tables.

A tool's text and a query are read the same way: words split at punctuation and
camelCase humps, lowercased, English stop words dropped, stemmed with the Snowball
English stemmer (so "screenshots" finds "screenshot", "merging" finds "merge"). A
tool's fields count as BM25F weights them (``FIELD_WEIGHTS``): its name and tags
three times, its title twice, the description and the skill's name once, its
parameters half. gateway/search.py ranks with these tables; gateway/fusion.py reads
which of a query's terms each field of a tool has.
"""

from __future__ import annotations

import functools
import math
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import snowballstemmer

#: (field, weight): how much a word of each field counts (BM25F's field weights).
FIELD_WEIGHTS = {"name": 3.0, "tags": 3.0, "title": 2.0, "description": 1.0, "skill": 1.0,
                 "parameters": 0.5}
K1 = 1.2
B = 0.75

WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_STOP = frozenset((
    "a", "about", "an", "and", "any", "are", "as", "at", "be", "by", "can", "do", "does",
    "for", "from", "get", "give", "has", "have", "how", "i", "if", "in", "into", "is", "it",
    "its", "me", "my", "of", "on", "or", "our", "please", "so", "some", "that", "the", "their",
    "them", "then", "there", "these", "this", "those", "to", "us", "use", "using", "want",
    "we", "what", "when", "where", "which", "who", "will", "with", "without", "would", "you",
    "your",
))


@functools.lru_cache(maxsize=1 << 16)
def _term(word: str) -> str | None:
    """A word as found (case kept) -> its index term, or None for a stop word: one
    cached call per word of the text (a set of 5,000 tools has a few million words
    but some thousands of distinct ones)."""
    lower = word.lower()
    if lower in _STOP:
        return None
    with _STEMMING:
        stemmed: str = _STEMMER.stemWord(lower)
    return stemmed


_STEMMER = snowballstemmer.stemmer("english")
#: The stemmer keeps the word it works on in itself, and words are stemmed from the
#: vectors' thread (the tables) and from searches in worker threads at once.
_STEMMING = threading.Lock()


def terms(text: str) -> list[str]:
    """``text``'s index terms: words split at punctuation and camelCase, lowercased,
    stop words dropped, stemmed."""
    return [term for word in WORD.findall(text) if (term := _term(word)) is not None]


class ToolText(Protocol):
    """A tool's texts as the search's modules read them (gateway/search.py's
    ``Document``): the tables here, gateway/fusion.py's features, gateway/actions.py's
    objects and gateway/abstain.py's checks."""

    @property
    def name(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def tags(self) -> tuple[str, ...]: ...

    @property
    def skill(self) -> str: ...

    @property
    def parameters(self) -> str: ...

    def name_words(self) -> str: ...

    def texts(self) -> tuple[str, ...]: ...


@dataclass(frozen=True, slots=True)
class Tables:
    """BM25's tables over a set of documents."""

    #: term -> [(document number, weighted term frequency)]
    postings: dict[str, list[tuple[int, float]]]
    idf: dict[str, float]
    #: BM25's length normalisation of each document, computed once.
    norms: list[float]


def tables(documents: Sequence[ToolText]) -> Tables:
    """BM25's tables over ``documents``, their fields weighted (``FIELD_WEIGHTS``)."""
    lengths: list[float] = []
    postings: dict[str, list[tuple[int, float]]] = {}
    for number, doc in enumerate(documents):
        bag = weighted_bag(doc)
        lengths.append(sum(bag.values()))
        for term, weight in bag.items():
            postings.setdefault(term, []).append((number, weight))
    count = len(documents)
    average = (sum(lengths) / count) if count else 0.0
    idf = {term: math.log(1 + (count - len(posting) + 0.5) / (len(posting) + 0.5))
           for term, posting in postings.items()}
    return Tables(postings, idf, [K1 * (1 - B + B * length / average) for length in lengths])


def weighted_bag(doc: ToolText) -> dict[str, float]:
    """Each term of ``doc`` -> its count, each field's words weighted."""
    bag: dict[str, float] = {}
    fields: Sequence[tuple[str, str]] = (
        ("name", doc.name), ("tags", " ".join(doc.tags)), ("title", doc.title),
        ("description", doc.description), ("skill", doc.skill),
        ("parameters", doc.parameters))
    for field, text in fields:
        weight = FIELD_WEIGHTS[field]
        for term in terms(text):
            bag[term] = bag.get(term, 0.0) + weight
    return bag
