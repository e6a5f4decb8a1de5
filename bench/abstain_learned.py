"""A learned abstention ("nothing fits") against today's threshold and checks.

What is measured, and why
-------------------------
``search_tools`` answers "nothing fits" (gateway/search.py) when the query's best raw
cosine is under a threshold by its length, or when a check with no threshold fires
(gateway/abstain.py, gateway/products.py). This script asks whether a small logistic
model over evidence the search already computes per query decides better:

* the features (``FEATURES``), each meaning the same in a set of 10 tools as in 5,000
  as far as the search's own scores do: the best raw cosine and its margin over the
  length's threshold, its gaps to the 2nd and 5th cosine, the blend's best score and
  its gaps, the fused (linear + trees) best score and its gap to the 2nd, the fused
  best's word-match evidence (BM25 share, idf cover, whether it performs the asked
  verb or names what is acted on), the squashed best BM25, the query's length, whether
  it asks an operation, names a product or a skill, and each check as 0/1 (a product
  served elsewhere, the operation, the unnamed object, the named service's operation
  and object). No tool name, no query word.
* **one seen set left out at a time** (a fold each of bench/disclosure.py's ``SEEN`` and
  its two old sets; never ``FROZEN_FILES``): the model is fitted on the other sets
  (L2-regularised logistic regression, numpy, standardised features), its operating
  point chosen on them so that their answerable queries are wrongly abstained on at
  ``--target`` (default: today's decision's pooled left-out rate, measured first);
  the set left out is counted: abstained share of its unanswerable queries, wrong
  share of its answerable ones. Pooled and per set, beside today's decision (its
  threshold level chosen per fold as bench/abstain_cv.py chooses it).
* two learned decisions: the model alone (the checks are features), and the checks
  kept with the model in the cosine threshold's place ("checks OR model": fitted on
  the queries no check fires on, its point chosen for the combined decision).
* **smaller sets** (``--sizes``): the model fitted on every seen set, point chosen
  likewise, against today's constants, on random subsets of the 551 tools (as
  bench/abstain_cv.py draws them: an answerable query's subset keeps its labels).

    python bench/numpy_only.py bench/abstain_learned.py [--sizes 60 200] [--draws 3]
        [--cache DIR] [--query-vectors FILE] [--features FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pickle
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import abstain_cv

from skillop.gateway import abstain as abstain_module
from skillop.gateway import abstain_model
from skillop.gateway import search as search_module
from skillop.gateway.actions import named
from skillop.gateway.fusion import CANDIDATES, features
from skillop.gateway.fusion import FEATURES as FUSED
from skillop.gateway.ranker import ranked_scores
from skillop.gateway.search import SearchIndex, query_terms

if TYPE_CHECKING:
    import numpy as np

#: The per-query evidence, in column order: gateway/abstain_model.py's (the blend of
#: the model's own query vector and its best tool's word evidence, nothing fitted on
#: the seen sets), each check as 0/1, then features read from the learned ranking (the
#: adapter, the fused order), fitted on the very sets a fold leaves out: scored apart
#: (``--learned-ranking``), an upper bound, never adopted.
RULES = ("elsewhere", "operation", "object", "service_operation", "service_object")
PLAIN = (*abstain_model.FEATURES, *RULES)
LEARNED = (
    "ranked", "adapted_blend", "adapted_blend_gap2", "adapted_blend_gap5", "fused",
    "fused_gap2", "fused_gap5", "top_bm25_share", "top_idf_cover", "top_cover",
    "top_name_covered", "top_verb_agrees", "top_verb_differs", "top_object_agrees",
    "top_object_differs",
)
FEATURES = PLAIN + LEARNED
_WORD_EVIDENCE = ("bm25_share", "idf_cover", "cover", "name_covered", "verb_agrees",
                  "verb_differs", "object_agrees", "object_differs")
_CHECKS = ("OPERATION", "UNNAMED_OBJECT", "SERVICE_OPERATION", "SERVICE_OBJECT")
_AT = {name: n for n, name in enumerate(FUSED)}


@contextlib.contextmanager
def only(check: str | None) -> Iterator[None]:
    """gateway/abstain.py's checks all off but ``check``; the operation no close tool
    says (``UNSAID_OPERATION``, where the build has it) counts as the operation's."""
    names = [*_CHECKS, *(["UNSAID_OPERATION"] if hasattr(abstain_module, "UNSAID_OPERATION")
                         else [])]
    saved = {name: getattr(abstain_module, name) for name in names}
    try:
        for name in names:
            setattr(abstain_module, name, name == check or (
                name == "UNSAID_OPERATION" and check == "OPERATION"))
        yield
    finally:
        for name, value in saved.items():
            setattr(abstain_module, name, value)


def _ordered(blended: Any, count: int) -> list[int]:
    import numpy as np

    top = np.argpartition(-blended, count - 1)[:count]
    result: list[int] = top[np.lexsort((top, -blended[top]))].tolist()
    return result


def evidence(index: SearchIndex, query: str) -> list[float]:
    """One row of ``FEATURES`` for ``query`` over ``index`` (hybrid, nothing hidden)."""
    import numpy as np

    weighted = query_terms(query)
    count = min(max(abstain_module.ACTION_CANDIDATES, CANDIDATES), len(index))
    skills = named(query, index._skills)
    ev, cosines = index._evidence(query, weighted)
    model = abstain_model.row(query, cosines, ev.plain or ev,
                              below=search_module.abstain_below(query), weighted=weighted,
                              idf=index._tables().idf, tools=index.documents,
                              words=index._words, skills=skills)
    closest = _ordered(ev.blended, count)
    rows = features(query, weighted, index._tables().idf, ev, closest[:CANDIDATES],
                    index.documents, index._words, skills)
    fused = ranked_scores(rows)
    lead = rows[int(np.argmax(fused))]
    flags = [float(index.elsewhere(query))]
    for check in _CHECKS:
        with only(check):
            flags.append(float(index._unable(query, closest[:abstain_module.ACTION_CANDIDATES],
                                             ev.blended, [])))
    return [*model, *flags, float(ev.ranked.max()), *_gaps(ev.blended[closest]),
            *_gaps(np.sort(fused)[::-1]), *(float(lead[_AT[name]]) for name in _WORD_EVIDENCE)]


def _gaps(values: Any) -> list[float]:
    """The best of ``values`` (best first) and its leads over the 2nd and 5th."""
    def at(k: int) -> float:
        return float(values[min(k, len(values) - 1)])
    return [at(0), at(0) - at(1), at(0) - at(4)]


def table(index: SearchIndex, queries: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Every query's ``FEATURES`` row, and ``weak`` with the cosine's threshold (the
    search's constants) in the model's place."""
    import numpy as np

    rows = np.array([evidence(index, q) for q in queries])
    with abstain_cv.threshold():
        today = np.array([index.find(q, limit=3).weak for q in queries])
    return rows, today


class Logistic:
    """L2-regularised logistic regression on standardised features (Newton steps)."""

    def __init__(self, x: np.ndarray, y: np.ndarray, *, l2: float = 1.0) -> None:
        import numpy as np

        self.mean = x.mean(axis=0)
        self.scale = np.where(x.std(axis=0) > 1e-9, x.std(axis=0), 1.0)
        z = self._design(x)
        w = np.zeros(z.shape[1])
        penalty = np.full(z.shape[1], l2)
        penalty[0] = 0.0
        for _ in range(50):
            p = 1 / (1 + np.exp(-(z @ w)))
            grad = z.T @ (p - y) + penalty * w
            hess = (z * (p * (1 - p))[:, None]).T @ z + np.diag(penalty) + 1e-9 * np.eye(len(w))
            step = np.linalg.solve(hess, grad)
            w -= step
            if float(np.abs(step).max()) < 1e-8:
                break
        self.w = w

    def _design(self, x: np.ndarray) -> np.ndarray:
        import numpy as np

        return np.hstack([np.ones((len(x), 1)), (x - self.mean) / self.scale])

    def score(self, x: np.ndarray) -> np.ndarray:
        """The log-odds that nothing fits."""
        result: np.ndarray = self._design(x) @ self.w
        return result


def point(score: np.ndarray, already: np.ndarray, ok: np.ndarray, target: float) -> float:
    """The lowest score above which abstaining (with ``already``'s, the checks') leaves
    at most ``target`` of the answerable (``ok``) wrongly abstained on."""
    import numpy as np

    budget = int(target * ok.sum()) - int((already & ok).sum())
    free = np.sort(score[ok & ~already])[::-1]
    if budget <= 0:
        return float(free[0]) + 1e-9
    return float(free[min(budget, len(free)) - 1]) + 1e-9 if budget < len(free) else -np.inf


def columns(names: tuple[str, ...]) -> list[int]:
    return [FEATURES.index(name) for name in names]


def decide(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, *, variant: str,
           target: float, l2: float) -> np.ndarray:
    """The learned decision for ``x_test``, fitted and pointed on the training rows."""
    import numpy as np

    ok = y_train == 0
    rules = x_train[:, columns(RULES)].max(axis=1) > 0
    rules_test = x_test[:, columns(RULES)].max(axis=1) > 0
    if variant == "alone":
        model = Logistic(x_train, y_train, l2=l2)
        cut = point(model.score(x_train), np.zeros_like(ok), ok, target)
        return model.score(x_test) > cut
    keep = [n for n, name in enumerate(FEATURES[:x_train.shape[1]]) if name not in RULES]
    below, inside = banded(x_train)
    below_test, inside_test = banded(x_test)
    fitted = ~rules & inside
    model = Logistic(x_train[fitted][:, keep], y_train[fitted], l2=l2)
    scores = np.full(len(x_train), -np.inf)
    scores[fitted] = model.score(x_train[fitted][:, keep])
    cut = point(scores, rules | below, ok, target)
    return rules_test | below_test | (inside_test & (model.score(x_test[:, keep]) > cut))


#: The model decides only where the best cosine is within this of the length's
#: threshold (``--band``; None: everywhere); under it, the query abstains, over it,
#: it is answered, as the threshold decided.
BAND: float | None = None


def banded(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Whether each row's best cosine is under the band, and whether within it."""
    import numpy as np

    margin = x[:, FEATURES.index("margin")]
    if BAND is None:
        return np.zeros(len(x), dtype=bool), np.ones(len(x), dtype=bool)
    return margin < -BAND, np.abs(margin) <= BAND


def today_folds(x: np.ndarray, ok: np.ndarray, sets: np.ndarray) -> np.ndarray:
    """Today's decision per left-out set: its threshold's level chosen on the others
    (as bench/abstain_cv.py does), the checks as they are."""
    import numpy as np

    level = x[:, FEATURES.index("margin")] + search_module.ABSTAIN_BELOW
    rules = x[:, columns(RULES)].max(axis=1) > 0
    weak = np.zeros(len(x), dtype=bool)
    for name, chosen in abstain_cv.chosen_levels(level, ok, sets).items():
        held = sets == name
        weak[held] = (level[held] < chosen) | rules[held]
    return weak


def learned_folds(x: np.ndarray, ok: np.ndarray, sets: np.ndarray, *, variant: str,
                  target: float, l2: float) -> np.ndarray:
    import numpy as np

    weak = np.zeros(len(x), dtype=bool)
    y = (~ok).astype(float)
    for name in dict.fromkeys(sets.tolist()):
        held = sets == name
        weak[held] = decide(x[~held], y[~held], x[held], variant=variant, target=target, l2=l2)
    return weak


def rows_of(weak: np.ndarray, ok: np.ndarray, sets: np.ndarray,
            ) -> list[tuple[str, float, float, int, int]]:
    out = []
    for name in dict.fromkeys(sets.tolist()):
        held = sets == name
        none, some = weak[held & ~ok], weak[held & ok]
        out.append((name, float(none.mean()) if len(none) else float("nan"),
                    float(some.mean()), len(none), len(some)))
    return out


def subset_tables(docs: Any, vectors: Any, names: Any, encode: Any, labelled: Any,
                  size: int, draws: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows, today's ``weak`` and answerable, over ``draws`` random subsets of ``size``
    tools (drawn as bench/abstain_cv.py draws them)."""
    import numpy as np

    rows, today, ok = [], [], []
    for index, query, relevant in abstain_cv.drawn(docs, vectors, names, encode, labelled,
                                                   size, draws):
        rows.append(evidence(index, query))
        with abstain_cv.threshold():
            today.append(index.find(query, limit=3).weak)
        ok.append(bool(relevant))
    return np.array(rows), np.array(today), np.array(ok)


def dropped(x: np.ndarray, names: str) -> np.ndarray:
    """``x`` with the columns of ``names`` (comma-separated) zeroed: a constant column
    weighs nothing in the fit, and the rules' columns keep their places."""
    x = x.copy()
    for name in filter(None, names.split(",")):
        x[:, FEATURES.index(name)] = 0.0
    return x


def share(weak: np.ndarray, ok: np.ndarray) -> str:
    return f"abstained {weak[~ok].mean():.1%} of {(~ok).sum()}, wrongly {weak[ok].mean():.2%}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[60, 200])
    parser.add_argument("--draws", type=int, default=3)
    parser.add_argument("--target", type=float, nargs="*", default=[],
                        help="the wrong shares to point at (default: today's pooled)")
    parser.add_argument("--l2", type=float, default=1.0)
    parser.add_argument("--learned-ranking", action="store_true",
                        help="also the features read from the adapter and the fused order"
                             " (fitted on the sets left out: an upper bound)")
    parser.add_argument("--write", action="store_true",
                        help="fit checks-or-model on every seen set at the first --target"
                             " and write gateway/abstain_weights.py")
    parser.add_argument("--band", type=float, default=abstain_model.BAND,
                        help="the model decides only within this of the cosine's threshold"
                             " (0: everywhere; default: gateway/abstain_model.py's)")
    parser.add_argument("--drop", default="",
                        help="comma-separated features left out (their column zeroed)")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/skillop-bench-vectors"))
    parser.add_argument("--query-vectors", type=Path,
                        default=Path("/tmp/skillop-bench-query-vectors.pkl"))
    parser.add_argument("--features", type=Path, default=None,
                        help="keep the computed rows in this file (and read them back)")
    args = parser.parse_args()
    if args.write and os.environ.get("PYTHONHASHSEED") != "0":
        # A query's terms come from a set: their order, and with it BM25's last bits.
        raise SystemExit("--write: run with PYTHONHASHSEED=0, so the file reproduces")
    import numpy as np

    global BAND
    BAND = args.band or None
    labelled = abstain_cv.seen()
    sets = np.array([name for name, *_ in labelled])
    ok = np.array([bool(r) for *_, r in labelled])
    kept: dict[str, Any] = {}
    if args.features is not None and args.features.exists():
        kept = pickle.loads(args.features.read_bytes())
    if "full" not in kept or (args.sizes and any(f"size{s}" not in kept for s in args.sizes)):
        docs, vectors, names, encode = abstain_cv.model_index(
            args.cache, args.query_vectors, [q for _, _, q, _ in labelled])
        index = abstain_cv.indexed(docs, vectors, names, encode, list(range(len(docs))))
        if "full" not in kept:
            kept["full"] = table(index, [q for _, _, q, _ in labelled])
        for size in args.sizes:
            if f"size{size}" not in kept:
                kept[f"size{size}"] = subset_tables(docs, vectors, names, encode, labelled,
                                                    size, args.draws)
        if args.features is not None:
            args.features.write_bytes(pickle.dumps(kept))
    x, today_const = kept["full"]
    width = len(FEATURES) if args.learned_ranking else len(PLAIN)
    x = dropped(x[:, :width], args.drop)
    print(f"{len(labelled)} seen queries, {(~ok).sum()} unanswerable, {width} features;"
          f" {len(set(sets.tolist()))} folds (one seen set left out)")
    print(f"today's constants, all 551 tools (not left out): {share(today_const, ok)}")
    today = today_folds(x, ok, sets)
    abstain_cv.print_folds("today (threshold per fold + checks)", rows_of(today, ok, sets))
    for target in args.target or [float(today[ok].mean())]:
        print(f"operating point: {target:.2%} of the training folds' answerable wrongly;"
              f" l2 {args.l2}")
        compare(x, ok, sets, today, target=target, l2=args.l2)
    target = args.target[0] if args.target else float(today[ok].mean())
    y = (~ok).astype(float)
    for size in args.sizes:
        xs, today_s, ok_s = kept[f"size{size}"]
        xs = dropped(xs[:, :width], args.drop)
        print(f"random subsets of {size} tools ({args.draws} draws): today's constants"
              f" {share(today_s, ok_s)}")
        for variant in ("alone", "checks-or-model"):
            weak = decide(x, y, xs, variant=variant, target=target, l2=args.l2)
            print(f"  learned {variant} (fitted on all seen sets, {target:.2%}):"
                  f" {share(weak, ok_s)}")
    if args.write:
        write(x, ok, target=target, l2=args.l2)
    return 0


WEIGHTS_FILE = (Path(__file__).resolve().parent.parent / "operator" / "skillop" / "gateway"
                / "abstain_weights.py")
_HEAD = '''"""The weights of gateway/abstain_model.py's logistic score, one per feature, its
operating point folded into the bias (the model says nothing fits above 0).

Written by ``PYTHONHASHSEED=0 python bench/numpy_only.py bench/abstain_learned.py
--sizes --target {target} --write``, which fits them on the seen queries no check
abstains on whose best cosine is within ``abstain_model.BAND`` of the length's
threshold ({rows} queries, {none} of them unanswerable), the point
leaving {target:.1%} of the seen sets' answerable queries wrongly abstained on with the
checks; do not edit by hand.
"""

'''


def write(x: np.ndarray, ok: np.ndarray, *, target: float, l2: float) -> None:
    """Fit checks-or-model on every row and write ``WEIGHTS_FILE`` (raw units)."""
    import numpy as np

    rules = x[:, columns(RULES)].max(axis=1) > 0
    below, inside = banded(x)
    fitted = ~rules & inside
    keep = [FEATURES.index(name) for name in abstain_model.FEATURES]
    train = x[fitted][:, keep]
    y = (~ok[fitted]).astype(float)
    model = Logistic(train, y, l2=l2)
    scores = np.full(len(x), -np.inf)
    scores[fitted] = model.score(train)
    cut = point(scores, rules | below, ok, target)
    weights = model.w[1:] / model.scale
    bias = float(model.w[0] - (model.w[1:] * model.mean / model.scale).sum() - cut)
    body = "".join(f"    \"{name}\": {float(w):.9g},\n"
                   for name, w in zip(abstain_model.FEATURES, weights, strict=True))
    WEIGHTS_FILE.write_text(
        _HEAD.format(target=target, rows=len(train), none=int(y.sum()))
        + f"BIAS: float = {bias:.9g}\nWEIGHTS: dict[str, float] = {{\n{body}}}\n")
    print(f"wrote {WEIGHTS_FILE.name}: bias {bias:+.4f}, " + ", ".join(
        f"{name} {float(w):+.3f}" for name, w in zip(abstain_model.FEATURES, weights,
                                                      strict=True)))


def compare(x: np.ndarray, ok: np.ndarray, sets: np.ndarray, today: np.ndarray, *,
            target: float, l2: float) -> None:
    """Each learned decision's left-out figures, and how many sets it moves."""
    for variant in ("alone", "checks-or-model"):
        weak = learned_folds(x, ok, sets, variant=variant, target=target, l2=l2)
        abstain_cv.print_folds(f"learned, {variant}", rows_of(weak, ok, sets))
        ups = sum(1 for a, b in zip(rows_of(weak, ok, sets), rows_of(today, ok, sets),
                                    strict=True) if a[3] and a[1] > b[1])
        downs = sum(1 for a, b in zip(rows_of(weak, ok, sets), rows_of(today, ok, sets),
                                      strict=True) if a[3] and a[1] < b[1])
        print(f"  sets abstaining more than today: {ups}, less: {downs}")


if __name__ == "__main__":
    sys.exit(main())
