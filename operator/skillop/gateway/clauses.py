"""A long request split into its clauses, and the one that carries its main action.

A task description says where the user is before what they want ("the deploy failed;
roll it back"), why ("so that I can start it again"), and often several steps ("open
the page, fill the form, then take a screenshot"). The sentence model reads only the
query's first tokens and BM25 weighs every word alike, so a tool matching the context
("deploy") can outrank the one doing the request ("rollback"). The learned order
(gateway/fusion.py) reads, per candidate, how well it matches the best clause and the
main one, and whether it performs the main clause's verb.

A clause ends at a sentence's end, at ";" or ":", and before a connective ("then",
"before", "after", "once", "so that", "if", "when", "until", "because") or a comma or
"and" that an imperative verb follows ("..., then commit them", "..., fill the form",
"find its process and end it"). A clause opening with a connective of purpose or
time ("so that I can ...", "before I touch anything", "if it did") is subordinate:
context, not a step. Cuts fall only between words, so the clauses' words are the
query's words, in order. Only general English is read here, no set's words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from skillop.gateway import actions
from skillop.gateway.actions import VERBS, leading
from skillop.gateway.memo import per_query

#: Words that open a clause of their own, wherever they stand.
_OPENERS = frozenset(("then", "before", "after", "once", "so", "if", "when", "whenever",
                      "until", "because", "since", "while", "afterwards", "finally"))
#: Openers of a clause that says why or when, not what to do ("then", "finally" open
#: a step).
_SUBORDINATE = _OPENERS - {"then", "afterwards", "finally"}
#: Verbs a request starts with that read, look or act without changing anything (the
#: operation lexicon, ``actions.VERBS``, has the changing ones): a clause opening with
#: either asks for a step.
_READING_WORDS = """look show list find get read check see search fetch pull open tell
    give describe count compare review investigate figure gather collect summarise summarize
    inspect view browse crawl scrape take grab load wait watch follow test navigate visit go
    type fill click press select ping connect reconnect query explain map extract identify
    locate track monitor verify confirm ensure make sure keep hover drag scroll evaluate
    think plan work calculate compute convert translate geocode"""
_READING = frozenset(_READING_WORDS.split())
_TOKEN = re.compile(r"\S+")
_EDGE = re.compile(r"^[\W_]+|[\W_]+$")
_HARD_END = re.compile(r"[.;:!?][\"'\u201d\u2019)\]]*$")
#: A query longer than this is read up to it (the search's own limit is shorter).
_MAX_CHARS = 2000


@dataclass(frozen=True, slots=True)
class Clause:
    """A run of the query's words: its text, and whether it states a step."""

    text: str
    #: Opens with a connective of purpose or time ("so I can", "before", "if").
    subordinate: bool
    #: Opens (after "please", "I need to", ...) with a verb: a request of its own.
    imperative: bool


@per_query(lambda: actions.ADVERBS, chars=_MAX_CHARS)
def clauses(query: str) -> tuple[Clause, ...]:
    """``query``'s clauses, in order (none for a query without words)."""
    tokens = [(m.start(), m.group()) for m in _TOKEN.finditer(query[:_MAX_CHARS])]
    starts = [0] + [i for i in range(1, len(tokens)) if _cut(tokens, i)]
    ends = [*starts[1:], len(tokens)]
    text = query[:_MAX_CHARS]
    return tuple(_clause(text[tokens[a][0]:tokens[b - 1][0] + len(tokens[b - 1][1])])
                 for a, b in zip(starts, ends, strict=True) if a < b)


def main(said: tuple[Clause, ...]) -> int:
    """The index in ``said`` of the clause carrying the request's main action: the
    first imperative step; else the first clause that is no subordinate one; else 0."""
    steps = [i for i, clause in enumerate(said) if clause.imperative and not clause.subordinate]
    if steps:
        return steps[0]
    return next((i for i, clause in enumerate(said) if not clause.subordinate), 0)


def _word(token: str) -> str:
    return _EDGE.sub("", token).lower()


def _verb(word: str) -> bool:
    return word in VERBS or word in _READING


def _cut(tokens: list[tuple[int, str]], i: int) -> bool:
    """Whether a clause starts at word ``i``."""
    before, word = tokens[i - 1][1], _word(tokens[i][1])
    if _HARD_END.search(before) and not before.endswith(("e.g.", "i.e.", "etc.")):
        return True
    if word in _OPENERS:
        return _word(before) != "and"  # "and then": the cut falls before "and"
    following = _word(tokens[i + 1][1]) if i + 1 < len(tokens) else ""
    if word == "and":
        return following in _OPENERS or _verb(following)
    return before.endswith(",") and _verb(word)


def _clause(text: str) -> Clause:
    first = _word(text.split(maxsplit=1)[0]) if text.split() else ""
    if first == "and":
        rest = text.split(maxsplit=2)
        first = _word(rest[1]) if len(rest) > 1 else ""
    return Clause(text, first in _SUBORDINATE, _verb(leading(text)))
