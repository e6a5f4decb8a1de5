"""The hybrid ranking's last step: its best candidates ordered by a linear model.

The blend (gateway/search.py: the cosine with BM25 squashed) ranks every tool of the
set; the ``CANDIDATES`` best of it are then ordered by a linear score over evidence
the blend does not weigh, or weighs by a constant: where in the tool the query's
words are (its name says what it does; a description also says what it does not, or
what to call next), whether the query names the tool's service or another, or its
kind ("the team chat": gateway/categories.py), whether the query's leading operation
verb is one the tool performs and what it acts on one the tool's name says
(gateway/actions.py), whether it performs the verb of the request's main clause when the
query has several (gateway/clauses.py: a long task's first step past its context),
how far the tool's cosine and BM25 score are from the set's best. Every feature means
the same in a set of 10 tools as in one of 5,000: scores are taken relative to the
set's best, word matches as shares of the query's words, never as counts or raw
BM25 (whose idf grows with the set). The weights (``fusion_weights.WEIGHTS``) are
fitted on the seen query sets by bench/disclosure_cv.py, which chooses each change by
leaving one set out at a time and writes the file; a feature missing from the file
counts for nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from skillop.gateway.actions import asked, objects, performed, phrase, sought, stems
from skillop.gateway.categories import asked_products, of_kind, service_terms
from skillop.gateway.clauses import Clause, clauses, main
from skillop.gateway.fusion_weights import WEIGHTS
from skillop.gateway.lexical import WORD, ToolText, terms

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
    "kind_named", "object_agrees", "object_differs", "main_verb_agrees", "main_verb_differs",
)
_AT = {name: column for column, name in enumerate(FEATURES)}
#: The blend's best whose texts' mean vector is the query's feedback (``feedback_cosine``).
FEEDBACK = 3
#: A query of more words than this is long (the blend's ``LONG_QUERY_WORDS``).
LONG_WORDS = 12


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
    #: Every field's terms.
    every: frozenset[str]
    #: The skill's and the name's terms (where a product's name is looked for).
    service: frozenset[str] = frozenset()
    #: The name's words as the operation check stems them (what the tool acts on).
    acts_on: frozenset[str] = frozenset()

    @classmethod
    def of(cls, tool: ToolText) -> ToolTerms:
        name = frozenset(terms(tool.name))
        service = frozenset(terms(" ".join(WORD.findall(tool.skill))))
        title, description = frozenset(terms(tool.title)), frozenset(terms(tool.description))
        parameters = frozenset(terms(tool.parameters))
        return cls(name, title, description, parameters, name - service, phrase(tool.skill),
                   name | title | description | parameters, service_terms(tool.skill, tool.name),
                   stems(tool.name_words().split()))


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
    #: Makes the same blend from the model's own query vector, when the ranking's was
    #: moved by the learned adapter (gateway/adapter.py); None: this one is. Made when
    #: ``plain`` is first read: only the abstention's model reads it, near its threshold.
    unmoved: Callable[[], Evidence] | None = field(default=None, repr=False, compare=False)
    _plain: Evidence | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def plain(self) -> Evidence | None:
        """The blend from the model's own query vector (None: this one is)."""
        if self._plain is None and self.unmoved is not None:
            object.__setattr__(self, "_plain", self.unmoved())
        return self._plain


def features(query: str, weighted: Mapping[str, float], idf: Mapping[str, float],
             evidence: Evidence, candidates: Sequence[int], tools: Sequence[ToolText],
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
    out[:, _AT["blend"]] = evidence.blended[chosen]
    out[:, _AT["blend_gap"]] = evidence.blended[chosen] - top
    out[:, _AT["cosine_gap"]] = evidence.ranked[chosen] - best_cosine
    out[:, _AT["name_cosine_gap"]] = evidence.names[chosen] - best_name
    if best_bm25 > 1e-6:  # a score that small matches nothing
        out[:, _AT["bm25_share"]] = evidence.bm25[chosen] / best_bm25
    own = frozenset(term for term, weight in weighted.items() if weight >= 1.0)
    synonyms = frozenset(weighted) - own
    mass = sum(idf.get(term, 0.0) for term in own)
    wanted = asked(query)
    centroid = evidence.vectors[chosen[:FEEDBACK]].sum(axis=0)
    centroid /= max(float(np.linalg.norm(centroid)), 1e-12)
    out[:, _AT["feedback_cosine"]] = evidence.vectors[chosen] @ centroid
    if len(query.split()) > LONG_WORDS:
        out[:, _AT["long_bm25_share"]] = out[:, _AT["bm25_share"]]
        out[:, _AT["long_cosine_gap"]] = out[:, _AT["cosine_gap"]]
    leaders = [words[n].own_name for n in candidates[:2]]
    products = asked_products(query)
    acted_on = sought(objects(query))
    # The word features of every candidate in one addition: a row at a time, the list's
    # conversion costs more than the features themselves.
    out += np.asarray([_matches(row, words[number], own, synonyms, weighted, idf, mass, leaders)
                       for row, number in enumerate(candidates)])
    for row, number in enumerate(candidates):
        if skills:
            named = words[number].skill in skills
            out[row, _AT["skill_named" if named else "other_skill"]] = 1.0
        if wanted:
            tool = tools[number]
            does = wanted & performed(tool.name_words(), tool.title, tool.description)
            out[row, _AT["verb_agrees" if does else "verb_differs"]] = 1.0
        out[row, _AT["reciprocal_rank"]] = 1.0 / (1 + row)
        if products and of_kind(words[number].service, products):
            out[row, _AT["kind_named"]] = 1.0
        if acted_on:
            agrees = acted_on & words[number].acts_on
            out[row, _AT["object_agrees" if agrees else "object_differs"]] = 1.0
    said = clauses(query)
    if len(said) > 1:
        _main_verb(out, said, [tools[n] for n in candidates])
    return out


def _main_verb(out: Matrix, said: tuple[Clause, ...], tools: Sequence[ToolText]) -> None:
    """Whether each candidate performs the operation of the query's main clause
    (gateway/clauses.py: its first step, past the context and the "so that I can"),
    into ``out``: a long task's leading verb is often the context's ("the deploy
    failed; roll it back"), or none ("I'm about to refactor ...; look at ...")."""
    wanted = asked(said[main(said)].text)
    if not wanted:
        return
    for row, tool in enumerate(tools):
        does = wanted & performed(tool.name_words(), tool.title, tool.description)
        out[row, _AT["main_verb_agrees" if does else "main_verb_differs"]] = 1.0


def _matches(row: int, found: ToolTerms, own: frozenset[str], synonyms: frozenset[str],
             weighted: Mapping[str, float], idf: Mapping[str, float], mass: float,
             leaders: Sequence[frozenset[str]]) -> list[float]:
    """A candidate's word features (the rest 0): where the query's own terms and its
    synonyms are in the tool, and how much of its name the query and the leaders say."""
    values = [0.0] * len(FEATURES)
    if own:
        anywhere = own & found.every
        if mass:
            values[_AT["idf_cover"]] = sum(idf.get(term, 0.0) for term in anywhere) / mass
        for feature, field in (("name_terms", found.name), ("title_terms", found.title),
                               ("description_terms", found.description),
                               ("parameter_terms", found.parameters), ("cover", found.every)):
            values[_AT[feature]] = len(own & field) / len(own)
    if synonyms:
        values[_AT["name_synonyms"]] = len(synonyms & found.name) / len(synonyms)
    if found.own_name:
        values[_AT["name_covered"]] = (len(found.own_name & weighted.keys())
                                       - 0.5 * len(found.own_name & synonyms)) / len(found.own_name)
    values[_AT["twin"]] = max((len(found.own_name & other) / len(found.own_name | other)
                               for i, other in enumerate(leaders) if i != row and other),
                              default=0.0)
    return values


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
