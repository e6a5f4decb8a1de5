"""Whether the closest tools of a set cannot do what a query asks (gateway/search.py's
"nothing fits", beside the cosine's threshold and the product check).

Two checks, neither with a threshold nor anything that grows with the set's size:

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
  is often context for a later step.

Tools hidden from a caller count for nothing in either (their numbers are left out of
the closest, and a service's own words are the visible tools'), so whether a query
gets "nothing fits" never tells a caller that a hidden tool exists.

``SWITCHES`` names each check's switch, for bench/abstain_cv.py's ablation (those of
other modules as "module.NAME": the adverbs skipped before a request's verb, and
self-hosted software read as a product, gateway/products.py).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from skillop.gateway.actions import (
    VERBS,
    Objects,
    asked,
    named,
    objects,
    phrase,
    sought,
    stems,
)
from skillop.gateway.lexical import ToolText

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
#: Each check runs while its switch is on (bench/abstain_cv.py turns each off in turn).
OPERATION = True
UNNAMED_OBJECT = True
SWITCHES = ("OPERATION", "UNNAMED_OBJECT", "ONE_STEP", "actions.ADVERBS",
            "products.SELF_HOSTED_PRODUCTS", "products.CAPITALISED_PRODUCTS")

#: A longer query that is one request (no second sentence, no "then") is checked too:
#: its object is what is acted on, not the context of a later step.
ONE_STEP = True
_STEPS = re.compile(r"[.:;!?]\s|\bthen\b", re.IGNORECASE)
_LETTERS = re.compile(r"[a-z]+")
#: An operation's word after the verb names what is said or made, or a kind of thing
#: by what is done to it, not a kind a tool must name ("post an update", "a merge
#: request"): such an object is not checked.
_OPERATIONS = stems(VERBS)


@functools.lru_cache(maxsize=1 << 14)
def _said(texts: tuple[str, ...]) -> frozenset[str]:
    """The stems of every word of a tool's texts."""
    return stems(_LETTERS.findall(" ".join(texts).lower()))


def unable(query: str, documents: Sequence[ToolText], closest: list[int], scores: Matrix, *,
           skills: Mapping[str, npt.NDArray[np.intp]], view: Objects) -> bool:
    """Whether the set cannot do what ``query`` asks: ``closest`` are the numbers of
    its best-ranked documents, ``scores`` every document's score (``-inf`` for those
    hidden from the caller), ``skills`` each skill's (``phrase``) document numbers,
    ``view`` the ``Objects`` of the documents the caller may see."""
    wanted = asked(query)
    if not wanted:
        return False
    if OPERATION and _no_operation(query, wanted, documents, closest[:ACTION_CANDIDATES],
                                   scores, skills=skills, view=view):
        return True
    return UNNAMED_OBJECT and _unnamed(query, documents, scores, view)


def _no_operation(query: str, wanted: frozenset[str], documents: Sequence[ToolText],
                  closest: list[int], scores: Matrix, *,
                  skills: Mapping[str, npt.NDArray[np.intp]], view: Objects) -> bool:
    import numpy as np

    said = named(query, skills)
    if said and any(phrase(documents[n].skill) in said for n in closest):
        numbers = np.concatenate([skills[name] for name in said])
        numbers = numbers[np.isfinite(scores[numbers])]  # not the hidden
        closest = numbers[np.argsort(-scores[numbers], kind="stable")][:len(closest)].tolist()
    return view.unable(query, wanted, [documents[n] for n in closest])


def _unnamed(query: str, documents: Sequence[ToolText], scores: Matrix, view: Objects) -> bool:
    """Whether ``query`` (short, or one step) names what it acts on, and no text of the
    ``OBJECT_CANDIDATES`` best-scored visible documents names it."""
    if len(query.split()) > OBJECT_WORDS and (not ONE_STEP or _STEPS.search(query.strip())):
        return False
    said = objects(query) - view.services
    if not said or said & _OPERATIONS:
        return False
    wanted = sought(said)
    if not wanted:
        return False
    import numpy as np

    visible = int(np.isfinite(scores).sum())
    count = min(OBJECT_CANDIDATES, visible)
    if count == 0:
        return False
    # Every document scored at least the count-th best visible one, ties included: the
    # same documents whatever else is hidden, and whatever order ties come in.
    least = np.partition(scores, len(scores) - count)[len(scores) - count]
    best = np.flatnonzero(scores >= least).tolist()
    return not any(wanted & _said(documents[n].texts()) for n in best)
