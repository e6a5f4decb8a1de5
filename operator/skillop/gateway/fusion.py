"""The hybrid ranking's last step: its best candidates ordered by a linear model.

The blend (gateway/search.py: the cosine with BM25 squashed) ranks every tool of the
set; the ``CANDIDATES`` best of it are then ordered by a linear score over evidence
the blend does not weigh, or weighs by a constant: where in the tool the query's
words are (its name says what it does; a description also says what it does not, or
what to call next), whether the query names the tool's service or another, whether
the query's leading operation verb is one the tool performs (gateway/actions.py),
how far the tool's cosine and BM25 score are from the set's best. Every feature means
the same in a set of 10 tools as in one of 5,000: scores are taken relative to the
set's best, word matches as shares of the query's words, never as counts or raw
BM25 (whose idf grows with the set). The weights (``fusion_weights.WEIGHTS``) are
fitted on the seen query sets by bench/disclosure_cv.py, which chooses each change by
leaving one set out at a time and writes the file; a feature missing from the file
counts for nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from skillop.gateway.actions import asked, performed, phrase
from skillop.gateway.fusion_weights import WEIGHTS
from skillop.gateway.lexical import WORD, terms

if TYPE_CHECKING:
    from skillop.gateway.embedding import Matrix

#: How many of the blend's best the linear score orders (the rest keep the blend's
#: order, below them): enough to hold nearly every relevant tool the blend finds.
CANDIDATES = 30
#: The features, in the order of a row of ``features``.
FEATURES = (
    "blend", "blend_gap", "cosine_gap", "name_cosine_gap", "bm25_share", "idf_cover",
    "name_terms", "title_terms", "description_terms", "parameter_terms", "name_covered",
    "skill_named", "other_skill", "verb_agrees", "verb_differs", "reciprocal_rank",
    "feedback_cosine", "twin", "cover", "name_synonyms", "long_bm25_share", "long_cosine_gap",
)
#: The blend's best whose texts' mean vector is the query's feedback (``feedback_cosine``).
FEEDBACK = 3
#: A query of more words than this is long (the blend's ``LONG_QUERY_WORDS``).
LONG_WORDS = 12


class Tool(Protocol):
    """What the features read of a tool (gateway/search.py's ``Document``)."""

    @property
    def name(self) -> str: ...

    @property
    def skill(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def parameters(self) -> str: ...

    def name_words(self) -> str: ...


@dataclass(frozen=True, slots=True)
class ToolTerms:
    """A tool's index terms by field, read once when the vectors attach."""

    name: frozenset[str]
    title: frozenset[str]
    description: frozenset[str]
    parameters: frozenset[str]
    #: The name's terms but its service's (what the tool's name says it does).
    own_name: frozenset[str]
    skill: str

    @classmethod
    def of(cls, tool: Tool) -> ToolTerms:
        name = frozenset(terms(tool.name))
        service = frozenset(terms(" ".join(WORD.findall(tool.skill))))
        return cls(name, frozenset(terms(tool.title)), frozenset(terms(tool.description)),
                   frozenset(terms(tool.parameters)), name - service, phrase(tool.skill))


@dataclass(frozen=True, slots=True)
class Evidence:
    """One query's scores over the whole set (hidden tools at minus infinity in
    ``blended``), as the blend computed them."""

    blended: Matrix
    #: The cosine the blend ranks (the text's and the name's, mixed).
    ranked: Matrix
    names: Matrix
    bm25: Matrix
    #: The set's text vectors (one unit row a tool).
    vectors: Matrix


def features(query: str, weighted: Mapping[str, float], idf: Mapping[str, float],
             evidence: Evidence, candidates: Sequence[int], tools: Sequence[Tool],
             words: Sequence[ToolTerms], skills: Sequence[str]) -> Matrix:
    """One row per candidate (in ``FEATURES`` order): ``weighted`` is the query's
    terms with their weights (1 its own, less a synonym's), ``skills`` the skills of
    the set the query names (as ``phrase`` spells them)."""
    import numpy as np

    out = np.zeros((len(candidates), len(FEATURES)), dtype=np.float32)
    if not candidates:
        return out
    chosen = np.asarray(candidates, dtype=np.intp)
    visible = np.isfinite(evidence.blended)
    top = float(evidence.blended[chosen[0]])
    best_cosine = float(evidence.ranked[visible].max())
    best_name = float(evidence.names[visible].max())
    best_bm25 = float(evidence.bm25[visible].max())
    out[:, 0] = evidence.blended[chosen]
    out[:, 1] = evidence.blended[chosen] - top
    out[:, 2] = evidence.ranked[chosen] - best_cosine
    out[:, 3] = evidence.names[chosen] - best_name
    if best_bm25 > 1e-6:  # a score that small matches nothing
        out[:, 4] = evidence.bm25[chosen] / best_bm25
    own = [term for term, weight in weighted.items() if weight >= 1.0]
    synonyms = {term for term, weight in weighted.items() if weight < 1.0}
    mass = sum(idf.get(term, 0.0) for term in own)
    wanted = asked(query)
    centroid = evidence.vectors[chosen[:FEEDBACK]].sum(axis=0)
    centroid /= max(float(np.linalg.norm(centroid)), 1e-12)
    out[:, 16] = evidence.vectors[chosen] @ centroid
    if len(query.split()) > LONG_WORDS:
        out[:, 20] = out[:, 4]
        out[:, 21] = out[:, 2]
    leaders = [words[n].own_name for n in candidates[:2]]
    for row, number in enumerate(candidates):
        tool, found = tools[number], words[number]
        if own:
            share = 1.0 / len(own)
            out[row, 5] = (sum(idf.get(term, 0.0) for term in own
                               if term in found.name or term in found.description
                               or term in found.title or term in found.parameters) / mass
                           if mass else 0.0)
            out[row, 6] = share * sum(term in found.name for term in own)
            out[row, 7] = share * sum(term in found.title for term in own)
            out[row, 8] = share * sum(term in found.description for term in own)
            out[row, 9] = share * sum(term in found.parameters for term in own)
            out[row, 18] = share * sum(term in found.name or term in found.title
                                       or term in found.description
                                       or term in found.parameters for term in own)
        if synonyms:
            out[row, 19] = len(synonyms & found.name) / len(synonyms)
        if found.own_name:
            out[row, 10] = (len(found.own_name & weighted.keys())
                            - 0.5 * len(found.own_name & synonyms)) / len(found.own_name)
        if skills:
            named = found.skill in skills
            out[row, 11 if named else 12] = 1.0
        if wanted:
            does = wanted & performed(tool.name_words(), tool.title, tool.description)
            out[row, 13 if does else 14] = 1.0
        out[row, 15] = 1.0 / (1 + row)
        out[row, 17] = max((len(found.own_name & other) / len(found.own_name | other)
                            for i, other in enumerate(leaders) if i != row and other),
                           default=0.0)
    return out


def scored(rows: Matrix, weights: Mapping[str, float] | None = None) -> Matrix:
    """The linear score of each row of ``features`` (higher ranks first), by
    ``weights`` (by default the fitted ones)."""
    import numpy as np

    weights = WEIGHTS if weights is None else weights
    vector = np.asarray([weights.get(name, 0.0) for name in FEATURES], dtype=np.float32)
    result: Matrix = rows @ vector
    return result


def reordered(candidates: Sequence[int], rows: Matrix,
              weights: Mapping[str, float] | None = None) -> list[int]:
    """``candidates`` (best first by the blend) by their linear score, best first;
    ties keep the blend's order."""
    score = scored(rows, weights).tolist()
    order = sorted(range(len(candidates)), key=lambda i: (-score[i], i))
    return [candidates[i] for i in order]
