"""Whether the closest tools of a set cannot do what a query asks (gateway/search.py's
"nothing fits", beside the cosine's threshold and the product check).

Three checks, none with a threshold nor anything that grows with the set's size:

* **the operation** (gateway/actions.py): the query leads with an operation verb
  ("delete ...") that none of the ``ACTION_CANDIDATES`` closest tools performs on what
  it names; when it names a skill of the set and one of them is that skill's, that
  skill's closest stand in for them ("cancel the CircleCI workflow": another
  service's tool that cancels does not do it for this one);
* **the object no close tool names**: the query asks for an operation on something
  ("create a gist", "set my status", "add an environment variable") that no text of
  the ``OBJECT_CANDIDATES`` closest tools names at all, in its words or the
  thesaurus's: the set's tools near the purpose do not know the thing. Only a short
  request (at most ``OBJECT_WORDS`` words) or a longer one of a single step (no
  second sentence, no "then"): in a task of several steps the first clause's object
  is often context for a later step;
* **the operation no close tool says**: the query leads with an operation of its own
  (gateway/operations.py: "rebase", "archive", "invite", "cancel") that no text of
  the ``OBJECT_CANDIDATES`` closest tools (nor of the named service's) says in any
  word of its family: the class gateway/actions.py reads is broader than it.

A leading label ("slack: delete the message") names the request's service: the checks
read "delete the message on slack" (``unlabelled``).

When the query names a service of the set (a skill's name, or a well-known product
some tools' texts name: gateway/products.py), that service's own closest tools are
read too, in a request of one step: "set my Slack status", "create a MongoDB user"
are near the service's other tools, yet the service does not do them.

* **the service's operation**: none of its ``SERVICE_OPERATION_CANDIDATES`` best-scored
  tools performs the operation on what the query names (``Objects.unable``, as
  above: "create a new Airtable base" where its tools only list bases);
* **the service's object**: no name, title or description of its
  ``SERVICE_OBJECT_CANDIDATES`` best-scored tools names what the query acts on, in
  its words or the thesaurus's (the parameters, which name what a tool reads or
  filters by, not what it acts on, are not read). Not for verbs whose object is
  what is written or run (``CONTENT_VERBS``: "post the release notes", "run SELECT
  ..."): no tool names it.

Tools hidden from a caller count for nothing in any (their numbers are left out of
the closest, and a service's own words are the visible tools'), so whether a query
gets "nothing fits" never tells a caller that a hidden tool exists.

``SWITCHES`` names each check's switch, for bench/abstain_cv.py's ablation (those of
other modules as "module.NAME": the adverbs skipped before a request's verb, and
self-hosted software read as a product, gateway/products.py).
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from skillop.gateway.actions import (
    VERBS,
    Objects,
    asked,
    ending,
    named,
    objects,
    phrase,
    sought,
    stems,
    telling,
    verb,
)
from skillop.gateway.lexical import ToolText
from skillop.gateway.operations import SAID
from skillop.gateway.products import mentioned

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from skillop.gateway.embedding import Matrix

#: A query that asks for an operation none of this many of the best-ranked tools
#: performs fits none: the closest tools a weak answer shows, a count that means the
#: same in a set of 10 tools as in 5,000.
ACTION_CANDIDATES = 3
#: How many of the best-ranked tools must all fail to name what the query acts on:
#: twice the matches a search shows by default (gateway/search_tool.py).
OBJECT_CANDIDATES = 10
#: The longest query (in words) whose object is checked against them: the length at
#: which the search leans on BM25 too (gateway/search.py's ``LONG_QUERY_WORDS``).
OBJECT_WORDS = 12
#: How many of a named service's best-scored tools must all fail to perform the
#: operation: more than ``ACTION_CANDIDATES``, as the service's tools are fewer and all
#: near; a count that means the same whatever the set's size.
SERVICE_OPERATION_CANDIDATES = 5
#: How many of them must all fail to name what the query acts on (as
#: ``OBJECT_CANDIDATES``).
SERVICE_OBJECT_CANDIDATES = 10
#: Verbs whose object is what is written, said or run, not a kind of thing a tool
#: names ("post that the release is out", "run SELECT count(*) ...").
CONTENT_VERBS = frozenset(("write", "post", "send", "publish", "reply", "comment", "respond",
                           "announce", "notify", "email", "message", "run", "execute"))
#: A reply or comment adds to what it is on: an update of it too, as adding is
#: (gateway/actions.py reads these verbs as sending or creating alone).
_ADDING = frozenset(("reply", "comment", "respond"))
_ADDS_TO = frozenset(("update",))
#: What "make" asks for when it makes a thing so ("make the service reachable on my
#: laptop", "make lookups faster"): an outcome, which tools of any operation reach
#: (forwarding a port, adding an index), not the making of the thing.
_OUTCOMES = frozenset((
    "public", "private", "visible", "hidden", "available", "accessible", "reachable",
    "executable", "readable", "writable", "faster", "slower", "smaller", "bigger", "larger",
    "shorter", "longer", "quicker", "cheaper", "safer"))


def _outcome(query: str) -> bool:
    """Whether ``query`` asks "make" something so (an outcome word among its words)."""
    return verb(query) == "make" and not _OUTCOMES.isdisjoint(_LETTERS.findall(query.lower()))


_SPECIFIC = frozenset(("merge", "restore"))
#: Each check runs while its switch is on (bench/abstain_cv.py turns each off in turn).
OPERATION = True
UNNAMED_OBJECT = True
SERVICE_OPERATION = True
SERVICE_OBJECT = True
UNSAID_OPERATION = True
#: Whether a leading label ("github: ...") is read as naming the service (``unlabelled``).
LABELS = True
#: A label before a colon: one to three words, then the request.
_LABEL = re.compile(r"^\s*([A-Za-z][\w.-]*(?: [\w.-]+){0,2}):\s+(\S.*)$", re.DOTALL)
_PARTICLES = frozenset(("off", "up", "out", "down", "back", "away", "over", "until", "through"))
#: Whether a tool that names what is removed from something must delete it (``_taken``).
REMOVED_FROM = True
SWITCHES = ("OPERATION", "UNSAID_OPERATION", "UNNAMED_OBJECT", "ONE_STEP",
            "SERVICE_OPERATION", "SERVICE_OBJECT", "REMOVED_FROM", "LABELS",
            "actions.ADVERBS", "actions.FORMS",
            "products.SELF_HOSTED_PRODUCTS", "products.CAPITALISED_PRODUCTS")

#: A longer query that is one request (no second sentence, no "then") is checked too:
#: its object is what is acted on, not the context of a later step.
ONE_STEP = True
_STEPS = re.compile(r"[.:;!?]\s|\bthen\b", re.IGNORECASE)
_LETTERS = re.compile(r"[a-z]+")
#: A capitalised word inside a sentence names one thing ("Carol", "Budget").
_NAME = re.compile(r"(?<=[a-z0-9,;] )[A-Z][a-z]+\b")
#: An operation's word after the verb names what is said or made, or a kind of thing
#: by what is done to it, not a kind a tool must name ("post an update", "a merge
#: request"): such an object is not checked.
_OPERATIONS = stems(VERBS)


@functools.lru_cache(maxsize=1 << 14)
def _said(texts: tuple[str, ...]) -> frozenset[str]:
    """The stems of every word of a tool's texts."""
    return stems(_LETTERS.findall(" ".join(texts).lower()))


def unable(query: str, documents: Sequence[ToolText], closest: list[int], scores: Matrix, *,
           skills: Mapping[str, npt.NDArray[np.intp]], view: Objects,
           service: Collection[int] = (), saying: Collection[int] = ()) -> bool:
    """Whether the set cannot do what ``query`` asks: ``closest`` are the numbers of
    its best-ranked documents, ``scores`` every document's score (``-inf`` for those
    hidden from the caller), ``skills`` each skill's (``phrase``) document numbers,
    ``view`` the ``Objects`` of the documents the caller may see, ``service`` the
    numbers of the documents of the skills the query names, ``saying`` those whose
    texts name a product it names."""
    # A label's colon still ends a sentence: "x: a, then b" is no more one step unlabelled.
    single = _one_step(query)
    query = unlabelled(query)
    wanted = asked(query) | (_ADDS_TO if verb(query) in _ADDING else frozenset())
    if _outcome(query):
        return False
    if UNSAID_OPERATION and single and _unsaid(query, documents, scores, service):
        return True
    if not wanted:
        return False
    naming = _taken(query, wanted)
    if OPERATION and _no_operation(query, wanted, documents, closest[:ACTION_CANDIDATES],
                                   scores, skills=skills, view=view, naming=naming):
        return True
    if UNNAMED_OBJECT and single and _unnamed(query, documents, scores, view):
        return True
    if not single:
        return False
    own = _best(service, scores, SERVICE_OPERATION_CANDIDATES)
    if SERVICE_OPERATION and own and view.unable(query, _specific(wanted),
                                                 [documents[n] for n in own], naming=naming):
        return True
    # A tool that names a product may serve only a part of it ("import issues from
    # Jira"): what it does is not the product's whole, but the words it knows are.
    own = _best({*service, *saying}, scores, SERVICE_OBJECT_CANDIDATES)
    return SERVICE_OBJECT and bool(own) and _service_unnamed(
        query, [documents[n] for n in own], view)


def _taken(query: str, wanted: frozenset[str]) -> frozenset[str] | None:
    """The classes a tool that names what ``query`` acts on must perform: deleting,
    when the query takes it away from something ("remove the Fax field from the
    table"): such a removal updates the table, and a tool that updates the field
    (renames it) does not remove it; else those ``wanted`` (None)."""
    if not REMOVED_FROM or "delete" not in wanted:
        return None
    return frozenset(("delete",)) if ending(query) == "from" else None


def _specific(wanted: frozenset[str]) -> frozenset[str]:
    """The classes a named service's own tool must perform: a merge or a restore
    alone when the verb asks for one (its tools that only update or create do
    something else to the same object: "merge two contacts" is no batch update),
    else every class asked."""
    own = wanted & _SPECIFIC
    return own or wanted


def _best(numbers: Collection[int], scores: Matrix, count: int) -> list[int]:
    """The ``count`` best-scored of ``numbers`` that the caller may see (a finite
    score), best first, ties by number: the same whatever else is hidden."""
    visible = [n for n in numbers if scores[n] > -math.inf]
    return sorted(visible, key=lambda n: (-float(scores[n]), n))[:count]


def _one_step(query: str) -> bool:
    """Whether ``query`` is short (at most ``OBJECT_WORDS`` words) or one request (no
    second sentence, no "then")."""
    return (len(query.split()) <= OBJECT_WORDS
            or (ONE_STEP and not _STEPS.search(query.strip())))


def _names(query: str) -> frozenset[str]:
    """The stems of the words ``query`` capitalises inside a sentence: each names one
    thing ("erase Carol", "the Budget field"), not a kind a tool would name."""
    return stems(word.lower() for word in _NAME.findall(query))


def _service_unnamed(query: str, tools: Sequence[ToolText], view: Objects) -> bool:
    """Whether ``query`` acts on something (not what is written or run) that no name,
    title or description of ``tools`` (a named service's closest) names."""
    if verb(query) in CONTENT_VERBS:
        return False
    said = objects(query, adverbs=False) - view.services - _names(query)
    said -= stems(word for name in mentioned(query) for word in name)
    if not said or said & _OPERATIONS:
        return False
    wanted = sought(said)
    return not any(wanted & _said((tool.name_words(), tool.title, tool.description))
                   for tool in tools)


def _no_operation(query: str, wanted: frozenset[str], documents: Sequence[ToolText],
                  closest: list[int], scores: Matrix, *,
                  skills: Mapping[str, npt.NDArray[np.intp]], view: Objects,
                  naming: frozenset[str] | None) -> bool:
    import numpy as np

    said = [skill for skill in named(query, skills) if telling(skill)]
    if said and any(phrase(documents[n].skill) in said for n in closest):
        numbers = np.concatenate([skills[name] for name in said])
        numbers = numbers[np.isfinite(scores[numbers])]  # not the hidden
        closest = numbers[np.argsort(-scores[numbers], kind="stable")][:len(closest)].tolist()
    return view.unable(query, wanted, [documents[n] for n in closest], naming=naming)


def _unnamed(query: str, documents: Sequence[ToolText], scores: Matrix, view: Objects) -> bool:
    """Whether ``query`` (short, or one step) names what it acts on, and no text of the
    ``OBJECT_CANDIDATES`` best-scored visible documents names it."""
    said = objects(query, adverbs=False) - view.services - _names(query)
    if not said or said & _OPERATIONS:
        return False
    wanted = sought(said)
    if not wanted:
        return False
    best = _top(scores, OBJECT_CANDIDATES)
    return bool(best) and not any(wanted & _said(documents[n].texts()) for n in best)


def _top(scores: Matrix, count: int) -> list[int]:
    """Every visible document scored at least the ``count``-th best visible one, ties
    included: the same documents whatever else is hidden, and whatever order ties
    come in (none when none is visible)."""
    import numpy as np

    count = min(count, int(np.isfinite(scores).sum()))
    if count == 0:
        return []
    least = np.partition(scores, len(scores) - count)[len(scores) - count]
    return np.flatnonzero(scores >= least).tolist()


def asks(query: str) -> bool:
    """Whether ``query`` leads with an operation (gateway/actions.py's, or one of
    gateway/operations.py's), after a label (``unlabelled``): else no check reads it."""
    query = unlabelled(query)
    return bool(asked(query)) or _own(query) is not None


def unlabelled(query: str) -> str:
    """``query`` with a leading label ("circleci: cancel the workflow", "knowledge
    graph: rename ...") moved to its end ("cancel the workflow on circleci"): the
    request is what follows the label, and the service it names is still named."""
    match = _LABEL.match(query) if LABELS else None
    if match is None or asked(match[1]) or verb(match[1]) in SAID:
        return query  # "rename it: ..." is a request, not a label
    return f"{match[2].strip()} on {match[1]}"


def _own(query: str) -> frozenset[str] | None:
    """The words a tool says when it performs the operation of its own that leads
    ``query`` (gateway/operations.py), or None: none leads it, or the verb is one of a
    phrasal verb ("kick off", "back up": another meaning)."""
    words = SAID.get(verb(query))
    return None if words is None or _phrasal(query) else words


def _phrasal(query: str) -> bool:
    """Whether the word after ``query``'s leading verb is a particle ("kick *off*")."""
    tokens = _LETTERS.findall(query.lower())
    lead = verb(query)
    after = next((tokens[n + 1] for n, word in enumerate(tokens[:-1]) if word == lead), "")
    return after in _PARTICLES


def _unsaid(query: str, documents: Sequence[ToolText], scores: Matrix,
            service: Collection[int]) -> bool:
    """Whether ``query`` (short, or one step) leads with an operation of its own
    (gateway/operations.py: "rebase", "archive", "invite") that no text of the
    ``OBJECT_CANDIDATES`` best-scored visible documents, nor of the named service's
    best (``service``), says in any of its words' forms (``_acting``)."""
    words = _own(query)
    if words is None:
        return False
    best = {*_top(scores, OBJECT_CANDIDATES), *_best(service, scores, OBJECT_CANDIDATES)}
    return bool(best) and not any(words & _joined(_acting(documents[n])) for n in best)


def _acting(tool: ToolText) -> tuple[str, ...]:
    """The texts that say what ``tool`` does: not its parameters, which name what it
    reads or filters by ("owner" of a repository)."""
    return (tool.skill, tool.name_words(), tool.title, tool.description, " ".join(tool.tags))


@functools.lru_cache(maxsize=1 << 14)
def _joined(texts: tuple[str, ...]) -> frozenset[str]:
    """The words of a tool's texts, lowercased, and each two in a row joined ("cherry
    pick": "cherrypick")."""
    words = _LETTERS.findall(" ".join(texts).lower())
    return frozenset((*words, *map("".join, itertools.pairwise(words))))
