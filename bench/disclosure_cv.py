"""Benchmark: the hybrid ranking's linear fusion (gateway/fusion.py), by cross-validation.

The gateway's hybrid search blends the cosine with BM25, then orders the blend's 30
best by a linear score over features (gateway/fusion.py). Their weights are fitted
here, on the seen query sets of bench/disclosure.py (``SEEN`` and the first two
sets; never a frozen one), and every choice is judged by **leaving one seen set out
at a time**: the weights fitted on the other sets order the one left out, and its
recall@1 / recall@5 / MRR are printed beside the blend's own (weight 1 on "blend"),
per set, per kind and pooled. The fit: a listwise logistic loss (each relevant tool
against the query's other candidates, softmax), L2-penalised, on standardised
features, by Adam; the file keeps the weights of the raw features. Then ``TREES``
regression trees on top of the linear score (bench/fusion_boost.py, gateway/ranker.py),
fitted in each fold after its weights.

* ``--features a,b``: fit only those (the rest weigh nothing), to compare sets of
  features by the same cross-validation;
* ``--subsets 60 200``: the same folds on random subsets of the 551 tools (each query's
  labelled tools always kept, the rest drawn per set, seed fixed): a feature that
  meant something only at 551 tools would show there;
* ``--misses``: the left-out queries whose relevant tools the fused order still puts
  past 5, and those it moved out of the first 5;
* ``--trees N``: N trees on top of the linear score (0: the linear score alone);
  ``--linear`` also prints the same folds' linear order -> with their trees;
* ``--write``: fit on every seen set and write operator/skillop/gateway/fusion_weights.py
  and fusion_trees.py (with ``PYTHONHASHSEED=0``, so that they reproduce exactly).

    [PYTHONHASHSEED=0] python bench/numpy_only.py bench/disclosure_cv.py [--features ...]
        [--subsets 60 200] [--misses] [--trees N] [--linear] [--write]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from disclosure import QUERY_FILES, SEEN, SERVERS, document, kinded_queries, load, queries
from fusion_boost import boosted

from skillop.gateway import fusion, ranker
from skillop.gateway.actions import named
from skillop.gateway.adapter import unadapted
from skillop.gateway.search import Document, SearchIndex, query_terms

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

GATEWAY = Path(__file__).resolve().parent.parent / "operator" / "skillop" / "gateway"
WEIGHTS_FILE, TREES_FILE = GATEWAY / "fusion_weights.py", GATEWAY / "fusion_trees.py"
#: How many trees of what depth go on top of the linear score (bench/fusion_boost.py),
#: chosen by the same folds.
TREES, TREE_DEPTH = 200, 3


NO_TREES = ranker.Forest()


@dataclass(frozen=True)
class Model:
    """A fused order: the linear weights and the trees on top of them."""

    weights: Mapping[str, float]
    forest: ranker.Forest = NO_TREES


#: The blend's own order: what the fusion is measured against.
BLEND = Model({"blend": 1.0})
#: The fit's L2 penalty, steps and rate, chosen by the same folds (pooled recall@1 /
#: @5 left out: penalty 0 or 0.001 0.679 / 0.860, 0.01 0.677 / 0.857, 0.1 0.669 / 0.856;
#: 1,000 steps as 400).
PENALTY, STEPS, RATE = 0.001, 400, 0.05
#: Ranks past the candidates, as the search returns them (bench/disclosure.py: 50).
DEPTH = 50


@dataclass(frozen=True)
class Query:
    """One answerable query of a seen set, with its candidates' features."""

    part: str
    kind: str
    text: str
    relevant: frozenset[str]
    #: The blend's DEPTH best document numbers, best first.
    ranked: list[int]
    rows: Any  # CANDIDATES x len(FEATURES)


def seen_sets() -> dict[str, list[tuple[str, str, set[str]]]]:
    """Every seen set, by its name: (kind, query, labels), answerable ones only."""
    parts = {part: kinded_queries(name) for name, part in SEEN}
    parts |= {name: [("old", q, r) for q, r in queries(name)] for name in QUERY_FILES}
    return {part: [q for q in labelled if q[2]] for part, labelled in parts.items()}


def collected(index: SearchIndex, parts: Mapping[str, list[tuple[str, str, set[str]]]],
              ) -> list[Query]:
    """Each query's blend order and candidates' features, as ``SearchIndex.find``
    computes them (no tool hidden)."""
    import numpy as np

    out = []
    for part, labelled in parts.items():
        for kind, text, relevant in labelled:
            weighted = query_terms(text)
            evidence, _ = index._evidence(text, weighted)
            blended = evidence.blended
            top = np.argpartition(-blended, DEPTH - 1)[:DEPTH]
            ranked = top[np.lexsort((top, -blended[top]))].tolist()
            head = ranked[:fusion.CANDIDATES]
            rows = fusion.features(text, weighted, index._tables().idf, evidence, head,
                                   index.documents, index._words,
                                   named(text, index._skills))
            out.append(Query(part, kind, text, frozenset(relevant), ranked, rows))
    return out


def order(query: Query, model: Model) -> list[int]:
    head = query.ranked[:fusion.CANDIDATES]
    return [*ranker.reordered(head, query.rows, weights=model.weights, forest=model.forest),
            *query.ranked[fusion.CANDIDATES:]]


def figures(found: list[str], relevant: frozenset[str]) -> tuple[float, float, float]:
    """recall@1, recall@5, MRR (as bench/disclosure.py counts them)."""
    rank = next((i + 1 for i, key in enumerate(found) if key in relevant), None)
    return (len(relevant & set(found[:1])) / min(1, len(relevant)),
            len(relevant & set(found[:5])) / min(5, len(relevant)),
            1 / rank if rank else 0.0)


def fit(train: Sequence[Query], keys: Sequence[str], names: Sequence[str]) -> dict[str, float]:
    """The weights of ``names`` (the raw features') that order ``train``'s candidates best
    by the listwise loss."""
    import numpy as np

    columns = [fusion.FEATURES.index(name) for name in names]
    used = [q for q in train if any(keys[n] in q.relevant for n in q.ranked[:fusion.CANDIDATES])]
    x = np.stack([q.rows[:, columns] for q in used]).astype(np.float64)  # Q x N x F
    positive = np.array([[keys[n] in q.relevant for n in q.ranked[:fusion.CANDIDATES]]
                         for q in used], dtype=np.float64)
    flat = x.reshape(-1, len(columns))
    mean, scale = flat.mean(axis=0), flat.std(axis=0)
    scale[scale == 0] = 1.0
    z = (x - mean) / scale
    weights = np.zeros(len(columns))
    if "blend" in names:
        weights[names.index("blend")] = 1.0
    moment, square = np.zeros_like(weights), np.zeros_like(weights)
    count = positive.sum(axis=1)
    for step in range(1, STEPS + 1):
        gradient = _gradient(z, positive, count, weights) + 2 * PENALTY * weights
        moment = 0.9 * moment + 0.1 * gradient
        square = 0.999 * square + 0.001 * gradient ** 2
        weights -= RATE * (moment / (1 - 0.9 ** step)) / (
            np.sqrt(square / (1 - 0.999 ** step)) + 1e-8)
    raw = weights / scale
    return {name: float(w) for name, w in zip(names, raw, strict=True)}


def _gradient(z: npt.NDArray[np.float64], positive: npt.NDArray[np.float64],
              count: npt.NDArray[np.float64], weights: npt.NDArray[np.float64],
              ) -> npt.NDArray[np.float64]:
    """The listwise loss's gradient: for each relevant candidate p, -log(e^s_p / (e^s_p
    + the sum over the query's irrelevant candidates)), averaged per query."""
    import numpy as np

    s = z @ weights
    e = np.exp(s - s.max(axis=1, keepdims=True))
    negatives = (e * (1 - positive)).sum(axis=1, keepdims=True)
    denominator = e + negatives  # per positive p: e_p + the negatives' sum
    share = positive * e / denominator  # softmax of p in its own list
    # d/ds_p = (-1 + share_p) / |P|; d/ds_n = sum_p e_n / denominator_p / |P|
    inverse = (positive / denominator).sum(axis=1, keepdims=True)
    ds = (positive * (share - 1) + (1 - positive) * e * inverse) / count[:, None]
    return np.einsum("qn,qnf->f", ds, z) / len(z)


def scored(queries_: Sequence[Query], keys: Sequence[str],
           weights_for: Callable[[Query], Model],
           ) -> dict[str, list[tuple[str, tuple[float, float, float]]]]:
    """Each set's (kind, figures) per query under the weights ``weights_for`` gives."""
    out: dict[str, list[tuple[str, tuple[float, float, float]]]] = {}
    for query in queries_:
        found = [keys[n] for n in order(query, weights_for(query))]
        out.setdefault(query.part, []).append((query.kind, figures(found, query.relevant)))
    return out


def report(before: Mapping[str, list[tuple[str, tuple[float, float, float]]]],
           after: Mapping[str, list[tuple[str, tuple[float, float, float]]]]) -> None:
    """Per set, per kind and pooled: recall@1, recall@5, MRR, blend -> fused."""
    def means(rows: list[tuple[float, float, float]]) -> str:
        return "/".join(f"{statistics.mean(r[i] for r in rows):.3f}" for i in range(3))

    up = {1: 0, 5: 0}
    down = {1: 0, 5: 0}
    for part in before:
        a, b = [f for _, f in before[part]], [f for _, f in after[part]]
        for i, k in ((0, 1), (1, 5)):
            delta = statistics.mean(r[i] for r in b) - statistics.mean(r[i] for r in a)
            up[k] += delta > 1e-9
            down[k] += delta < -1e-9
        print(f"  {part} ({len(a)}): r@1/r@5/MRR {means(a)} -> {means(b)}")
    for kind in ("para", "task", "kw", "pick", "old"):
        a = [f for rows in before.values() for k, f in rows if k == kind]
        b = [f for rows in after.values() for k, f in rows if k == kind]
        print(f"  kind {kind} ({len(a)}): {means(a)} -> {means(b)}")
    a = [f for rows in before.values() for _, f in rows]
    b = [f for rows in after.values() for _, f in rows]
    print(f"  pooled ({len(a)}): {means(a)} -> {means(b)}; sets up/down at 1: {up[1]}/"
          f"{down[1]}, at 5: {up[5]}/{down[5]}")


def left_out(collected_: Sequence[Query], keys: Sequence[str], names: Sequence[str], *,
             trees: int) -> dict[str, Model]:
    """The model fitted with each seen set left out, by that set."""
    parts = list(dict.fromkeys(q.part for q in collected_))
    return {part: fitted([q for q in collected_ if q.part != part], keys, names, trees=trees)
            for part in parts}


def fitted(train: Sequence[Query], keys: Sequence[str], names: Sequence[str], *,
           trees: int) -> Model:
    """The linear weights fitted on ``train``, then ``trees`` trees on top of them."""
    import numpy as np

    weights = fit(train, keys, names)
    if not trees:
        return Model(weights)
    rows = np.stack([q.rows for q in train])
    positive = np.array([[keys[n] in q.relevant for n in q.ranked[:fusion.CANDIDATES]]
                         for q in train])
    base = np.stack([fusion.scored(q.rows, weights) for q in train]).astype(np.float64)
    return Model(weights, boosted(rows, positive, base, trees=trees, depth=TREE_DEPTH))


def subset_index(index: SearchIndex, keep: Sequence[int]) -> SearchIndex:
    """An index of ``index``'s documents numbered ``keep``, their vectors attached."""
    assert index._semantic is not None and index._names is not None
    vectors, encode = index._semantic
    sub = SearchIndex([index.documents[n] for n in keep])
    sub.attach_vectors(vectors[keep], encode, names=index._names[keep], adapt=index._adapt)
    return sub


def remembered(index: SearchIndex, path: Path) -> None:
    """Have ``index`` read each query's vector from ``path`` when it holds it (by the
    query's text and the model), and write the file back with the new ones at exit:
    the 2,403 queries' forward passes cost minutes on a loaded machine."""
    import atexit

    import numpy as np

    assert index._semantic is not None
    vectors, encode = index._semantic
    known: dict[str, Any] = {}
    if path.exists():
        with np.load(path, allow_pickle=False) as data:
            known = dict(zip(data["texts"].tolist(), data["vectors"], strict=True))
    size = len(known)

    def cached(text: str) -> Any:
        if text not in known:
            known[text] = encode(text)
        return known[text]

    def save() -> None:
        if len(known) > size:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.savez(path, texts=np.array(list(known)), vectors=np.stack(list(known.values())))

    atexit.register(save)
    # The model's own query vectors: the fusion is fitted and judged on them (the
    # adapter's in-sample cosines would teach it to trust the cosine too much;
    # bench/adapter_cv.py judges the adapter with these weights).
    index.attach_vectors(vectors, cached, names=index._names, adapt=unadapted)


Scores = dict[str, list[tuple[str, tuple[float, float, float]]]]


def subsets(index: SearchIndex, parts: Mapping[str, list[tuple[str, str, set[str]]]],
            size: int, folds: Mapping[str, Model]) -> tuple[Scores, Scores, Scores]:
    """Each set's figures with the blend, with its fold's weights alone and with its
    fold's weights and trees, on random subsets of ``size`` tools: its queries taken in
    turn into groups whose labelled tools are at most a third of ``size``, each group's
    subset those tools and others drawn at random (seeded)."""
    import numpy as np

    rng = np.random.default_rng(size)
    keys = [d.key for d in index.documents]
    number = {key: n for n, key in enumerate(keys)}
    before: Scores = {}
    linear: Scores = {}
    after: Scores = {}
    for part, labelled in parts.items():
        groups: list[list[tuple[str, str, set[str]]]] = [[]]
        for query in labelled:
            wanted = {k for _, _, r in groups[-1] for k in r} | query[2]
            if groups[-1] and len(wanted) > size // 3:
                groups.append([])
            groups[-1].append(query)
        for group in groups:
            wanted = {number[k] for _, _, r in group for k in r}
            others = [n for n in range(len(keys)) if n not in wanted]
            drawn = rng.choice(others, size - len(wanted), replace=False).tolist()
            keep = sorted(wanted | set(drawn))
            small = collected(subset_index(index, keep), {part: group})
            small_keys = [keys[n] for n in keep]
            for out, weights in ((before, BLEND), (linear, Model(folds[part].weights)),
                                 (after, folds[part])):
                out.setdefault(part, []).extend(
                    scored(small, small_keys, lambda q, w=weights: w)[part])
    return before, linear, after


def prepared_index(cache: Path) -> tuple[SearchIndex, list[Document]]:
    """The 551 tools' index with their vectors (from ``cache``), every seen query's
    vector remembered beside them; and the tools' documents."""
    from skillop.gateway.embedding import Unavailable, shared_encoder
    from skillop.gateway.vectors import SemanticRanker

    encoder = shared_encoder()
    if isinstance(encoder, Unavailable):
        raise SystemExit(f"no sentence model: {encoder.reason}")
    docs: list[Document] = [document(short, SERVERS[short], t) for short in SERVERS
                            for t in load(SERVERS[short])]
    index = SearchIndex(docs)
    SemanticRanker(cache, lambda _: None, loader=lambda: encoder).prepare(index)
    model = hashlib.sha256(encoder.identity.encode()).hexdigest()[:16]
    remembered(index, cache / f"cv-queries-{model}.npz")
    return index, docs


def main() -> int:

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--features", help="comma-separated: fit only these")
    parser.add_argument("--subsets", type=int, nargs="*", default=[],
                        help="also score on random subsets of this many tools")
    parser.add_argument("--candidates", type=int, default=fusion.CANDIDATES,
                        help="order this many of the blend's best (the search's: 30)")
    parser.add_argument("--misses", action="store_true")
    parser.add_argument("--write", action="store_true",
                        help="fit on every seen set and write gateway/fusion_weights.py")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/skillop-bench-vectors"))
    parser.add_argument("--trees", type=int, default=TREES,
                        help="this many trees on top of the linear score (0: none)")
    parser.add_argument("--linear", action="store_true",
                        help="with --trees: also print the linear folds -> the trees' folds")
    args = parser.parse_args()
    if args.write and os.environ.get("PYTHONHASHSEED") != "0":
        # A query's terms come from a set: their order, and with it BM25's last bits
        # and which of two equal splits a tree takes, changes with the hash seed.
        raise SystemExit("--write: run with PYTHONHASHSEED=0, so the files reproduce")
    fusion.CANDIDATES = min(args.candidates, DEPTH)
    index, docs = prepared_index(args.cache)
    keys = [d.key for d in docs]
    names = args.features.split(",") if args.features else list(fusion.FEATURES)
    unknown = set(names) - set(fusion.FEATURES)
    if unknown:
        raise SystemExit(f"unknown features: {sorted(unknown)}")
    parts = seen_sets()
    started = time.process_time()
    every = collected(index, parts)
    print(f"set: {len(docs)} tools; {len(every)} answerable queries of {len(parts)} seen"
          f" sets; features {', '.join(names)} ({time.process_time() - started:.1f} s CPU)")
    folds = left_out(every, keys, names, trees=args.trees)
    print(f"one seen set left out at a time (blend -> fused, the fold's weights and"
          f" {args.trees} trees of depth {TREE_DEPTH}):")
    report(scored(every, keys, lambda q: BLEND), scored(every, keys, lambda q: folds[q.part]))
    if args.trees and args.linear:
        print("the same folds, linear alone -> with the trees:")
        linear = {part: Model(model.weights) for part, model in folds.items()}
        report(scored(every, keys, lambda q: linear[q.part]),
               scored(every, keys, lambda q: folds[q.part]))
    if args.misses:
        for query in every:
            before = [keys[n] for n in order(query, BLEND)][:5]
            after = [keys[n] for n in order(query, folds[query.part])][:5]
            if not query.relevant <= set(after) and len(query.relevant & set(after)) < min(
                    5, len(query.relevant)):
                lost = "LOST " if len(query.relevant & set(before)) > len(
                    query.relevant & set(after)) else ""
                print(f"  {lost}{query.part} {query.kind}: {query.text!r} wants"
                      f" {sorted(query.relevant)}; top 5 {after}")
    for size in args.subsets:
        print(f"subsets of {size} tools (the queries in groups whose labelled tools are at"
              f" most a third of it, each group its own subset; blend -> fused, the fold's"
              f" weights):")
        before, linear_, after = subsets(index, parts, size, folds)
        report(before, after)
        if args.trees and args.linear:
            print("  the same subsets, linear alone -> with the trees:")
            report(linear_, after)
    if args.write:
        model = fitted(every, keys, names, trees=args.trees)
        print("fitted on every seen set: " + ", ".join(f"{k} {v:+.4f}" for k, v in
                                                       model.weights.items())
              + f"; {len(model.forest.splits)} trees")
        write(model.weights)
        write_trees(model.forest)
    return 0


def write(weights: Mapping[str, float]) -> None:
    body = ",\n".join(f'    "{name}": {value:.6f}' for name, value in weights.items())
    text = WEIGHTS_FILE.read_text()
    head = text[:text.index("WEIGHTS: dict[str, float] = ")]
    WEIGHTS_FILE.write_text(f"{head}WEIGHTS: dict[str, float] = {{\n{body},\n}}\n")
    print(f"wrote {WEIGHTS_FILE}")


def write_trees(forest: ranker.Forest) -> None:
    text = TREES_FILE.read_text()
    head = text[:text.index("SPLITS: ")]
    import numpy as np

    def threshold(value: float) -> str:  # the shortest text the float32 compared reads back
        return np.format_float_positional(np.float32(value), unique=True, trim="0")

    splits = "".join(f"    ({', '.join(f'({n!r}, {threshold(t)})' for n, t in tree)},),\n"
                     for tree in forest.splits)
    leaves = "".join(f"    ({', '.join(f'{v:.6f}' for v in tree)},),\n" for tree in forest.leaves)
    TREES_FILE.write_text(f"{head}SPLITS: tuple[tuple[tuple[str, float], ...], ...] = (\n"
                          f"{splits})\n\nLEAVES: tuple[tuple[float, ...], ...] = (\n{leaves})\n")
    print(f"wrote {TREES_FILE}")


if __name__ == "__main__":
    sys.exit(main())
