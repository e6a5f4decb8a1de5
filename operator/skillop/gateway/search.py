"""Ranked keyword search over one Actor's tool set (``disclosure: Search``).

The gateway's ``search_tools`` answers a purpose ("open a merge request") with the
set's best-matching tools. The index holds exactly the set the gateway serves, so a
search can never reveal, let alone reach, a tool outside it.

Ranking is BM25 (Robertson and Zaragoza's, k1 = 1.2, b = 0.75) over one bag of words
per tool, its fields weighted as BM25F does: the name (split at ``_``, ``-``, ``.``
and camelCase humps) and the tags count three times, the title twice, the description
and the skill's name once. Words are lowercased, stemmed with the Snowball English
stemmer (so "screenshots" finds "screenshot", "merging" finds "merge") and stripped of
English stop words (gateway/lexical.py). No model, no download: a query over 1,000
tools costs well under a millisecond (bench/disclosure.py). The index's tables (every
distinct word stemmed: about half a second of CPU at 5,000 tools) are built on first
use, not when the set is read: the vectors' background thread builds them when it
attaches the vectors, else the first search does, so the gateway serves before they
exist.

When the gateway has a sentence model (gateway/embedding.py) and the set's vectors are
ready (gateway/vectors.py), the ranking is hybrid: each tool's score is
``SEMANTIC_WEIGHT`` times the cosine of the query's vector and the tool's plus the
rest times its BM25 score squashed into [0, 1) as ``s / (s + BM25_HALF)`` (a blend of
scores rather than of ranks: a weak lexical match should not pull a tool up as far as
a strong one); for a query of more than ``LONG_QUERY_WORDS`` words the cosine counts
less (``semantic_weight``: the model reads only a query's first tokens). A tool has
two vectors, its text's (``Document.sentence``) and its name's (``Document.label``);
the cosine ranked is their mix, ``NAME_WEIGHT`` of the name's, each with the query's
vector moved by the learned adapter (gateway/adapter.py; the abstention's cosine
reads the query's own vector). The blend's 30 best are then ordered by a linear
score (gateway/fusion.py: where in each tool the query's words are, whether it names
the tool's service, whether the tool performs the query's verb, each score against
the set's best). A query whose best cosine with any tool's text is under its threshold
(``abstain_below``: higher for a short query) is answered with "nothing fits" and the
closest few, marked weak; so is one that asks for an operation (gateway/actions.py:
"delete ...") that none of the ``ACTION_CANDIDATES`` best-ranked tools performs on what
it names (or, when it names a skill of the set, none of that skill's best), or on a
thing no text of the closest ten names (gateway/abstain.py), and one naming a well-known
product no text of the set names (gateway/products.py: "create a Jira ticket";
``elsewhere``). The blend's two constants were fitted on
bench/mcp_tools/queries-v2-tuning.txt, the threshold's two on the seen query sets so
that none left out wrongly abstains on over 5% of its answerable queries
(bench/disclosure.py --hybrid, docs/benchmarks.md)."""

from __future__ import annotations

import heapq
import math
import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from skillop.gateway import abstain, abstain_model
from skillop.gateway.abstain import ACTION_CANDIDATES
from skillop.gateway.actions import ObjectsByView, named, phrase, telling
from skillop.gateway.adapter import adapted
from skillop.gateway.fusion import CANDIDATES, Evidence, ToolTerms, features
from skillop.gateway.lexical import K1, WORD, terms
from skillop.gateway.lexical import Tables as _Tables
from skillop.gateway.lexical import tables as _tables
from skillop.gateway.products import mentioned, said_in
from skillop.gateway.ranker import reordered
from skillop.gateway.thesaurus import DEVELOPER_GROUPS, EXPANSION_WEIGHT, GROUPS
from skillop.model.wording import count

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from skillop.gateway.embedding import Matrix

#: The hybrid blend: how much the cosine counts, and the BM25 score that counts half.
SEMANTIC_WEIGHT = 0.75
BM25_HALF = 8.0
#: How much a tool's name vector (the skill, the name's words, the title) counts in
#: the cosine ranked, beside its text's (the description weighs most in that one): a
#: mix of two cosines, chosen on the seen query sets (docs/benchmarks.md). The
#: abstention reads the text's cosine alone, as it was calibrated.
NAME_WEIGHT = 0.15
#: A query of ``LONG_QUERY_WORDS`` words or more whose best cosine with any tool is under
#: this fits none; a shorter one's threshold is ``ABSTAIN_PER_WORD`` higher a word fewer
#: (0.29 at 6 words): a longer query's best cosine is lower even when a tool fits. The
#: cosine, not the blend: BM25's scores grow with the set (its idf), a cosine does not.
ABSTAIN_BELOW = 0.17
ABSTAIN_PER_WORD = 0.02
#: A query longer than this is cut (a model's search is a sentence, not a document).
MAX_QUERY_CHARS = 1000
#: A query of more words than this leans more on BM25: the model reads a query's first
#: tokens only (a task's later steps go unread), BM25 all of it. The cosine's weight is
#: ``SEMANTIC_WEIGHT`` times the square root of this over the query's words (0.53 at
#: 24 words), chosen on the seen query sets, each left out in turn (docs/benchmarks.md,
#: "fifth round"); no extra pass of the model.
LONG_QUERY_WORDS = 12

@dataclass(frozen=True, slots=True)
class Document:
    """One tool as the index sees it: its key (bindingName) and its fields' text."""

    key: str
    name: str
    title: str = ""
    description: str = ""
    tags: tuple[str, ...] = ()
    skill: str = ""
    #: The input schema's top-level property names and descriptions.
    parameters: str = ""

    def name_words(self) -> str:
        """The name split into lowercase words ("slack_post_message" -> "slack post
        message", "createIssue" -> "create issue")."""
        return " ".join(WORD.findall(self.name)).lower()

    def sentence(self) -> str:
        """What the sentence model reads: the skill, the name's words, the title and
        the description (the model cuts it at 128 tokens; the first sentences say
        what a tool does)."""
        text = f"{self.skill}: {self.name_words()}. {self.title} {self.description}"
        return " ".join(text.split())

    def texts(self) -> tuple[str, ...]:
        """Every text of the tool, as the set says it (which products it names)."""
        return (self.skill, self.name_words(), self.title, self.description,
                " ".join(self.tags), self.parameters)

    def label(self) -> str:
        """The second text the model reads: the skill, the name's words and the title
        (what the tool is called, without the description that outweighs it in
        ``sentence``'s vector)."""
        return " ".join(f"{self.skill}: {self.name_words()}. {self.title}".split())


@dataclass(frozen=True, slots=True)
class Found:
    """A search's answer: the matches, best first, and whether they are weak (the
    best is under the abstention threshold: nothing in the set fits). Hybrid, a
    match's score is the blend's, capped at the score of the match before it (the
    learned order may re-order the blend's best)."""

    matches: tuple[tuple[str, float], ...]
    weak: bool = False
    #: "hybrid" when the sentence model ranked too, else "lexical".
    ranking: str = "lexical"
    #: Hybrid: the best cosine of the query with any tool of the set.
    confidence: float | None = None


def query_terms(query: str) -> dict[str, float]:
    """The query's terms, weight 1, and their synonyms (``thesaurus``), each at
    ``EXPANSION_WEIGHT`` unless the query has it itself."""
    own = dict.fromkeys(terms(query[:MAX_QUERY_CHARS]), 1.0)
    out = dict(own)
    for term in own:
        for synonym in _SYNONYMS.get(term, ()):
            out.setdefault(synonym, EXPANSION_WEIGHT)
    return out


def semantic_weight(query: str) -> float:
    """How much the cosine counts in ``query``'s hybrid score (BM25 the rest): less for
    a long query, whose later words the model does not read."""
    words = len(query[:MAX_QUERY_CHARS].split())
    if words <= LONG_QUERY_WORDS:
        return SEMANTIC_WEIGHT
    return SEMANTIC_WEIGHT * math.sqrt(LONG_QUERY_WORDS / words)


def abstain_below(query: str) -> float:
    """The best cosine under which nothing in a set fits ``query``: higher the shorter
    the query, down to ``ABSTAIN_BELOW`` at ``LONG_QUERY_WORDS`` words."""
    words = len(query[:MAX_QUERY_CHARS].split())
    return ABSTAIN_BELOW + ABSTAIN_PER_WORD * (LONG_QUERY_WORDS - min(words, LONG_QUERY_WORDS))


def _synonyms() -> dict[str, frozenset[str]]:
    """Each stem of the thesaurus -> the stems of every group it is in, but itself."""
    out: dict[str, set[str]] = {}
    for group in (*GROUPS, *DEVELOPER_GROUPS):
        stems = {term for word in group for term in terms(word)}
        for stem in stems:
            out.setdefault(stem, set()).update(stems - {stem})
    return {stem: frozenset(others) for stem, others in out.items()}


class SearchIndex:
    """BM25 over a fixed set of documents; ``search`` ranks them for a query. Its
    tables are built on first use (``build``), once, whichever thread comes first."""

    def __init__(self, documents: Iterable[Document]) -> None:
        self.documents: tuple[Document, ...] = tuple(documents)
        self._keys: list[str] = [doc.key for doc in self.documents]
        self._built: _Tables | None = None
        self._building = threading.Lock()
        #: The documents' unit vectors (one row each, in order) and the query encoder,
        #: once attached; None: lexical ranking only.
        self._semantic: tuple[Matrix, Callable[[str], Matrix]] | None = None
        #: Hybrid: the documents' name vectors (``Document.label``), when attached.
        self._names: Matrix | None = None
        #: Hybrid: each term's postings as arrays (document numbers, and BM25's
        #: saturated term frequency), so a query is scored by a few vector additions
        #: instead of a Python loop over every posting.
        self._arrays: dict[str, tuple[npt.NDArray[np.intp], Matrix]] = {}
        #: Hybrid: each skill's name as a query would say it -> its documents' numbers.
        self._skills: dict[str, npt.NDArray[np.intp]] = {}
        #: Hybrid: each well-known product (gateway/products.py) the set's texts name ->
        #: the numbers of the documents that name it.
        self._served: dict[tuple[str, ...], frozenset[int]] = {}
        self._objects = ObjectsByView(())  # hybrid: which name words name no object
        self._words: list[ToolTerms] = []  # hybrid: each document's terms by field
        #: Hybrid: the query's vector as the ranking reads it (gateway/adapter.py).
        self._adapt: Callable[[Matrix], Matrix] = adapted

    def build(self) -> None:
        """Build the tables now, if no search or attachment has yet."""
        self._tables()

    @property
    def built(self) -> bool:
        """Whether a search finds the tables built (else it builds them first)."""
        return self._built is not None

    def _tables(self) -> _Tables:
        tables = self._built
        if tables is None:
            with self._building:
                tables = self._built
                if tables is None:
                    tables = self._built = _tables(self.documents)
        return tables

    def attach_vectors(self, vectors: Matrix, encode: Callable[[str], Matrix], *,
                       names: Matrix | None = None,
                       adapt: Callable[[Matrix], Matrix] = adapted) -> None:
        """Rank with the sentence model from now on: ``vectors`` holds one unit row
        per document (its ``sentence``), in order, ``names`` likewise of its
        ``label`` (without them the text's cosine alone ranks); ``encode(query)``
        gives the query's unit vector, ``adapt`` the vector the ranking reads from
        it (by default the packaged adapter's: gateway/adapter.py)."""
        for rows in (vectors, names):
            if rows is not None and len(rows) != len(self._keys):
                raise ValueError(f"{count(len(rows), 'vector')} for"
                                 f" {count(len(self._keys), 'document')}")
        import numpy as np

        # Every posting in two flat arrays, scored at once, then cut per term (views):
        # a Python loop per posting costs about a second at 5,000 tools.
        tables = self._tables()
        postings = tables.postings
        total = sum(len(posting) for posting in postings.values())
        numbers = np.fromiter((n for posting in postings.values() for n, _ in posting),
                              dtype=np.intp, count=total)
        tf = np.fromiter((f for posting in postings.values() for _, f in posting),
                         dtype=np.float32, count=total)
        saturated = ((K1 + 1) * tf / (tf + np.asarray(tables.norms, dtype=np.float32)[numbers])
                     ).astype(np.float32)
        ends = np.cumsum([len(posting) for posting in postings.values()])
        self._arrays = {term: (numbers[end - len(posting):end], saturated[end - len(posting):end])
                        for (term, posting), end in zip(postings.items(), ends.tolist(),
                                                        strict=True)}
        by_skill: dict[str, list[int]] = {}
        for number, doc in enumerate(self.documents):
            if doc.skill:
                by_skill.setdefault(phrase(doc.skill), []).append(number)
        self._skills = {name: np.asarray(numbers, dtype=np.intp)
                        for name, numbers in by_skill.items()}
        served: dict[tuple[str, ...], set[int]] = {}
        for number, doc in enumerate(self.documents):
            for name in frozenset().union(*map(said_in, doc.texts())):
                served.setdefault(name, set()).add(number)
        self._served = {name: frozenset(numbers) for name, numbers in served.items()}
        self._objects = ObjectsByView([(doc.skill, doc.name_words()) for doc in self.documents])
        self._words = [ToolTerms.of(doc) for doc in self.documents]
        self._names = names
        self._adapt = adapt
        self._semantic = (vectors, encode)

    @property
    def hybrid(self) -> bool:
        return self._semantic is not None

    def find(self, query: str, *, limit: int, hidden: Collection[str] = ()) -> Found:
        """The ``limit`` best documents for ``query``, hybrid when vectors are
        attached (else lexical), and whether nothing fits (``weak``); documents
        whose key is in ``hidden`` are never found (a caller may not use them)."""
        if self._semantic is None:
            matches = tuple(self.search(query, limit=limit, hidden=hidden))
            return Found(matches, weak=not matches)
        import numpy as np

        weighted = query_terms(query)
        gone = self._numbers(hidden)
        evidence, cosines = self._evidence(query, weighted, gone=gone)
        blended = evidence.blended
        count = min(max(limit, ACTION_CANDIDATES, CANDIDATES), len(self._keys) - len(gone))
        if count == 0:
            return Found((), weak=True, ranking="hybrid", confidence=0.0)
        top = np.argpartition(-blended, count - 1)[:count]
        closest = top[np.lexsort((top, -blended[top]))].tolist()
        best = self.fused(query, weighted, evidence, closest)
        shown = best[:limit]
        # The learned order may place a tool above one the blend scores higher; each
        # match shows the blend's score, never above the score shown before it, so an
        # answer's scores read best first as its order does.
        capped = np.minimum.accumulate(blended[shown]).tolist() if shown else []
        matches = tuple(zip((self._keys[i] for i in shown), map(float, capped), strict=True))
        confidence = float(cosines.max())
        # The operation check reads the blend's closest, as it was calibrated.
        weak = (self._unlikely(query, weighted, evidence, cosines)
                or self.elsewhere(query, gone=gone)
                or self._unable(query, closest[:ACTION_CANDIDATES], blended, gone))
        return Found(matches, weak=weak, ranking="hybrid", confidence=confidence)

    def _evidence(self, query: str, weighted: dict[str, float], *,
                  gone: Sequence[int] = ()) -> tuple[Evidence, Matrix]:
        """The blend's scores of every document for ``query`` (``weighted``: its terms)
        and the cosines of their texts alone (the abstention's), those numbered ``gone``
        (hidden from the caller) at minus infinity in both and in ``Evidence.plain``."""
        import numpy as np

        assert self._semantic is not None
        vectors, encode = self._semantic
        idf = self._tables().idf
        wanted = encode(query[:MAX_QUERY_CHARS])
        moved = self._adapt(wanted)
        if moved is wanted:
            cosines = text = vectors @ wanted
        else:  # both cosines in one pass over the vectors
            both = vectors @ np.stack((wanted, moved), axis=1)
            cosines, text = both[:, 0], both[:, 1]
        names = text if self._names is None else self._names @ moved
        bm25 = np.zeros(len(self._keys), dtype=np.float32)
        for term, weight in weighted.items():
            posting = self._arrays.get(term)
            if posting is not None:
                numbers, saturated = posting
                bm25[numbers] += (weight * idf[term]) * saturated
        semantic = semantic_weight(query)
        squashed: Matrix = (1 - semantic) * bm25 / (bm25 + BM25_HALF)

        def hidden(values: Matrix) -> Matrix:  # those ``gone`` at minus infinity
            if gone:
                values[gone] = -np.inf
            return values

        def evidence(text: Matrix, names: Matrix,
                     unmoved: Callable[[], Evidence] | None = None) -> Evidence:
            ranked: Matrix = text if self._names is None else (
                np.float32(1 - NAME_WEIGHT) * text + np.float32(NAME_WEIGHT) * names)
            blended = hidden(semantic * ranked + squashed)
            return Evidence(blended, ranked, names, bm25, vectors, unmoved)

        def plain() -> Evidence:  # the blend of the model's own vector (gateway/abstain_model.py)
            own = cosines if self._names is None else self._names @ wanted
            return evidence(cosines.copy(), own)

        return evidence(text, names, None if moved is wanted else plain), hidden(cosines.copy())

    def _unlikely(self, query: str, weighted: dict[str, float], evidence: Evidence,
                  cosines: Matrix) -> bool:
        """Whether nothing fits: the learned model's say (gateway/abstain_model.py, from
        what the caller may see: the hidden at minus infinity) where the best cosine is
        near the length's threshold; elsewhere, or with the model off, whether it is under."""
        below = abstain_below(query)
        margin = float(cosines.max()) - below
        if (not abstain_model.LEARNED or margin > abstain_model.BAND
                or margin < -abstain_model.BAND_UNDER):
            return margin < 0.0
        return abstain_model.nothing_fits(abstain_model.row(
            query, cosines, evidence.plain or evidence, below=below, weighted=weighted,
            idf=self._tables().idf, tools=self.documents, words=self._words,
            skills=named(query, self._skills)))

    def fused(self, query: str, weighted: dict[str, float], evidence: Evidence,
              best: list[int]) -> list[int]:
        """``best`` (the blend's order) with its first ``CANDIDATES`` ordered by the
        linear score (gateway/fusion.py) and the trees on top of it (gateway/ranker.py)."""
        head = best[:CANDIDATES]
        rows = features(query, weighted, self._tables().idf, evidence, head, self.documents,
                        self._words, named(query, self._skills))
        return [*reordered(head, rows), *best[CANDIDATES:]]

    def elsewhere(self, query: str, *, gone: Collection[int] = frozenset()) -> bool:
        """Whether ``query`` names well-known products or services (gateway/products.py)
        none of which a text of the set names, nor a skill of the set ("create a Jira
        ticket" where no tool mentions Jira; not "copy the Jira ticket into a GitHub
        issue": the set may do a part of it). The documents numbered ``gone`` (hidden
        from the caller) count for nothing: the answer must not tell that they exist."""
        said = mentioned(query)
        gone = frozenset(gone)
        if not said or any(self._served.get(name, frozenset()) - gone for name in said):
            return False
        return not any(set(self._skills[skill].tolist()) - gone
                       for skill in named(query, self._skills))

    def _unable(self, query: str, closest: list[int], blended: Matrix, gone: list[int]) -> bool:
        """Whether the closest documents cannot do what ``query`` asks (the operation,
        or what it acts on: gateway/abstain.py); the hidden (``gone``, their scores
        ``-inf``) count for nothing: the answer must not tell that they exist."""
        if not abstain.asks(query):
            return False  # no operation asked: no check reads the services named
        return abstain.unable(query, self.documents, closest, blended, skills=self._skills,
                              view=self._objects.without(gone), service=self._service(query),
                              saying=self._saying(query))

    def _service(self, query: str) -> set[int]:
        """The numbers of the documents of the skills ``query`` names (the hidden among
        them too: ``abstain.unable`` leaves them out by their score)."""
        numbers: set[int] = set()
        for skill in named(query, self._skills):
            if telling(skill):
                numbers.update(self._skills[skill].tolist())
        return numbers

    def _saying(self, query: str) -> set[int]:
        """The numbers of the documents whose texts name a product ``query`` names."""
        return set().union(*(self._served.get(name, ()) for name in mentioned(query)))

    def __len__(self) -> int:
        return len(self._keys)

    def _numbers(self, keys: Collection[str]) -> list[int]:
        """The document numbers of ``keys`` (those in the index)."""
        return [n for n, key in enumerate(self._keys) if key in keys] if keys else []

    def search(self, query: str, *, limit: int,
               hidden: Collection[str] = ()) -> list[tuple[str, float]]:
        """The ``limit`` best documents for ``query`` as (key, score), best first;
        ties in index order. Documents sharing no term with the query, and those
        ``hidden``, are left out. Lexical only, whatever is attached."""
        scores = self._scores(query)
        for number in self._numbers(hidden):
            scores.pop(number, None)
        best = heapq.nsmallest(limit, scores.items(), key=lambda item: (-item[1], item[0]))
        return [(self._keys[number], score) for number, score in best]

    def _scores(self, query: str) -> dict[int, float]:
        """BM25 score by document number, for the documents sharing a term."""
        scores: dict[int, float] = {}
        tables = self._tables()
        norms = tables.norms
        for term, weight in query_terms(query).items():
            idf = tables.idf.get(term)
            if idf is None:
                continue
            factor = weight * idf * (K1 + 1)
            for number, tf in tables.postings[term]:
                scores[number] = scores.get(number, 0.0) + factor * tf / (tf + norms[number])
        return scores


_SYNONYMS = _synonyms()
