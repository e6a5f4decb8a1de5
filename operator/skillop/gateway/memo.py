"""A query's reading, done once a query though a search asks for it several times.

A search reads the same query's words again and again: its leading verb
(gateway/actions.py) for the ranking's features, the abstention's checks and its
model, its clauses (gateway/clauses.py) for the features of the blend's best and of
the abstention's tool. ``per_query`` keeps a few recent answers, keyed on the query
and on the module switches the reading depends on (those bench/abstain_cv.py's
ablation turns with ``setattr``): read afresh on every call, so a switch turned
reads the query anew, as it did before it was kept.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from typing import TypeVar

T = TypeVar("T")
#: Recent queries kept per reading: a search asks for each reading within a few
#: milliseconds, and a gateway's worker threads search a few at once.
KEPT = 256


def per_query(switches: Callable[[], Hashable], *,
              chars: int) -> Callable[[Callable[[str], T]], Callable[[str], T]]:
    """Memoise a reading of a query's first ``chars`` characters (all it reads) on
    them and on ``switches()``, the values of the switches it reads."""

    def wrap(read: Callable[[str], T]) -> Callable[[str], T]:
        @functools.lru_cache(maxsize=KEPT)
        def kept(text: str, switched: Hashable) -> T:
            return read(text)

        @functools.wraps(read)
        def reading(query: str) -> T:
            return kept(query[:chars], switches())

        return reading

    return wrap
