"""Which ranking the abstention's checks read: the adapted one or the model's own.

bench/abstain_cv.py ``--adapter-folds``. The search ranks by a cosine whose query
vector the learned adapter moves (gateway/adapter.py); its threshold reads the query's
own vector, and its checks (gateway/abstain.py: the operation over the blend's closest,
the object over the ten best-scored, a named service's own closest) read the blend,
so the adapted cosine. The adapter is fitted on every seen set, so a set left out
in plain abstain_cv.py was in its fit: here each left-out set's queries are searched
with an adapter fitted on the other sets only (bench/adapter_fit.py's ``fit_adapter``,
the settings of bench/adapter_cv.py; the shipped weights are not touched), and each
query's checks are asked on both rankings:

* **adapted**: the checks read the adapted blend (the search today);
* **raw**: they read the blend of the model's own vector (the answer's order stays
  adapted; the checks alone read the other ranking);
* **both**: a check's "nothing fits" stands only when the two rankings agree;
* **either**: it stands when either says so.

The threshold (the raw cosine, the adapter's no part) is chosen per fold as in
abstain_cv.py; a product no text names (``elsewhere``) reads no ranking.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from adapter_fit import Settings, adapted, fit_adapter

from skillop.gateway import search as search_module
from skillop.gateway.abstain import ACTION_CANDIDATES
from skillop.gateway.actions import asked
from skillop.gateway.adapter import unadapted
from skillop.gateway.search import NAME_WEIGHT, Document, SearchIndex, query_terms

if TYPE_CHECKING:
    import numpy as np

    from skillop.gateway.embedding import Matrix

    Labelled = list[tuple[str, str, str, set[str]]]
    Adapt = Callable[[Matrix], Matrix]

VARIANTS = ("adapted", "raw", "both", "either")
#: bench/adapter_cv.py's defaults (those the shipped weights were written with).
SETTINGS = Settings(rank=32, penalty=0.01, temperature=20.0, steps=300)


class TwoRankings(SearchIndex):
    """An index whose checks are asked on the adapted blend and on the raw one; the
    last query's two verdicts are kept in ``last`` (None when the checks did not run:
    a product no text names decided, or no operation was asked)."""

    last: tuple[bool, bool] | None = None

    def _unable(self, query: str, closest: list[int], blended: Matrix, gone: list[int]) -> bool:
        on = super()._unable(query, closest, blended, gone)
        if not asked(query):
            self.last = (on, on)
            return on
        raw, raw_closest = self._raw(query, gone)
        self.last = (on, super()._unable(query, raw_closest, raw, gone))
        return on

    def _raw(self, query: str, gone: list[int]) -> tuple[Matrix, list[int]]:
        """The blend of the model's own query vector, and its closest (as ``find``)."""
        import numpy as np

        saved = self._adapt
        self._adapt = unadapted
        try:
            evidence, _ = self._evidence(query, query_terms(query))
        finally:
            self._adapt = saved
        blended = evidence.blended
        if gone:
            blended[gone] = -np.inf
        count = min(ACTION_CANDIDATES, len(self) - len(gone))
        top = np.argpartition(-blended, count - 1)[:count]
        return blended, top[np.lexsort((top, -blended[top]))].tolist()


def built(docs: list[Document], vectors: Matrix, names: Matrix,
          encode: Callable[[str], Matrix], numbers: list[int]) -> TwoRankings:
    index = TwoRankings([docs[n] for n in numbers])
    index.attach_vectors(vectors[numbers], encode, names=names[numbers])
    return index


def fold_adapters(docs: list[Document], vectors: Matrix, names: Matrix,
                  encode: Callable[[str], Matrix], labelled: Labelled, kept: Path, *,
                  groups: int, reverse: bool = False) -> dict[str, Adapt]:
    """Each seen set -> the adapter fitted on the answerable queries of the sets outside
    its group (the sets in their order dealt into ``groups``; as many as sets: each
    set alone), every tool a candidate (bench/adapter_cv.py's fold (a)); each fold's
    weights are kept in ``kept`` (a directory) and read back from there (keyed by the
    training queries' digest), so that a second process may fit the folds from the
    other end (``reverse``)."""
    import numpy as np

    keys = {doc.key: n for n, doc in enumerate(docs)}
    tools = ((1 - NAME_WEIGHT) * vectors.astype(np.float64)
             + NAME_WEIGHT * names.astype(np.float64))
    out: dict[str, Adapt] = {}
    started = time.process_time()
    kept.mkdir(parents=True, exist_ok=True)
    every = list(dict.fromkeys(s for s, *_ in labelled))
    folds = [every[g::groups] for g in range(min(groups, len(every)))]
    for group in reversed(folds) if reverse else folds:
        train = [(q, r) for s, _, q, r in labelled if s not in group and r]
        digest = hashlib.sha256(repr((SETTINGS, [(q, sorted(r)) for q, r in train])).encode())
        path = kept / f"{digest.hexdigest()[:16]}.npz"
        if path.exists():
            with np.load(path) as saved:
                a, b = saved["a"], saved["b"]
        else:
            queries_ = np.stack([encode(q[:search_module.MAX_QUERY_CHARS])
                                 for q, _ in train]).astype(np.float64)
            positive = np.zeros((len(train), len(docs)))
            for i, (_, relevant) in enumerate(train):
                positive[i, [keys[k] for k in relevant]] = 1.0
            a, b = fit_adapter(queries_, positive, tools, SETTINGS)
            np.savez(path.with_suffix(".tmp.npz"), a=a, b=b)
            path.with_suffix(".tmp.npz").replace(path)
        for name in group:
            out[name] = lambda v, a=a, b=b: adapted(v, a, b)
        print(f"  adapter without {', '.join(group)}: {len(train)} queries,"
              f" {time.process_time() - started:.0f} s CPU", flush=True)
    return out


def verdicts(index: TwoRankings, labelled: Labelled, adapters: dict[str, Adapt] | None,
             ) -> Iterator[tuple[bool, bool, float]]:
    """Per query, with its fold's adapter (``adapters``; None: the shipped one): the
    checks' verdict on the adapted ranking and on the raw one (the threshold off),
    and its best raw cosine less its threshold's lift for length (under
    ``ABSTAIN_BELOW``: under the threshold)."""
    from abstain_cv import checks_only

    shipped = index._adapt
    for name, _, query, _ in labelled:
        index._adapt = shipped if adapters is None else adapters[name]
        index.last = None
        with checks_only():
            found = index.find(query, limit=3)
        assert found.confidence is not None
        on, off = (found.weak, found.weak) if index.last is None else index.last
        lift = search_module.abstain_below(query) - search_module.ABSTAIN_BELOW
        yield on, off, found.confidence - lift
    index._adapt = shipped


def combined(on: np.ndarray, off: np.ndarray) -> dict[str, np.ndarray]:
    """Each variant's checks' verdicts."""
    return {"adapted": on, "raw": off, "both": on & off, "either": on | off}


def arrays(rows: Iterator[tuple[bool, bool, float]]) -> tuple[np.ndarray, ...]:
    import numpy as np

    on, off, level = zip(*rows, strict=True)
    return np.array(on), np.array(off), np.array(level)


def print_changes(base: list[tuple[str, float, float, int, int]],
                  other: list[tuple[str, float, float, int, int]]) -> None:
    """Each set's abstained and wrongly, against ``base``'s, where they differ."""
    from abstain_cv import short

    def differs(x: float, y: float) -> bool:
        return not (x == y or (math.isnan(x) and math.isnan(y)))

    moved = [f"{short(n)} {a - a0:+.1%} / {w - w0:+.1%}"
             for (n, a0, w0, *_), (_, a, w, *_) in zip(base, other, strict=True)
             if differs(a, a0) or differs(w, w0)]
    print("  against adapted, per set (abstained / wrongly): " + ("; ".join(moved) or "none"))


def full_set(docs: list[Document], vectors: Matrix, names: Matrix,
             encode: Callable[[str], Matrix], labelled: Labelled,
             adapters: dict[str, Adapt]) -> None:
    """The left-out figures of each variant, every tool in the set."""
    import numpy as np
    from abstain_cv import left_out, print_folds

    index = built(docs, vectors, names, encode, list(range(len(docs))))
    sets = np.array([name for name, *_ in labelled])
    ok = np.array([bool(r) for *_, r in labelled])
    on, off, level = arrays(verdicts(index, labelled, None))
    for variant, checked in combined(on, off).items():
        if variant in ("adapted", "raw"):
            print_folds(f"shipped adapter (fitted on every set), checks read {variant}",
                        left_out(level, checked, ok, sets))
    on, off_fold, _ = arrays(verdicts(index, labelled, adapters))
    assert (off == off_fold).all(), "the raw ranking read the adapter"
    base = left_out(level, on, ok, sets)
    for variant, checked in combined(on, off).items():
        rows = left_out(level, checked, ok, sets)
        print_folds(f"adapter fitted without the set left out, checks read {variant}", rows)
        print(f"  the checks alone: abstained {checked[~ok].mean():.1%}, wrongly"
              f" {checked[ok].mean():.2%}")
        if variant != "adapted":
            print_changes(base, rows)


def subsets(docs: list[Document], vectors: Matrix, names: Matrix,
            encode: Callable[[str], Matrix], labelled: Labelled,
            adapters: dict[str, Adapt], size: int, draws: int) -> None:
    """Each variant on ``draws`` random subsets of ``size`` tools (an answerable
    query's keeps its labelled tools), the search's constants, each query with its
    fold's adapter."""
    import random

    import numpy as np

    keys = {doc.key: n for n, doc in enumerate(docs)}
    rng = random.Random(size)
    rows: list[tuple[bool, bool, float]] = []
    ok: list[bool] = []
    for _ in range(draws):
        base = rng.sample(range(len(docs)), size)
        made: dict[frozenset[str], TwoRankings] = {}
        for item in labelled:
            labels = frozenset(item[3])
            index = made.get(labels)
            if index is None:
                numbers = sorted(set(base[:size - len(labels)]) | {keys[k] for k in labels})
                index = made[labels] = built(docs, vectors, names, encode, numbers)
            rows.extend(verdicts(index, [item], adapters))
            ok.append(bool(labels))
    on, off, level = arrays(iter(rows))
    answerable = np.array(ok)
    under = level < search_module.ABSTAIN_BELOW
    for variant, checked in combined(on, off).items():
        weak = under | checked
        print(f"random subsets of {size} tools ({draws} draws), checks read {variant}:"
              f" abstained {weak[~answerable].mean():.1%} of unanswerable, wrongly"
              f" {weak[answerable].mean():.2%} of answerable (the checks alone"
              f" {checked[answerable].mean():.2%})")


def compare(docs: list[Document], vectors: Matrix, names: Matrix,
            encode: Callable[[str], Matrix], labelled: Labelled, sizes: list[int],
            draws: int, kept: Path, *, groups: int, fit_only: bool = False,
            full: bool = True) -> None:
    """bench/abstain_cv.py ``--adapter-folds``: every variant, the full set (unless not
    ``full``) and the subsets (``fit_only``: the folds' adapters fitted and kept, from
    the last fold, nothing scored)."""
    adapters = fold_adapters(docs, vectors, names, encode, labelled, kept, groups=groups,
                             reverse=fit_only)
    if fit_only:
        return
    if full:
        full_set(docs, vectors, names, encode, labelled, adapters)
    for size in sizes:
        subsets(docs, vectors, names, encode, labelled, adapters, size, draws)
