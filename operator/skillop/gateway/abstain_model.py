"""The learned half of "nothing fits" (gateway/search.py): whether a query's evidence,
weighed together, says no tool of the set does it.

The checks without a threshold (gateway/abstain.py, gateway/products.py) stay as
they are; this model stands where a threshold on the best cosine stood, and reads
more than that cosine: how far the best is ahead of the 2nd and 5th, how the blend
scores its best and how far ahead, how much of the query's words the blend's best
tool holds and where (gateway/fusion.py's evidence of that one tool: its BM25 share,
the query's idf it covers, whether it performs the asked operation and names what is
acted on), the query's length, whether it asks an operation, names a product or a
skill of the set, and the log of the set's size (the tools the caller may see): at
the same cosine a request is likelier answerable in a set of 15 tools than in 551,
where more tools come near a request none of them does. The cosines and the blend
are the sentence model's own (the learned query adapter, gateway/adapter.py, moves
only the ranking), so nothing the model reads was fitted on the queries it was
fitted on.

Every other feature means the same in a set of 10 tools as in 5,000 as far as the
search's own scores do, and every one is read from the tools the caller may see
only (the hidden are at minus infinity): whether a query abstains never tells that
a hidden tool exists. The weights (``abstain_weights``: a logistic regression's, its
operating point folded into the bias and the size's weight) are fitted by
bench/abstain_learned.py ``--write`` on the seen query sets whose queries no check
abstains on, over all the recorded tools and random subsets of 15, 60 and 200.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from skillop.gateway.abstain_weights import BIAS, WEIGHTS
from skillop.gateway.actions import asked
from skillop.gateway.fusion import FEATURES as FUSED
from skillop.gateway.fusion import Evidence, ToolTerms, features
from skillop.gateway.lexical import ToolText
from skillop.gateway.products import mentioned

if TYPE_CHECKING:
    from skillop.gateway.embedding import Matrix

#: The model decides only where the best cosine is within this of the length's
#: threshold (gateway/search.py's ``abstain_below``): farther under it, nothing fits;
#: farther over it, something does, as the threshold alone decided. Outside the band
#: a linear score would extrapolate (a tool whose text is the query's, cosine 1, is
#: never refused for its gaps); chosen on the seen sets, each left out in turn.
BAND = 0.3
#: How far under the threshold the model decides (the band's lower half). Narrower
#: than ``BAND``: over all 551 recorded tools, 5 of the 7,015 seen queries' best cosines
#: lie more than 0.15 under the threshold and none more than 0.2, so there the score
#: extrapolates (a one-word request far from every text answered for a close name);
#: the seen sets, each left out in turn, score 0.3, 0.2 and 0.15 alike
#: (docs/benchmarks.md).
BAND_UNDER = 0.15
#: Whether the model decides (bench/abstain_cv.py and bench/abstain_learned.py turn it
#: off to score the cosine's threshold in its place).
LEARNED = True
#: The features, in the order of ``row``.
FEATURES = (
    "cosine", "margin", "cosine_gap2", "cosine_gap5", "blend", "blend_gap2", "blend_gap5",
    "bm25_squashed", "bm25_share", "idf_cover", "cover", "name_covered", "verb_agrees",
    "verb_differs", "object_agrees", "object_differs", "words", "long", "asks", "mentions",
    "names_skill", "tools",
)
#: The blend's best tool's evidence read from gateway/fusion.py's features.
_TOOL = ("bm25_share", "idf_cover", "cover", "name_covered", "verb_agrees", "verb_differs",
         "object_agrees", "object_differs")
#: A query of more words than this is long (gateway/search.py's ``LONG_QUERY_WORDS``).
LONG_WORDS = 12
#: The longest query read (gateway/search.py's ``MAX_QUERY_CHARS``).
MAX_QUERY_CHARS = 1000
#: The BM25 score that counts half (gateway/search.py's ``BM25_HALF``).
BM25_HALF = 8.0
#: The smallest and largest sets the weights were fitted on (random subsets of the
#: recorded tools, and all of them): a set outside is read as the nearest, so that
#: the size's weight is not drawn beyond the sizes seen.
SMALLEST_FITTED = 15
LARGEST_FITTED = 551


def _gaps(values: Matrix) -> list[float]:
    """The best of the finite ``values``, and its leads over the 2nd and the 5th (over
    the last when there are fewer)."""
    import numpy as np

    finite = values[np.isfinite(values)]
    if not len(finite):
        return [0.0, 0.0, 0.0]
    k = min(5, len(finite))
    best = -np.sort(np.partition(-finite, k - 1)[:k])
    return [float(best[0]), float(best[0] - best[min(1, k - 1)]),
            float(best[0] - best[min(4, k - 1)])]


def row(query: str, cosines: Matrix, plain: Evidence, *, below: float,
        weighted: Mapping[str, float], idf: Mapping[str, float],
        tools: Sequence[ToolText], words: Sequence[ToolTerms],
        skills: Sequence[str]) -> list[float]:
    """``FEATURES`` for ``query``: ``cosines`` its raw cosine with each tool's text,
    ``plain`` the blend from the model's own query vector (hidden tools at minus
    infinity in both), ``below`` the length's cosine threshold, ``weighted`` the
    query's terms (gateway/search.py's ``query_terms``), ``skills`` the set's skills
    the query names."""
    import numpy as np

    cosine = _gaps(cosines)
    blend = _gaps(plain.blended)
    visible = np.isfinite(plain.blended)
    tool = [0.0] * len(_TOOL)
    best_bm25 = 0.0
    if visible.any():
        best_bm25 = float(plain.bm25[visible].max())
        top = int(np.argmax(plain.blended))
        rows = features(query, weighted, idf, plain, [top], tools, words, skills)
        tool = [float(rows[0, FUSED.index(name)]) for name in _TOOL]
    count = len(query[:MAX_QUERY_CHARS].split())
    return [cosine[0], cosine[0] - below, *cosine[1:], *blend,
            best_bm25 / (best_bm25 + BM25_HALF), *tool,
            min(count, 2 * LONG_WORDS) / LONG_WORDS, float(count > LONG_WORDS),
            float(bool(asked(query))), float(bool(mentioned(query))), float(bool(skills)),
            float(np.log(min(max(int(visible.sum()), SMALLEST_FITTED), LARGEST_FITTED)))]


def score(values: Sequence[float]) -> float:
    """The log-odds, less the operating point's, that nothing fits."""
    return BIAS + sum(WEIGHTS.get(name, 0.0) * value
                      for name, value in zip(FEATURES, values, strict=True))


def nothing_fits(values: Sequence[float]) -> bool:
    """Whether the model says no tool fits (``values``: a ``row``)."""
    return score(values) > 0.0
