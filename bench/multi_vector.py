"""Benchmark: a sentence vector per description sentence, measured by the folds of
bench/disclosure_cv.py (one seen set left out at a time).

Today a tool has two vectors (gateway/search.py: its text's, ``Document.sentence``,
and its name's, ``Document.label``). A long description's vector averages all it
says, so a user who paraphrases one of its purposes can sit far from it. This
measures, without changing the package, a vector per description sentence (its
first ``--k``, each read as "skill: name words. sentence" unless ``--plain``):

* ``sentence_gap``: the candidate's best sentence cosine (its text's when its
  description has no sentence of three words) minus the set's best, a fusion
  feature; ``first_gap`` likewise of the first sentence alone; ``sentence_lift`` the
  best sentence's cosine minus the tool's text's (how much better one sentence fits);
* ``--mix W``: W of the ranked cosine's text part replaced by the best sentence's
  (the blend's order changes, so do the candidates).

The sentences' vectors are cached beside the set's (``--cache``, a file of their
own); the report is bench/disclosure_cv.py's, blend -> fused, with and without the
extra features.

    python bench/numpy_only.py bench/multi_vector.py [--k 4] [--mix 0.3] [--plain]
        [--features sentence_gap,first_gap] [--subsets 60 200] [--no-base]
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import disclosure_cv as cv
from disclosure import SERVERS, document, load

from skillop.gateway import fusion
from skillop.gateway.search import MAX_QUERY_CHARS, Document, SearchIndex, semantic_weight

#: A description's sentences: cut after . ! ? and at line ends.
SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
EXTRA = ("sentence_gap", "first_gap", "sentence_lift")


def sentences(doc: Document, k: int, *, plain: bool) -> list[str]:
    """The first ``k`` sentences of ``doc``'s description of three words or more, as the
    model reads them."""
    parts = [p.strip() for p in SPLIT.split(doc.description) if len(p.split()) >= 3][:k]
    if plain:
        return parts
    return [" ".join(f"{doc.skill}: {doc.name_words()}. {p}".split()) for p in parts]


class Sentences:
    """Each tool's sentence vectors, and per query the best and first sentence cosines
    of every document of an index (the last query's, for the features)."""

    def __init__(self, by_key: Mapping[str, list[Any]], mix: float) -> None:
        self.by_key = by_key
        self.mix = mix
        self.tables: dict[int, tuple[Any, Any, Any, SearchIndex]] = {}
        self.last: dict[str, Any] = {}

    def table(self, index: SearchIndex) -> tuple[Any, Any, Any]:
        import numpy as np

        got = self.tables.get(id(index))
        if got is None:
            rows = [(n, v) for n, d in enumerate(index.documents) for v in self.by_key[d.key]]
            owner = np.asarray([n for n, _ in rows], dtype=np.intp)
            starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
            got = (np.stack([v for _, v in rows]).astype(np.float32), owner, starts, index)
            self.tables[id(index)] = got
        return got[:3]

    def scores(self, index: SearchIndex, query: str, cosines: Any) -> tuple[Any, Any]:
        """The best and the first sentence cosine of every document (its text's
        cosine when it has none)."""
        import numpy as np

        assert index._semantic is not None
        matrix, owner, starts = self.table(index)
        sims = matrix @ index._semantic[1](query[:MAX_QUERY_CHARS])
        best, first = cosines.copy(), cosines.copy()
        best[owner[starts]] = np.maximum.reduceat(sims, starts)
        first[owner[starts]] = sims[starts]
        return best, first


def patch(extra: Sentences) -> None:
    """Have SearchIndex._evidence and fusion.features see the sentences."""
    import numpy as np

    original_evidence = SearchIndex._evidence
    original_features = fusion.features

    def evidence(self: SearchIndex, query: str, weighted: dict[str, float], **hidden: Any) -> Any:
        found, cosines = original_evidence(self, query, weighted, **hidden)
        best, first = extra.scores(self, query, cosines)
        extra.last = {"best": best, "first": first, "lift": best - cosines}
        if extra.mix:
            ranked = found.ranked + np.float32(extra.mix) * (best - cosines)
            blended = found.blended + np.float32(semantic_weight(query)) * (ranked - found.ranked)
            found = fusion.Evidence(blended.astype(np.float32), ranked.astype(np.float32),
                                    found.names, found.bm25, found.vectors)
        return found, cosines

    def features(query: str, weighted: Any, idf: Any, found: Any, candidates: Sequence[int],
                 *rest: Any) -> Any:
        out = original_features(query, weighted, idf, found, candidates, *rest)
        if candidates:
            chosen = np.asarray(candidates, dtype=np.intp)
            visible = np.isfinite(found.blended)
            for name, values in (("sentence_gap", extra.last["best"]),
                                 ("first_gap", extra.last["first"])):
                out[:, fusion.FEATURES.index(name)] = values[chosen] - values[visible].max()
            out[:, fusion.FEATURES.index("sentence_lift")] = extra.last["lift"][chosen]
        return out

    SearchIndex._evidence = evidence  # type: ignore[method-assign]
    fusion.features = features  # type: ignore[assignment]
    fusion.FEATURES = (*fusion.FEATURES, *EXTRA)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", type=int, default=4, help="sentences a tool at most")
    parser.add_argument("--mix", type=float, default=0.0)
    parser.add_argument("--plain", action="store_true", help="the sentence alone")
    parser.add_argument("--features", default="sentence_gap")
    parser.add_argument("--subsets", type=int, nargs="*", default=[])
    parser.add_argument("--no-base", action="store_true")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/skillop-bench-vectors"))
    args = parser.parse_args()
    from skillop.gateway.embedding import Unavailable, shared_encoder
    from skillop.gateway.vectors import SemanticRanker, VectorCache, digest

    encoder = shared_encoder()
    if isinstance(encoder, Unavailable):
        raise SystemExit(f"no sentence model: {encoder.reason}")
    docs = [document(short, SERVERS[short], t) for short in SERVERS for t in load(SERVERS[short])]
    index = SearchIndex(docs)
    SemanticRanker(args.cache, lambda _: None, loader=lambda: encoder).prepare(index)
    model = hashlib.sha256(encoder.identity.encode()).hexdigest()[:16]
    cv.remembered(index, args.cache / f"cv-queries-{model}.npz")
    cache = VectorCache(args.cache, f"{encoder.identity}+sentences")
    texts = {d.key: sentences(d, args.k, plain=args.plain) for d in docs}
    distinct = {t for parts in texts.values() for t in parts}
    missing = sorted(t for t in distinct if cache.get(digest(t)) is None)
    started = time.process_time()
    found = {digest(t): v for t in distinct if (v := cache.get(digest(t))) is not None}
    if missing:
        found |= dict(zip(map(digest, missing), encoder.encode(missing), strict=True))
        cache.store(found)
    print(f"set: {len(docs)} tools; {len(distinct)} distinct sentences (--k {args.k}"
          f"{', plain' if args.plain else ''}), {len(missing)} read by the model"
          f" ({time.process_time() - started:.1f} s CPU); mix {args.mix}")
    extra = Sentences({k: [found[digest(t)] for t in v] for k, v in texts.items()}, args.mix)
    patch(extra)
    parts = cv.seen_sets()
    keys = [d.key for d in docs]
    every = cv.collected(index, parts)
    base = [name for name in fusion.FEATURES if name not in EXTRA]
    runs = [("with " + args.features, base + args.features.split(","))]
    if not args.no_base:
        runs.insert(0, ("today's features", base))
    for label, names in runs:
        folds = cv.left_out(every, keys, names)
        print(f"{label}, one seen set left out at a time (blend -> fused):")
        cv.report(cv.scored(every, keys, lambda q: cv.BLEND),
                  cv.scored(every, keys, lambda q, f=folds: f[q.part]))
        for size in args.subsets:
            print(f"  subsets of {size} tools:")
            cv.report(*cv.subsets(index, parts, size, folds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
